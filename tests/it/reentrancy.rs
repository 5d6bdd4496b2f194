//! Reentrancy by hold counts, in the Redisson layout.

use crate::support;

use std::time::Duration;

use support::{Server, hash};

#[test]
fn depth_three_counts_three_and_the_key_stays_until_the_third_release() {
    let server = Server::start();
    let client = server.client();
    let lock = client.lock("orders:42");
    let mut redis = server.conn();

    let first = lock.lock().unwrap();
    let second = lock.lock().unwrap();
    let third = lock.try_lock().unwrap().expect("re-entry never waits");

    let fields = hash(&mut redis, "orders:42");
    assert_eq!(fields.len(), 1);
    let (field, count) = &fields[0];
    assert_eq!(*count, 3);
    let (uuid, thread) = field.split_once(':').unwrap();
    assert_eq!(uuid, client.id());
    assert!(thread.parse::<u64>().is_ok(), "thread part {thread:?}");
    assert_eq!(lock.hold_count().unwrap(), 3);

    third.unlock().unwrap();
    assert_eq!(hash(&mut redis, "orders:42")[0].1, 2);
    drop(second);
    assert_eq!(hash(&mut redis, "orders:42")[0].1, 1);
    assert!(lock.is_locked().unwrap());
    first.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());
    assert_eq!(lock.hold_count().unwrap(), 0);
}

#[test]
fn another_thread_of_the_same_client_is_another_owner() {
    let server = Server::start();
    let lock = server.client().lock("shared");
    let guard = lock.lock().unwrap();

    let other = lock.clone();
    let seen = std::thread::spawn(move || {
        let busy = other.try_lock().unwrap().is_none();
        (
            busy,
            other.is_held_by_current_thread().unwrap(),
            other.hold_count().unwrap(),
        )
    })
    .join()
    .unwrap();
    assert_eq!(seen, (true, false, 0));
    assert!(lock.is_held_by_current_thread().unwrap());

    drop(guard);
    let other = lock.clone();
    let got = std::thread::spawn(move || other.try_lock().unwrap().is_some());
    assert!(got.join().unwrap(), "free once released");
}

#[test]
fn an_intermediate_release_refreshes_the_lease() {
    let server = Server::start();
    let lock = server.client().lock("lease");
    let mut redis = server.conn();
    let outer = lock.lock_with_lease(Duration::from_secs(60)).unwrap();
    let inner = lock.lock_with_lease(Duration::from_secs(60)).unwrap();
    let _: () = redis::cmd("PEXPIRE")
        .arg("lease")
        .arg(5_000)
        .query(&mut redis)
        .unwrap();
    inner.unlock().unwrap();
    let left = lock.remaining_lease().unwrap().unwrap();
    assert!(
        left > Duration::from_secs(30),
        "lease after release: {left:?}"
    );
    outer.unlock().unwrap();
    assert_eq!(lock.remaining_lease().unwrap(), None);
}

#[test]
fn different_clients_are_different_owners_even_in_one_thread() {
    let server = Server::start();
    let a = server.client().lock("pair");
    let b = server.client().lock("pair");
    let held = a.lock().unwrap();
    assert!(b.try_lock().unwrap().is_none());
    drop(held);
    assert!(b.try_lock().unwrap().is_some());
}

#[test]
fn the_key_prefix_is_part_of_the_key_and_of_the_channel() {
    let server = Server::start();
    let client = server.builder().key_prefix("app:").build().unwrap();
    let lock = client.lock("job");
    let mut redis = server.conn();
    let mut sub_conn = server.conn();
    let mut sub = sub_conn.as_pubsub();
    sub.subscribe("redisson_lock__channel:{app:job}").unwrap();

    let guard = lock.lock().unwrap();
    assert_eq!(hash(&mut redis, "app:job")[0].1, 1);
    assert_eq!(hash(&mut redis, "job").len(), 0);
    guard.unlock().unwrap();

    let message = sub.get_message().unwrap();
    assert_eq!(message.get_payload::<String>().unwrap(), "0");
}

#[test]
fn introspection_and_force_unlock() {
    let server = Server::start();
    let client = server.client();
    let lock = client.lock("inspect");
    assert!(!lock.is_locked().unwrap());
    assert_eq!(lock.remaining_lease().unwrap(), None);
    assert!(!lock.force_unlock().unwrap(), "nothing to delete");

    let guard = lock.lock_with_lease(Duration::from_secs(100)).unwrap();
    let left = lock.remaining_lease().unwrap().unwrap();
    assert!(left > Duration::from_secs(90) && left <= Duration::from_secs(100));

    let by_other = server.client().lock("inspect");
    assert!(by_other.force_unlock().unwrap());
    assert!(!lock.is_locked().unwrap());
    let err = guard.unlock().unwrap_err();
    assert!(err.is_lost(), "{err}");
}
