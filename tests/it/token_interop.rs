//! The token lock and the real SET-NX libraries on the same key, each driven as a
//! subprocess: redis-py's `Lock`, node-redlock and redsync's `Mutex` on a single node. Each
//! excludes the other, neither can release the other's hold, each side sees the other's
//! extend, and each side's waiter gets in once the other side releases (theirs publish
//! nothing: our waiter notices on its retry loop).

use crate::support;

use std::time::Duration;

use redmutex::LockKind;
use support::toolchain::{Toolchain, skip_without};
use support::{Peer, Server, eventually};

/// Far longer than any wait below: nobody gets in by an expiry.
const LONG_MS: u64 = 60_000;
const WAIT: Duration = Duration::from_secs(20);

/// Each peer, its name, and the server command each of its acquire attempts runs
/// (redis-py and redsync send `SET NX PX`, node-redlock runs its acquire script by
/// EVALSHA).
fn peers(server: &Server) -> [(&'static str, Peer, &'static str); 3] {
    [
        ("redis-py", Peer::python(&server.url()), "set"),
        ("node-redlock", Peer::node(&server.url()), "evalsha"),
        ("redsync", Peer::go(&server.url()), "set"),
    ]
}

fn get(server: &Server, key: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(key)
        .query(&mut server.conn())
        .unwrap()
}

#[test]
fn their_hold_excludes_us_and_our_waiter_gets_in_after_their_release() {
    if skip_without(&[Toolchain::Python, Toolchain::Node, Toolchain::Go]) {
        return;
    }
    let server = Server::start();
    let client = server.client();
    for (peer_name, mut peer, _) in peers(&server) {
        let lock = client.token_lock("shared");
        let token = peer.acquire("shared", LONG_MS, 0);
        assert!(
            lock.try_lock().unwrap().is_none(),
            "{peer_name}: busy for us"
        );
        assert!(lock.is_locked().unwrap());

        let (tx, rx) = crossbeam_channel::bounded(1);
        let waiter = lock.clone();
        std::thread::spawn(move || {
            let _ = tx.send(waiter.lock().map(|guard| guard.token().to_owned()));
        });
        assert!(
            rx.recv_timeout(Duration::from_millis(200)).is_err(),
            "{peer_name}: we wait"
        );
        assert_eq!(peer.call("release shared"), "released", "{peer_name}");
        let ours = rx
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("{peer_name}: our waiter missed their release"))
            .unwrap();
        assert_ne!(ours, token);
        // Our waiter's guard was dropped in its thread: the key is free again.
        assert!(!lock.is_locked().unwrap(), "{peer_name}");
    }
}

#[test]
fn our_hold_excludes_them_and_theirs_gets_in_after_our_release() {
    if skip_without(&[Toolchain::Python, Toolchain::Node, Toolchain::Go]) {
        return;
    }
    let server = Server::start();
    let client = server.client();
    for (peer_name, mut peer, attempts) in peers(&server) {
        let lock = client.token_lock("shared");
        let guard = lock.lock().unwrap();
        assert_eq!(
            peer.call(&format!("acquire shared {LONG_MS} 0")),
            "busy",
            "{peer_name}"
        );

        // Neither side can release the other's hold: theirs, with a token not ours...
        let reply = peer.call("release-token shared 0123456789abcdef0123456789abcdef");
        assert_eq!(reply, "not-owned", "{peer_name}");
        assert!(lock.is_locked().unwrap(), "{peer_name}: our hold survived");

        // ...and, once they waited us out, ours is refused and leaves their hold.
        let peer_acquire = std::thread::scope(|scope| {
            let base = server.calls(attempts);
            let waiting = scope.spawn(|| peer.call(&format!("acquire shared {LONG_MS} 15000")));
            // They tried, found it busy, and tried again: they are waiting.
            assert!(
                eventually(WAIT, || server.calls(attempts) >= base + 2),
                "{peer_name}: no attempts seen"
            );
            guard.unlock().unwrap();
            waiting.join().unwrap()
        });
        let token = peer_acquire
            .strip_prefix("acquired ")
            .unwrap_or_else(|| panic!("{peer_name}: {peer_acquire}"))
            .to_owned();
        let value: String = redis::cmd("GET")
            .arg("shared")
            .query(&mut server.conn())
            .unwrap();
        assert_eq!(value, token, "{peer_name}: their token is stored");
        assert_eq!(peer.call("release shared"), "released", "{peer_name}");
    }
}

#[test]
fn a_stale_guard_never_releases_their_hold() {
    if skip_without(&[Toolchain::Python, Toolchain::Node, Toolchain::Go]) {
        return;
    }
    let server = Server::start();
    let client = server.client();
    for (peer_name, mut peer, _) in peers(&server) {
        let lock = client.token_lock("expiring");
        let guard = lock.lock_with_lease(Duration::from_millis(100)).unwrap();
        // They get in once our lease ran out, blocking up to 15 s.
        let token = peer.acquire("expiring", LONG_MS, 15_000);
        let err = guard.unlock().unwrap_err();
        assert!(err.is_lost(), "{peer_name}: {err}");
        let value: String = redis::cmd("GET")
            .arg("expiring")
            .query(&mut server.conn())
            .unwrap();
        assert_eq!(value, token, "{peer_name}: their hold is intact");
        assert_eq!(peer.call("owned expiring"), "true", "{peer_name}");
        assert_eq!(peer.call("release expiring"), "released", "{peer_name}");
    }
}

#[test]
fn their_extend_shows_in_our_inspection() {
    if skip_without(&[Toolchain::Python, Toolchain::Node, Toolchain::Go]) {
        return;
    }
    let server = Server::start();
    let client = server.client();
    for (peer_name, mut peer, _) in peers(&server) {
        let token = peer.acquire("extended", 10_000, 0);
        let info = client.inspect("extended").unwrap();
        assert_eq!(info.kind, LockKind::Token, "{peer_name}");
        assert_eq!(info.holders.len(), 1, "{peer_name}");
        assert_eq!(info.holders[0].id, token, "{peer_name}");
        let before = info.lease_left.expect("their key expires");
        assert!(before <= Duration::from_secs(10), "{peer_name}: {before:?}");

        // redis-py adds to what is left, the others set the time to live: either way
        // beyond the 10 s it was acquired with.
        assert_eq!(
            peer.call("extend extended 60000"),
            "extended",
            "{peer_name}"
        );
        let info = client.inspect("extended").unwrap();
        assert_eq!(info.holders[0].id, token, "{peer_name}: still theirs");
        let after = info.lease_left.expect("their key expires");
        assert!(after > Duration::from_secs(10), "{peer_name}: {after:?}");
        assert_eq!(peer.call("release extended"), "released", "{peer_name}");
    }
}

#[test]
fn our_extend_keeps_their_waiter_out_past_our_first_lease() {
    if skip_without(&[Toolchain::Python, Toolchain::Node, Toolchain::Go]) {
        return;
    }
    let server = Server::start();
    let client = server.client();
    for (peer_name, mut peer, _) in peers(&server) {
        let lock = client.token_lock("extended");
        let guard = lock.lock_with_lease(Duration::from_secs(2)).unwrap();
        guard.extend(Duration::from_millis(LONG_MS)).unwrap();
        // Without the extend they would get in after 2 s.
        assert_eq!(
            peer.call(&format!("acquire extended {LONG_MS} 4000")),
            "busy",
            "{peer_name}"
        );
        assert_eq!(get(&server, "extended").as_deref(), Some(guard.token()));
        guard.unlock().unwrap();
        peer.acquire("extended", LONG_MS, 0);
        assert_eq!(peer.call("release extended"), "released", "{peer_name}");
    }
}

#[test]
fn a_release_with_the_wrong_token_leaves_the_other_sides_hold() {
    if skip_without(&[Toolchain::Python, Toolchain::Node, Toolchain::Go]) {
        return;
    }
    let server = Server::start();
    let client = server.client();
    for (peer_name, mut peer, _) in peers(&server) {
        // A token of their own making, for another key: the right shape, not the holder.
        let stranger = peer.acquire("other", LONG_MS, 0);

        // Ours, by their wrong token.
        let lock = client.token_lock("held");
        let guard = lock.lock().unwrap();
        let reply = peer.call(&format!("release-token held {stranger}"));
        assert_eq!(reply, "not-owned", "{peer_name}");
        let info = client.inspect("held").unwrap();
        assert_eq!(info.holders.len(), 1, "{peer_name}");
        assert_eq!(info.holders[0].id, guard.token(), "{peer_name}: still ours");
        guard.unlock().unwrap();

        // Theirs, by our wrong token.
        let token = peer.acquire("held", LONG_MS, 0);
        assert!(
            !lock.force_unlock_held_by(&stranger).unwrap(),
            "{peer_name}: nothing released"
        );
        assert_eq!(
            get(&server, "held"),
            Some(token),
            "{peer_name}: still theirs"
        );
        assert_eq!(peer.call("owned held"), "true", "{peer_name}");
        assert_eq!(peer.call("release held"), "released", "{peer_name}");
        assert_eq!(peer.call("release other"), "released", "{peer_name}");
    }
}
