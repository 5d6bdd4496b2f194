//! Measures the lock against raw Redis round trips, in one run, as ratios.
//!
//! `cargo run --release --example bench` starts a throwaway redis-server unless `REDIS_URL`
//! is set. Absolute times on shared machines swing severalfold; the ratios are the result.
//! Each row's samples are interleaved with the floor's, so load from elsewhere hits both.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use redis::Script;
use redmutex::LockClient;

const ROUNDS: usize = 21;
const PAIRS: u32 = 500;

fn main() -> redmutex::Result<()> {
    let throwaway;
    let url = match std::env::var("REDIS_URL") {
        Ok(url) => url,
        Err(_) => {
            throwaway = support::Server::start();
            throwaway.url()
        }
    };
    let client = LockClient::open(&url)?;
    let lock = client.lock("bench:uncontended");
    let mut raw = redis::Client::open(url.as_str())
        .and_then(|c| c.get_connection())
        .expect("raw connection");
    let noop = Script::new("return nil");
    let acquire = Script::new(include_str!("../src/scripts/acquire.lua"));
    let release = Script::new(include_str!("../src/scripts/release.lua"));

    let mut floor = Samples::default();
    let mut scripts = Samples::default();
    let mut pairs = Samples::default();
    for _ in 0..ROUNDS {
        floor.time(2 * PAIRS, || {
            let () = noop.invoke(&mut raw).expect("evalsha");
        });
        scripts.time(PAIRS, || {
            let _: Option<i64> = acquire
                .key("bench:raw")
                .arg(30_000)
                .arg("bench:1")
                .invoke(&mut raw)
                .expect("acquire");
            let _: Option<i64> = release
                .key("bench:raw")
                .key("redisson_lock__channel:{bench:raw}")
                .arg(0)
                .arg(30_000)
                .arg("bench:1")
                .invoke(&mut raw)
                .expect("release");
        });
        pairs.time(PAIRS, || {
            lock.lock()
                .and_then(|guard| guard.unlock())
                .expect("lock+unlock");
        });
    }
    let (floor, scripts, pair) = (floor.median(), scripts.median(), pairs.median());
    println!("| row | measure |");
    println!("|---|---|");
    println!(
        "| floor | raw EVALSHA round trip (`return nil`): {} µs |",
        micros(floor)
    );
    println!(
        "| uncontended | {:.0} lock+unlock pairs/s; ratio to 2 × floor: {:.2}; \
         to the same two scripts sent raw: {:.2} |",
        1.0 / pair.as_secs_f64(),
        ratio(2 * floor, pair),
        ratio(scripts, pair),
    );
    Ok(())
}

#[derive(Default)]
struct Samples(Vec<Duration>);

impl Samples {
    /// Runs `f` `n` times and records the mean time of one run.
    fn time(&mut self, n: u32, mut f: impl FnMut()) {
        let started = Instant::now();
        for _ in 0..n {
            f();
        }
        self.0.push(started.elapsed() / n);
    }

    fn median(&mut self) -> Duration {
        self.0.sort();
        self.0[self.0.len() / 2]
    }
}

/// How many `measured` fit in the time of one `unit`: 1.0 means no overhead.
fn ratio(unit: Duration, measured: Duration) -> f64 {
    unit.as_secs_f64() / measured.as_secs_f64()
}

fn micros(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}
