//! Real Redisson (3.52.0 and 4.7.0) `RSpinLock` and our spin lock on one name, both ways:
//! neither side publishes or subscribes, so each waiter takes the lock by its back-off.

use crate::support;

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use serde_json::{Value, json};
use support::java::{Jvm, Redisson};
use support::toolchain::{Toolchain, skip_without};
use support::{Server, channel, eventually, hash};

/// Scripts the server has run, by EVAL or EVALSHA.
fn scripts_run(server: &Server) -> u64 {
    server.calls("eval") + server.calls("evalsha")
}

/// Whether nothing subscribes to the lock's channel and nothing was published at all.
fn lock_channel_quiet(server: &Server, name: &str) -> bool {
    server.subscribers(&channel(name)) == 0 && server.calls("publish") == 0
}

#[test]
fn java_s_spin_lock_is_taken_by_our_spinning_waiter_after_its_release() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    for version in Redisson::ALL {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let a = java.thread("a");
        let ours = server.client();

        a.ok("lock", "spin", "spun", Value::Null);
        assert!(ours.spin_lock("spun").try_lock().unwrap().is_none());
        let before = scripts_run(&server);
        let (tx, rx) = mpsc::channel();
        let lock = ours.spin_lock("spun");
        thread::spawn(move || {
            let guard = lock.try_lock_for(Duration::from_secs(60)).unwrap();
            let taken = guard.as_ref().map(|_| lock.hold_count().unwrap());
            let _ = tx.send(taken);
            drop(guard);
        });
        // Our waiter spins: attempts keep coming, with nothing subscribed.
        assert!(eventually(Duration::from_secs(10), || scripts_run(&server)
            >= before + 3));
        assert!(lock_channel_quiet(&server, "spun"), "Redisson {version:?}");
        a.ok("unlock", "spin", "spun", Value::Null);
        // Java's lease is 30 s: only our back-off (128 ms at most) takes it this soon.
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(10)),
            Ok(Some(1)),
            "Redisson {version:?}: our waiter did not take the lock Java released"
        );
        assert!(lock_channel_quiet(&server, "spun"), "Redisson {version:?}");
    }
}

#[test]
fn our_spin_lock_is_taken_by_java_s_spinning_waiter_after_its_release() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    for version in Redisson::ALL {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let b = java.thread("b");
        let ours = server.client();
        let lock = ours.spin_lock("spun");

        let guard = lock.lock().unwrap();
        let again = lock.lock().unwrap();
        let fields = hash(&mut server.conn(), "spun");
        assert_eq!(fields.len(), 1, "{fields:?}");
        assert_eq!(fields[0].1, 2, "one field counts both holds");
        let refused = b.ok("tryLock", "spin", "spun", json!({"wait": 0}));
        assert_eq!(refused, json!(false), "Redisson {version:?}");
        let before = scripts_run(&server);
        let spinning = b.send("tryLock", "spin", "spun", json!({"wait": 30_000}));
        assert!(eventually(Duration::from_secs(10), || scripts_run(&server)
            >= before + 2));
        again.unlock().unwrap();
        assert_eq!(
            spinning.is_done(),
            None,
            "Redisson {version:?} took a lock we still hold once"
        );
        guard.unlock().unwrap();
        // Our lease is 30 s: Java's back-off (128 ms at most) takes it this soon.
        assert_eq!(
            spinning.wait_for(Duration::from_secs(10)),
            Some(Ok(json!(true))),
            "Redisson {version:?} did not take the lock we released"
        );
        assert_eq!(b.ok("holdCount", "spin", "spun", Value::Null), json!(1));
        assert!(lock.try_lock().unwrap().is_none());
        b.ok("unlock", "spin", "spun", Value::Null);
        assert!(!server.exists("spun"));
        assert!(lock_channel_quiet(&server, "spun"), "Redisson {version:?}");
    }
}
