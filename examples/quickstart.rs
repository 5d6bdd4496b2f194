//! A guided tour: acquire, re-enter, watch the watchdog renew, make a second thread wait,
//! release.
//!
//! Uses the Redis at `REDIS_URL` when set; otherwise starts a throwaway `redis-server`.

use std::time::{Duration, Instant};

use redmutex::LockClient;

fn main() -> redmutex::Result<()> {
    let (url, throwaway) = redis_url();
    if throwaway.is_some() {
        println!("started a throwaway redis-server at {url}");
    }
    let start = Instant::now();
    let say = |what: &str| println!("[{:>5} ms] {what}", start.elapsed().as_millis());

    // A short lease so that the renewals show within seconds (the default is 30 s), and a
    // response timeout below its renew interval (a third of it), as the builder requires.
    let client = LockClient::builder(&url)
        .lease(Duration::from_secs(3))
        .response_timeout(Duration::from_millis(500))
        .build()?;
    let lock = client.lock("quickstart:orders:42");

    let outer = lock.lock()?;
    say(&format!(
        "acquired; remaining lease {:?}",
        lock.remaining_lease()?
    ));
    let inner = lock.lock()?;
    say(&format!("re-entered; hold count {}", lock.hold_count()?));

    let waiter = {
        let lock = lock.clone();
        std::thread::spawn(move || -> redmutex::Result<()> {
            let asked = Instant::now();
            println!(
                "[{:>5} ms] second thread is waiting",
                start.elapsed().as_millis()
            );
            let guard = lock.lock()?;
            println!(
                "[{:>5} ms] second thread got the lock after waiting {} ms",
                start.elapsed().as_millis(),
                asked.elapsed().as_millis()
            );
            guard.unlock()
        })
    };

    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(800));
        let ttl = lock.remaining_lease()?.unwrap_or_default();
        say(&format!(
            "still held, the watchdog renews every 1 s: lease left {ttl:?}"
        ));
    }

    inner.unlock()?;
    say(&format!("released once; hold count {}", lock.hold_count()?));
    outer.unlock()?;
    say("released the last hold: the key is deleted and the waiter may go");
    waiter.join().expect("second thread")?;
    say(&format!("done; locked now: {}", lock.is_locked()?));
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
