//! The metrics feature, seen through the `metrics` crate's debugging recorder: the counters
//! and histograms move as a lock is taken, waited for, handed off, renewed, found failing,
//! lost and released.
#![cfg(feature = "metrics")]

use crate::support;

use std::collections::HashMap;
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use support::{Proxy, Server, eventually, response_timeout_for};

const PATIENCE: Duration = Duration::from_secs(60);

/// What the recorder saw, summed over snapshots: counters by name and labels, and how many
/// values each histogram recorded (a snapshot drains both: it gives what a counter counted
/// since the last one).
#[derive(Default)]
struct Seen {
    counters: HashMap<String, u64>,
    histograms: HashMap<String, usize>,
}

impl Seen {
    fn take(&mut self, snapshotter: &Snapshotter) {
        for (key, _, _, value) in snapshotter.snapshot().into_vec() {
            let key = key.key();
            let mut name = key.name().to_owned();
            for label in key.labels() {
                name += &format!(",{}={}", label.key(), label.value());
            }
            match value {
                DebugValue::Counter(n) => *self.counters.entry(name).or_default() += n,
                DebugValue::Histogram(values) => {
                    *self.histograms.entry(name).or_default() += values.len()
                }
                DebugValue::Gauge(_) => {}
            }
        }
    }

    fn counter(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }

    fn histogram(&self, name: &str) -> usize {
        self.histograms.get(name).copied().unwrap_or(0)
    }
}

#[test]
fn counters_and_histograms_move_with_the_locks() {
    support::alone(
        "metrics::counters_and_histograms_move_with_the_locks",
        || {
            let recorder = DebuggingRecorder::new();
            let snapshotter = recorder.snapshotter();
            recorder.install().unwrap();
            let mut seen = Seen::default();

            let server = Server::start();
            let proxy = Proxy::start(server.port());
            let lease = Duration::from_secs(9);
            let client = redmutex::LockClient::builder(&proxy.url())
                .lease(lease)
                .response_timeout(response_timeout_for(lease))
                .build()
                .unwrap();
            // Its waiters do not come back on their own within the test: the release's
            // message wakes them, so a hand-off is counted.
            let other = server.sleepy();

            // Taken, then waited for by another client and handed off by the release.
            let guard = client.lock("m").lock().unwrap();
            let rival = other.lock("m");
            let attempts = server.calls("evalsha");
            let waiter =
                std::thread::spawn(move || rival.try_lock_for(PATIENCE).unwrap().is_some());
            // Subscribed, and its attempt made (scripts run beyond the one each look runs):
            // only the release's message lets it in.
            let mut looks = 0;
            assert!(eventually(PATIENCE, || {
                looks += 1;
                let subscribed = other.inspect("m").unwrap().waiters == Some(1);
                subscribed && server.calls("evalsha") > attempts + looks
            }));
            guard.unlock().unwrap();
            assert!(waiter.join().unwrap());
            seen.take(&snapshotter);
            assert_eq!(
                seen.counter("redmutex_acquisitions_total,kind=reentrant,outcome=acquired"),
                2
            );
            assert_eq!(seen.histogram("redmutex_wait_seconds,kind=reentrant"), 2);
            assert_eq!(seen.histogram("redmutex_handoff_seconds,kind=reentrant"), 1);
            assert!(seen.histogram("redmutex_hold_seconds,kind=reentrant") >= 1);

            // A bounded wait that runs out.
            let held = other.token_lock("t").lock().unwrap();
            assert!(
                client
                    .token_lock("t")
                    .try_lock_for(Duration::from_millis(50))
                    .unwrap()
                    .is_none()
            );
            drop(held);
            seen.take(&snapshotter);
            assert_eq!(
                seen.counter("redmutex_acquisitions_total,kind=token,outcome=timeout"),
                1
            );

            // A try_lock and a try_acquire that find it taken are busy, not timed out.
            let held = other.lock("b").lock().unwrap();
            assert!(client.lock("b").try_lock().unwrap().is_none());
            drop(held);
            let semaphore = client.leased_semaphore("s");
            semaphore.try_set_permits(1).unwrap();
            let permit = semaphore.acquire().unwrap();
            assert!(semaphore.try_acquire().unwrap().is_none());
            permit.release().unwrap();
            seen.take(&snapshotter);
            assert_eq!(
                seen.counter("redmutex_acquisitions_total,kind=reentrant,outcome=busy"),
                1
            );
            assert_eq!(
                seen.counter("redmutex_acquisitions_total,kind=semaphore,outcome=busy"),
                1
            );
            assert_eq!(
                seen.counter("redmutex_acquisitions_total,kind=reentrant,outcome=timeout"),
                0
            );
            assert_eq!(
                seen.counter("redmutex_acquisitions_total,kind=semaphore,outcome=timeout"),
                0
            );

            // A cancelled call is counted as cancelled, and not as an error.
            let errors = seen.counter("redmutex_errors_total,class=other");
            let stop = redmutex::Cancel::new();
            stop.cancel();
            let err = client.lock("c").with_cancel(&stop).lock().unwrap_err();
            assert!(err.is_cancelled());
            seen.take(&snapshotter);
            assert_eq!(
                seen.counter("redmutex_acquisitions_total,kind=reentrant,outcome=cancelled"),
                1
            );
            assert_eq!(seen.counter("redmutex_errors_total,class=other"), errors);

            // Renewed; a renewal that fails; then the hold found gone.
            let guard = client.lock("renewed").lock().unwrap();
            assert!(eventually(PATIENCE, || client.stats().renewals >= 1));
            proxy.pause();
            assert!(eventually(PATIENCE, || client.stats().renewal_failures >= 1));
            proxy.resume();
            assert!(eventually(PATIENCE, || client.stats().renewals >= 2));
            let () = redis::cmd("DEL")
                .arg("renewed")
                .query(&mut server.conn())
                .unwrap();
            assert!(eventually(PATIENCE, || guard.is_lost()));
            assert!(guard.unlock().unwrap_err().is_lost());
            // Counted before the guard can see it when the watchdog finds the key gone;
            // when the validity ran out first (a starved watchdog), once it finds it.
            assert!(eventually(PATIENCE, || {
                seen.take(&snapshotter);
                seen.counter("redmutex_locks_lost_total") >= 1
            }));
            seen.take(&snapshotter);
            // Both clients report to the one recorder: the other's holds may have been
            // renewed too, on a slow run.
            let (ours, theirs) = (client.stats(), other.stats());
            assert_eq!(
                seen.counter("redmutex_renewals_total"),
                ours.renewals + theirs.renewals
            );
            assert_eq!(
                seen.counter("redmutex_renewal_failures_total"),
                ours.renewal_failures + theirs.renewal_failures
            );
            assert_eq!(seen.counter("redmutex_locks_lost_total"), 1);
            assert_eq!(seen.counter("redmutex_errors_total,class=lost"), 1);

            // Bad input is an error of its own class.
            assert!(client.lock("").try_lock().is_err());
            seen.take(&snapshotter);
            assert_eq!(seen.counter("redmutex_errors_total,class=input"), 1);
            assert_eq!(
                seen.counter("redmutex_acquisitions_total,kind=reentrant,outcome=error"),
                1
            );

            // A deadlock: counted once, as its own outcome, and not as an error.
            let (one, two) = (server.client(), server.client());
            let waiting = || crate::deadlock::waiting_beside(&server, "dl:a");
            let err = crate::deadlock::cycle_of_two((&one, &two), ("dl:a", "dl:b"), &waiting);
            assert!(err.is_deadlock(), "{err:#}");
            seen.take(&snapshotter);
            assert_eq!(seen.counter("redmutex_deadlocks_total"), 1);
            assert_eq!(
                seen.counter("redmutex_acquisitions_total,kind=reentrant,outcome=deadlock"),
                1
            );
            assert_eq!(seen.counter("redmutex_errors_total,class=other"), 0);
        },
    );
}
