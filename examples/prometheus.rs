//! The locks' metrics exported for Prometheus: `cargo run --features metrics --example
//! prometheus`. Installs `metrics-exporter-prometheus` as the recorder (without its HTTP
//! listener: an application serves `handle.render()` on its own metrics endpoint), takes
//! and hands off a lock, and prints the text Prometheus would scrape.

use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;
use redmutex::LockClient;

fn main() -> redmutex::Result<()> {
    let handle = PrometheusBuilder::new()
        .install_recorder()
        .expect("no other recorder is installed");
    let (url, _throwaway) = redis_url();
    let (a, b) = (LockClient::open(&url)?, LockClient::open(&url)?);

    let guard = a.lock("orders:42").lock()?;
    let rival = b.lock("orders:42");
    let waiter = std::thread::spawn(move || {
        let guard = rival.try_lock_for(Duration::from_secs(10))?;
        Ok::<bool, redmutex::Error>(guard.is_some())
    });
    // Once the rival waits, the release hands the lock off to it.
    for _ in 0..1000 {
        if a.inspect("orders:42")?.waiters == Some(1) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    guard.unlock()?;
    waiter.join().expect("the waiter ran")?;
    let _ = a
        .token_lock("jobs")
        .try_lock_for(Duration::from_millis(10))?;

    handle.run_upkeep();
    print!("{}", handle.render());
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
