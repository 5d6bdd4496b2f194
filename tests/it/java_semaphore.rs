//! Real Redisson (3.52.0 and 4.7.0, whose `RPermitExpirableSemaphore` scripts are the same)
//! and this crate's leased semaphore on one pool of permits, both ways: the permits set by
//! one side are the other's, both count them alike, each side's release wakes the other's
//! waiter, a lapsed lease gives the permit back to the other side, and each side gives back
//! the other's permits by id and refuses ids it does not hold.

use crate::support;

use std::time::Duration;

use redmutex::LockKind;
use serde_json::{Value, json};
use support::java::{Jvm, Redisson, Thread};
use support::toolchain::{Toolchain, skip_without};
use support::{Server, await_subscribers};

const NAME: &str = "pool";
const CHANNEL: &str = "redisson_sc:{pool}";
/// The lease of the permits that make others wait: no waiter may wait it out in a test.
const LONG: Duration = Duration::from_secs(60);
/// Within this a woken waiter must have its permit: well below [`LONG`], our client's
/// lease (30 s) and its retry interval (30 s), so only a message can have woken it.
const WOKEN: Duration = Duration::from_secs(15);
/// An id no one holds.
const UNKNOWN: &str = "0123456789abcdef0123456789abcdef";

/// A Java permit with a lease of `lease`, taken without waiting: its id, or None.
fn java_take(thread: &Thread, lease: Duration) -> Option<String> {
    let extra = json!({"wait": 0, "lease": lease.as_millis() as u64});
    let id = thread.ok("tryAcquire", "permits", NAME, extra);
    id.as_str().map(str::to_owned)
}

fn java_available(thread: &Thread) -> u64 {
    let available = thread.ok("available", "permits", NAME, Value::Null);
    available.as_u64().unwrap()
}

/// The ids of the held permits as our inspection sees them, sorted.
fn held(server: &Server) -> Vec<String> {
    let info = server.client().inspect(NAME).unwrap();
    // With no permit held, the count alone is left: a counting semaphore's shape while a
    // client still waits on (or lingers on) its channel, else a bare number.
    assert!(
        matches!(
            info.kind,
            LockKind::LeasedSemaphore | LockKind::CountingSemaphore | LockKind::NotALock(_)
        ),
        "{:?}",
        info.kind
    );
    let mut ids: Vec<_> = info.holders.into_iter().map(|holder| holder.id).collect();
    ids.sort();
    ids
}

fn is_hex_id(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
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
            let ours = server.client().leased_semaphore(NAME);
            let set_twice = json!({"n": 5});
            if java_sets {
                assert_eq!(
                    a.ok("trySetPermits", "permits", NAME, json!({"n": 3})),
                    json!(true)
                );
                assert!(!ours.try_set_permits(5).unwrap(), "{version:?}: set twice");
            } else {
                assert!(ours.try_set_permits(3).unwrap());
                let again = a.ok("trySetPermits", "permits", NAME, set_twice);
                assert_eq!(again, json!(false), "{version:?}: set twice");
            }
            assert_eq!(ours.available_permits().unwrap(), 3);
            assert_eq!(java_available(&a), 3);

            let theirs = java_take(&a, LONG).expect("a permit for them");
            assert!(is_hex_id(&theirs), "{theirs}");
            let mine = ours.acquire().unwrap();
            assert_eq!(
                (ours.available_permits().unwrap(), java_available(&a)),
                (1, 1)
            );
            let second = ours.try_acquire().unwrap().expect("the last permit");
            assert_eq!(
                java_take(&a, LONG),
                None,
                "{version:?}: four of three permits"
            );
            assert!(ours.try_acquire().unwrap().is_none());
            assert_eq!(
                (ours.available_permits().unwrap(), java_available(&a)),
                (0, 0)
            );
            let mut all = vec![theirs.clone(), mine.id(), second.id()];
            all.sort();
            assert_eq!(held(&server), all, "{version:?}");

            mine.release().unwrap();
            assert_eq!(
                (ours.available_permits().unwrap(), java_available(&a)),
                (1, 1)
            );
            a.ok("release", "permits", NAME, json!({"permit": theirs}));
            second.release().unwrap();
            assert_eq!(
                (ours.available_permits().unwrap(), java_available(&a)),
                (3, 3)
            );
            assert_eq!(held(&server), Vec::<String>::new());
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
        let ours = server.sleepy().leased_semaphore(NAME);
        assert!(ours.try_set_permits(1).unwrap());

        // Theirs holds the one permit for a minute; their release wakes our waiter.
        let theirs = java_take(&a, LONG).expect("the permit");
        let (taken_tx, taken) = std::sync::mpsc::channel();
        let waiter = ours.clone();
        std::thread::spawn(move || {
            let permit = waiter.try_acquire_for(LONG).unwrap();
            let _ = taken_tx.send(permit.map(|permit| permit.release().is_ok()));
        });
        await_subscribers(&server, CHANNEL, 1);
        a.ok("release", "permits", NAME, json!({"permit": theirs}));
        assert_eq!(
            taken.recv_timeout(WOKEN),
            Ok(Some(true)),
            "{version:?}: their release did not wake our waiter"
        );

        // Ours holds it; our release wakes their waiter.
        let permit = ours.acquire_with_lease(LONG).unwrap();
        let b = java.thread("b");
        let before = server.subscribers(CHANNEL);
        let extra = json!({"wait": LONG.as_millis() as u64, "lease": LONG.as_millis() as u64});
        let pending = b.send("tryAcquire", "permits", NAME, extra);
        await_subscribers(&server, CHANNEL, before + 1);
        permit.release().unwrap();
        let id = match pending.wait_for(WOKEN) {
            Some(Ok(Value::String(id))) => id,
            other => panic!("{version:?}: our release did not wake their waiter: {other:?}"),
        };
        assert_eq!(held(&server), [id.as_str()]);
        b.ok("release", "permits", NAME, json!({"permit": id}));
        assert_eq!(ours.available_permits().unwrap(), 1);
    }
}

#[test]
fn a_lapsed_lease_on_either_side_gives_the_permit_to_the_other() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    let short = Duration::from_millis(1500);
    for version in Redisson::ALL {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let a = java.thread("a");
        let ours = server.sleepy().leased_semaphore(NAME);
        assert!(ours.try_set_permits(1).unwrap());

        // Their permit's lease runs out: our waiter, whose wait is bounded by it, takes it.
        let theirs = java_take(&a, short).expect("the permit");
        assert!(ours.try_acquire().unwrap().is_none());
        let mine = ours.try_acquire_for(WOKEN).unwrap();
        let mine = mine.unwrap_or_else(|| panic!("{version:?}: their lapsed permit not ours"));
        assert_eq!(held(&server), [mine.id()]);
        // Their release of the lapsed permit is refused and gives nothing back.
        let late = a.call("release", "permits", NAME, json!({"permit": theirs}));
        assert!(late.is_err(), "{version:?}: {late:?}");
        assert_eq!(
            (ours.available_permits().unwrap(), java_available(&a)),
            (0, 0)
        );
        mine.release().unwrap();

        // Our permit's lease runs out: their waiter, bounded by it, takes it.
        let mine = ours
            .try_acquire_with_lease(short)
            .unwrap()
            .expect("the permit");
        assert_eq!(java_take(&a, LONG), None);
        let extra = json!({"wait": WOKEN.as_millis() as u64, "lease": LONG.as_millis() as u64});
        let taken = a.ok("tryAcquire", "permits", NAME, extra);
        let id = taken
            .as_str()
            .unwrap_or_else(|| panic!("{version:?}: ours not theirs"));
        assert_eq!(held(&server), [id]);
        let late = mine.release();
        assert!(late.is_err_and(|err| err.is_lost()), "{version:?}");
        assert_eq!(
            (ours.available_permits().unwrap(), java_available(&a)),
            (0, 0)
        );
        a.ok("release", "permits", NAME, json!({"permit": id}));
        assert_eq!(ours.available_permits().unwrap(), 1);
    }
}

#[test]
fn each_side_gives_back_the_other_s_permits_by_id_and_no_unknown_ones() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    for version in Redisson::ALL {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let a = java.thread("a");
        let ours = server.client().leased_semaphore(NAME);
        assert!(ours.try_set_permits(3).unwrap());
        let theirs = java_take(&a, LONG).expect("a permit");
        let mine = ours.acquire().unwrap();

        // Unknown ids, and each side's own id given to the wrong call, change nothing.
        let unknown = a.call("release", "permits", NAME, json!({"permit": UNKNOWN}));
        assert!(unknown.is_err(), "{version:?}: {unknown:?}");
        let unknown = ours.release(UNKNOWN);
        assert!(unknown.is_err_and(|err| err.is_not_held()), "{version:?}");
        let mut both = vec![theirs.clone(), mine.id()];
        both.sort();
        assert_eq!(held(&server), both, "{version:?}");
        assert_eq!(
            (ours.available_permits().unwrap(), java_available(&a)),
            (1, 1)
        );

        // Each gives back the other's permit by its id, once.
        ours.release(&theirs).unwrap();
        a.ok("release", "permits", NAME, json!({"permit": mine.id()}));
        assert_eq!(
            (ours.available_permits().unwrap(), java_available(&a)),
            (3, 3)
        );
        let again = ours.release(&theirs);
        assert!(again.is_err_and(|err| err.is_not_held()), "{version:?}");
        let again = a.call("release", "permits", NAME, json!({"permit": mine.id()}));
        assert!(again.is_err(), "{version:?}: {again:?}");
        let lost = mine.release();
        assert!(lost.is_err_and(|err| err.is_lost()), "{version:?}");
        assert_eq!(
            (ours.available_permits().unwrap(), java_available(&a)),
            (3, 3)
        );
        assert_eq!(held(&server), Vec::<String>::new());
    }
}
