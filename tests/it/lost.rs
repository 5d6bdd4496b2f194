//! Losing a hold: detected by the watchdog, reported once, and never undone by a release.

use crate::support;

use std::time::{Duration, Instant};

use crossbeam_channel::{RecvTimeoutError, Sender};
use redmutex::Health;
use support::{Proxy, SHORT_LEASE, Server, eventually, response_timeout_for};

#[test]
fn a_key_deleted_from_outside_is_reported_lost_once() {
    let server = Server::start();
    let (tx, rx) = crossbeam_channel::unbounded();
    let client = server
        .builder_with_lease(SHORT_LEASE)
        .on_lock_lost(move |lost| tx.send((lost.name.clone(), lost.error.is_none())).unwrap())
        .build()
        .unwrap();
    let lock = client.lock("fragile");
    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();

    let _: () = redis::cmd("DEL")
        .arg("fragile")
        .query(&mut server.conn())
        .unwrap();
    let reported = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("loss reported");
    assert_eq!(reported, ("fragile".to_owned(), true));
    assert!(outer.is_lost() && inner.is_lost());

    // A rival takes the free lock; our stale guards must not touch it.
    let rival = server.client().lock("fragile");
    let rival_guard = rival.try_lock().unwrap().expect("free after the delete");
    assert!(inner.unlock().unwrap_err().is_lost());
    assert!(outer.unlock().unwrap_err().is_lost());
    assert!(rival.is_held_by_current_thread().unwrap());
    assert_eq!(rival.hold_count().unwrap(), 1);
    drop(rival_guard);

    // The same thread can take the lock afresh.
    let again = lock.lock().unwrap();
    assert!(!again.is_lost());
    again.unlock().unwrap();

    // Gone with its client, the callback drops its sender: whatever it reported is in the
    // channel, and that was the one report above.
    drop((lock, client));
    match rx.recv_timeout(Duration::from_secs(30)) {
        Err(RecvTimeoutError::Disconnected) => {}
        Err(RecvTimeoutError::Timeout) => panic!("the callback outlived its client"),
        Ok(again) => panic!("reported twice: {again:?}"),
    }
}

#[test]
fn unlocking_an_expired_hold_leaves_the_new_owner_alone() {
    let server = Server::start();
    let lock = server.client().lock("expiring");
    let rival = server.client().lock("expiring");
    let guard = lock.lock_with_lease(Duration::from_millis(200)).unwrap();
    let rival_guard = rival
        .try_lock_for(Duration::from_secs(10))
        .unwrap()
        .expect("expired");

    let err = guard.unlock().unwrap_err();
    assert!(err.is_lost(), "{err}");
    assert_eq!(err.lock_name(), Some("expiring"));
    assert_eq!(
        rival.hold_count().unwrap(),
        1,
        "the new owner's hold is intact"
    );
    assert!(rival.remaining_lease().unwrap().is_some());
    rival_guard.unlock().unwrap();
}

#[test]
fn a_hold_is_lost_when_redis_stays_unreachable_for_a_whole_lease() {
    let mut server = Server::start();
    let (tx, rx) = crossbeam_channel::unbounded();
    let client = server
        .builder_with_lease(Duration::from_millis(600))
        .connect_timeout(Duration::from_millis(200))
        .on_lock_lost(move |lost| tx.send(lost.error.is_some()).unwrap())
        .build()
        .unwrap();
    let guard = client.lock("cut-off").lock().unwrap();
    server.stop();
    assert!(
        rx.recv_timeout(Duration::from_secs(20))
            .expect("loss reported"),
        "with the error"
    );
    assert!(guard.is_lost());
    let stats = client.stats();
    assert!(
        stats.renewal_failures > 0 && stats.locks_lost == 1,
        "{stats:?}"
    );
    server.restart();
    assert!(guard.unlock().unwrap_err().is_lost());
}

#[test]
fn re_entering_after_the_key_vanished_is_an_error_then_a_fresh_holding() {
    let server = Server::start();
    let lock = server.client().lock("vanishing");
    let stale = lock.lock().unwrap();
    let _: () = redis::cmd("DEL")
        .arg("vanishing")
        .query(&mut server.conn())
        .unwrap();

    let err = lock.lock().unwrap_err();
    assert!(err.is_lost(), "{err}");
    assert!(stale.is_lost(), "the earlier hold is gone");
    let fresh = lock.lock().unwrap();
    assert!(!fresh.is_lost());
    assert_eq!(lock.hold_count().unwrap(), 1, "a fresh holding counts one");
    assert!(stale.unlock().unwrap_err().is_lost());
    assert_eq!(
        lock.hold_count().unwrap(),
        1,
        "the stale guard left the fresh hold alone"
    );
    fresh.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());
}

#[test]
fn a_panicking_callback_does_not_stop_the_renewal_of_other_locks() {
    let server = Server::start();
    let (tx, rx) = crossbeam_channel::unbounded();
    let client = server
        .builder_with_lease(SHORT_LEASE)
        .on_lock_lost(move |_| {
            tx.send(()).unwrap();
            panic!("a careless callback");
        })
        .build()
        .unwrap();
    let doomed = client.lock("doomed").lock().unwrap();
    let _: () = redis::cmd("DEL")
        .arg("doomed")
        .query(&mut server.conn())
        .unwrap();
    rx.recv_timeout(Duration::from_secs(10))
        .expect("loss reported");
    assert!(doomed.is_lost());

    // Whichever watchdog thread serves it, this lock must keep being renewed.
    let kept = client.lock("kept").lock().unwrap();
    let rival = server.client().lock("kept");
    // Four renewals of it take four renew intervals, past the lease of its acquisition.
    let before = client.stats().renewals;
    let renewed = eventually(Duration::from_secs(30), || {
        assert!(rival.try_lock().unwrap().is_none(), "renewals stopped");
        client.stats().renewals >= before + 4
    });
    assert!(renewed, "{:?}", client.stats());
    assert!(rival.try_lock().unwrap().is_none(), "renewals stopped");
    assert!(!kept.is_lost());
    kept.unlock().unwrap();
}

#[test]
fn valid_until_follows_the_lease_left_after_a_release() {
    let server = Server::start();
    let lock = server.client().lock("shortened");
    let short = Duration::from_millis(200);
    let leased = lock.try_lock_with_lease(short).unwrap().unwrap();
    let watched = lock.lock().unwrap();
    assert!(
        leased.valid_until() > std::time::Instant::now() + short,
        "the watchdog lease"
    );
    drop(watched);
    // The key now expires `short` after that release, and the guard must not promise more.
    assert!(leased.valid_until() <= std::time::Instant::now() + short);
    let left = lock.remaining_lease().unwrap().unwrap();
    assert!(left <= short);
}

/// How long the tests below wait for a loss: far beyond the short lease, far below the
/// connect timeout of their clients, which a renewal round once waited out.
const PATIENCE: Duration = Duration::from_secs(30);
const HANGING_CONNECT: Duration = Duration::from_secs(120);

/// A client at `url` with a short lease and a connect timeout far beyond [`PATIENCE`],
/// telling `tx` when a lock is lost.
fn cut_off_client(url: &str, tx: Sender<Instant>) -> redmutex::LockClient {
    redmutex::LockClient::builder(url)
        .lease(SHORT_LEASE)
        .response_timeout(response_timeout_for(SHORT_LEASE))
        .connect_timeout(HANGING_CONNECT)
        .on_lock_lost(move |_| {
            let _ = tx.send(Instant::now());
        })
        .build()
        .unwrap()
}

/// How a holder is cut off from Redis.
#[derive(Clone, Copy, Debug)]
enum CutOff {
    /// Every byte held both ways by the proxy: a renewal's new connection hangs for the
    /// whole connect timeout.
    StalledProxy,
    /// The server stopped with SIGSTOP: connections are accepted and never answered.
    StoppedServer,
    /// Every connection dropped, and new ones refused.
    DroppedConnection,
}

/// A hold of one kind, kept alive by `_hold`, and a watch on it.
type Taken = (Box<dyn std::any::Any>, redmutex::HoldWatch);

/// A kind's name, how a hold of it is taken, and whether another client takes it.
type WatchedKind = (
    &'static str,
    fn(&redmutex::LockClient) -> Taken,
    fn(&redmutex::LockClient) -> bool,
);

/// The kinds whose holds the watchdog renews: how one is taken, and whether another client
/// takes the same lock within [`PATIENCE`].
fn watched_kinds() -> Vec<WatchedKind> {
    vec![
        (
            "reentrant",
            |c| {
                let guard = c.lock("cut-off").lock().unwrap();
                let watch = guard.watch();
                (Box::new(guard), watch)
            },
            |c| c.lock("cut-off").try_lock_for(PATIENCE).unwrap().is_some(),
        ),
        (
            "token",
            |c| {
                let guard = c.token_lock("cut-off-token").lock().unwrap();
                let watch = guard.watch();
                (Box::new(guard), watch)
            },
            |c| {
                c.token_lock("cut-off-token")
                    .try_lock_for(PATIENCE)
                    .unwrap()
                    .is_some()
            },
        ),
        (
            "semaphore",
            |c| {
                let semaphore = c.leased_semaphore("cut-off-permits");
                semaphore.try_set_permits(1).unwrap();
                let permit = semaphore.acquire().unwrap();
                let watch = permit.watch();
                (Box::new(permit), watch)
            },
            |c| {
                let semaphore = c.leased_semaphore("cut-off-permits");
                semaphore.try_acquire_for(PATIENCE).unwrap().is_some()
            },
        ),
        (
            "election",
            |c| {
                let leadership = c.election("cut-off-election").campaign().unwrap();
                let watch = leadership.watch();
                (Box::new(leadership), watch)
            },
            |c| {
                let election = c.election("cut-off-election");
                election.try_campaign_for(PATIENCE).unwrap().is_some()
            },
        ),
    ]
}

/// For every watched kind: a holder cut off from Redis `how` is lost when its validity
/// ends, by every means the API has, while its renewal still waits; once another client
/// holds the lock, the cut-off one says it is lost.
fn cut_off_holders_are_lost_when_their_validity_ends(how: CutOff) {
    for (kind, take, rival_takes) in watched_kinds() {
        let server = Server::start();
        let proxy = Proxy::start(server.port());
        let (tx, rx) = crossbeam_channel::unbounded();
        let url = match how {
            CutOff::StoppedServer => server.url(),
            _ => proxy.url(),
        };
        let client = cut_off_client(&url, tx);
        let (_hold, watch) = take(&client);
        let waiting = watch.clone();
        let watcher = std::thread::spawn(move || waiting.wait_lost(PATIENCE));
        match how {
            CutOff::StalledProxy => proxy.pause(),
            CutOff::StoppedServer => server.pause(),
            CutOff::DroppedConnection => proxy.cut_all_and_refuse(),
        }
        let told = rx
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|_| panic!("{kind}, {how:?}: the loss was not told in time"));
        assert!(
            told >= watch.valid_until(),
            "{kind}: told before the validity ended"
        );
        assert!(watch.is_lost(), "{kind}");
        assert_eq!(watch.health(), Health::Lost, "{kind}");
        assert!(
            watcher.join().unwrap(),
            "{kind}: wait_lost returned with the loss"
        );
        if let CutOff::StoppedServer = how {
            server.resume();
        }
        // Another holder gets in once the key expires; the cut-off one stays lost.
        assert!(rival_takes(&server.client()), "{kind}: the key expired");
        assert!(watch.is_lost(), "{kind}");
        proxy.resume();
    }
}

#[test]
fn holders_behind_a_stalled_proxy_are_lost_when_their_validity_ends() {
    cut_off_holders_are_lost_when_their_validity_ends(CutOff::StalledProxy);
}

#[test]
fn holders_on_a_stopped_server_are_lost_when_their_validity_ends() {
    cut_off_holders_are_lost_when_their_validity_ends(CutOff::StoppedServer);
}

#[test]
fn holders_whose_connection_dropped_are_lost_when_their_validity_ends() {
    cut_off_holders_are_lost_when_their_validity_ends(CutOff::DroppedConnection);
}

#[test]
fn a_renewal_that_ran_unanswered_is_given_back_with_the_loss() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let (tx, rx) = crossbeam_channel::unbounded();
    let client = cut_off_client(&proxy.url(), tx);
    let guard = client.lock("unanswered").lock().unwrap();
    // Every renewal runs on Redis, extending the key by a lease, and is never answered.
    let renew = redis::Script::new(include_str!("../../src/kinds/reentrant/renew.lua"));
    proxy.silence_after(renew.get_hash().as_bytes());
    rx.recv_timeout(PATIENCE).expect("the loss was told");
    assert!(guard.is_lost());
    assert!(
        !server.client().lock("unanswered").is_locked().unwrap(),
        "a renewal that ran kept the key of a hold declared lost"
    );
}
