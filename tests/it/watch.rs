//! A hold's watch: kept by another thread, it reports what the guard does and wakes a
//! thread waiting on it when the hold is found lost.

use crate::support;

use std::time::Duration;

use redmutex::{Health, HoldWatch};
use support::{SHORT_LEASE, Server, eventually};

const PATIENCE: Duration = Duration::from_secs(60);

fn shareable<T: Send + Sync + Clone>() {}

#[test]
fn a_watch_in_another_thread_wakes_when_the_hold_is_found_lost() {
    shareable::<HoldWatch>();
    let server = Server::start();
    let client = server.builder_with_lease(SHORT_LEASE).build().unwrap();
    let guard = client.lock("watched").lock().unwrap();
    let watch = guard.watch();
    assert_eq!(watch.name(), "watched");
    assert_eq!(watch.health(), Health::Held);
    assert_eq!(watch.valid_until(), guard.valid_until());
    assert!(!watch.wait_lost(Duration::from_millis(1)), "held");

    let helper = std::thread::spawn({
        let watch = watch.clone();
        move || (watch.wait_lost(PATIENCE), watch.is_lost(), watch.health())
    });
    let () = redis::cmd("DEL")
        .arg("watched")
        .query(&mut server.conn())
        .unwrap();
    let (woken, lost, health) = helper.join().unwrap();
    assert!(woken, "the wait ended without the loss");
    assert!(lost && guard.is_lost());
    assert_eq!(health, Health::Lost);
    assert!(guard.unlock().unwrap_err().is_lost());
}

#[test]
fn a_permit_has_a_watch_too() {
    let server = Server::start();
    let client = server.builder_with_lease(SHORT_LEASE).build().unwrap();
    let semaphore = client.leased_semaphore("w");
    semaphore.try_set_permits(1).unwrap();
    let permit = semaphore.acquire().unwrap();
    let watch = permit.watch();
    let helper = std::thread::spawn(move || watch.wait_lost(PATIENCE));
    let () = redis::cmd("DEL")
        .arg("{w}:timeout")
        .query(&mut server.conn())
        .unwrap();
    assert!(helper.join().unwrap(), "the renewal found the permit gone");
    assert!(eventually(PATIENCE, || permit.is_lost()));
}

/// Waits on `watch` in another thread for far longer than a test may take; the result,
/// if the wait ended within `PATIENCE` after `end` ran.
fn waited_on(watch: &HoldWatch, end: impl FnOnce()) -> Option<bool> {
    let (sent, got) = std::sync::mpsc::channel();
    let watch = watch.clone();
    std::thread::spawn(move || sent.send(watch.wait_lost(Duration::from_secs(3600))));
    end();
    got.recv_timeout(PATIENCE).ok()
}

#[test]
fn a_released_guard_ends_the_waits_on_its_watch() {
    let server = Server::start();
    let client = server.client();
    let guard = client.lock("released").lock().unwrap();
    let watch = guard.watch();
    assert!(!watch.is_released());
    let ended = waited_on(&watch, || guard.unlock().unwrap());
    assert_eq!(ended, Some(false), "released, not lost");
    assert!(watch.is_released() && !watch.is_lost());

    let semaphore = client.leased_semaphore("released");
    semaphore.try_set_permits(1).unwrap();
    let permit = semaphore.acquire().unwrap();
    let watch = permit.watch();
    assert_eq!(waited_on(&watch, || drop(permit)), Some(false), "dropped");
}

/// A multi-lock's watch sees every member: the loss of the second member wakes a wait on
/// it, and a release or drop of the guard ends the waits, as a single guard's does.
#[test]
fn a_multi_lock_s_watch_wakes_when_any_member_is_lost() {
    let server = Server::start();
    let client = server.builder_with_lease(SHORT_LEASE).build().unwrap();
    let both = || {
        redmutex::MultiLock::new()
            .and(client.lock("first"))
            .and(client.fair_lock("second"))
    };
    let guard = both().lock().unwrap();
    assert!(guard.is_watched());
    let watch = guard.watch();
    assert_eq!(watch.name(), "first, second");
    assert_eq!(watch.health(), Health::Held);
    assert_eq!(watch.valid_until(), guard.valid_until());
    let ended = waited_on(&watch, || {
        let () = redis::cmd("DEL")
            .arg("second")
            .query(&mut server.conn())
            .unwrap();
    });
    assert_eq!(
        ended,
        Some(true),
        "the second member's loss did not wake the wait"
    );
    assert!(watch.is_lost() && guard.is_lost());
    assert!(!watch.is_released());
    assert!(guard.unlock().unwrap_err().is_lost());
    assert!(watch.is_released());

    let leased = both().lock_with_lease(Duration::from_secs(60)).unwrap();
    assert!(!leased.is_watched());
    let watch = leased.watch();
    assert_eq!(
        waited_on(&watch, || drop(leased)),
        Some(false),
        "dropped, not lost"
    );
    assert!(watch.is_released() && !watch.is_lost());
}
