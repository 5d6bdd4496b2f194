//! Redlock: one lock on a majority of five independent redis-server processes.

use crate::support;

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use redmutex::{Error, LockClient, LockClientBuilder};
use support::{
    SHORT_LEASE, Server, await_calls, await_subscribers, channel, eventually, hash, history,
    response_timeout_for, spawn_worker,
};

const URLS_VAR: &str = "REDMUTEX_TEST_URLS";

struct Five {
    servers: Vec<Server>,
}

impl Five {
    fn start() -> Five {
        Five {
            servers: (0..5).map(|_| Server::start()).collect(),
        }
    }

    fn urls(&self) -> Vec<String> {
        self.servers.iter().map(Server::url).collect()
    }

    fn builder(&self) -> LockClientBuilder {
        let urls = self.urls();
        let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
        LockClient::redlock(&urls)
            .connect_timeout(Duration::from_millis(300))
            .response_timeout(Duration::from_millis(300))
    }

    fn client(&self) -> LockClient {
        self.builder().build().unwrap()
    }

    fn name(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.servers[i].port())
    }

    /// The hold counts of `key` on node `i`.
    fn fields(&self, i: usize, key: &str) -> Vec<(String, i64)> {
        hash(&mut self.servers[i].conn(), key)
    }

    fn exists(&self, i: usize, key: &str) -> bool {
        redis::cmd("EXISTS")
            .arg(key)
            .query(&mut self.servers[i].conn())
            .unwrap()
    }
}

/// GET, yield, SET under the lock; the hold's window goes to the list `history` beside the
/// counter.
fn increment(redis: &mut redis::Connection, lock: &redmutex::Lock, holder: &str) {
    let guard = lock.lock().unwrap();
    let taken = Instant::now();
    assert!(guard.valid_until() > taken);
    let value: Option<i64> = redis::cmd("GET").arg("counter").query(redis).unwrap();
    std::thread::yield_now();
    let _: () = redis::cmd("SET")
        .arg("counter")
        .arg(value.unwrap_or(0) + 1)
        .query(redis)
        .unwrap();
    let window = (taken, Instant::now(), guard.valid_until());
    history::send(redis, "history", holder, window);
    guard.unlock().unwrap();
}

#[test]
fn exclusion_across_four_threads_and_two_processes() {
    let five = Five::start();
    let urls = five.urls().join(",");
    let workers: Vec<_> = (0..2)
        .map(|_| spawn_worker("redlock::worker_process", &[(URLS_VAR, urls.clone())]))
        .collect();
    let client = five.client();
    std::thread::scope(|scope| {
        for thread in 0..4 {
            let lock = client.lock("counted");
            let mut redis = five.servers[0].conn();
            scope.spawn(move || {
                for _ in 0..100 {
                    increment(&mut redis, &lock, &format!("thread-{thread}"));
                }
            });
        }
    });
    for mut worker in workers {
        assert!(worker.wait().unwrap().success());
    }
    let total: i64 = redis::cmd("GET")
        .arg("counter")
        .query(&mut five.servers[0].conn())
        .unwrap();
    assert_eq!(total, 6 * 100);
    let history = history::received(&mut five.servers[0].conn(), "history");
    assert_eq!(history.len(), 6 * 100);
    history.assert_exclusive();
}

/// One worker process of `exclusion_across_four_threads_and_two_processes`.
#[test]
#[ignore = "run as a child process by exclusion_across_four_threads_and_two_processes"]
fn worker_process() {
    let urls = std::env::var(URLS_VAR).expect("started by the parent test");
    let urls: Vec<&str> = urls.split(',').collect();
    let client = LockClient::redlock(&urls).build().unwrap();
    let lock = client.lock("counted");
    let mut redis = redis::Client::open(urls[0])
        .unwrap()
        .get_connection()
        .unwrap();
    let holder = format!("process-{}", std::process::id());
    for _ in 0..100 {
        increment(&mut redis, &lock, &holder);
    }
}

#[test]
fn two_of_five_down_still_lock_and_three_down_is_no_quorum() {
    let mut five = Five::start();
    let client = five.client();
    let lock = client.lock("quorum");
    five.servers[3].stop();
    five.servers[4].stop();

    let guard = lock.lock().unwrap();
    assert!(lock.is_locked().unwrap());
    assert_eq!(lock.hold_count().unwrap(), 1);
    match guard.unlock() {
        Err(Error::PartialRelease {
            released,
            of,
            failed,
            ..
        }) => {
            assert_eq!((released, of), (3, 5));
            let down: Vec<_> = failed.iter().map(|f| f.node.clone()).collect();
            assert_eq!(down, [five.name(3), five.name(4)]);
        }
        other => panic!("expected a partial release, got {other:?}"),
    }
    assert!(!lock.is_locked().unwrap());

    five.servers[2].stop();
    let err = lock.lock().map(drop).unwrap_err();
    assert!(err.is_no_quorum(), "{err}");
    let message = err.to_string();
    for down in 2..5 {
        assert!(
            message.contains(&five.name(down)),
            "{message} names {}",
            five.name(down)
        );
    }
    assert!(!message.contains(&five.name(0)), "{message}");
    for live in 0..2 {
        assert!(
            !five.exists(live, "quorum"),
            "a key was left on node {live}"
        );
    }
    let err = lock.try_lock().map(drop).unwrap_err();
    assert!(err.is_no_quorum(), "{err}");
    assert!(lock.is_locked().unwrap_err().is_no_quorum());
}

#[test]
fn the_lock_outlives_a_node_stopped_while_it_is_held() {
    let mut five = Five::start();
    let lease = SHORT_LEASE;
    let client = five
        .builder()
        .lease(lease)
        .response_timeout(response_timeout_for(lease))
        .build()
        .unwrap();
    let lock = client.lock("durable");
    let rival = five.client().lock("durable");
    let guard = lock.lock().unwrap();
    five.servers[1].stop();
    // Four renewals on the four live nodes take four renew intervals, past the lease of
    // the acquisition: only they kept the rival out.
    let renewed = eventually(Duration::from_secs(30), || {
        assert!(
            rival.try_lock().unwrap().is_none(),
            "the rival got a held lock"
        );
        client.stats().renewals >= 4
    });
    assert!(renewed, "{:?}", client.stats());
    assert!(!guard.is_lost());
    assert_eq!(client.stats().locks_lost, 0);
    assert!(matches!(
        guard.unlock(),
        Err(Error::PartialRelease { released: 4, .. })
    ));
}

#[test]
fn a_node_restarted_empty_gets_the_hold_back_at_the_next_renewal() {
    let mut five = Five::start();
    let lease = SHORT_LEASE;
    let client = five
        .builder()
        .lease(lease)
        .response_timeout(response_timeout_for(lease))
        .build()
        .unwrap();
    let lock = client.lock("restored");
    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    five.servers[0].restart();
    assert!(five.fields(0, "restored").is_empty(), "restarted empty");
    assert!(
        eventually(Duration::from_secs(10), || five.fields(0, "restored").len()
            == 1),
        "the hold was not put back"
    );
    assert_eq!(
        five.fields(0, "restored")[0].1,
        2,
        "with the full hold count"
    );
    assert!(!outer.is_lost());
    drop(inner);
    outer.unlock().unwrap();
    for i in 0..5 {
        assert!(!five.exists(i, "restored"));
    }
}

/// A node that lost our hold while another owner took the key there (it restarted empty,
/// then someone locked it on that node alone): the renewal puts our hold back only where
/// the key is free, and never writes our field into the other owner's hash.
#[test]
fn a_renewal_never_puts_a_hold_back_into_another_owner_s_key() {
    let five = Five::start();
    let lease = SHORT_LEASE;
    let client = five
        .builder()
        .lease(lease)
        .response_timeout(response_timeout_for(lease))
        .build()
        .unwrap();
    let guard = client.lock("taken").lock().unwrap();
    let mut node = five.servers[0].conn();
    let () = redis::pipe()
        .cmd("DEL")
        .arg("taken")
        .cmd("HSET")
        .arg("taken")
        .arg("other:1")
        .arg(1)
        .cmd("PEXPIRE")
        .arg("taken")
        .arg(60_000)
        .query(&mut node)
        .unwrap();
    let renewals = client.stats().renewals;
    assert!(
        eventually(Duration::from_secs(10), || client.stats().renewals
            >= renewals + 2),
        "{:?}",
        client.stats()
    );
    assert_eq!(five.fields(0, "taken"), [("other:1".to_owned(), 1)]);
    assert!(!guard.is_lost(), "still held on four of five");
    guard.unlock().unwrap();
    assert_eq!(five.fields(0, "taken"), [("other:1".to_owned(), 1)]);
}

#[test]
fn two_racing_clients_never_both_hold_and_one_always_wins() {
    let five = Five::start();
    let clients = [five.client(), five.client()];
    let barrier = Arc::new(Barrier::new(2));
    std::thread::scope(|scope| {
        let outcomes: Vec<_> = clients
            .iter()
            .map(|client| {
                let (lock, barrier) = (client.lock("race"), barrier.clone());
                scope.spawn(move || {
                    (0..50)
                        .map(|_| {
                            barrier.wait();
                            let guard = lock.try_lock().unwrap();
                            let won = guard.is_some();
                            barrier.wait(); // both have tried; now release
                            drop(guard);
                            barrier.wait();
                            won
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let outcomes: Vec<Vec<bool>> = outcomes.into_iter().map(|h| h.join().unwrap()).collect();
        for round in 0..50 {
            let winners = outcomes.iter().filter(|o| o[round]).count();
            assert_eq!(winners, 1, "round {round}: {winners} holders");
        }
    });
}

#[test]
fn acquiring_slower_than_the_lease_takes_nothing_and_leaves_nothing() {
    let five = Five::start();
    let client = five
        .builder()
        .response_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let lock = client.lock("slow");
    let short = Duration::from_millis(50);
    five.servers[4].pause();
    let err = lock.try_lock_with_lease(short).map(drop).unwrap_err();
    assert!(err.is_validity_exhausted(), "{err}");
    assert_eq!(err.lock_name(), Some("slow"));
    for i in 0..4 {
        assert!(!five.exists(i, "slow"), "a key was left on node {i}");
    }
    // The frozen node failed its reconnect within the connect timeout; from then on rounds
    // wait only a moment for it, and a retry within the deadline gets the lock on the others.
    let guard = lock
        .try_lock_with_lease_for(Duration::from_secs(5), short)
        .unwrap()
        .expect("taken on the four live nodes");
    drop(guard);
    five.servers[4].resume();
    // The frozen node ran the queued commands when it woke; whatever they left expires.
    assert!(eventually(Duration::from_secs(10), || !five.exists(4, "slow")));
}

#[test]
fn reentrancy_counts_on_every_node() {
    let five = Five::start();
    let client = five.client();
    let lock = client.lock("nested");
    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    for i in 0..5 {
        let fields = five.fields(i, "nested");
        assert_eq!(fields.len(), 1);
        assert_eq!(fields[0].1, 2, "node {i}");
        assert!(fields[0].0.starts_with(client.id()));
    }
    assert_eq!(lock.hold_count().unwrap(), 2);
    inner.unlock().unwrap();
    assert!((0..5).all(|i| five.fields(i, "nested")[0].1 == 1));
    outer.unlock().unwrap();
    assert!((0..5).all(|i| !five.exists(i, "nested")));
}

#[test]
fn a_waiter_wakes_on_the_unlock_and_valid_until_tracks_the_lease() {
    let five = Five::start();
    let lease = Duration::from_secs(20);
    let holder = five.builder().lease(lease).build().unwrap().lock("waited");
    let waiter = five.builder().lease(lease).build().unwrap().lock("waited");
    let before = Instant::now();
    let guard = holder.lock().unwrap();
    assert!(guard.valid_until() > Instant::now());
    assert!(
        guard.valid_until() < before + lease,
        "less the drift allowance"
    );

    let base = five.servers[0].calls("evalsha");
    let thread = std::thread::spawn(move || {
        let guard = waiter.try_lock_for(Duration::from_secs(15)).unwrap();
        guard.map(|guard| guard.unlock().unwrap()).is_some()
    });
    // Waiting once it has subscribed on every node and made its attempt after that.
    for server in &five.servers {
        await_subscribers(server, &channel("waited"), 1);
    }
    await_calls(&five.servers[0], base + 2);
    guard.unlock().unwrap();
    assert!(
        thread.join().unwrap(),
        "woken before its lease bound of 20 s"
    );
}

#[test]
fn bad_node_lists_are_typed_errors() {
    let five = Five::start();
    let url = five.servers[0].url();
    let err = LockClient::redlock(&[]).build().unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidConfig {
                setting: "urls",
                ..
            }
        ),
        "{err}"
    );
    let err = LockClient::redlock(&[&url, &url]).build().unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidConfig {
                setting: "urls",
                ..
            }
        ),
        "{err}"
    );
    let err = LockClient::redlock(&[&url, "not a url"])
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::InvalidUrl { .. }), "{err}");
    let err = five
        .builder()
        .lease(Duration::from_millis(600))
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
        "a round as long as a renew interval: {err}"
    );
    let single: Vec<_> = five.servers.iter().map(|s| s.client()).collect();
    let combined = LockClient::redlock_from(&single).unwrap();
    assert_eq!(combined.nodes().len(), 5);
    let guard = combined.lock("combined").lock().unwrap();
    assert!((0..5).all(|i| five.exists(i, "combined")));
    guard.unlock().unwrap();
}

#[test]
fn a_re_entry_that_cannot_confirm_its_holds_keeps_them() {
    let five = Five::start();
    let client = five.client();
    let rival = five.client().lock("unsure");
    let lock = client.lock("unsure");
    let outer = lock.lock().unwrap();
    // Two nodes lose the key, two hang: only one still confirms our holds.
    for i in [3, 4] {
        let _: () = redis::cmd("DEL")
            .arg("unsure")
            .query(&mut five.servers[i].conn())
            .unwrap();
    }
    five.servers[1].pause();
    five.servers[2].pause();
    let inner = lock.try_lock_for(Duration::from_secs(5));
    five.servers[1].resume();
    five.servers[2].resume();
    assert!(
        !outer.is_lost(),
        "thrown away although the hanging nodes still had it"
    );
    // Either the re-entry was confirmed on a quorum (the nodes that had lost the key got the
    // holds back), or it gave up for want of one; never "not held", never busy.
    match inner {
        Ok(Some(inner)) => released_on_a_quorum(inner.unlock()),
        Err(err) if err.is_no_quorum() => {}
        other => panic!("re-entry: {other:?}"),
    }
    assert!(
        rival.try_lock().unwrap().is_none(),
        "a rival got in while the outer hold lasts"
    );
    released_on_a_quorum(outer.unlock());
    assert!(!lock.is_locked().unwrap());
}

/// A release that reached a quorum. A node just thawed may not be told at once: its pool
/// found it unreachable while it was frozen, and gives it only a moment until it reconnects.
fn released_on_a_quorum(result: redmutex::Result<()>) {
    match result {
        Ok(()) => {}
        Err(Error::PartialRelease { released, .. }) if released >= 3 => {}
        other => panic!("release: {other:?}"),
    }
}

#[test]
fn a_release_that_cannot_tell_does_not_call_the_hold_lost() {
    let five = Five::start();
    let lock = five.client().lock("told");
    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    let _: () = redis::cmd("DEL")
        .arg("told")
        .query(&mut five.servers[4].conn())
        .unwrap();
    five.servers[2].pause();
    five.servers[3].pause();
    let result = inner.unlock();
    five.servers[2].resume();
    five.servers[3].resume();
    let err = result.unwrap_err();
    assert!(
        err.is_no_quorum(),
        "released on 2, not ours on 1, 2 silent: {err}"
    );
    assert!(!outer.is_lost());
    assert_eq!(five.fields(0, "told")[0].1, 1);
}

#[test]
fn a_renewal_never_puts_back_what_a_release_deleted() {
    let servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls: Vec<String> = servers.iter().map(Server::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    // Renewals every 3 ms, so that many of them meet a release on the way.
    let client = LockClient::redlock(&urls)
        .lease(Duration::from_secs(5))
        .renew_interval(Duration::from_millis(3))
        .response_timeout(Duration::from_millis(2))
        .build()
        .unwrap();
    let lock = client.lock("raced");
    let mut conns: Vec<_> = servers.iter().map(Server::conn).collect();
    let exists = |conn: &mut redis::Connection| -> bool {
        redis::cmd("EXISTS").arg("raced").query(conn).unwrap()
    };
    const ROUNDS: u64 = 200;
    let (mut checked, mut skipped, mut left_behind) = (0, 0, 0);
    while checked < ROUNDS {
        assert!(
            skipped <= 4 * ROUNDS,
            "only {checked} of {} rounds could be checked",
            checked + skipped
        );
        let round = checked + skipped;
        // A node too slow for the 2 ms timeout fails the acquire or the release. Such a
        // round proves nothing: whatever it left on that node expires within the 5 s lease,
        // and the next round starts once it has.
        let released = lock.lock().map(|guard| {
            std::thread::sleep(Duration::from_micros(2_000 + round * 37 % 3_000));
            guard.unlock()
        });
        if !matches!(released, Ok(Ok(()))) {
            skipped += 1;
            assert!(
                eventually(Duration::from_secs(10), || !conns.iter_mut().any(exists)),
                "a failed round left a key beyond its lease"
            );
            continue;
        }
        checked += 1;
        for conn in &mut conns {
            if exists(conn) {
                left_behind += 1;
                let _: () = redis::cmd("DEL").arg("raced").query(conn).unwrap();
            }
        }
    }
    assert_eq!(left_behind, 0, "keys put back after their release");
}

/// Holds `key` on nodes 1 to 3 for another owner, the way kind `string` or `hash` stores
/// it, for a minute: a Redlock attempt then gets nodes 0 and 4 only, and must give them back.
fn held_elsewhere_on_a_majority(five: &Five, key: &str, string: bool) {
    for server in &five.servers[1..4] {
        let mut conn = server.conn();
        let mut cmd = match string {
            true => redis::cmd("SET"),
            false => redis::cmd("HSET"),
        };
        match string {
            true => cmd.arg(key).arg("another token"),
            false => cmd.arg(key).arg("another:1").arg(1),
        };
        let _: () = cmd.query(&mut conn).unwrap();
        let _: () = redis::cmd("PEXPIRE")
            .arg(key)
            .arg(60_000)
            .query(&mut conn)
            .unwrap();
    }
}

#[test]
fn a_failed_attempt_gives_back_without_waking_anyone() {
    let five = Five::start();
    let client = five.client();
    for (kind, string) in [("reentrant", false), ("token", true)] {
        let name = format!("split:{kind}");
        held_elsewhere_on_a_majority(&five, &name, string);
        // A listener on node 0, where the attempt is granted and given back.
        let mut listener = five.servers[0].conn();
        let mut pubsub = listener.as_pubsub();
        pubsub.subscribe(channel(&name)).unwrap();

        let taken = match string {
            true => client.token_lock(&name).try_lock().unwrap().is_some(),
            false => client.lock(&name).try_lock().unwrap().is_some(),
        };
        assert!(!taken, "{kind}: taken on a minority");
        assert!(!five.exists(0, &name), "{kind}: not given back on node 0");
        assert!(!five.exists(4, &name), "{kind}: not given back on node 4");

        // A message of our own marks the end: anything before it came from the give-back.
        let _: () = redis::cmd("PUBLISH")
            .arg(channel(&name))
            .arg("marker")
            .query(&mut five.servers[0].conn())
            .unwrap();
        let first: String = pubsub.get_message().unwrap().get_payload().unwrap();
        assert_eq!(first, "marker", "{kind}: the give-back published");
    }
}

#[test]
fn a_waiter_gets_in_after_a_lock_freed_without_a_message() {
    let five = Five::start();
    let name = "freed:silently";
    held_elsewhere_on_a_majority(&five, name, false);
    let waiter = five.client().lock(name);
    let (taken, got) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let guard = waiter.try_lock_for(Duration::from_secs(120)).unwrap();
        let _ = taken.send(guard.is_some());
    });
    for server in &five.servers {
        await_subscribers(server, &channel(name), 1);
    }
    // Freed as a failed attempt's give-back frees it: no message, a minute of lease left.
    for server in &five.servers {
        let _: () = redis::cmd("DEL")
            .arg(name)
            .query(&mut server.conn())
            .unwrap();
    }
    // Half the lease it would otherwise sleep on, and a hundred times the retry cap.
    let woken = got.recv_timeout(Duration::from_secs(30));
    assert_eq!(
        woken,
        Ok(true),
        "the waiter slept on a lease that was no longer there"
    );
}

#[test]
fn a_token_acquire_whose_replies_were_lost_takes_the_lock() {
    let servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let proxies: Vec<support::Proxy> = servers
        .iter()
        .map(|server| support::Proxy::start(server.port()))
        .collect();
    let urls: Vec<String> = proxies.iter().map(support::Proxy::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let client = LockClient::redlock(&urls).build().unwrap();
    let lock = client.token_lock("t");
    // Every node runs the SET and loses its reply; each retry finds the key taken.
    for proxy in &proxies {
        proxy.cut_on_reply_to(b"\r\nNX\r\n");
    }
    let guard = lock.try_lock().unwrap();
    assert!(proxies.iter().all(support::Proxy::trap_sprung));
    let guard = guard.expect("blocked by our own token");
    for server in &servers {
        let value: String = redis::cmd("GET")
            .arg("t")
            .query(&mut server.conn())
            .unwrap();
        assert_eq!(value, guard.token());
    }
    guard.unlock().unwrap();
    assert!(servers.iter().all(|server| !server.exists("t")));
}
