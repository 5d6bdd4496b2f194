//! Faults injected from outside the crate, one test per defect they once exposed: a TCP proxy
//! between client and server, frozen servers, ACL users with narrow rights, keys of other
//! types, foreign unlock messages.
//!
//! Leases are long (60 s) wherever a wake-up is under test, and each waiter's own deadline is
//! far below that lease: a waiter that gets the lock in time was woken, not let in by an
//! expiry. Steps are sequenced by what the server shows (`PUBSUB NUMSUB`, command counts),
//! never by sleeps.

use crate::support;

use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use redis::Script;
use redmutex::{Error, LockClient};
use support::{Proxy, Server, await_calls, await_subscribers, eventually, foreign_hold};

const LONG: Duration = Duration::from_secs(60);
/// How long a waiter waits in these tests: far below `LONG`.
const WAIT: Duration = Duration::from_secs(15);

fn sha(script: &str) -> String {
    Script::new(script).get_hash().to_owned()
}

fn acquire_sha() -> String {
    sha(include_str!("../../src/kinds/reentrant/acquire.lua"))
}

/// Waits for `lock` in a thread, with no deadline of its own (a waiter with a deadline makes
/// a last attempt there, which would hide a missed wake-up); the receiver hears once it got
/// the lock and released it.
fn waiter(lock: redmutex::Lock) -> Receiver<redmutex::Result<()>> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    thread::spawn(move || {
        let _ = tx.send(lock.lock().and_then(|guard| guard.unlock()));
    });
    rx
}

/// The waiter got the lock within `WAIT`: it was woken, since the holder's lease is `LONG`.
fn woken(waiter: &Receiver<redmutex::Result<()>>, what: &str) {
    waiter
        .recv_timeout(WAIT)
        .unwrap_or_else(|_| panic!("{what}: not woken in {WAIT:?}, with a 60 s lease"))
        .unwrap();
}

/// Takes and releases a lock once, so that the scripts are loaded and their calls counted
/// from here on without NOSCRIPT retries.
fn warm_up(server: &Server) {
    let client = server.client();
    client.lock("warm-up").lock().unwrap().unlock().unwrap();
}

#[test]
fn lost_wake_up_a_waiter_that_leaves_hands_its_wake_up_on() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    warm_up(&server);
    let holder = server.builder().lease(LONG).build().unwrap().lock("l");
    // One pooled connection: when the trap closes it, an attempt needs a new one.
    let waiters = LockClient::builder(&proxy.url())
        .lease(LONG)
        .pool_size(1)
        .connect_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let guard = holder.lock().unwrap();
    let base = server.calls("evalsha");

    // The first waiter is first in line for the wake-up; its woken attempt will fail.
    let first = waiters.lock("l");
    let first = thread::spawn(move || first.try_lock_for(Duration::from_secs(3)).map(drop));
    await_calls(&server, base + 2);
    // The second finds the channel subscribed: one attempt, then it waits (a wake-up that
    // comes before it registered is kept for it).
    let second = waiter(waiters.lock("l"));
    await_calls(&server, base + 3);

    // The next acquire through the proxy (the woken waiter's) never reaches Redis, and no
    // new connection gets through until the proxy resumes: that attempt fails.
    proxy.drop_request_then_refuse(acquire_sha().as_bytes());
    guard.unlock().unwrap();
    let err = first.join().unwrap().unwrap_err();
    assert!(err.is_connection(), "{err}");
    assert!(proxy.trap_sprung(), "the first waiter was the one woken");
    proxy.resume();
    woken(&second, "the second waiter");
}

#[test]
fn deaf_subscriber_is_noticed_replaced_and_its_waiters_woken() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let holder = server.builder().lease(LONG).build().unwrap().lock("l");
    let waiters = LockClient::builder(&proxy.url())
        .lease(LONG)
        .response_timeout(Duration::from_millis(500))
        .ping_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    let channel = "redisson_lock__channel:{l}";

    warm_up(&server);
    for round in 0..2 {
        let guard = holder.lock().unwrap();
        let base = server.calls("evalsha");
        let waiting = waiter(waiters.lock("l"));
        // Round 0 subscribes and tries again since; round 1 finds the channel still
        // subscribed and waits after one attempt (a release that comes before it
        // registered is kept for it).
        await_calls(&server, base + if round == 0 { 2 } else { 1 });
        await_subscribers(&server, channel, 1);
        if round == 0 {
            // Every connection open now goes deaf, as behind a NAT that dropped its state;
            // the pooled ones are then closed by the server (the subscriber is not), so
            // that only the subscriber stays half-open.
            proxy.silence_existing();
            let _: () = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("TYPE")
                .arg("normal")
                .query(&mut server.conn())
                .unwrap();
        }
        guard.unlock().unwrap();
        woken(&waiting, &format!("round {round}"));
    }
}

#[test]
fn honest_release_a_release_whose_reply_was_lost_reports_success() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let client = LockClient::open(&proxy.url()).unwrap();
    let lock = client.lock("l");

    for depth in [1, 2] {
        let guards: Vec<_> = (0..depth).map(|_| lock.lock().unwrap()).collect();
        let mut guards = guards.into_iter();
        let last = guards.next().unwrap();
        for inner in guards {
            proxy.cut_on_reply_to(
                sha(include_str!("../../src/kinds/reentrant/release.lua")).as_bytes(),
            );
            inner.unlock().unwrap();
            assert!(proxy.trap_sprung());
            assert_eq!(
                lock.hold_count().unwrap(),
                1,
                "one hold given back, not two"
            );
        }
        proxy
            .cut_on_reply_to(sha(include_str!("../../src/kinds/reentrant/release.lua")).as_bytes());
        let result = last.unlock();
        assert!(proxy.trap_sprung(), "the reply to the release was lost");
        result.unwrap();
        assert!(!lock.is_locked().unwrap());
    }
    assert_eq!(client.stats().locks_lost, 0);

    // force_unlock: the first attempt deleted the key; its retry says so.
    let holder = server.client().lock("l");
    let _held = holder.lock().unwrap();
    proxy.cut_on_reply_to(
        sha(concat!(
            include_str!("../../src/transport/scripts/shape.lua"),
            include_str!("../../src/transport/scripts/force_unlock.lua")
        ))
        .as_bytes(),
    );
    assert!(lock.force_unlock().unwrap(), "there was a lock to delete");
    assert!(proxy.trap_sprung());
    assert!(!lock.is_locked().unwrap());
}

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Three `try_lock_for(200 ms)` on `client`, each returning what `expected` accepts, well
/// before a connect timeout: the deadline, not the connect timeout, bounds them.
fn deadline_kept(client: &LockClient, expected: fn(&redmutex::Result<bool>) -> bool) {
    for _ in 0..3 {
        let started = Instant::now();
        let result = client
            .lock("l")
            .try_lock_for(Duration::from_millis(200))
            .map(|guard| guard.is_some());
        let took = started.elapsed();
        assert!(expected(&result), "{result:?}");
        assert!(
            took < CONNECT_TIMEOUT / 2,
            "took {took:?}: a connect timeout instead of the deadline"
        );
    }
}

fn builder(url: &str) -> redmutex::LockClientBuilder {
    LockClient::builder(url)
        .connect_timeout(CONNECT_TIMEOUT)
        .response_timeout(Duration::from_millis(200))
}

#[test]
fn deadlines_kept_when_nodes_are_frozen_refuse_or_are_slow_to_connect() {
    let refused =
        |result: &redmutex::Result<bool>| result.as_ref().is_err_and(Error::is_connection);

    // Redlock with two of five nodes frozen: busy on the other three.
    let servers: Vec<Server> = (0..5).map(|_| Server::start()).collect();
    let urls: Vec<String> = servers.iter().map(Server::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let _held = LockClient::redlock(&urls)
        .build()
        .unwrap()
        .lock("l")
        .lock()
        .unwrap();
    let redlock = LockClient::redlock(&urls)
        .connect_timeout(CONNECT_TIMEOUT)
        .response_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    servers[3].pause();
    servers[4].pause();
    deadline_kept(&redlock, |result| matches!(result, Ok(false)));
    servers[3].resume();
    servers[4].resume();

    // One node behind a proxy that holds everything: connects hang.
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let client = builder(&proxy.url()).build().unwrap();
    proxy.pause();
    deadline_kept(&client, refused);
    proxy.resume();

    // One node that refuses connections: stopped.
    let mut server = Server::start();
    let client = builder(&server.url()).build().unwrap();
    server.stop();
    deadline_kept(&client, refused);
}

/// A user named `name` with password `pass` and the given ACL rules, and its URL.
fn acl_user(server: &Server, name: &str, rules: &[&str]) -> String {
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER")
        .arg(name)
        .arg("reset")
        .arg("on")
        .arg(">pass");
    for rule in rules {
        cmd.arg(*rule);
    }
    let _: () = cmd.query(&mut server.conn()).unwrap();
    format!("redis://{name}:pass@127.0.0.1:{}/", server.port())
}

/// The rights `docs/deploying.md` lists for a lock user.
const LOCK_USER: &[&str] = &[
    "~*",
    "&redisson_lock__channel:*",
    "+evalsha",
    "+script|load",
    "+exists",
    "+type",
    "+get",
    "+set",
    "+hget",
    "+hset",
    "+hexists",
    "+pexpire",
    "+pttl",
    "+del",
    "+rename",
    "+publish",
    "+subscribe",
    "+unsubscribe",
    "+ping",
];

#[test]
fn scripts_that_fail_halfway_are_refused_before_any_write() {
    let server = Server::start();
    // Redis 7's default for a new user: no channels. Refused at build, naming what is missing.
    let no_channels: Vec<&str> = LOCK_USER[..1]
        .iter()
        .chain(&LOCK_USER[2..])
        .copied()
        .collect();
    let url = acl_user(&server, "nochannels", &no_channels);
    let err = LockClient::open(&url).unwrap_err();
    assert!(err.is_permission(), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("PUBLISH") && message.contains("SUBSCRIBE"),
        "{message}"
    );
    assert!(!message.contains("pass@"), "{message}");

    // Rights lost after the build: the release refuses before deleting anything.
    let url = acl_user(&server, "locker", LOCK_USER);
    let client = LockClient::builder(&url).lease(LONG).build().unwrap();
    let lock = client.lock("l");
    let guard = lock.lock().unwrap();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("locker")
        .arg("resetchannels")
        .query(&mut server.conn())
        .unwrap();
    let err = guard.unlock().unwrap_err();
    assert!(err.is_permission(), "{err}");
    assert!(
        lock.is_locked().unwrap(),
        "the key is still there: nothing was written"
    );
    assert_eq!(lock.hold_count().unwrap(), 1);
}

#[test]
fn scripts_that_fail_halfway_a_refused_subscribe_falls_back_to_polling() {
    let server = Server::start();
    let url = acl_user(&server, "locker", LOCK_USER);
    let holder = server.builder().lease(LONG).build().unwrap().lock("l");
    let client = LockClient::builder(&url).lease(LONG).build().unwrap();
    // The user may still publish, but no longer subscribe (and may name its connection, so
    // that the subscriber connects and meets the refusal on SUBSCRIBE itself).
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("locker")
        .arg("-subscribe")
        .arg("+client|setname")
        .query(&mut server.conn())
        .unwrap();
    let guard = holder.lock().unwrap();
    let base = server.calls("evalsha");
    let waiting = waiter(client.lock("l"));
    // Polling: attempts keep coming although nobody publishes.
    await_calls(&server, base + 4);
    guard.unlock().unwrap();
    woken(&waiting, "the polling waiter");
}

#[test]
fn a_subscribe_refused_for_the_lock_channel_alone_falls_back_to_polling() {
    let server = Server::start();
    let url = acl_user(&server, "locker", LOCK_USER);
    let holder = server.builder().lease(LONG).build().unwrap().lock("l");
    let client = LockClient::builder(&url).lease(LONG).build().unwrap();
    // From now on the user may use the subscriber's own channels but no lock channel: the
    // subscriber connects and works, and only the SUBSCRIBE of the lock's channel is refused.
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("locker")
        .arg("resetchannels")
        .arg("&redisson_lock__channel:{redmutex:notify}:*")
        .query(&mut server.conn())
        .unwrap();
    let guard = holder.lock().unwrap();
    let base = server.calls("evalsha");
    let refused = server.rejected_calls("subscribe");
    let lock = client.lock("l");
    // The guard's release is refused too (no PUBLISH on the lock channel); it is logged.
    let waiting = thread::spawn(move || lock.try_lock_for(WAIT).map(|guard| guard.is_some()));
    // Polling: attempts keep coming although nobody publishes. A waiter that took the
    // SUBSCRIBE for confirmed would wait for a message, for the whole 60 s lease.
    await_calls(&server, base + 4);
    assert!(
        server.rejected_calls("subscribe") > refused,
        "the waiter never tried to subscribe"
    );
    guard.unlock().unwrap();
    assert!(
        waiting.join().unwrap().unwrap(),
        "the polling waiter got it"
    );
}

#[test]
fn wrong_type_a_string_key_is_a_foreign_lock_to_wait_for() {
    let server = Server::start();
    let client = server.client();
    let lock = client.lock("l");
    let mut redis = server.conn();
    // A SET NX PX lock of another library, without and then with an expiry.
    let _: () = redis::cmd("SET")
        .arg("l")
        .arg("token")
        .query(&mut redis)
        .unwrap();
    assert!(lock.try_lock().unwrap().is_none(), "busy, not an error");
    assert!(lock.is_locked().unwrap());
    assert_eq!(lock.hold_count().unwrap(), 0);
    assert!(
        lock.try_lock_for(Duration::from_millis(300))
            .unwrap()
            .is_none(),
        "waited out its deadline"
    );
    let _: () = redis::cmd("PEXPIRE")
        .arg("l")
        .arg(300)
        .query(&mut redis)
        .unwrap();
    let guard = lock
        .try_lock_for(WAIT)
        .unwrap()
        .expect("taken once the foreign lock expired");
    guard.unlock().unwrap();
}

#[test]
fn hash_tagged_names_use_redissons_channel() {
    let server = Server::start();
    warm_up(&server);
    for (name, channel) in [
        ("plain", "redisson_lock__channel:{plain}"),
        ("{user1}:lock", "redisson_lock__channel:{user1}:lock"),
    ] {
        // Redisson's unlock, literally: DEL, then PUBLISH 0 on its channel, wakes our waiter.
        foreign_hold(&mut server.conn(), name, 60_000);
        let lock = server.client().lock(name);
        let base = server.calls("evalsha");
        let waiting = waiter(lock);
        await_calls(&server, base + 2);
        await_subscribers(&server, channel, 1);
        let mut redis = server.conn();
        let _: i64 = redis::cmd("DEL").arg(name).query(&mut redis).unwrap();
        let _: i64 = redis::cmd("PUBLISH")
            .arg(channel)
            .arg(0)
            .query(&mut redis)
            .unwrap();
        woken(&waiting, name);

        // Our unlock publishes where a Redisson waiter listens.
        let mut listener = server.conn();
        let mut sub = listener.as_pubsub();
        sub.subscribe(channel).unwrap();
        server.client().lock(name).lock().unwrap().unlock().unwrap();
        assert_eq!(sub.get_message().unwrap().get_channel_name(), channel);
    }
}

#[test]
fn losses_seen_outside_the_watchdog_are_reported() {
    let server = Server::start();
    let (tx, rx) = crossbeam_channel::unbounded();
    let client = server
        .builder()
        .lease(LONG)
        .on_lock_lost(move |lost| tx.send(lost.name.clone()).unwrap())
        .build()
        .unwrap();
    let mut redis = server.conn();
    let delete = |redis: &mut redis::Connection, key: &str| {
        let _: i64 = redis::cmd("DEL").arg(key).query(redis).unwrap();
    };

    // Found by a release: an explicit lease that ran out.
    let leased = client.lock("leased");
    let guard = leased.lock_with_lease(Duration::from_millis(50)).unwrap();
    assert!(eventually(Duration::from_secs(10), || !leased
        .is_locked()
        .unwrap()));
    let err = guard.unlock().unwrap_err();
    assert!(err.is_lost() && !err.is_not_held(), "{err}");
    assert_eq!(rx.recv_timeout(WAIT).unwrap(), "leased");

    // Found by a release before the watchdog's next renewal (20 s away).
    let watched = client.lock("watched");
    let guard = watched.lock().unwrap();
    delete(&mut redis, "watched");
    assert!(guard.unlock().unwrap_err().is_lost());
    assert_eq!(rx.recv_timeout(WAIT).unwrap(), "watched");

    // Found by a re-entry: an error of its own, not a quiet fresh hold.
    let nested = client.lock("nested");
    let outer = nested.lock().unwrap();
    delete(&mut redis, "nested");
    let err = nested.lock().unwrap_err();
    assert!(err.is_lost(), "{err}");
    assert_eq!(rx.recv_timeout(WAIT).unwrap(), "nested");
    assert!(outer.is_lost());
    assert!(
        !nested.is_locked().unwrap(),
        "the re-entry left nothing behind"
    );
    assert!(outer.unlock().unwrap_err().is_lost());
    nested.lock().unwrap().unlock().unwrap();

    assert_eq!(client.stats().locks_lost, 3);
    drop(client);
    assert!(rx.recv_timeout(WAIT).is_err(), "each loss reported once");
}

#[test]
fn settings_that_cannot_work_a_response_timeout_at_the_renew_interval() {
    let server = Server::start();
    for (lease, response) in [(3, 1_000), (3, 2_000), (30, 10_000)] {
        let err = server
            .builder()
            .lease(Duration::from_secs(lease))
            .response_timeout(Duration::from_millis(response))
            .build()
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidConfig {
                    setting: "response_timeout",
                    ..
                }
            ),
            "{err}"
        );
    }
    server
        .builder()
        .lease(Duration::from_secs(3))
        .response_timeout(Duration::from_millis(999))
        .build()
        .unwrap();
}

#[test]
fn errors_say_why() {
    let mut server = Server::start();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("secret")
        .query(&mut server.conn())
        .unwrap();
    let port = server.port();

    // The message says what happened; what Redis replied is its source.
    let chain = |err: &Error| {
        let mut text = err.to_string();
        let mut next = std::error::Error::source(err);
        while let Some(source) = next {
            text = format!("{text}: {source}");
            next = source.source();
        }
        text
    };
    let err = LockClient::open(&format!("redis://127.0.0.1:{port}/")).unwrap_err();
    let text = chain(&err);
    assert!(
        text.contains("NOAUTH") || text.contains("uthentication"),
        "{text}"
    );
    assert!(text.contains("redis://user:password@"), "{text}");
    assert!(err.is_auth(), "{err}");

    let err = LockClient::open(&format!("redis://default:wrong@127.0.0.1:{port}/")).unwrap_err();
    let text = chain(&err);
    assert!(
        text.contains("WRONGPASS") || text.contains("uthentication failed"),
        "{text}"
    );
    assert!(
        text.contains("redis://user:password@") && !text.contains("wrong@"),
        "{text}"
    );

    server.stop();
    let err = LockClient::open(&format!("redis://127.0.0.1:{port}/")).unwrap_err();
    assert!(chain(&err).contains("refused"), "{err}");

    let lost = Error::Lost { lock: "l".into() }.to_string();
    let not_held = Error::NotHeld { lock: "l".into() }.to_string();
    assert_ne!(lost, not_held);
}

/// The part of a `SET key token NX PX lease` command that no other command has.
const SET_NX: &[u8] = b"\r\nNX\r\n";

#[test]
fn a_token_acquire_whose_reply_was_lost_takes_the_lock() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let client = LockClient::open(&proxy.url()).unwrap();
    let lock = client.token_lock("t");
    for round in 0..3 {
        // The SET runs, its reply is lost with its connection, and the client sends it again.
        proxy.cut_on_reply_to(SET_NX);
        let guard = lock.try_lock().unwrap();
        assert!(proxy.trap_sprung(), "round {round}: the reply was not lost");
        let guard = guard.unwrap_or_else(|| panic!("round {round}: blocked by our own token"));
        let value: String = redis::cmd("GET")
            .arg("t")
            .query(&mut server.conn())
            .unwrap();
        assert_eq!(value, guard.token(), "round {round}");
        guard.unlock().unwrap();
        assert!(!server.exists("t"), "round {round}: left behind");
    }
}
