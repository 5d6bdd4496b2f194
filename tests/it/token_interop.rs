//! The token lock and the real SET-NX libraries on the same key, each driven as a
//! subprocess: redis-py's `Lock` and node-redlock on a single node. Each excludes the other,
//! neither can release the other's hold, and each side's waiter gets in once the other side
//! releases (theirs publish nothing: our waiter notices on its retry loop).

use crate::support;

use std::time::Duration;

use support::{Peer, Server, eventually};

/// Far longer than any wait below: nobody gets in by an expiry.
const LONG_MS: u64 = 60_000;
const WAIT: Duration = Duration::from_secs(20);

/// Each peer, its name, and the server command each of its acquire attempts runs
/// (redis-py sends `SET NX PX`, node-redlock runs its acquire script by EVALSHA).
fn peers(server: &Server) -> [(&'static str, Peer, &'static str); 2] {
    [
        ("redis-py", Peer::python(&server.url()), "set"),
        ("node-redlock", Peer::node(&server.url()), "evalsha"),
    ]
}

#[test]
fn their_hold_excludes_us_and_our_waiter_gets_in_after_their_release() {
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
