//! Real Redisson (3.52.0 and 4.7.0) and this crate's counting semaphore on one count of
//! permits (Redisson's `RSemaphore`), both ways: permits set by either side are the other's,
//! both count them alike as each side takes and gives back, and each side's release wakes
//! the other's waiter.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::java::{Jvm, Redisson, Thread};
use support::toolchain::{Toolchain, skip_without};
use support::{Server, await_subscribers};

const NAME: &str = "slots";
const CHANNEL: &str = "redisson_sc:{slots}";
const KIND: &str = "semaphore";
/// How long a waiter waits at most: no waiter may wait it out in a test.
const LONG: Duration = Duration::from_secs(60);
/// Within this a woken waiter must have its permits: well below [`LONG`] and our sleepy
/// client's first pause (30 s), so only a message can have woken it.
const WOKEN: Duration = Duration::from_secs(15);

fn java_available(thread: &Thread) -> i64 {
    let available = thread.ok("available", KIND, NAME, Value::Null);
    available.as_i64().unwrap()
}

/// Takes `n` permits on the Java side without waiting; whether it did.
fn java_take(thread: &Thread, n: u64) -> bool {
    let taken = thread.ok("tryAcquire", KIND, NAME, json!({"n": n, "wait": 0}));
    taken.as_bool().unwrap()
}

#[test]
fn permits_set_on_either_side_are_shared_and_counted_alike() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    for version in Redisson::ALL {
        for java_sets in [true, false] {
            let server = Server::start();
            let java = Jvm::shared(version).connect(&server.url(), None);
            let a = java.thread("a");
            let ours = server.client().counting_semaphore(NAME);
            if java_sets {
                let set = a.ok("trySetPermits", KIND, NAME, json!({"n": 4}));
                assert_eq!(set, json!(true));
                assert!(!ours.try_set_permits(5).unwrap(), "{version:?}: set twice");
            } else {
                assert!(ours.try_set_permits(4).unwrap());
                let again = a.ok("trySetPermits", KIND, NAME, json!({"n": 5}));
                assert_eq!(again, json!(false), "{version:?}: set twice");
            }
            let both = |expected: i64| {
                assert_eq!(
                    (ours.available_permits().unwrap(), java_available(&a)),
                    (expected, expected),
                    "{version:?}"
                );
            };
            both(4);
            assert!(java_take(&a, 2));
            both(2);
            let two = ours.try_acquire_many(2).unwrap().expect("the last two");
            both(0);
            assert!(!java_take(&a, 1), "{version:?}: five of four permits");
            assert!(ours.try_acquire().unwrap().is_none());
            two.release().unwrap();
            both(2);
            a.ok("release", KIND, NAME, json!({"n": 2}));
            both(4);
            // Changes of the pool, either way, below zero too.
            assert_eq!(ours.reduce_permits(5).unwrap(), -1);
            both(-1);
            a.ok("addPermits", KIND, NAME, json!({"n": 3}));
            both(2);
            assert_eq!(ours.release(1).unwrap(), 3);
            both(3);
        }
    }
}

#[test]
fn a_release_on_either_side_wakes_a_waiter_on_the_other() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    for version in Redisson::ALL {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let a = java.thread("a");
        let ours = server.sleepy().counting_semaphore(NAME);
        assert!(ours.try_set_permits(2).unwrap());

        // Theirs hold both permits; their release wakes our waiter for two.
        assert!(java_take(&a, 2));
        let (taken_tx, taken) = std::sync::mpsc::channel();
        let waiter = ours.clone();
        std::thread::spawn(move || {
            let permits = waiter.try_acquire_many_for(2, LONG).unwrap();
            let _ = taken_tx.send(permits.map(|permits| permits.release().is_ok()));
        });
        await_subscribers(&server, CHANNEL, 1);
        a.ok("release", KIND, NAME, json!({"n": 2}));
        assert_eq!(
            taken.recv_timeout(WOKEN),
            Ok(Some(true)),
            "{version:?}: their release did not wake our waiter"
        );

        // Ours hold both; our guard's release wakes their waiter for two.
        let permits = ours.acquire_many(2).unwrap();
        let b = java.thread("b");
        let before = server.subscribers(CHANNEL);
        let extra = json!({"n": 2, "wait": LONG.as_millis() as u64});
        let pending = b.send("tryAcquire", KIND, NAME, extra);
        await_subscribers(&server, CHANNEL, before + 1);
        permits.release().unwrap();
        match pending.wait_for(WOKEN) {
            Some(Ok(Value::Bool(true))) => {}
            other => panic!("{version:?}: our release did not wake their waiter: {other:?}"),
        }
        assert_eq!(ours.available_permits().unwrap(), 0);
        // Our handle gives back the permits their thread took.
        assert_eq!(ours.release(2).unwrap(), 2);
        assert_eq!(java_available(&a), 2);
    }
}
