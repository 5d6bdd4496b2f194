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

/// A client through `proxy` with a short lease and a connect timeout far beyond
/// [`PATIENCE`], telling `tx` when a lock is lost.
fn cut_off_client(proxy: &Proxy, tx: Sender<Instant>) -> redmutex::LockClient {
    redmutex::LockClient::builder(&proxy.url())
        .lease(SHORT_LEASE)
        .response_timeout(response_timeout_for(SHORT_LEASE))
        .connect_timeout(HANGING_CONNECT)
        .on_lock_lost(move |_| {
            let _ = tx.send(Instant::now());
        })
        .build()
        .unwrap()
}

#[test]
fn a_holder_cut_off_is_lost_when_its_validity_ends_whatever_its_renewal_waits_for() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let (tx, rx) = crossbeam_channel::unbounded();
    let client = cut_off_client(&proxy, tx);
    let guard = client.lock("cut-off").lock().unwrap();
    let watch = guard.watch();
    let watcher = std::thread::spawn(move || watch.wait_lost(PATIENCE));
    // Every byte held: a renewal's connect hangs for the whole connect timeout.
    proxy.pause();
    let told = rx
        .recv_timeout(PATIENCE)
        .expect("the loss was told while the renewal still waited for a connection");
    assert!(
        told >= guard.valid_until(),
        "told before the validity ended"
    );
    assert!(guard.is_lost());
    assert_eq!(guard.health(), Health::Lost);
    assert!(watcher.join().unwrap(), "wait_lost returned with the loss");

    // Another holder gets in once the key expires; the cut-off one says it is lost.
    let rival = server.client().lock("cut-off");
    let taken = rival.try_lock_for(PATIENCE).unwrap();
    assert!(taken.is_some(), "the key expired");
    assert!(guard.is_lost());
    proxy.resume();
    assert!(guard.unlock().unwrap_err().is_lost());
    assert!(rival.is_locked().unwrap(), "the rival kept its hold");
}

#[test]
fn a_renewal_that_ran_unanswered_is_given_back_with_the_loss() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let (tx, rx) = crossbeam_channel::unbounded();
    let client = cut_off_client(&proxy, tx);
    let guard = client.lock("unanswered").lock().unwrap();
    // Every renewal runs on Redis, extending the key by a lease, and is never answered.
    let renew = redis::Script::new(include_str!("../../src/transport/scripts/renew.lua"));
    proxy.silence_after(renew.get_hash().as_bytes());
    rx.recv_timeout(PATIENCE).expect("the loss was told");
    assert!(guard.is_lost());
    assert!(
        !server.client().lock("unanswered").is_locked().unwrap(),
        "a renewal that ran kept the key of a hold declared lost"
    );
}
