//! Real Redisson (3.52.0 and 4.7.0, whose `RCountDownLatch` is the same) and this crate's
//! count-down latch on one latch, both ways: a count set by one side is the other's and
//! refuses the other's set, both read the same count, and each side's last count-down
//! opens the other's waiter, woken by the message alone.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::java::{Jvm, Redisson, Thread};
use support::toolchain::{Toolchain, skip_without};
use support::{Server, await_subscribers};

const NAME: &str = "ready";
const CHANNEL: &str = "redisson_countdownlatch__channel__{ready}";
/// A wait that only an opening ends within a test.
const LONG: Duration = Duration::from_secs(60);
/// Within this a woken waiter must have returned: well below our sleepy client's poll
/// (30 s), so only a message can have woken ours.
const WOKEN: Duration = Duration::from_secs(15);

fn java_count(thread: &Thread) -> u64 {
    thread
        .ok("count", "latch", NAME, Value::Null)
        .as_u64()
        .unwrap()
}

fn java_set(thread: &Thread, n: u64) -> Value {
    thread.ok("trySetCount", "latch", NAME, json!({"n": n}))
}

#[test]
fn a_count_set_on_either_side_is_shared_and_refuses_the_other_s_set() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    for version in Redisson::ALL {
        for java_sets in [true, false] {
            let server = Server::start();
            let java = Jvm::shared(version).connect(&server.url(), None);
            let a = java.thread("a");
            let ours = server.client().count_down_latch(NAME);
            if java_sets {
                assert_eq!(java_set(&a, 3), json!(true));
                assert!(!ours.try_set_count(5).unwrap(), "{version:?}: set twice");
            } else {
                assert!(ours.try_set_count(3).unwrap());
                assert_eq!(java_set(&a, 5), json!(false), "{version:?}: set twice");
            }
            assert_eq!((ours.count().unwrap(), java_count(&a)), (3, 3));
            assert_eq!(ours.count_down().unwrap(), 2);
            assert_eq!(java_count(&a), 2);
            a.ok("countDown", "latch", NAME, Value::Null);
            assert_eq!((ours.count().unwrap(), java_count(&a)), (1, 1));
            a.ok("countDown", "latch", NAME, Value::Null);
            assert_eq!((ours.count().unwrap(), java_count(&a)), (0, 0));
            assert!(!server.exists(NAME), "{version:?}: the count stays at zero");
            // Open on both sides: either may set it again.
            assert_eq!(ours.count_down().unwrap(), 0);
            assert_eq!(java_count(&a), 0);
            assert!(ours.try_set_count(1).unwrap());
            assert_eq!(java_set(&a, 1), json!(false));
        }
    }
}

#[test]
fn the_last_count_down_on_either_side_opens_the_other_s_waiter() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    for version in Redisson::ALL {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let a = java.thread("a");
        let ours = server.sleepy().count_down_latch(NAME);

        // Their count-down opens our waiter.
        assert!(ours.try_set_count(1).unwrap());
        let (done, opened) = std::sync::mpsc::channel();
        let waiter = ours.clone();
        std::thread::spawn(move || {
            let _ = done.send(waiter.wait_for(LONG).map_err(|err| err.to_string()));
        });
        await_subscribers(&server, CHANNEL, 1);
        a.ok("countDown", "latch", NAME, Value::Null);
        assert_eq!(
            opened.recv_timeout(WOKEN),
            Ok(Ok(true)),
            "{version:?}: their count-down did not open our waiter"
        );

        // Our count-down opens their waiter, once it waits on the channel.
        assert_eq!(java_set(&a, 2), json!(true));
        let b = java.thread("b");
        let before = server.subscribers(CHANNEL);
        let pending = b.send(
            "await",
            "latch",
            NAME,
            json!({"wait": LONG.as_millis() as u64}),
        );
        await_subscribers(&server, CHANNEL, before + 1);
        assert_eq!(ours.count_down().unwrap(), 1);
        assert!(
            pending.is_done().is_none(),
            "{version:?}: theirs opened at 1"
        );
        assert_eq!(ours.count_down().unwrap(), 0);
        assert_eq!(
            pending.wait_for(WOKEN),
            Some(Ok(json!(true))),
            "{version:?}: our count-down did not open their waiter"
        );
    }
}
