//! Every kind of lock through one shared test body, then what is particular to the token
//! lock: a guard that moves between threads, extend, expiry, keys of another kind, and
//! waiting out a SET-NX lock of another library, whose release publishes nothing.

use crate::support;

use std::time::{Duration, Instant};

use redmutex::{Fenced, LockClient, Reentrant, Token};
use support::{MakeLock, SHORT_LEASE, Server, eventually};

const LONG: Duration = Duration::from_secs(60);

/// The acquisition quartet and its leased forms, the same for every kind: a holder through
/// one client, a rival through another.
fn quartet<K: MakeLock>() {
    let server = Server::start();
    let (ours, theirs) = (server.client(), server.client());
    let lock = K::make(&ours, "quartet");
    let rival = K::make(&theirs, "quartet");
    let kind = K::NAME;

    let guard = lock.lock().unwrap();
    assert!(guard.is_watched() && !guard.is_lost(), "{kind}");
    assert!(lock.is_locked().unwrap(), "{kind}");
    assert!(rival.try_lock().unwrap().is_none(), "{kind}");
    let short = Duration::from_millis(50);
    assert!(rival.try_lock_for(short).unwrap().is_none(), "{kind}");
    assert!(
        rival
            .try_lock_until(Instant::now() + short)
            .unwrap()
            .is_none(),
        "{kind}"
    );
    assert!(rival.try_lock_with_lease(LONG).unwrap().is_none(), "{kind}");
    guard.unlock().unwrap();
    assert!(!lock.is_locked().unwrap(), "{kind}");

    // A leased hold is not renewed: it expires, and the rival's waiting form gets it.
    let leased = lock.lock_with_lease(Duration::from_millis(200)).unwrap();
    assert!(!leased.is_watched(), "{kind}");
    let left = lock.remaining_lease().unwrap().expect("a lease");
    assert!(left <= Duration::from_millis(200), "{kind}: {left:?}");
    let taken = rival
        .try_lock_with_lease_for(Duration::from_secs(20), LONG)
        .unwrap()
        .expect("the lease ran out");
    let err = leased.unlock().unwrap_err();
    assert!(err.is_lost(), "{kind}: {err}");
    assert!(
        rival.is_locked().unwrap(),
        "{kind}: the new holder kept its hold"
    );
    assert_eq!(theirs.stats().locks_lost, 0, "{kind}");
    assert_eq!(ours.stats().locks_lost, 1, "{kind}");
    drop(taken);

    // Waiting forms get the lock once it is released.
    let guard = lock.lock().unwrap();
    let (tx, rx) = crossbeam_channel::bounded(1);
    let waiter = std::thread::spawn(move || {
        let guard = rival.try_lock_until(Instant::now() + LONG).unwrap();
        tx.send(()).unwrap();
        guard.map(|g| g.unlock().unwrap()).is_some()
    });
    assert!(
        rx.recv_timeout(Duration::from_millis(100)).is_err(),
        "{kind}: waits"
    );
    drop(guard);
    assert!(waiter.join().unwrap(), "{kind}");

    // Bad input is refused before anything is sent.
    let err = lock.lock_with_lease(Duration::ZERO).map(drop).unwrap_err();
    assert!(err.is_invalid_input(), "{kind}: {err}");
    let err = K::make(&ours, "").try_lock().map(drop).unwrap_err();
    assert!(err.is_invalid_input(), "{kind}: {err}");
}

#[test]
fn the_quartet_for_every_kind() {
    quartet::<Reentrant>();
    quartet::<Fenced>();
    quartet::<Token>();
}

#[test]
fn a_token_guard_is_released_from_another_thread() {
    let server = Server::start();
    let lock = server.client().token_lock("moved");
    let guard = lock.lock().unwrap();
    let token = guard.token().to_owned();
    let value: String = redis::cmd("GET")
        .arg("moved")
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(value, token, "the key holds the guard's token");
    assert_eq!(token.len(), 32);
    std::thread::spawn(move || guard.unlock().unwrap())
        .join()
        .unwrap();
    assert!(!lock.is_locked().unwrap());
}

#[test]
fn a_token_lock_is_not_reentrant() {
    let server = Server::start();
    let lock = server.client().token_lock("once");
    let guard = lock.lock().unwrap();
    assert!(
        lock.try_lock().unwrap().is_none(),
        "a second hold waits like anyone"
    );
    let other = server.client().token_lock("once");
    assert!(other.try_lock().unwrap().is_none());
    guard.unlock().unwrap();
    assert!(lock.try_lock().unwrap().is_some());
}

#[test]
fn extend_sets_the_lease_and_fails_once_the_token_is_gone() {
    let server = Server::start();
    let lock = server.client().token_lock("extended");
    let guard = lock.lock_with_lease(Duration::from_secs(1)).unwrap();
    guard.extend(LONG).unwrap();
    let left = lock.remaining_lease().unwrap().unwrap();
    assert!(left > Duration::from_secs(50), "{left:?}");
    assert!(guard.valid_until() > Instant::now() + Duration::from_secs(50));
    assert!(guard.extend(Duration::ZERO).unwrap_err().is_invalid_input());

    // Someone else's token now: extend and unlock refuse and leave it.
    let _: () = redis::cmd("SET")
        .arg("extended")
        .arg("not-ours")
        .query(&mut server.conn())
        .unwrap();
    assert!(guard.extend(LONG).unwrap_err().is_lost());
    assert!(guard.is_lost());
    assert!(guard.unlock().unwrap_err().is_lost());
    let value: String = redis::cmd("GET")
        .arg("extended")
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(value, "not-ours");
}

#[test]
fn the_watchdog_renews_a_token_lock() {
    let server = Server::start();
    let client = server.builder_with_lease(SHORT_LEASE).build().unwrap();
    let lock = client.token_lock("renewed");
    let rival = server.client().token_lock("renewed");
    let guard = lock.lock().unwrap();
    // Held through three renewals, that is well past its first lease.
    assert!(eventually(Duration::from_secs(30), || {
        assert!(
            rival.try_lock().unwrap().is_none(),
            "the rival got a renewed lock"
        );
        client.stats().renewals >= 3
    }));
    assert!(!guard.is_lost());
    guard.unlock().unwrap();
    assert!(rival.try_lock().unwrap().is_some());
}

#[test]
fn kinds_do_not_mix_silently() {
    let server = Server::start();
    let client = server.client();
    let held = client.lock("mixed").lock().unwrap();
    let err = server
        .client()
        .token_lock("mixed")
        .try_lock()
        .map(drop)
        .unwrap_err();
    assert!(err.is_wrong_kind(), "{err}");
    assert!(err.to_string().contains("hash"), "{err}");
    drop(held);

    let _: () = redis::cmd("RPUSH")
        .arg("listed")
        .arg("x")
        .query(&mut server.conn())
        .unwrap();
    let err = client.token_lock("listed").lock().map(drop).unwrap_err();
    assert!(err.is_wrong_kind(), "{err}");
    // The hash kinds refuse it too, naming what they found, and write nothing.
    for err in [
        client.lock("listed").lock().map(drop).unwrap_err(),
        client.fenced_lock("listed").lock().map(drop).unwrap_err(),
    ] {
        assert!(err.is_wrong_kind(), "{err}");
        assert!(err.to_string().contains("a list"), "{err}");
        assert_eq!(err.lock_name(), Some("listed"));
    }
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.conn())
        .unwrap();
    let keys: Vec<_> = keys
        .iter()
        .filter(|key| !key.starts_with("redisson_unlock_latch:{mixed}"))
        .collect();
    assert_eq!(
        keys,
        ["listed"],
        "nothing written beside it, no fencing counter either"
    );
}

/// A forced unlock deletes only its own kind's data: a key of another type, or another
/// kind's lock, is `WrongKind` and stays as it was.
#[test]
fn a_forced_unlock_never_deletes_another_kinds_key() {
    let server = Server::start();
    let client = server.client();
    let mut redis = server.conn();
    let _: () = redis::pipe()
        .cmd("RPUSH")
        .arg("listed")
        .arg("x")
        .cmd("SET")
        .arg("cached")
        .arg(r#"{"name":"bob"}"#)
        .query(&mut redis)
        .unwrap();
    let _reading = client.read_write_lock("rw").read().lock().unwrap();
    let _hashed = client.lock("hashed").lock().unwrap();
    let refused = [
        ("listed", client.lock("listed").force_unlock()),
        ("listed", client.token_lock("listed").force_unlock()),
        ("listed", client.fair_lock("listed").force_unlock()),
        (
            "listed",
            client.read_write_lock("listed").write().force_unlock(),
        ),
        ("cached", client.lock("cached").force_unlock()),
        ("cached", client.fenced_lock("cached").force_unlock()),
        ("rw", client.lock("rw").force_unlock()),
        ("rw", client.token_lock("rw").force_unlock()),
        ("hashed", client.token_lock("hashed").force_unlock()),
        (
            "hashed",
            client.read_write_lock("hashed").read().force_unlock(),
        ),
    ];
    for (key, result) in refused {
        let err = result.unwrap_err();
        // Data is no lock at all; a lock of another kind is of the wrong kind.
        match key {
            "cached" => assert!(err.is_not_a_lock(), "{key}: {err}"),
            _ => assert!(err.is_wrong_kind(), "{key}: {err}"),
        }
        assert!(server.exists(key), "{key} deleted");
    }
    let value: String = redis::cmd("GET").arg("cached").query(&mut redis).unwrap();
    assert_eq!(value, r#"{"name":"bob"}"#);
    assert!(client.lock("hashed").force_unlock().unwrap());
    assert!(client.read_write_lock("rw").read().force_unlock().unwrap());
}

#[test]
fn a_token_waiter_notices_a_foreign_release_within_the_retry_cap() {
    let server = Server::start();
    // A SET-NX lock of another library, with a long lease, released by a plain DEL that
    // publishes nothing.
    let mut redis = server.conn();
    let _: () = redis::cmd("SET")
        .arg("shared")
        .arg("foreign-token")
        .arg("NX")
        .arg("PX")
        .arg(LONG.as_millis() as u64)
        .query(&mut redis)
        .unwrap();
    let client: LockClient = server.client();
    let lock = client.token_lock("shared");
    let base = server.calls("set");
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let _ = tx.send(lock.lock().and_then(|guard| guard.unlock()));
    });
    // It keeps trying, although nobody publishes.
    assert!(eventually(Duration::from_secs(20), || server.calls("set") >= base + 3));
    let _: i64 = redis::cmd("DEL").arg("shared").query(&mut redis).unwrap();
    rx.recv_timeout(Duration::from_secs(20))
        .expect("noticed the foreign release long before its 60 s lease")
        .unwrap();
}

/// A forced unlock naming a holder deletes the lock only while that holder holds it: the
/// next holder is spared. A field that is no owner (a read-write lock's `mode`) names
/// nobody.
#[test]
fn a_forced_unlock_naming_a_holder_spares_any_other() {
    let server = Server::start();
    let (first, second) = (server.client(), server.client());
    let guard = first.lock("named").lock().unwrap();
    let old = first.inspect("named").unwrap().holders[0].id.clone();
    guard.unlock().unwrap();
    let _held = second.lock("named").lock().unwrap();
    assert!(!first.lock("named").force_unlock_held_by(&old).unwrap());
    let now = first.inspect("named").unwrap().holders[0].id.clone();
    assert_ne!(now, old);
    assert!(first.lock("named").force_unlock_held_by(&now).unwrap());
    assert!(!server.exists("named"));

    let rw = second.read_write_lock("rw");
    let _reading = rw.read().lock().unwrap();
    assert!(!rw.read().force_unlock_held_by("mode").unwrap());
    assert!(!rw.write().force_unlock_held_by("mode").unwrap());
    assert!(server.exists("rw"));
    let err = first.lock("named").force_unlock_held_by("").unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
}
