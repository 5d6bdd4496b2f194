//! Mutual exclusion, the Jepsen way: a non-atomic read-modify-write counter incremented
//! under the lock by many threads and processes must come out exact, with every kind of
//! lock, and no two holders' validity windows may overlap (`support::history`).

use crate::support;

use std::time::{Duration, Instant};

use redmutex::{Fair, Fenced, Lock, NonReentrant, NonReentrantFair, Reentrant, Spin, Token, Write};
use support::history::{self, History, Window};
use support::{MakeLock, SHORT_LEASE, Server, spawn_worker};

const URL_VAR: &str = "REDMUTEX_TEST_URL";
const COUNT_VAR: &str = "REDMUTEX_TEST_COUNT";
const KIND_VAR: &str = "REDMUTEX_TEST_KIND";

/// GET, pause, SET: loses updates unless the lock excludes everyone else. The hold's
/// window goes to `history` under `holder`.
fn increment<K: MakeLock>(
    redis: &mut redis::Connection,
    lock: &Lock<K>,
    hold: Duration,
    history: &History,
    holder: &str,
) {
    let guard = lock.lock().unwrap();
    let taken = Instant::now();
    let value: i64 = redis::cmd("GET")
        .arg("counter")
        .query::<Option<i64>>(redis)
        .unwrap()
        .unwrap_or(0);
    if hold.is_zero() {
        std::thread::yield_now();
    } else {
        std::thread::sleep(hold);
    }
    let _: () = redis::cmd("SET")
        .arg("counter")
        .arg(value + 1)
        .query(redis)
        .unwrap();
    assert!(!guard.is_lost());
    let valid_until = guard.valid_until();
    history.record(holder, taken, Instant::now(), valid_until);
    guard.unlock().unwrap();
}

fn counter(server: &Server) -> i64 {
    redis::cmd("GET")
        .arg("counter")
        .query(&mut server.conn())
        .unwrap()
}

fn run_threads<K: MakeLock>(
    server: &Server,
    threads: usize,
    rounds: usize,
    lease: Duration,
    hold: Duration,
) {
    let client = server.builder_with_lease(lease).build().unwrap();
    let history = History::default();
    std::thread::scope(|scope| {
        for thread in 0..threads {
            let lock = K::make(&client, "counter-lock");
            let mut redis = server.conn();
            let history = &history;
            scope.spawn(move || {
                let holder = format!("thread-{thread}");
                for _ in 0..rounds {
                    increment(&mut redis, &lock, hold, history, &holder);
                }
            });
        }
    });
    assert_eq!(history.len(), threads * rounds, "{}", K::NAME);
    history.assert_exclusive();
}

/// Eight threads of one client, two hundred increments each, under one lock of kind `K`.
fn eight_threads_two_hundred_increments_each<K: MakeLock>() {
    let server = Server::start();
    run_threads::<K>(&server, 8, 200, Duration::from_secs(30), Duration::ZERO);
    assert_eq!(counter(&server), 8 * 200, "{}", K::NAME);
}

// One test per kind, so that the suite runs them side by side.
#[test]
fn eight_threads_two_hundred_increments_each_reentrant() {
    eight_threads_two_hundred_increments_each::<Reentrant>();
}

#[test]
fn eight_threads_two_hundred_increments_each_fenced() {
    eight_threads_two_hundred_increments_each::<Fenced>();
}

#[test]
fn eight_threads_two_hundred_increments_each_token() {
    eight_threads_two_hundred_increments_each::<Token>();
}

#[test]
fn eight_threads_two_hundred_increments_each_fair() {
    eight_threads_two_hundred_increments_each::<Fair>();
}

#[test]
fn eight_threads_two_hundred_increments_each_write() {
    eight_threads_two_hundred_increments_each::<Write>();
}

#[test]
fn eight_threads_two_hundred_increments_each_non_reentrant() {
    eight_threads_two_hundred_increments_each::<NonReentrant>();
}

#[test]
fn eight_threads_two_hundred_increments_each_non_reentrant_fair() {
    eight_threads_two_hundred_increments_each::<NonReentrantFair>();
}

#[test]
fn eight_threads_two_hundred_increments_each_spin() {
    eight_threads_two_hundred_increments_each::<Spin>();
}

#[test]
fn four_processes_two_hundred_increments_each() {
    fn body<K: MakeLock>() {
        let server = Server::start();
        let workers: Vec<_> = (0..4)
            .map(|_| {
                spawn_worker(
                    "exclusion::worker_process",
                    &[
                        (URL_VAR, server.url()),
                        (COUNT_VAR, "200".into()),
                        (KIND_VAR, K::NAME.into()),
                    ],
                )
            })
            .collect();
        for mut worker in workers {
            // A signal here, not an exit code, means the worker was killed from outside.
            let status = worker.wait().unwrap();
            assert!(
                status.success(),
                "{}: a worker ended with {status:?}",
                K::NAME
            );
        }
        // The windows first: where two holds overlapped, they say whose.
        let history = history::received(&mut server.conn(), "history");
        // A hold shorter than the clock conversion's margin leaves no window: the workers
        // count their holds apart.
        let holds: i64 = redis::cmd("GET")
            .arg("holds")
            .query(&mut server.conn())
            .unwrap();
        assert_eq!(holds, 4 * 200, "{}", K::NAME);
        assert!(history.len() <= 4 * 200, "{}", K::NAME);
        history.assert_exclusive();
        assert_eq!(counter(&server), 4 * 200, "{}", K::NAME);
    }
    body::<Reentrant>();
    body::<Fenced>();
    body::<Token>();
    body::<Fair>();
    body::<Write>();
    body::<NonReentrant>();
    body::<NonReentrantFair>();
    body::<Spin>();
}

#[test]
fn only_the_watchdog_keeps_a_short_lease_alive_across_longer_holds() {
    let server = Server::start();
    let hold = SHORT_LEASE + Duration::from_millis(500);
    run_threads::<Reentrant>(&server, 3, 1, SHORT_LEASE, hold);
    assert_eq!(counter(&server), 3);
    run_threads::<Token>(&server, 3, 1, SHORT_LEASE, hold);
    assert_eq!(counter(&server), 6);
}

/// One worker process of `four_processes_two_hundred_increments_each`.
#[test]
#[ignore = "run as a child process by four_processes_two_hundred_increments_each"]
fn worker_process() {
    let url = std::env::var(URL_VAR).expect("started by the parent test");
    let rounds: usize = std::env::var(COUNT_VAR).unwrap().parse().unwrap();
    let client = redmutex::LockClient::open(&url).unwrap();
    let mut redis = redis::Client::open(url).unwrap().get_connection().unwrap();
    fn run<K: MakeLock>(client: &redmutex::LockClient, redis: &mut redis::Connection, n: usize) {
        let lock = K::make(client, "counter-lock");
        let history = History::default();
        let holder = format!("process-{}", std::process::id());
        for _ in 0..n {
            increment(redis, &lock, Duration::ZERO, &history, &holder);
        }
        let lines: Vec<String> = history.windows().iter().map(Window::to_line).collect();
        if !lines.is_empty() {
            let _: () = redis::cmd("RPUSH")
                .arg("history")
                .arg(lines)
                .query(redis)
                .unwrap();
        }
        let _: i64 = redis::cmd("INCRBY")
            .arg("holds")
            .arg(history.len())
            .query(redis)
            .unwrap();
    }
    match std::env::var(KIND_VAR).unwrap().as_str() {
        Reentrant::NAME => run::<Reentrant>(&client, &mut redis, rounds),
        Fenced::NAME => run::<Fenced>(&client, &mut redis, rounds),
        Token::NAME => run::<Token>(&client, &mut redis, rounds),
        Fair::NAME => run::<Fair>(&client, &mut redis, rounds),
        Write::NAME => run::<Write>(&client, &mut redis, rounds),
        NonReentrant::NAME => run::<NonReentrant>(&client, &mut redis, rounds),
        NonReentrantFair::NAME => run::<NonReentrantFair>(&client, &mut redis, rounds),
        Spin::NAME => run::<Spin>(&client, &mut redis, rounds),
        other => panic!("unknown kind {other}"),
    }
}

/// The check above can fail: two holders' windows that overlap by a nanosecond are found,
/// and one holder's own nested windows are not an overlap.
#[test]
fn the_history_check_finds_overlapping_windows() {
    let window = |holder: &str, from, to| Window {
        holder: holder.into(),
        from,
        to,
    };
    let history = History::default();
    history.add(window("a", 10, 20));
    history.add(window("a", 12, 15));
    history.add(window("b", 20, 30));
    assert_eq!(history.overlap(), None);
    history.add(window("c", 29, 40));
    let (first, second) = history.overlap().expect("b and c overlap");
    assert_eq!((first.holder.as_str(), second.holder.as_str()), ("b", "c"));
    let line = window("d", 1, 2).to_line();
    assert_eq!(Window::from_line(&line), Some(window("d", 1, 2)));
}
