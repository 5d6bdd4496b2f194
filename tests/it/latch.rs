//! The count-down latch: the last count-down releases every waiter of every client (woken
//! by its message), waits end at their deadlines or on a cancel, a client without pub/sub
//! still sees the latch open, the count follows sets and count-downs, a count-down whose
//! reply was lost counts once, and bad input or a key of another kind changes nothing.

use crate::support;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use redis::Script;
use redmutex::{Cancel, Error, LockClient};
use support::{Proxy, Server, await_subscribers, eventually};

const NAME: &str = "ready";
const CHANNEL: &str = "redisson_countdownlatch__channel__{ready}";
/// Far beyond what any step here takes: a wait that hangs fails the test.
const NO_HANG: Duration = Duration::from_secs(60);
/// Within this a woken waiter must have returned: well below the sleepy clients' poll
/// (30 s), so only the message can have woken it.
const WOKEN: Duration = Duration::from_secs(15);

fn sha(script: &str) -> String {
    Script::new(script).get_hash().to_owned()
}

fn count_down_sha() -> String {
    sha(include_str!("../../src/kinds/latch/latch_count_down.lua"))
}

fn keys(server: &Server) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.conn())
        .unwrap();
    keys.sort();
    keys
}

#[test]
fn the_last_count_down_releases_every_waiter_of_every_client() {
    let server = Server::start();
    let clients: Vec<LockClient> = (0..3).map(|_| server.sleepy()).collect();
    let latch = server.client().count_down_latch(NAME);
    assert!(latch.try_set_count(2).unwrap());
    let looks = server.calls("evalsha");
    let (done, results) = mpsc::channel();
    for client in &clients {
        for _ in 0..2 {
            let (waiter, done) = (client.count_down_latch(NAME), done.clone());
            std::thread::spawn(move || {
                let _ = done.send(waiter.wait_for(NO_HANG).map_err(|e| e.to_string()));
            });
        }
    }
    // Every client's subscriber has the channel, and every waiter has looked at the count
    // once at least: a count-down from now on reaches each of them.
    await_subscribers(&server, CHANNEL, clients.len());
    assert!(eventually(NO_HANG, || server.calls("evalsha") >= looks + 6));
    assert_eq!(latch.count_down().unwrap(), 1);
    assert_eq!(latch.count().unwrap(), 1);
    assert!(results.try_recv().is_err(), "a waiter left at a count of 1");
    assert_eq!(latch.count_down().unwrap(), 0);
    for _ in 0..6 {
        assert_eq!(
            results.recv_timeout(WOKEN),
            Ok(Ok(true)),
            "a waiter was not woken by the last count-down"
        );
    }
    assert!(!server.exists(NAME), "the count is deleted at zero");
}

#[test]
fn waits_end_at_their_deadlines() {
    let server = Server::start();
    let latch = server.client().count_down_latch(NAME);
    // Never set: open.
    latch.wait().unwrap();
    assert!(latch.wait_for(Duration::ZERO).unwrap());
    assert!(latch.try_set_count(1).unwrap());
    assert!(!latch.wait_for(Duration::ZERO).unwrap());
    assert!(!latch.wait_until(Instant::now()).unwrap());
    let started = Instant::now();
    assert!(!latch.wait_for(Duration::from_millis(200)).unwrap());
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert!(!latch.wait_for(Duration::from_millis(50)).unwrap());

    let bounded = server
        .builder()
        .max_wait(Duration::from_millis(200))
        .build()
        .unwrap();
    let err = bounded.count_down_latch(NAME).wait().unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert!(matches!(err, Error::Timeout { waited, .. } if waited >= Duration::from_millis(200)));
    assert!(err.to_string().contains("count-down latch"), "{err}");
    assert_eq!(latch.count().unwrap(), 1, "waits change nothing");
    // A deadline the clock cannot hold waits for the opening.
    let waiter = latch.clone();
    let waiting = std::thread::spawn(move || waiter.wait_for(Duration::MAX));
    await_subscribers(&server, CHANNEL, 1);
    latch.count_down().unwrap();
    assert!(waiting.join().unwrap().unwrap());
}

#[test]
fn a_cancel_or_closing_the_client_ends_a_wait() {
    let server = Server::start();
    let client = server.sleepy();
    let latch = client.count_down_latch(NAME);
    assert!(latch.try_set_count(1).unwrap());
    let cancel = Cancel::new();
    let waiter = latch.with_cancel(&cancel);
    let waiting = std::thread::spawn(move || waiter.wait_for(NO_HANG));
    await_subscribers(&server, CHANNEL, 1);
    cancel.cancel();
    let err = waiting.join().unwrap().unwrap_err();
    assert!(err.is_cancelled() && !err.is_closed(), "{err}");
    // A cancelled handle refuses later waits; the latch itself is untouched.
    assert!(
        latch
            .with_cancel(&cancel)
            .wait()
            .unwrap_err()
            .is_cancelled()
    );
    assert_eq!(latch.count().unwrap(), 1);

    let waiter = latch.clone();
    let looks = server.calls("evalsha");
    let waiting = std::thread::spawn(move || waiter.wait());
    assert!(eventually(NO_HANG, || server.calls("evalsha") > looks));
    client.close();
    let err = waiting.join().unwrap().unwrap_err();
    assert!(err.is_closed(), "{err}");
}

#[test]
fn a_client_without_pubsub_sees_the_latch_open() {
    let server = Server::start();
    let polling = server.builder().pubsub(false).build().unwrap();
    let latch = polling.count_down_latch(NAME);
    assert!(latch.try_set_count(1).unwrap());
    let looks = server.calls("evalsha");
    let waiter = latch.clone();
    let waiting = std::thread::spawn(move || waiter.wait_for(NO_HANG));
    // It looks again and again, never subscribing.
    assert!(eventually(NO_HANG, || server.calls("evalsha") >= looks + 3));
    assert_eq!(server.subscribers(CHANNEL), 0);
    server.client().count_down_latch(NAME).count_down().unwrap();
    assert!(waiting.join().unwrap().unwrap());
}

#[test]
fn a_waiter_whose_subscription_is_refused_polls() {
    let server = Server::start();
    let mut conn = server.conn();
    let acl = |rules: &[&str], conn: &mut redis::Connection| {
        let mut cmd = redis::cmd("ACL");
        cmd.arg("SETUSER").arg("waiter");
        for rule in rules {
            cmd.arg(*rule);
        }
        let () = cmd.query(conn).unwrap();
    };
    acl(&["on", ">pw", "~*", "&*", "+@all"], &mut conn);
    let url = format!("redis://waiter:pw@127.0.0.1:{}/", server.port());
    let client = LockClient::builder(&url)
        .retry_base(Duration::from_millis(5))
        .retry_cap(Duration::from_millis(50))
        .build()
        .unwrap();
    // Rights taken away after the client was built: Redis refuses its SUBSCRIBE.
    acl(&["-subscribe", "-ssubscribe"], &mut conn);
    let latch = client.count_down_latch(NAME);
    assert!(latch.try_set_count(1).unwrap());
    let looks = server.calls("evalsha");
    let waiter = latch.clone();
    let waiting = std::thread::spawn(move || waiter.wait_for(NO_HANG));
    assert!(eventually(NO_HANG, || server.calls("evalsha") >= looks + 3));
    assert!(eventually(NO_HANG, || server.rejected_calls("subscribe") >= 1));
    assert_eq!(server.subscribers(CHANNEL), 0);
    latch.count_down().unwrap();
    assert!(waiting.join().unwrap().unwrap());
}

#[test]
fn the_count_follows_sets_and_count_downs_and_a_set_latch_refuses_another_count() {
    let server = Server::start();
    let latch = server.client().count_down_latch(NAME);
    assert_eq!(latch.count().unwrap(), 0);
    assert!(latch.try_set_count(3).unwrap());
    assert!(!latch.try_set_count(5).unwrap(), "set twice");
    assert_eq!(latch.count().unwrap(), 3);
    assert_eq!(latch.count_down().unwrap(), 2);
    assert_eq!(latch.count_down().unwrap(), 1);
    assert_eq!(latch.count().unwrap(), 1);
    assert_eq!(latch.count_down().unwrap(), 0);
    assert_eq!(latch.count().unwrap(), 0);
    assert!(!server.exists(NAME));
    // Open stays open.
    assert_eq!(latch.count_down().unwrap(), 0);
    assert!(!server.exists(NAME));
    // Open may be set again, and a deletion opens it.
    assert!(latch.try_set_count(2).unwrap());
    assert!(latch.delete().unwrap());
    assert!(!latch.delete().unwrap());
    assert_eq!(latch.count().unwrap(), 0);
    assert!(latch.wait_for(Duration::ZERO).unwrap());
    assert_eq!(
        keys(&server)
            .iter()
            .filter(|k| !k.contains("latch"))
            .count(),
        0
    );
}

#[test]
fn a_deletion_opens_the_latch_for_its_waiters() {
    let server = Server::start();
    let latch = server.sleepy().count_down_latch(NAME);
    assert!(latch.try_set_count(5).unwrap());
    let waiter = latch.clone();
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || done.send(waiter.wait_for(NO_HANG).map_err(|e| e.to_string())));
    await_subscribers(&server, CHANNEL, 1);
    assert!(server.client().count_down_latch(NAME).delete().unwrap());
    assert_eq!(result.recv_timeout(WOKEN), Ok(Ok(true)));
}

#[test]
fn bad_input_and_keys_of_another_kind_change_nothing() {
    let server = Server::start();
    let latch = server.client().count_down_latch(NAME);
    for bad in [0, (1 << 40) + 1, u64::MAX] {
        let err = latch.try_set_count(bad).unwrap_err();
        assert!(err.is_invalid_input(), "{bad}: {err}");
    }
    let unnamed = server.client().count_down_latch("");
    for err in [
        unnamed.try_set_count(1).unwrap_err(),
        unnamed.count_down().unwrap_err(),
        unnamed.count().unwrap_err(),
        unnamed.delete().unwrap_err(),
        unnamed.wait().unwrap_err(),
    ] {
        assert!(err.is_invalid_input(), "{err}");
    }
    assert!(keys(&server).is_empty());

    let mut conn = server.conn();
    let _: () = redis::cmd("HSET")
        .arg(NAME)
        .arg("f")
        .arg("1")
        .query(&mut conn)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("text")
        .arg("three")
        .query(&mut conn)
        .unwrap();
    for name in [NAME, "text"] {
        let latch = server.client().count_down_latch(name);
        for err in [
            latch.try_set_count(1).unwrap_err(),
            latch.count_down().unwrap_err(),
            latch.count().unwrap_err(),
            latch.delete().unwrap_err(),
            latch.wait_for(NO_HANG).unwrap_err(),
        ] {
            assert!(err.is_wrong_kind(), "{name}: {err}");
            assert!(err.to_string().contains("count-down latch"), "{err}");
        }
    }
    assert_eq!(keys(&server), ["ready", "text"], "no latch key written");
    assert_eq!(support::hash(&mut conn, NAME), [("f".to_owned(), 1)]);
    let text: String = redis::cmd("GET").arg("text").query(&mut conn).unwrap();
    assert_eq!(text, "three");
}

#[test]
fn a_count_down_whose_reply_was_lost_counts_once() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let client = LockClient::open(&proxy.url()).unwrap();
    let latch = client.count_down_latch(NAME);
    // A set whose reply was lost reports the set, not a refusal.
    proxy.cut_on_reply_to(sha(include_str!("../../src/kinds/latch/latch_set.lua")).as_bytes());
    assert!(latch.try_set_count(3).unwrap());
    assert!(proxy.trap_sprung());
    for left in [2, 1] {
        proxy.cut_on_reply_to(count_down_sha().as_bytes());
        assert_eq!(latch.count_down().unwrap(), left);
        assert!(proxy.trap_sprung(), "the reply to the count-down was lost");
        assert_eq!(latch.count().unwrap(), left, "counted down once");
    }
    // A reply that never comes in time: an error saying the count-down may have run,
    // which it did, once; it is not sent again.
    let slow = Proxy::start(server.port());
    let impatient = LockClient::builder(&slow.url())
        .response_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    slow.delay_reply_to(count_down_sha().as_bytes(), Duration::from_secs(2));
    let err = impatient.count_down_latch(NAME).count_down().unwrap_err();
    assert!(slow.trap_sprung());
    assert!(err.is_outcome_unknown(), "{err}");
    assert!(err.to_string().contains("not sent again"), "{err}");
    assert!(eventually(NO_HANG, || latch.count().unwrap() == 0));
    assert!(latch.try_set_count(1).unwrap());
    proxy.cut_on_reply_to(sha(include_str!("../../src/kinds/latch/latch_delete.lua")).as_bytes());
    assert!(latch.delete().unwrap(), "the deletion ran once and says so");
    assert!(proxy.trap_sprung());
    assert_eq!(latch.count().unwrap(), 0);
}

#[test]
fn a_count_down_latch_on_redlock_is_unsupported() {
    let servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls: Vec<String> = servers.iter().map(Server::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let client = LockClient::redlock(&urls).build().unwrap();
    let latch = client.count_down_latch(NAME);
    for err in [
        latch.try_set_count(1).unwrap_err(),
        latch.count_down().unwrap_err(),
        latch.count().unwrap_err(),
        latch.delete().unwrap_err(),
        latch.wait().unwrap_err(),
    ] {
        assert!(err.is_unsupported(), "{err}");
    }
    for server in &servers {
        assert!(keys(server).is_empty());
    }
}

/// On a cluster: the count, its call latches and Redisson's channel share the name's slot;
/// a waiter subscribes where that slot is served (sharded or not) and the last count-down
/// there wakes it. A name with a hash tag of its own would put the channel elsewhere, and
/// is refused before anything is sent.
#[test]
fn a_count_down_latch_waits_and_opens_on_a_cluster() {
    let cluster = support::Cluster::start();
    let latch = cluster.client().count_down_latch(NAME);
    assert!(latch.try_set_count(1).unwrap());
    // A waiter that would not look again for 30 s: only the message opens it in time.
    let sleepy = (cluster.builder())
        .retry_base(Duration::from_secs(30))
        .retry_cap(Duration::from_secs(30))
        .lease(Duration::from_secs(60))
        .build()
        .unwrap();
    let waiter = sleepy.count_down_latch(NAME);
    let (sender, opened) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(waiter.wait_for(NO_HANG).map_err(|e| e.to_string()));
    });
    let owner = cluster.owner_of(NAME);
    let subscribed = || owner.any_channels(CHANNEL) >= 1;
    assert!(
        eventually(NO_HANG, subscribed),
        "the waiter never subscribed"
    );
    assert_eq!(latch.count_down().unwrap(), 0);
    assert_eq!(
        opened.recv_timeout(WOKEN),
        Ok(Ok(true)),
        "not opened by the message"
    );
    assert!(!owner.exists(NAME));

    let tagged = cluster.client().count_down_latch("{elsewhere}:latch");
    let err = tagged.try_set_count(1).unwrap_err();
    assert!(err.is_unsupported(), "{err}");
}
