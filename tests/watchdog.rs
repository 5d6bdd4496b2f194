//! The watchdog: renewals keep a short lease alive while held and stop at release;
//! explicit leases are not renewed; threads are reused.

mod support;

use std::time::Duration;

use serial_test::serial;
use support::{Server, eventually, threads_named};

const LEASE: Duration = Duration::from_millis(300);

#[test]
#[serial]
fn renewals_keep_the_lock_and_stop_at_release() {
    let server = Server::start();
    let owner = server.builder().lease(LEASE).build().unwrap();
    let rival = server.client().lock("renewed");
    let lock = owner.lock("renewed");

    let guard = lock.lock().unwrap();
    let held_until = std::time::Instant::now() + Duration::from_millis(1500);
    while std::time::Instant::now() < held_until {
        assert!(
            rival.try_lock().unwrap().is_none(),
            "the rival got a watched lock"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!guard.is_lost());
    assert!(owner.stats().renewals >= 3, "{:?}", owner.stats());
    guard.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());

    // Three renew intervals later no renewal has been sent.
    let calls = server.calls("evalsha");
    std::thread::sleep(LEASE);
    assert_eq!(server.calls("evalsha"), calls, "renewals after release");
}

#[test]
#[serial]
fn an_explicit_lease_expires_and_another_client_gets_the_lock() {
    let server = Server::start();
    let lock = server.client().lock("leased");
    let rival = server.client().lock("leased");

    let guard = lock.lock_with_lease(LEASE).unwrap();
    assert!(!guard.is_watched());
    assert!(rival.try_lock().unwrap().is_none());
    let taken = rival
        .try_lock_for(Duration::from_secs(10))
        .unwrap()
        .expect("the lease expired");
    assert!(!lock.is_held_by_current_thread().unwrap());
    drop(taken);
    assert!(guard.unlock().unwrap_err().is_not_held());
}

#[test]
#[serial]
fn a_short_explicit_reentry_does_not_cut_a_watched_lease() {
    let server = Server::start();
    let client = server.builder().lease(LEASE).build().unwrap();
    let lock = client.lock("mixed");
    let watched = lock.lock().unwrap();
    let leased = lock.lock_with_lease(Duration::from_millis(50)).unwrap();
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        lock.hold_count().unwrap(),
        2,
        "still held through the watchdog"
    );
    leased.unlock().unwrap();
    watched.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());
}

#[test]
#[serial]
#[cfg(target_os = "linux")]
fn watchdog_threads_are_reused_and_end_with_the_client() {
    let server = Server::start();
    let client = server.client();
    // Threads of the clients of earlier tests end once those clients are gone.
    assert!(eventually(Duration::from_secs(10), || threads_named(
        "redmutex-watch"
    ) == 0));
    for name in ["a", "b", "c", "a"] {
        let guard = client.lock(name).lock().unwrap();
        guard.unlock().unwrap();
    }
    assert!(
        eventually(Duration::from_secs(10), || threads_named("redmutex-watch")
            == 1),
        "one parked thread served every holding"
    );

    let (a, b) = (
        client.lock("a").lock().unwrap(),
        client.lock("b").lock().unwrap(),
    );
    // A new thread names itself once it runs, so give it a moment to show up.
    assert!(
        eventually(Duration::from_secs(10), || threads_named("redmutex-watch")
            == 2),
        "one thread per held lock"
    );
    drop((a, b));
    drop(client);
    assert!(
        eventually(Duration::from_secs(10), || threads_named("redmutex-watch")
            == 0),
        "parked threads outlived their client"
    );
}
