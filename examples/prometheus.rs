//! The locks' metrics exported for Prometheus: `cargo run --features metrics --example
//! prometheus`. Installs `metrics-exporter-prometheus` as the recorder (without its HTTP
//! listener: an application serves `handle.render()` on its own metrics endpoint), takes
//! and hands off a lock, and prints the text Prometheus would scrape.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;
use redmutex::LockClient;

fn main() -> redmutex::Result<()> {
    let handle = PrometheusBuilder::new()
        .install_recorder()
        .expect("no other recorder is installed");
    let (url, _throwaway) = support::redis_url();
    let (a, b) = (LockClient::open(&url)?, LockClient::open(&url)?);

    let guard = a.lock("orders:42").lock()?;
    let rival = b.lock("orders:42");
    let waiter = std::thread::spawn(move || {
        let guard = rival.try_lock_for(Duration::from_secs(10))?;
        Ok::<bool, redmutex::Error>(guard.is_some())
    });
    // Once the rival waits, the release hands the lock off to it.
    support::eventually(Duration::from_secs(10), || {
        a.inspect("orders:42")
            .is_ok_and(|info| info.waiters == Some(1))
    });
    guard.unlock()?;
    waiter.join().expect("the waiter ran")?;
    let _ = a
        .token_lock("jobs")
        .try_lock_for(Duration::from_millis(10))?;

    handle.run_upkeep();
    print!("{}", handle.render());
    Ok(())
}
