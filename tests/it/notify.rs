//! Unlock notifications: waiters wake on a message (ours, foreign, or a raw PUBLISH), one
//! per message, survive a killed subscriber, and leave nothing behind.
//!
//! Attempts are counted with `INFO commandstats` (every acquire and release is one EVALSHA),
//! so the tests assert what happened, never how long it took. Leases are long (60 s) so that
//! no renewal and no expiry can stand in for a message.

use crate::support;

use std::time::Duration;

use support::{Server, await_calls, eventually, foreign_hold, threads_named};

const LONG: Duration = Duration::from_secs(60);

fn pubsub_clients(server: &Server) -> usize {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut server.conn())
        .unwrap();
    list.lines().filter(|line| !line.is_empty()).count()
}

/// Connections our subscribers opened (they name themselves), subscribed or not.
fn subscriber_connections(server: &Server) -> usize {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut server.conn())
        .unwrap();
    list.lines()
        .filter(|line| line.contains(" name=redmutex-notify:"))
        .count()
}

/// Loads the scripts, so that no NOSCRIPT retry shows in the counts that follow.
fn warm_up(server: &Server) {
    server
        .client()
        .lock("warm-up")
        .lock()
        .unwrap()
        .unlock()
        .unwrap();
}

#[test]
fn a_waiter_wakes_on_our_unlock_after_exactly_one_more_attempt() {
    let server = Server::start();
    let holder = server.builder().lease(LONG).build().unwrap().lock("l");
    let waiter = server.builder().lease(LONG).build().unwrap().lock("l");
    warm_up(&server);
    let base = server.calls("evalsha");
    let guard = holder.lock().unwrap();
    let thread = std::thread::spawn(move || waiter.lock().map(|guard| guard.unlock()));
    // lock, then the waiter's attempt, subscription, and attempt again.
    await_calls(&server, base + 3);
    guard.unlock().unwrap();
    thread.join().unwrap().unwrap().unwrap();
    // + our unlock, the waiter's one woken attempt, and its unlock: no polling in between.
    assert_eq!(server.calls("evalsha"), base + 6);
}

#[test]
fn a_raw_publish_wakes_a_waiter() {
    let server = Server::start();
    let mut foreign = server.conn();
    foreign_hold(&mut foreign, "l", 60_000);
    let waiter = server.builder().lease(LONG).build().unwrap().lock("l");
    warm_up(&server);
    let base = server.calls("evalsha");
    let thread = std::thread::spawn(move || {
        let guard = waiter.try_lock_for(Duration::from_secs(30)).unwrap();
        guard.map(|guard| guard.unlock().unwrap()).is_some()
    });
    await_calls(&server, base + 2);
    let _: i64 = redis::cmd("DEL").arg("l").query(&mut foreign).unwrap();
    let _: i64 = redis::cmd("PUBLISH")
        .arg("redisson_lock__channel:{l}")
        .arg("0")
        .query(&mut foreign)
        .unwrap();
    assert!(thread.join().unwrap(), "woken before its 60 s bound");
    assert_eq!(server.calls("evalsha"), base + 4);
}

#[test]
fn an_expiry_without_any_message_still_lets_the_waiter_in() {
    let server = Server::start();
    foreign_hold(&mut server.conn(), "l", 300);
    let waiter = server.client().lock("l");
    let guard = waiter.try_lock_for(Duration::from_secs(30)).unwrap();
    assert!(guard.is_some(), "acquired after the foreign lease ran out");
}

#[test]
fn a_killed_subscriber_reconnects_and_the_waiter_still_wakes() {
    let server = Server::start();
    let holder = server.builder().lease(LONG).build().unwrap().lock("l");
    let waiter = server.builder().lease(LONG).build().unwrap().lock("l");
    warm_up(&server);
    let base = server.calls("evalsha");
    let guard = holder.lock().unwrap();
    let thread = std::thread::spawn(move || {
        let guard = waiter.try_lock_for(Duration::from_secs(30)).unwrap();
        guard.map(|guard| guard.unlock().unwrap()).is_some()
    });
    await_calls(&server, base + 3);
    assert_eq!(pubsub_clients(&server), 1);
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(killed, 1);
    // Resubscribed, the waiter is told to retry once; after that attempt a message counts.
    await_calls(&server, base + 4);
    assert_eq!(pubsub_clients(&server), 1);
    guard.unlock().unwrap();
    assert!(
        thread.join().unwrap(),
        "woken by the unlock before its 60 s bound"
    );
}

#[test]
fn one_unlock_wakes_one_of_sixteen_waiters() {
    let server = Server::start();
    let client = server.builder().lease(LONG).build().unwrap();
    let holder = server.builder().lease(LONG).build().unwrap().lock("l");
    warm_up(&server);
    let base = server.calls("evalsha");
    let guard = holder.lock().unwrap();
    // The first waiter: an attempt, a subscription, a second attempt, then it waits. Each
    // later one finds the channel subscribed: one attempt, then it waits.
    let waiters: Vec<_> = (0..16)
        .map(|i| {
            let lock = client.lock("l");
            let waiter = std::thread::spawn(move || lock.lock().map(|guard| guard.unlock()));
            await_calls(&server, base + 2 + 1 + i);
            waiter
        })
        .collect();
    let before = base + 1 + 2 + 15;
    assert_eq!(server.calls("evalsha"), before);
    guard.unlock().unwrap();
    for waiter in waiters {
        waiter.join().unwrap().unwrap().unwrap();
    }
    // Each release wakes one waiter, which takes the lock and releases it in turn:
    // 16 acquisitions and 16 releases. A herd would make 16 + 15 + ... attempts.
    let after_release = server.calls("evalsha") - (before + 1);
    assert_eq!(after_release, 16 * 2);
}

#[test]
fn a_client_that_never_waits_opens_no_subscription() {
    let server = Server::start();
    let client = server.client();
    client.lock("l").lock().unwrap().unlock().unwrap();
    assert!(client.lock("l").try_lock().unwrap().is_some());
    assert_eq!(subscriber_connections(&server), 0);
}

#[test]
fn dropping_the_client_ends_its_subscriber_thread_and_connection() {
    support::alone(
        "notify::dropping_the_client_ends_its_subscriber_thread_and_connection",
        || {
            let server = Server::start();
            // Every thread of the library names itself "redmutex-...".
            let client = server.client();
            let holder = server.client();
            let held = holder.lock("l").lock().unwrap();
            assert!(
                client
                    .lock("l")
                    .try_lock_for(Duration::from_millis(50))
                    .unwrap()
                    .is_none()
            );
            assert_eq!(subscriber_connections(&server), 1);
            // The channel lingers a second after the waiter left, then is unsubscribed.
            assert!(
                eventually(Duration::from_secs(10), || pubsub_clients(&server) == 0),
                "unsubscribed when the last waiter left"
            );
            assert_eq!(threads_named("redmutex-notif"), 1);
            drop(client);
            assert!(
                eventually(Duration::from_secs(10), || subscriber_connections(&server)
                    == 0),
                "the subscriber connection outlived its client"
            );
            assert!(
                eventually(Duration::from_secs(10), || threads_named("redmutex-notif")
                    == 0),
                "the subscriber thread outlived its client"
            );
            drop(held);
            drop(holder);
            // Pools, watchdogs, subscribers: nothing of either client is left, in threads or in
            // connections (the one left is the connection asking).
            assert!(
                eventually(Duration::from_secs(10), || threads_named("redmutex") == 0),
                "threads outlived their clients: {}",
                threads_named("redmutex")
            );
            assert!(
                eventually(Duration::from_secs(10), || connections(&server) == 1),
                "connections outlived their clients: {}",
                connections(&server)
            );
        },
    );
}

fn connections(server: &Server) -> usize {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut server.conn())
        .unwrap();
    list.lines().filter(|line| !line.is_empty()).count()
}

#[test]
fn a_waiter_whose_subscription_is_never_confirmed_polls() {
    let server = Server::start();
    let proxy = support::Proxy::start(server.port());
    let waiter = redmutex::LockClient::builder(&proxy.url())
        .connect_timeout(Duration::from_secs(5))
        .response_timeout(Duration::from_secs(5))
        .build()
        .unwrap()
        .lock("l");
    let holder = server.builder().lease(LONG).build().unwrap().lock("l");
    warm_up(&server);
    // From here on every SUBSCRIBE reaches Redis and none is ever answered: the subscriber
    // cannot even open its connection, which subscribes a channel of its own to check its
    // rights. (After the build, whose script loading names SUBSCRIBE too.)
    proxy.silence_after(b"SUBSCRIBE");
    let base = server.calls("evalsha");
    let guard = holder.lock().unwrap();
    let (taken, got) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let guard = waiter.try_lock_for(2 * LONG).unwrap();
        let _ = taken.send(guard.map(|guard| guard.unlock()).is_some());
    });
    // The lock, the waiter's attempt, and its attempt after the unconfirmed subscription.
    await_calls(&server, base + 3);
    guard.unlock().unwrap();
    // Half the holder's lease, which the waiter would sleep on if it counted on a message.
    assert_eq!(
        got.recv_timeout(LONG / 2),
        Ok(true),
        "the waiter slept on a subscription that was never confirmed"
    );
}

/// A waiter whose attempt was sent before its client's subscription to the lock's channel
/// was confirmed (made for another waiter on that channel) attempts again before it
/// sleeps: an unlock published between its attempt and that confirmation reached nobody,
/// and waiting for a message would leave it asleep on a free lock until it polls.
#[test]
fn a_waiter_whose_attempt_came_before_the_confirmation_attempts_again() {
    let server = Server::start();
    let proxy = support::Proxy::start(server.port());
    // Its waiters would not try again on their own for a minute.
    let client = redmutex::LockClient::builder(&proxy.url())
        .connect_timeout(Duration::from_secs(5))
        .response_timeout(Duration::from_secs(5))
        .retry_base(LONG)
        .retry_cap(LONG)
        .build()
        .unwrap();
    // "w" and "{w}" are two locks with one channel, `redisson_lock__channel:{w}`. Both held
    // for two minutes; the holder's acquisitions load the scripts.
    let holder = server.client();
    let held = holder.lock("w").lock_with_lease(2 * LONG).unwrap();
    let other = holder.lock("{w}").lock_with_lease(2 * LONG).unwrap();
    let channel = "redisson_lock__channel:{w}";

    // The waiter's attempt runs and finds "w" held; its reply is kept from it for now.
    let acquire = redis::Script::new(include_str!("../../src/kinds/reentrant/acquire.lua"));
    proxy.hold_reply_to(acquire.get_hash().as_bytes());
    let base = server.calls("evalsha");
    let (taken, got) = std::sync::mpsc::channel();
    let lock = client.lock("w");
    std::thread::spawn(move || {
        let guard = lock.try_lock_for(2 * LONG).unwrap();
        let _ = taken.send(guard.map(|guard| guard.unlock()).is_some());
    });
    await_calls(&server, base + 1);
    assert!(eventually(Duration::from_secs(10), || proxy.trap_sprung()));

    // "w" is released while the client listens on nothing: its message reaches nobody.
    assert_eq!(server.subscribers(channel), 0);
    held.unlock().unwrap();

    // Another waiter of the client, on "{w}": its attempt, the subscription to the shared
    // channel, and its attempt once the subscription is confirmed.
    let other_lock = client.lock("{w}");
    let other_waiter = std::thread::spawn(move || {
        let guard = other_lock.try_lock_for(2 * LONG).unwrap();
        guard.map(|guard| guard.unlock()).is_some()
    });
    await_calls(&server, base + 4);
    assert_eq!(server.subscribers(channel), 1);

    // The first waiter now hears that "w" was busy, and joins a subscription confirmed
    // after its attempt: it must look again, and finds "w" free.
    proxy.let_reply_go();
    assert_eq!(
        got.recv_timeout(LONG / 3),
        Ok(true),
        "the waiter slept on a free lock, counting on a message sent before it listened"
    );
    other.unlock().unwrap();
    assert!(
        other_waiter.join().unwrap(),
        "woken by the release of {{w}}"
    );
}
