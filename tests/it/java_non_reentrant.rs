//! Real Redisson and this crate on one non-reentrant lock, both ways: Redisson 4.7.0's
//! `RNonReentrantLock` and `RNonReentrantFairLock` (4.4 and later) against ours, and, since
//! 3.52.0 has neither, its `RLock` and `RFairLock`, whose hash and queue are the same.

use crate::support;

use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use redmutex::{Kind, Lock, LockClient};
use serde_json::{Value, json};
use support::java::{Jvm, Redisson};
use support::toolchain::{Toolchain, skip_without};
use support::{Server, eventually, hash};

/// Makes our handle of the lock kind Redisson calls by the name beside it.
type Make<K> = fn(&LockClient, &str) -> Lock<K>;

/// Runs `case` on the plain and the fair non-reentrant lock, against Redisson `version`
/// with its kinds of those names.
macro_rules! each_kind {
    ($case:ident, $version:expr, $plain:expr, $fair:expr) => {
        $case(
            $version,
            $plain,
            false,
            |client: &LockClient, name: &str| client.non_reentrant_lock(name),
        );
        $case($version, $fair, true, |client: &LockClient, name: &str| {
            client.non_reentrant_fair_lock(name)
        });
    };
}

const NO_HANG: Duration = Duration::from_secs(60);

/// How soon a woken waiter has the lock: well below the 30 s of the holder's lease and of
/// the waiter's own retries, so a waiter that has it in time was woken by a message.
const WOKEN: Duration = Duration::from_secs(10);

/// Subscribers to the lock's channel, or for a fair lock to its waiters' channels.
fn listening(server: &Server, name: &str, fair: bool) -> usize {
    let channel = format!("redisson_lock__channel:{{{name}}}");
    match fair {
        true => server.channels(&format!("{channel}:*")),
        false => server.subscribers(&channel),
    }
}

fn pttl(server: &Server, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query(&mut server.conn())
        .unwrap()
}

fn queued(server: &Server, name: &str) -> usize {
    redis::cmd("LLEN")
        .arg(format!("redisson_lock_queue:{{{name}}}"))
        .query(&mut server.conn())
        .unwrap()
}

/// Takes `lock` on a thread of its own and releases it at once; what that did comes
/// through the receiver.
fn wait_for_lock<K: Kind>(lock: Lock<K>) -> Receiver<redmutex::Result<()>> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(lock.lock().and_then(|guard| guard.unlock()));
    });
    receiver
}

#[test]
fn java_s_release_wakes_our_waiter_and_ours_wakes_java_s() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    fn case<K: Kind>(version: Redisson, kind: &str, fair: bool, make: Make<K>) {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let a = java.thread("a");
        let ours = server.sleepy();

        a.ok("lock", kind, "shared", Value::Null);
        let waiter = wait_for_lock(make(&ours, "shared"));
        assert!(eventually(NO_HANG, || listening(&server, "shared", fair) == 1));
        assert!(
            waiter.try_recv().is_err(),
            "{kind}: taken while Java held it"
        );
        a.ok("unlock", kind, "shared", Value::Null);
        let woken = waiter.recv_timeout(WOKEN);
        assert!(
            matches!(woken, Ok(Ok(()))),
            "Redisson {version:?} {kind}: our waiter was not woken: {woken:?}"
        );

        // A name of its own: our subscription to the first lingers.
        let guard = make(&ours, "again").lock().unwrap();
        let pending = a.send("tryLock", kind, "again", json!({"wait": 30_000}));
        assert!(eventually(NO_HANG, || listening(&server, "again", fair) >= 1));
        assert!(
            pending.is_done().is_none(),
            "{kind}: Java took it while held"
        );
        guard.unlock().unwrap();
        assert_eq!(
            pending.wait_for(WOKEN),
            Some(Ok(json!(true))),
            "Redisson {version:?} {kind} was not woken by our release"
        );
        assert_eq!(hash(&mut server.conn(), "again"), [(a.owner(), 1)]);
        a.ok("unlock", kind, "again", Value::Null);
        assert!(!server.exists("again"));
    }
    each_kind!(case, Redisson::V4, "nonreentrant", "nonreentrantFair");
    each_kind!(case, Redisson::V3, "lock", "fair");
}

#[test]
fn a_holder_s_second_acquisition_fails_alike_on_both_sides() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    fn case<K: Kind>(version: Redisson, kind: &str, _fair: bool, make: Make<K>) {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let a = java.thread("a");
        let ours = server.client();
        let lock = make(&ours, "once");

        a.ok("lock", kind, "once", json!({"lease": 60_000}));
        let held = hash(&mut server.conn(), "once");
        assert_eq!(held, [(a.owner(), 1)], "{kind}");
        let before = pttl(&server, "once");
        for (op, extra) in [
            ("tryLock", json!({"wait": 0, "lease": 90_000})),
            ("tryLock", json!({"wait": 2_000})),
            ("lock", json!({"lease": 90_000})),
        ] {
            let refused = a.call(op, kind, "once", extra);
            assert!(
                refused
                    .as_ref()
                    .is_err_and(|err| err.contains("IllegalMonitorStateException")),
                "Redisson {kind} {op} on its own hold: {refused:?}"
            );
        }
        assert_eq!(hash(&mut server.conn(), "once"), held, "{kind}");
        let after = pttl(&server, "once");
        assert!(0 < after && after <= before, "{kind}: {before} -> {after}");
        assert_eq!(queued(&server, "once"), 0, "{kind}");
        // Ours is busy, not refused: another owner holds it.
        assert!(lock.try_lock().unwrap().is_none(), "{kind}");
        a.ok("unlock", kind, "once", Value::Null);

        let guard = lock.lock_with_lease(Duration::from_secs(60)).unwrap();
        let held = hash(&mut server.conn(), "once");
        assert_eq!(held.len(), 1, "{kind}");
        assert_eq!(held[0].1, 1, "{kind}");
        let before = pttl(&server, "once");
        for (call, result) in [
            ("try_lock", lock.try_lock().map(|_| ())),
            ("try_lock_for", lock.try_lock_for(WOKEN).map(|_| ())),
            ("lock", lock.lock().map(|_| ())),
        ] {
            let err = result.expect_err(call);
            assert!(err.is_reentry(), "{kind} {call}: {err}");
        }
        assert_eq!(hash(&mut server.conn(), "once"), held, "{kind}");
        let after = pttl(&server, "once");
        assert!(0 < after && after <= before, "{kind}: {before} -> {after}");
        // Java, another owner, finds it busy.
        let busy = a.ok("tryLock", kind, "once", json!({"wait": 0}));
        assert_eq!(busy, json!(false), "{kind}");
        guard.unlock().unwrap();
        assert!(!server.exists("once"));
    }
    each_kind!(case, Redisson::V4, "nonreentrant", "nonreentrantFair");
}

/// One waiter of a mixed fair queue: a Java thread or a thread of ours.
enum Waiter<'a> {
    Java(support::java::Pending<'a>),
    Ours {
        taken: Receiver<()>,
        release: mpsc::Sender<()>,
    },
}

#[test]
fn a_mixed_queue_of_java_and_our_waiters_is_served_in_order() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    fn case<K: Kind>(version: Redisson, kind: &str, make: Make<K>) {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let ours = server.sleepy();
        let threads: Vec<_> = (0..4).map(|k| java.thread(&format!("w{k}"))).collect();
        let guard = make(&ours, "queue").lock().unwrap();
        // Waiters 0 and 2 are Java's, 1 and 3 ours; each queues once the one before has.
        let mut waiters = Vec::new();
        for (k, thread) in threads.iter().enumerate() {
            assert!(eventually(NO_HANG, || queued(&server, "queue") == k));
            waiters.push(match k % 2 {
                0 => Waiter::Java(thread.send("tryLock", kind, "queue", json!({"wait": 60_000}))),
                _ => {
                    let (lock, (taken_tx, taken), (release, released)) =
                        (make(&ours, "queue"), mpsc::channel(), mpsc::channel());
                    std::thread::spawn(move || {
                        let guard = lock.lock().unwrap();
                        taken_tx.send(()).unwrap();
                        let _ = released.recv();
                        guard.unlock().unwrap();
                    });
                    Waiter::Ours { taken, release }
                }
            });
        }
        assert!(eventually(NO_HANG, || queued(&server, "queue") == 4));
        guard.unlock().unwrap();
        // The lock is exclusive: the waiter expected next has it, or the order is broken.
        for (k, waiter) in waiters.iter().enumerate() {
            match waiter {
                Waiter::Java(pending) => {
                    let taken = pending.wait_for(WOKEN);
                    assert_eq!(taken, Some(Ok(json!(true))), "{version:?}: waiter {k}");
                    threads[k].ok("unlock", kind, "queue", Value::Null);
                }
                Waiter::Ours { taken, release } => {
                    assert_eq!(taken.recv_timeout(WOKEN), Ok(()), "{version:?}: waiter {k}");
                    release.send(()).unwrap();
                }
            }
        }
        assert!(eventually(NO_HANG, || !server.exists("queue")));
        assert_eq!(queued(&server, "queue"), 0);
    }
    case(Redisson::V4, "nonreentrantFair", |client, name| {
        client.non_reentrant_fair_lock(name)
    });
    case(Redisson::V3, "fair", |client, name| {
        client.non_reentrant_fair_lock(name)
    });
}

#[test]
fn a_crashed_java_holder_s_lock_is_ours_once_its_watchdog_lease_runs_out() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    let server = Server::start();
    let jvm = Jvm::private(Redisson::V4);
    let java = jvm.connect(&server.url(), Some(Duration::from_millis(1500)));
    java.thread("a")
        .ok("lock", "nonreentrant", "crashed", Value::Null);
    let lock = server.client().non_reentrant_lock("crashed");
    assert!(lock.try_lock().unwrap().is_none());
    jvm.kill();
    // Nothing is published for a crash: the lease runs out, and the waiter's retries find it.
    let left = pttl(&server, "crashed");
    assert!(0 < left && left <= 1500, "PTTL {left}");
    let guard = lock.try_lock_for(NO_HANG).unwrap();
    assert!(
        guard.is_some(),
        "the crashed holder's lease did not run out"
    );
}
