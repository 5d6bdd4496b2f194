//! The non-reentrant locks (Redisson's `RNonReentrantLock` and `RNonReentrantFairLock`
//! layouts): a holder that asks again is refused with nothing sent; everything else is the
//! reentrant or fair lock's: waiting woken by the release, leases, the watchdog, the queue.

use crate::support;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use redmutex::{Lock, NonReentrant, NonReentrantFair};
use support::{MakeLock, SHORT_LEASE, Server, eventually, hash};

const NO_HANG: Duration = Duration::from_secs(60);

fn pttl(server: &Server, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query(&mut server.conn())
        .unwrap()
}

fn scripts_run(server: &Server) -> u64 {
    server.calls("eval") + server.calls("evalsha")
}

fn queued(server: &Server, name: &str) -> usize {
    redis::cmd("LLEN")
        .arg(format!("redisson_lock_queue:{{{name}}}"))
        .query(&mut server.conn())
        .unwrap()
}

#[test]
fn a_second_acquisition_by_the_holder_is_refused_and_changes_nothing() {
    fn body<K: MakeLock>() {
        let server = Server::start();
        let client = server.client();
        let lock = K::make(&client, "once");
        // An explicit lease: no renewal runs meanwhile, so nothing at all may reach Redis.
        let guard = lock.lock_with_lease(Duration::from_secs(60)).unwrap();
        let fields = hash(&mut server.conn(), "once");
        assert_eq!(fields.len(), 1, "{}", K::NAME);
        assert_eq!(fields[0].1, 1, "{}", K::NAME);
        let (before, scripts) = (pttl(&server, "once"), scripts_run(&server));
        let calls: [(&str, redmutex::Result<bool>); 5] = [
            ("lock", lock.lock().map(|_| true)),
            ("try_lock", lock.try_lock().map(|g| g.is_some())),
            (
                "try_lock_for",
                lock.try_lock_for(Duration::from_secs(5))
                    .map(|g| g.is_some()),
            ),
            (
                "lock_with_lease",
                lock.lock_with_lease(Duration::from_secs(90)).map(|_| true),
            ),
            (
                "another handle",
                K::make(&client, "once").try_lock().map(|g| g.is_some()),
            ),
        ];
        for (call, result) in calls {
            let err = result.expect_err(call);
            assert!(err.is_reentry(), "{} {call}: {err}", K::NAME);
            assert_eq!(err.lock_name(), Some("once"));
            assert!(err.to_string().contains("not reentrant"), "{err}");
        }
        assert_eq!(scripts_run(&server), scripts, "{}: sent a script", K::NAME);
        assert_eq!(hash(&mut server.conn(), "once"), fields, "{}", K::NAME);
        let after = pttl(&server, "once");
        assert!(
            after > 0 && after <= before,
            "{}: {before} -> {after}",
            K::NAME
        );
        assert_eq!(queued(&server, "once"), 0, "{}: queued", K::NAME);
        // The hold is as it was: one release frees the lock.
        guard.unlock().unwrap();
        assert!(!lock.is_locked().unwrap(), "{}", K::NAME);
        lock.try_lock()
            .unwrap()
            .expect("free again")
            .unlock()
            .unwrap();
    }
    body::<NonReentrant>();
    body::<NonReentrantFair>();
}

#[test]
fn a_thread_that_holds_the_reentrant_lock_of_the_name_is_refused_too() {
    let server = Server::start();
    let client = server.client();
    let reentrant = client.lock("shared").lock().unwrap();
    let err = client.non_reentrant_lock("shared").try_lock().unwrap_err();
    assert!(err.is_reentry(), "{err}");
    drop(reentrant);
    let lock = client.non_reentrant_lock("shared");
    let once = lock.lock().unwrap();
    assert!(lock.is_held_by_current_thread().unwrap());
    assert_eq!(lock.hold_count().unwrap(), 1);
    // The reentrant lock sees the same hash and owner, and counts on from it.
    let again = client.lock("shared").lock().unwrap();
    assert_eq!(hash(&mut server.conn(), "shared")[0].1, 2);
    drop(again);
    once.unlock().unwrap();
    assert!(!server.exists("shared"));
}

/// Takes `lock` on a thread of its own, releases it at once, and says when it had it.
fn wait_for<K: MakeLock>(lock: Lock<K>) -> mpsc::Receiver<redmutex::Result<Instant>> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let taken = lock.lock().and_then(|guard| {
            let at = Instant::now();
            guard.unlock().map(|()| at)
        });
        let _ = sender.send(taken);
    });
    receiver
}

#[test]
fn another_thread_waits_and_is_woken_by_the_release() {
    fn body<K: MakeLock>(channels: &str) {
        let server = Server::start();
        let guard = K::make(&server.client(), "woken").lock().unwrap();
        let waiter = wait_for(K::make(&server.sleepy(), "woken"));
        assert!(
            eventually(NO_HANG, || server.channels(channels) == 1),
            "{}: the waiter never subscribed",
            K::NAME
        );
        assert!(waiter.try_recv().is_err(), "{}: taken while held", K::NAME);
        guard.unlock().unwrap();
        // The holder's watchdog lease is 30 s, and the waiter would not come back sooner.
        let woken = waiter.recv_timeout(Duration::from_secs(10));
        assert!(matches!(woken, Ok(Ok(_))), "{}: {woken:?}", K::NAME);
    }
    body::<NonReentrant>("redisson_lock__channel:{woken}");
    body::<NonReentrantFair>("redisson_lock__channel:{woken}:*");
}

#[test]
fn an_explicit_lease_expires_and_another_client_gets_the_lock() {
    fn body<K: MakeLock>() {
        let server = Server::start();
        let lock = K::make(&server.client(), "leased");
        let rival = K::make(&server.client(), "leased");
        let lease = Duration::from_secs(1);
        let guard = lock.lock_with_lease(lease).unwrap();
        assert!(!guard.is_watched());
        let left = pttl(&server, "leased");
        assert!(left > 0 && left <= 1000, "{}: {left}", K::NAME);
        let taken = rival
            .try_lock_for(Duration::from_secs(20))
            .unwrap()
            .expect("the lease ran out");
        drop(taken);
        assert!(guard.unlock().unwrap_err().is_lost(), "{}", K::NAME);
    }
    body::<NonReentrant>();
    body::<NonReentrantFair>();
}

#[test]
fn the_watchdog_renews_a_hold_until_it_is_released() {
    fn body<K: MakeLock>() {
        let server = Server::start();
        let owner = server.builder_with_lease(SHORT_LEASE).build().unwrap();
        let rival = K::make(&server.client(), "renewed");
        let lock = K::make(&owner, "renewed");
        let guard = lock.lock().unwrap();
        assert!(guard.is_watched());
        // Four renewals outlast the lease the acquisition set: only they kept the rival out.
        let renewed = eventually(Duration::from_secs(30), || {
            assert!(
                rival.try_lock().unwrap().is_none(),
                "{}: rival got it",
                K::NAME
            );
            owner.stats().renewals >= 4
        });
        assert!(renewed, "{}: {:?}", K::NAME, owner.stats());
        assert!(!guard.is_lost());
        assert_eq!(hash(&mut server.conn(), "renewed")[0].1, 1, "{}", K::NAME);
        guard.unlock().unwrap();
        assert!(!lock.is_locked().unwrap(), "{}", K::NAME);
    }
    body::<NonReentrant>();
    body::<NonReentrantFair>();
}

#[test]
fn the_fair_kind_serves_its_waiters_in_the_order_they_came() {
    let server = Server::start();
    let guard = server
        .client()
        .non_reentrant_fair_lock("queue")
        .lock()
        .unwrap();
    let client = server.sleepy();
    let (order, taken) = mpsc::channel();
    let waiters: Vec<_> = (0..4)
        .map(|k| {
            assert!(eventually(NO_HANG, || queued(&server, "queue") == k));
            let (lock, order) = (client.non_reentrant_fair_lock("queue"), order.clone());
            std::thread::spawn(move || {
                let guard = lock.lock().unwrap();
                order.send(k).unwrap();
                guard.unlock().unwrap();
            })
        })
        .collect();
    assert!(eventually(NO_HANG, || queued(&server, "queue") == 4));
    guard.unlock().unwrap();
    for waiter in waiters {
        waiter.join().unwrap();
    }
    drop(order);
    assert_eq!(taken.iter().collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert_eq!(queued(&server, "queue"), 0);
}
