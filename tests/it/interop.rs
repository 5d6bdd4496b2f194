//! Interoperability with a "foreign" client that speaks the Redisson layout in raw
//! commands, as a Java service using Redisson would.

use crate::support;

use std::time::Duration;

use support::{FOREIGN, Server, await_calls, await_subscribers, channel, foreign_hold, hash};

/// The Redisson acquire, spelled out in raw commands (atomic enough for one test thread).
fn foreign_try_lock(redis: &mut redis::Connection, key: &str) -> bool {
    let exists: bool = redis::cmd("EXISTS").arg(key).query(redis).unwrap();
    let ours: bool = redis::cmd("HEXISTS")
        .arg(key)
        .arg(FOREIGN)
        .query(redis)
        .unwrap();
    if exists && !ours {
        return false;
    }
    foreign_hold(redis, key, 30_000);
    true
}

fn foreign_unlock(redis: &mut redis::Connection, key: &str) {
    let left: i64 = redis::cmd("HINCRBY")
        .arg(key)
        .arg(FOREIGN)
        .arg(-1)
        .query(redis)
        .unwrap();
    assert_eq!(left, 0);
    let _: i64 = redis::cmd("DEL").arg(key).query(redis).unwrap();
    let _: i64 = redis::cmd("PUBLISH")
        .arg(format!("redisson_lock__channel:{{{key}}}"))
        .arg(0)
        .query(redis)
        .unwrap();
}

#[test]
fn a_foreign_hold_blocks_our_acquire_until_it_is_released() {
    let server = Server::start();
    let mut foreign = server.conn();
    assert!(foreign_try_lock(&mut foreign, "shared"));
    let lock = server.client().lock("shared");
    assert!(lock.try_lock().unwrap().is_none());
    assert!(lock.is_locked().unwrap());
    assert!(!lock.is_held_by_current_thread().unwrap());

    let base = server.calls("evalsha");
    let waiter = std::thread::spawn(move || {
        // Bounded below the foreign 30 s lease: only the unlock message lets it in.
        let guard = lock
            .try_lock_for(Duration::from_secs(20))
            .unwrap()
            .expect("woken by the foreign unlock");
        guard.unlock().unwrap();
    });
    // Waiting once it has subscribed and made its attempt after that.
    await_subscribers(&server, &channel("shared"), 1);
    await_calls(&server, base + 2);
    foreign_unlock(&mut foreign, "shared");
    waiter.join().unwrap();
}

#[test]
fn our_hold_blocks_a_foreign_acquire_and_our_release_is_announced() {
    let server = Server::start();
    let client = server.client();
    let lock = client.lock("shared");
    let mut foreign = server.conn();
    let mut listener = server.conn();
    let mut sub = listener.as_pubsub();
    sub.subscribe("redisson_lock__channel:{shared}").unwrap();

    let guard = lock.lock().unwrap();
    assert!(!foreign_try_lock(&mut foreign, "shared"));
    let fields = hash(&mut foreign, "shared");
    assert_eq!(fields.len(), 1);
    assert!(fields[0].0.starts_with(&format!("{}:", client.id())));
    let ttl: i64 = redis::cmd("PTTL")
        .arg("shared")
        .query(&mut foreign)
        .unwrap();
    assert!(ttl > 0 && ttl <= 30_000, "watchdog lease as PTTL: {ttl}");

    guard.unlock().unwrap();
    let message = sub.get_message().unwrap();
    assert_eq!(
        message.get_channel_name(),
        "redisson_lock__channel:{shared}"
    );
    assert_eq!(message.get_payload::<String>().unwrap(), "0");
    assert!(foreign_try_lock(&mut foreign, "shared"));
}
