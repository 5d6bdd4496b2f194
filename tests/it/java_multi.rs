//! Real Redisson (3.52.0 and 4.7.0) `RMultiLock` over `RLock`s and our multi-lock over the
//! same names, both ways: each excludes the other, and each one's release wakes the other's
//! waiter by the members' unlock messages.

use crate::support;

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use serde_json::json;
use support::java::{Jvm, Redisson};
use support::toolchain::{Toolchain, skip_without};
use support::{Server, await_subscribers, channel, hash};

const NO_HANG: Duration = Duration::from_secs(60);

fn names(prefix: &str) -> [String; 3] {
    ["a", "b", "c"].map(|n| format!("{prefix}:{n}"))
}

#[test]
fn java_s_multi_lock_excludes_ours_and_its_release_wakes_our_waiter() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    for version in Redisson::ALL {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let j = java.thread("j");
        let names = names(&format!("jm{}", version.version()));
        let extra = json!({ "names": names });
        let ours = server.client();
        let multi = ours.multi_lock(&names);

        j.ok("lock", "multi", "", extra.clone());
        let owner = j.owner();
        for name in &names {
            assert_eq!(hash(&mut server.conn(), name), vec![(owner.clone(), 1)]);
        }
        assert!(multi.try_lock().unwrap().is_none(), "Redisson {version:?}");
        // Only Java's members are there: nothing of ours was left behind.
        for name in &names {
            assert_eq!(hash(&mut server.conn(), name), vec![(owner.clone(), 1)]);
        }
        let (tx, rx) = mpsc::channel();
        let (done, hang_up) = mpsc::channel::<()>();
        thread::spawn(move || {
            let guard = multi.lock().unwrap();
            tx.send(()).unwrap();
            let _ = hang_up.recv();
            drop(guard);
        });
        // Waiting on the first member's channel: Java's lease is 30 s, so only its
        // release's message lets our waiter in within the bound below.
        await_subscribers(&server, &channel(&names[0]), 1);
        j.ok("unlock", "multi", "", extra.clone());
        rx.recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("Redisson {version:?}: our waiter was not woken"));
        let refused = j.ok("tryLock", "multi", "", json!({ "names": names, "wait": 0 }));
        assert_eq!(refused, json!(false), "Redisson {version:?}");
        for name in &names {
            let fields = hash(&mut server.conn(), name);
            assert_eq!(fields.len(), 1, "{name}: {fields:?}");
            assert_ne!(fields[0].0, owner, "{name}: Java kept a member");
        }
        drop(done);
        assert!(support::eventually(NO_HANG, || names
            .iter()
            .all(|name| !server.exists(name))));
    }
}

#[test]
fn our_multi_lock_excludes_java_s_and_our_release_wakes_its_waiter() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    for version in Redisson::ALL {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let j = java.thread("j");
        let names = names(&format!("om{}", version.version()));
        let ours = server.client();
        let multi = ours.multi_lock(&names);

        let guard = multi.lock().unwrap();
        let wait = |ms: u64| json!({ "names": names, "wait": ms });
        assert_eq!(j.ok("tryLock", "multi", "", wait(0)), json!(false));
        // Java's plain lock on one member is excluded too.
        let one = j.ok("tryLock", "lock", &names[1], json!({ "wait": 0 }));
        assert_eq!(one, json!(false), "Redisson {version:?}");
        let waiting = j.send("tryLock", "multi", "", wait(30_000));
        // Redisson waits on its first member's channel, subscribed before it parks.
        await_subscribers(&server, &channel(&names[0]), 1);
        assert_eq!(
            waiting.is_done(),
            None,
            "Redisson {version:?} took a held lock"
        );
        guard.unlock().unwrap();
        assert_eq!(
            waiting.wait_for(Duration::from_secs(20)),
            Some(Ok(json!(true))),
            "Redisson {version:?} did not take the locks we released"
        );
        assert!(multi.try_lock().unwrap().is_none());
        let owner = j.owner();
        for name in &names {
            assert_eq!(hash(&mut server.conn(), name), vec![(owner.clone(), 1)]);
        }
        j.ok("unlock", "multi", "", json!({ "names": names }));
        assert!(names.iter().all(|name| !server.exists(name)));
        assert!(multi.try_lock().unwrap().is_some());
    }
}
