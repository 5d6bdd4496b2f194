//! Real Redisson (3.52.0 and 4.7.0) and this crate on one reentrant lock, both ways.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::java::{Jvm, Redisson};
use support::{Server, await_subscribers, channel};

/// A client of ours that would not try again for 30 s on its own: a waiter of it that
/// returns sooner was woken by a message.
fn sleepy(server: &Server) -> redmutex::LockClient {
    redmutex::LockClient::builder(&server.url())
        .retry_base(Duration::from_secs(30))
        .retry_cap(Duration::from_secs(30))
        .build()
        .unwrap()
}

#[test]
fn java_s_release_wakes_our_waiter_and_ours_wakes_java_s() {
    for version in Redisson::ALL {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let a = java.thread("a");
        let ours = sleepy(&server);
        let lock = ours.lock("shared");

        a.ok("lock", "lock", "shared", Value::Null);
        let waiter = std::thread::spawn(move || lock.lock().map(|guard| guard.unlock()));
        await_subscribers(&server, &channel("shared"), 1);
        a.ok("unlock", "lock", "shared", Value::Null);
        waiter.join().unwrap().unwrap().unwrap();

        let guard = ours.lock("shared").lock().unwrap();
        let pending = a.send("tryLock", "lock", "shared", json!({"wait": 20_000}));
        await_subscribers(&server, &channel("shared"), 1);
        guard.unlock().unwrap();
        // Our lease is 30 s: Redisson, not woken, would wait for it.
        let taken = pending.wait_for(Duration::from_secs(10));
        assert_eq!(
            taken,
            Some(Ok(json!(true))),
            "Redisson {version:?} was not woken by our release"
        );
        assert_eq!(a.ok("holdCount", "lock", "shared", Value::Null), json!(1));
        a.ok("unlock", "lock", "shared", Value::Null);
    }
}
