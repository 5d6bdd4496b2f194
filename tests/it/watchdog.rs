//! The watchdog: renewals keep a short lease alive while held and stop at release;
//! explicit leases are not renewed; threads are reused.

use crate::support;

use std::time::{Duration, Instant};

use support::{Proxy, SHORT_LEASE, Server, eventually, thread_ids, threads_named};

const LEASE: Duration = SHORT_LEASE;

#[test]
fn renewals_keep_the_lock_and_stop_at_release() {
    let server = Server::start();
    let owner = server.builder_with_lease(LEASE).build().unwrap();
    let rival = server.client().lock("renewed");
    let lock = owner.lock("renewed");

    let guard = lock.lock().unwrap();
    // Four renewals take four renew intervals at least: the lease of the acquisition has
    // run out by then, and only the renewals kept the rival out.
    let renewed = eventually(Duration::from_secs(30), || {
        assert!(
            rival.try_lock().unwrap().is_none(),
            "the rival got a watched lock"
        );
        owner.stats().renewals >= 4
    });
    assert!(renewed, "{:?}", owner.stats());
    assert!(rival.try_lock().unwrap().is_none(), "the rival got it");
    assert!(!guard.is_lost());
    guard.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());

    // A release waits for a renewal on its way and stops the next, so from here on the
    // counts stay put, however slow the machine: three renew intervals show it.
    let (calls, stats) = (server.calls("evalsha"), owner.stats());
    std::thread::sleep(LEASE);
    assert_eq!(server.calls("evalsha"), calls, "renewals after release");
    assert_eq!(owner.stats(), stats, "renewals after release");
}

#[test]
fn an_explicit_lease_expires_and_another_client_gets_the_lock() {
    let server = Server::start();
    let lock = server.client().lock("leased");
    let rival = server.client().lock("leased");

    let lease = Duration::from_secs(1);
    let taken_at = Instant::now();
    let guard = lock.lock_with_lease(lease).unwrap();
    assert!(!guard.is_watched());
    let busy = rival.try_lock().unwrap().is_none();
    assert!(
        busy || taken_at.elapsed() >= lease,
        "taken within the lease"
    );
    let taken = rival
        .try_lock_for(Duration::from_secs(10))
        .unwrap()
        .expect("the lease expired");
    assert!(!lock.is_held_by_current_thread().unwrap());
    drop(taken);
    assert!(guard.unlock().unwrap_err().is_lost());
}

#[test]
fn a_short_explicit_reentry_does_not_cut_a_watched_lease() {
    let server = Server::start();
    let client = server.builder_with_lease(LEASE).build().unwrap();
    let lock = client.lock("mixed");
    let watched = lock.lock().unwrap();
    let leased = lock.lock_with_lease(Duration::from_millis(50)).unwrap();
    // Two more renewals are a renew interval apart at least, ten times the 50 ms.
    let before = client.stats().renewals;
    assert!(
        eventually(Duration::from_secs(30), || client.stats().renewals
            >= before + 2),
        "{:?}",
        client.stats()
    );
    assert_eq!(
        lock.hold_count().unwrap(),
        2,
        "still held through the watchdog"
    );
    assert!(!watched.is_lost() && !leased.is_lost());
    leased.unlock().unwrap();
    watched.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());
}

/// A renewal that Redis ran but answered only after the hold's validity had ended extends
/// nothing: the hold is reported lost as that answer comes, and the lease the renewal put on
/// the key is given back with the loss, so that the key does not keep everyone out for up to
/// a lease after its holder was told it is gone.
#[test]
fn a_renewal_answered_after_the_validity_ended_is_a_loss_given_back_at_once() {
    // Renewals every 3 s of a 9 s lease: each is sent with at most 6 s of validity left
    // (a little less, for the clock drift allowed), and each reply may take 2.9 s. Every
    // reply comes 2.4 s late; a renewal that finds its script gone from Redis waits for
    // three replies at least (NOSCRIPT, the loads, its own), 7.2 s in all, so each read is
    // in time while its "renewed" comes after the validity ended.
    const DELAY: Duration = Duration::from_millis(2400);
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let observer = std::sync::Mutex::new(server.conn());
    let (tx, rx) = crossbeam_channel::unbounded();
    let client = redmutex::LockClient::builder(&proxy.url())
        .lease(Duration::from_secs(9))
        .renew_interval(Duration::from_secs(3))
        .response_timeout(Duration::from_millis(2900))
        .connect_timeout(Duration::from_secs(5))
        .on_lock_lost(move |lost| {
            // Whether the key is still on Redis as the loss is told.
            let kept: bool = redis::cmd("EXISTS")
                .arg("late-renewal")
                .query(&mut *observer.lock().unwrap())
                .unwrap();
            let _ = tx.send((kept, lost.error.is_none()));
        })
        .build()
        .unwrap();
    let guard = client.lock("late-renewal").lock().unwrap();
    let watch = guard.watch();

    proxy.delay_replies(DELAY);
    // The key outlives the client's validity on Redis (as on a server whose clock runs a
    // little slow), so that the late renewal finds it and extends it.
    let _: () = redis::cmd("PEXPIRE")
        .arg("late-renewal")
        .arg(60_000)
        .query(&mut server.conn())
        .unwrap();
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut server.conn())
        .unwrap();
    let (kept, gone_on_redis) = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the hold whose renewal came late was reported lost");
    let stats = client.stats();
    // Every round was answered, the last one with "renewed": the loss came from the late
    // answer, not from a timeout or a key found gone.
    assert_eq!(stats.renewal_failures, 0, "{stats:?}");
    assert!(stats.renewals >= 1, "{stats:?}");
    assert!(gone_on_redis, "the loss carries no error: Redis answered");
    assert!(
        !kept,
        "the late renewal's lease was left on the key of a hold reported lost"
    );
    assert!(guard.is_lost() && watch.is_lost());
    assert_eq!(stats.locks_lost, 1);

    // Another client gets the lock at once, and the lost holder leaves it alone.
    proxy.delay_replies(Duration::ZERO);
    let rival = server.client().lock("late-renewal");
    let taken = rival.try_lock().unwrap().expect("given back with the loss");
    assert!(guard.unlock().unwrap_err().is_lost());
    assert!(rival.is_held_by_current_thread().unwrap());
    assert_eq!(rival.hold_count().unwrap(), 1);
    drop(taken);
    assert_eq!(client.stats().locks_lost, 1, "reported once");
}

/// Watchdog threads, once every thread started by this one has named itself (until it
/// runs, a new thread carries the name of the thread that started it).
#[cfg(target_os = "linux")]
fn watchdog_threads() -> usize {
    let me = std::fs::read_link("/proc/thread-self").unwrap();
    let my_id = me.file_name().unwrap().to_owned();
    let my_name = std::fs::read_to_string("/proc/thread-self/comm").unwrap();
    let unnamed = || {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(Result::ok)
            .filter(|task| task.file_name() != my_id)
            .any(|task| {
                std::fs::read_to_string(task.path().join("comm")).ok() == Some(my_name.clone())
            })
    };
    assert!(
        eventually(Duration::from_secs(10), || !unnamed()),
        "a thread started here never named itself"
    );
    threads_named("redmutex-watch")
}

#[test]
#[cfg(target_os = "linux")]
fn watchdog_threads_are_reused_and_end_with_the_client() {
    support::alone(
        "watchdog::watchdog_threads_are_reused_and_end_with_the_client",
        || {
            let server = Server::start();
            let client = server.builder_with_lease(LEASE).build().unwrap();

            // A thread per held lock, handed its work before the first renewal is due: a new
            // client has none parked, so three locks held at once start three.
            let held: Vec<_> = ["a", "b", "c"]
                .iter()
                .map(|name| client.lock(name).lock().unwrap())
                .collect();
            assert!(
                eventually(Duration::from_secs(30), || watchdog_threads() == 3),
                "one thread per held lock: {}",
                watchdog_threads()
            );
            for guard in held {
                guard.unlock().unwrap();
            }

            // A release lists its thread as parked at once: every later holding is served by a
            // parked thread and starts none, however late the released threads are to notice.
            for name in ["d", "e", "a", "d"] {
                let before = thread_ids();
                let renewals = client.stats().renewals;
                let guard = client.lock(name).lock().unwrap();
                assert!(
                    eventually(Duration::from_secs(30), || client.stats().renewals
                        > renewals),
                    "{name} was not renewed"
                );
                guard.unlock().unwrap();
                let started = thread_ids().difference(&before).count();
                assert_eq!(started, 0, "holding {name} started a thread");
            }
            assert_eq!(
                watchdog_threads(),
                3,
                "the first three threads served them all"
            );

            drop(client);
            assert!(
                eventually(Duration::from_secs(10), || threads_named("redmutex-") == 0),
                "watchdog or timer threads outlived their client"
            );
        },
    );
}

#[test]
#[cfg(target_os = "linux")]
fn holdings_released_before_their_first_renewal_wake_no_thread() {
    support::alone(
        "watchdog::holdings_released_before_their_first_renewal_wake_no_thread",
        || {
            let server = Server::start();
            // The first renewal is due 20 minutes after each acquisition.
            let client = server
                .builder()
                .lease(Duration::from_secs(3600))
                .build()
                .unwrap();
            for kind in 0..3 {
                for _ in 0..50 {
                    match kind {
                        0 => client.lock("brief").lock().unwrap().unlock().unwrap(),
                        1 => client
                            .fenced_lock("brief-fenced")
                            .lock()
                            .unwrap()
                            .unlock()
                            .unwrap(),
                        _ => client
                            .token_lock("brief-token")
                            .lock()
                            .unwrap()
                            .unlock()
                            .unwrap(),
                    }
                }
            }
            assert_eq!(
                watchdog_threads(),
                0,
                "a brief holding started a watchdog thread"
            );
            assert_eq!(client.stats().renewals, 0);
        },
    );
}
