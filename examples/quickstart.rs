//! A guided tour: acquire, re-enter, watch the watchdog renew, make a second thread wait,
//! release.
//!
//! Uses the Redis at `REDIS_URL` when set; otherwise starts a throwaway `redis-server`.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use redmutex::LockClient;

fn main() -> redmutex::Result<()> {
    let (url, throwaway) = support::redis_url();
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
