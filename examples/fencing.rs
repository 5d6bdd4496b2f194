//! Fencing tokens: a holder paused past its lease cannot overwrite the work of the holder
//! that came after it, because the storage refuses a token lower than one it has seen.
//!
//! Uses the Redis at `REDIS_URL` when set; otherwise starts a throwaway `redis-server`.

use std::time::Duration;

use redmutex::LockClient;

/// The protected resource: it remembers the highest token it has seen and refuses older ones.
#[derive(Default)]
struct Storage {
    highest: u64,
    value: String,
}

impl Storage {
    fn write(&mut self, token: u64, value: &str) -> Result<(), String> {
        if token < self.highest {
            return Err(format!("token {token} is older than {}", self.highest));
        }
        self.highest = token;
        self.value = value.to_owned();
        Ok(())
    }
}

fn main() -> redmutex::Result<()> {
    let (url, _throwaway) = redis_url();
    let mut storage = Storage::default();
    let (a, b) = (LockClient::open(&url)?, LockClient::open(&url)?);

    // A takes the lock with a short lease, then stalls (a GC pause, a stopped VM) past it.
    let slow = a
        .fenced_lock("fencing:report")
        .lock_with_lease(Duration::from_millis(200))?;
    println!("A holds the lock with token {}", slow.token());

    // Meanwhile the lease runs out, and B takes the lock and writes.
    let fast = b.fenced_lock("fencing:report").lock()?;
    println!("B holds the lock with token {}", fast.token());
    storage
        .write(fast.token(), "B's report")
        .expect("B is current");
    fast.unlock()?;

    // A wakes up and writes as if it still held the lock: the storage refuses it.
    match storage.write(slow.token(), "A's stale report") {
        Ok(()) => println!("A overwrote B: this must not happen"),
        Err(why) => println!("A's write refused: {why}"),
    }
    println!("stored: {:?}", storage.value);
    // A's release finds the hold gone, and says so.
    println!("A's unlock: {}", slow.unlock().unwrap_err());
    Ok(())
}

/// Your Redis at `REDIS_URL`, or else a throwaway `redis-server` on a free port of this
/// machine, which ends with the returned handle or with this process. (Each example stands
/// alone, so that it can be copied as it is.)
fn redis_url() -> (String, Option<Throwaway>) {
    if let Ok(url) = std::env::var("REDIS_URL") {
        return (url, None);
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    // The shell kills the server once this process closes its stdin, even if it crashes.
    let script =
        "redis-server --port \"$0\" --save '' --appendonly no >/dev/null & read _; kill $!; wait";
    let child = std::process::Command::new("sh")
        .args(["-c", script, &port.to_string()])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("sh and redis-server on the PATH, or REDIS_URL set");
    let server = Throwaway(child);
    for _ in 0..500 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return (format!("redis://127.0.0.1:{port}/"), Some(server));
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("redis-server did not start on port {port}");
}

/// A throwaway `redis-server`, stopped when dropped.
struct Throwaway(std::process::Child);

impl Drop for Throwaway {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let _ = self.0.wait();
    }
}
