//! Fencing tokens: a holder paused past its lease cannot overwrite the work of the holder
//! that came after it, because the storage refuses a token lower than one it has seen.
//!
//! Uses the Redis at `REDIS_URL` when set; otherwise starts a throwaway `redis-server`.

#[path = "../tests/support/mod.rs"]
mod support;

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
    let (url, _throwaway) = support::redis_url();
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
