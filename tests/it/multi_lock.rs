//! The multi-lock: several locks of any kinds taken all or none, never holding one while
//! waiting for another, one guard for all.

use crate::support;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Duration;

use redmutex::{Cancel, Health, MultiLock};
use support::{FOREIGN, Server, await_subscribers, channel, foreign_hold, hash};

const NO_HANG: Duration = Duration::from_secs(60);

/// The owner fields holding `key`, with their counts.
fn holders(server: &Server, key: &str) -> Vec<(String, i64)> {
    hash(&mut server.conn(), key)
}

#[test]
fn a_busy_member_leaves_the_others_untaken_and_a_free_set_is_taken_whole() {
    let server = Server::start();
    let client = server.client();
    let multi = client.multi_lock(["m1:a", "m1:b", "m1:c"]);
    foreign_hold(&mut server.conn(), "m1:b", 60_000);

    assert!(multi.try_lock().unwrap().is_none());
    assert!(!server.exists("m1:a") && !server.exists("m1:c"));
    let waited = multi.try_lock_for(Duration::from_millis(300)).unwrap();
    assert!(waited.is_none(), "b is held for a minute");
    assert!(!server.exists("m1:a") && !server.exists("m1:c"));
    assert_eq!(holders(&server, "m1:b"), vec![(FOREIGN.to_owned(), 1)]);

    let _: i64 = redis::cmd("DEL")
        .arg("m1:b")
        .query(&mut server.conn())
        .unwrap();
    let guard = multi.try_lock().unwrap().expect("all free");
    let owner = holders(&server, "m1:a");
    assert_eq!(owner.len(), 1);
    assert_eq!(owner[0].1, 1);
    for key in ["m1:b", "m1:c"] {
        assert_eq!(
            holders(&server, key),
            owner,
            "{key}: one owner, one hold each"
        );
    }
    assert_eq!(guard.health(), Health::Held);
    assert!(!guard.is_lost());
    guard.unlock().unwrap();
    for key in ["m1:a", "m1:b", "m1:c"] {
        assert!(!server.exists(key), "{key} left after the unlock");
    }
}

#[test]
fn a_waiter_holds_nothing_while_it_waits_and_takes_all_when_the_busy_one_is_released() {
    let server = Server::start();
    let (ours, other) = (server.client(), server.client());
    let held = other.lock("m2:b").lock().unwrap();
    let multi = ours.multi_lock(["m2:a", "m2:b", "m2:c"]);
    let (tx, rx) = mpsc::channel();
    let (done, hang_up) = mpsc::channel::<()>();
    thread::spawn(move || {
        let guard = multi.lock().unwrap();
        tx.send(()).unwrap();
        // Held until the test hangs up.
        let _ = hang_up.recv();
        drop(guard);
    });
    // Waiting on b's channel, with a and c given back.
    await_subscribers(&server, &channel("m2:b"), 1);
    assert!(!server.exists("m2:a") && !server.exists("m2:c"));
    assert!(
        other.lock("m2:a").try_lock().unwrap().is_some(),
        "a is free"
    );
    held.unlock().unwrap();
    rx.recv_timeout(NO_HANG).expect("the waiter took all three");
    for key in ["m2:a", "m2:b", "m2:c"] {
        assert_eq!(holders(&server, key).len(), 1, "{key}");
    }
    assert!(other.lock("m2:c").try_lock().unwrap().is_none());
    drop(done);
}

#[test]
fn multi_locks_over_the_same_locks_in_opposite_orders_never_deadlock_nor_overlap() {
    let server = Server::start();
    let names = ["m3:a", "m3:b", "m3:c"];
    let busy: Arc<[AtomicBool; 3]> = Arc::new(Default::default());
    let rounds = Arc::new(AtomicU32::new(0));
    let orders: [&[usize]; 4] = [&[0, 1, 2], &[2, 1, 0], &[1, 0], &[2]];
    let threads: Vec<_> = orders
        .iter()
        .map(|order| {
            let client = server.client();
            let members: Vec<usize> = order.to_vec();
            let multi = client.multi_lock(members.iter().map(|&i| names[i]));
            let (busy, rounds) = (busy.clone(), rounds.clone());
            thread::spawn(move || {
                for _ in 0..15 {
                    let guard = multi
                        .try_lock_for(NO_HANG)
                        .unwrap()
                        .expect("not a deadlock");
                    for &i in &members {
                        assert!(!busy[i].swap(true, Ordering::SeqCst), "two holders of {i}");
                    }
                    thread::yield_now();
                    for &i in &members {
                        busy[i].store(false, Ordering::SeqCst);
                    }
                    guard.unlock().unwrap();
                    rounds.fetch_add(1, Ordering::SeqCst);
                }
                drop(client);
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("a holder saw another in its section");
    }
    assert_eq!(rounds.load(Ordering::SeqCst), 60);
    for name in names {
        assert!(!server.exists(name), "{name} left");
    }
}

#[test]
fn members_of_other_kinds_are_taken_with_their_own_layouts() {
    let server = Server::start();
    let (ours, other) = (server.client(), server.client());
    let rw = ours.read_write_lock("m4:rw");
    let multi = MultiLock::new()
        .and(ours.fair_lock("m4:fair"))
        .and(rw.write().clone())
        .and(ours.token_lock("m4:token"))
        .and(ours.fenced_lock("m4:fenced"));
    let reading = other.read_write_lock("m4:rw").read().lock().unwrap();
    assert!(
        multi.try_lock().unwrap().is_none(),
        "a reader holds the rw lock"
    );
    for key in ["m4:fair", "m4:token", "m4:fenced"] {
        assert!(
            !server.exists(key),
            "{key} taken while the write side was busy"
        );
    }
    drop(reading);
    let guard = multi.try_lock().unwrap().expect("all free");
    let mode: Option<String> = redis::cmd("HGET")
        .arg("m4:rw")
        .arg("mode")
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(mode.as_deref(), Some("write"));
    let token_type: String = redis::cmd("TYPE")
        .arg("m4:token")
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(token_type, "string");
    assert!(other.fair_lock("m4:fair").try_lock().unwrap().is_none());
    assert!(other.token_lock("m4:token").try_lock().unwrap().is_none());
    drop(guard);
    for key in ["m4:fair", "m4:rw", "m4:token", "m4:fenced"] {
        assert!(!server.exists(key), "{key} left after the drop");
    }
}

#[test]
fn no_members_a_lock_named_twice_and_bad_names_are_refused_before_anything_is_sent() {
    let server = Server::start();
    let client = server.client();
    let rw = client.read_write_lock("m5:rw");
    let scripts = || server.calls("eval") + server.calls("evalsha");
    let before = scripts();
    let cases: [(&str, MultiLock); 4] = [
        ("none", MultiLock::new()),
        ("twice", client.multi_lock(["m5:a", "m5:b", "m5:a"])),
        (
            "both sides",
            MultiLock::new()
                .and(rw.read().clone())
                .and(rw.write().clone()),
        ),
        ("empty name", client.multi_lock(["m5:a", ""])),
    ];
    for (case, multi) in cases {
        let err = multi.try_lock().expect_err(case);
        assert!(err.is_invalid_input(), "{case}: {err}");
        let err = multi.lock().expect_err(case);
        assert!(err.is_invalid_input(), "{case}: {err}");
    }
    let err = client
        .multi_lock(["m5:a", "m5:b"])
        .try_lock_with_lease(Duration::ZERO)
        .expect_err("a zero lease");
    assert!(err.is_invalid_input(), "{err}");
    assert_eq!(scripts(), before, "a refused call sent a script");
    assert!(!server.exists("m5:a") && !server.exists("m5:b"));
    let twice = client.multi_lock(["m5:a", "m5:a"]).try_lock().unwrap_err();
    assert!(twice.to_string().contains("multi-lock"), "{twice}");
    assert!(twice.to_string().contains("twice"), "{twice}");
}

#[test]
fn a_thread_that_holds_a_member_takes_it_again_and_keeps_its_own_hold() {
    let server = Server::start();
    let client = server.client();
    let mine = client.lock("m6:a");
    let outer = mine.lock().unwrap();
    let guard = client.multi_lock(["m6:a", "m6:b"]).lock().unwrap();
    assert_eq!(mine.hold_count().unwrap(), 2);
    guard.unlock().unwrap();
    assert_eq!(mine.hold_count().unwrap(), 1);
    assert!(!server.exists("m6:b"));
    outer.unlock().unwrap();
    assert!(!server.exists("m6:a"));
}

/// A thread that holds one member, whose key is then deleted from outside, is told the hold
/// was lost, as a re-entry of that lock alone would tell it, and leaves nothing held: the
/// fresh hold the attempt took goes back whole, not down to the count the thread believed
/// it had, and the other member goes back too.
#[test]
fn a_member_whose_earlier_holds_are_gone_is_reported_lost_and_left_free() {
    let server = Server::start();
    let client = server.client();
    let mine = client.lock("m13:a");
    let outer = mine.lock().unwrap();
    let () = redis::cmd("DEL")
        .arg("m13:a")
        .query(&mut server.conn())
        .unwrap();
    let err = client.multi_lock(["m13:a", "m13:b"]).lock().unwrap_err();
    assert!(err.is_lost(), "{err:#}");
    assert!(!server.exists("m13:a"), "{:?}", holders(&server, "m13:a"));
    assert!(!server.exists("m13:b"), "{:?}", holders(&server, "m13:b"));
    assert!(outer.is_lost());
    assert!(outer.unlock().unwrap_err().is_lost());
    // The thread starts afresh.
    let guard = client.multi_lock(["m13:a", "m13:b"]).lock().unwrap();
    assert_eq!(mine.hold_count().unwrap(), 1);
    guard.unlock().unwrap();
}

#[test]
fn an_explicit_lease_is_every_member_s_and_the_watchdog_renews_every_member() {
    let server = Server::start();
    let client = server.client();
    let multi = client.multi_lock(["m7:a", "m7:b"]);
    let guard = multi.lock_with_lease(Duration::from_secs(5)).unwrap();
    for key in ["m7:a", "m7:b"] {
        let ttl: i64 = redis::cmd("PTTL")
            .arg(key)
            .query(&mut server.conn())
            .unwrap();
        assert!(ttl > 0 && ttl <= 5_000, "{key}: {ttl}");
    }
    drop(guard);

    // A client whose lease is short: without renewals the keys would be gone after it.
    let lease = support::SHORT_LEASE;
    let short = server.builder_with_lease(lease).build().unwrap();
    let taken = std::time::Instant::now();
    let guard = short.multi_lock(["m7:a", "m7:b"]).lock().unwrap();
    let kept = support::eventually(NO_HANG, || {
        taken.elapsed() > 2 * lease && server.exists("m7:a") && server.exists("m7:b")
    });
    assert!(kept, "a member was not renewed");
    assert!(!guard.is_lost());
    guard.unlock().unwrap();
}

#[test]
fn a_cancelled_or_timed_out_wait_ends_holding_nothing() {
    let server = Server::start();
    let (ours, other) = (server.client(), server.client());
    let _held = other.lock("m8:b").lock().unwrap();
    let stop = Cancel::new();
    let multi = ours.multi_lock(["m8:a", "m8:b"]).with_cancel(&stop);
    let waiter = thread::spawn(move || multi.lock().map(|_| ()));
    await_subscribers(&server, &channel("m8:b"), 1);
    stop.cancel();
    let err = waiter.join().unwrap().expect_err("cancelled");
    assert!(err.is_cancelled(), "{err}");
    assert!(!server.exists("m8:a"));

    let patient = server
        .builder()
        .max_wait(Duration::from_millis(200))
        .build()
        .unwrap();
    let err = patient.multi_lock(["m8:a", "m8:b"]).lock().unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert!(err.to_string().contains("multi-lock"), "{err}");
    assert!(!server.exists("m8:a"));
}

fn multi_acquire_sha() -> String {
    redis::Script::new(include_str!("../../src/kinds/multi/multi_acquire.lua"))
        .get_hash()
        .to_owned()
}

#[test]
fn reentrant_members_of_one_server_are_taken_by_one_script_all_or_none() {
    let server = Server::start();
    let client = server.client();
    let names = ["m9:a", "m9:b", "m9:c"];
    let multi = client.multi_lock(names);
    let scripts = || server.calls("evalsha") + server.calls("eval");
    let before = scripts();
    let guard = multi.try_lock().unwrap().expect("free");
    assert_eq!(scripts(), before + 1, "one script took all three");
    drop(guard);

    // A SET-NX lock of another library on the last: busy, and nothing written.
    let _: () = redis::cmd("SET")
        .arg("m9:c")
        .arg("token")
        .arg("PX")
        .arg(60_000)
        .query(&mut server.conn())
        .unwrap();
    let before = scripts();
    assert!(multi.try_lock().unwrap().is_none());
    assert_eq!(scripts(), before + 1, "one script found it busy");
    assert!(!server.exists("m9:a") && !server.exists("m9:b"));

    // Data of another type: a typed error naming that key, and nothing written.
    let _: () = redis::cmd("DEL")
        .arg("m9:c")
        .query(&mut server.conn())
        .unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg("m9:b")
        .arg("user data")
        .query(&mut server.conn())
        .unwrap();
    let err = multi.try_lock().unwrap_err();
    assert!(err.is_wrong_kind(), "{err}");
    assert_eq!(err.lock_name(), Some("m9:b"));
    assert!(!server.exists("m9:a") && !server.exists("m9:c"));
    let kept: Vec<String> = redis::cmd("LRANGE")
        .arg("m9:b")
        .arg(0)
        .arg(-1)
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(kept, vec!["user data".to_owned()]);
}

#[test]
fn a_lost_reply_to_the_one_script_leaves_no_hold_without_a_guard() {
    let server = Server::start();
    let proxy = support::Proxy::start(server.port());
    let client = redmutex::LockClient::open(&proxy.url()).unwrap();
    let multi = client.multi_lock(["m10:a", "m10:b"]);
    proxy.cut_on_reply_to(multi_acquire_sha().as_bytes());
    let result = multi.try_lock();
    assert!(proxy.trap_sprung(), "the reply was lost");
    match result {
        // Sent again on a new connection: the script sets each count, so one hold each.
        Ok(Some(guard)) => {
            for key in ["m10:a", "m10:b"] {
                let fields = holders(&server, key);
                assert_eq!(fields.len(), 1, "{key}: {fields:?}");
                assert_eq!(fields[0].1, 1, "{key}: one hold, not two");
            }
            guard.unlock().unwrap();
            assert!(!server.exists("m10:a") && !server.exists("m10:b"));
        }
        Ok(None) => panic!("nobody else holds them"),
        // Reported: whatever the script took is given back.
        Err(err) => {
            assert!(err.is_outcome_unknown() || err.is_connection(), "{err}");
            let gone = support::eventually(NO_HANG, || {
                !server.exists("m10:a") && !server.exists("m10:b")
            });
            assert!(gone, "holds left without a guard");
        }
    }
    assert!(multi.try_lock().unwrap().is_some());
}

#[test]
fn on_a_cluster_each_slot_s_locks_go_by_one_script_even_while_the_slot_migrates() {
    let cluster = support::Cluster::start();
    let (ours, theirs) = (cluster.client(), cluster.client());
    let names = ["{mc}:a", "{mc}:b", "mc-other:1", "mc-other:2"];
    let multi = ours.multi_lock(names);
    let taken_by_us = |names: &[&str]| {
        names
            .iter()
            .all(|name| theirs.lock(*name).try_lock().unwrap().is_none())
    };
    let guard = multi.try_lock().unwrap().expect("free");
    assert!(taken_by_us(&names));
    guard.unlock().unwrap();
    assert!(
        names
            .iter()
            .all(|name| !cluster.owner_of(name).exists(name))
    );

    // The tagged slot starts to move: a script over its keys, all absent, is turned away
    // until it settles, and the members are taken one by one meanwhile.
    let slot = cluster.slot("{mc}:a");
    let from = cluster.owner(slot).port();
    let to = (cluster.primaries().into_iter())
        .find(|server| server.port() != from)
        .unwrap();
    let migration = cluster.begin_migration(slot, to);
    let guard = multi
        .try_lock_for(NO_HANG)
        .unwrap()
        .expect("taken while it moves");
    assert!(taken_by_us(&names));
    // A release declares its latch as a key, absent until written: while the slot moves it
    // is turned away too, so the holds are given back once it has moved.
    migration.finish();
    guard.unlock().unwrap();
    let guard = multi.try_lock().unwrap().expect("free after the move");
    assert!(taken_by_us(&names));
    drop(guard);
}

/// On a server answering every reply 600 ms late (response timeout 1 s), a
/// `try_lock_for(100 ms)` over 12 fair locks stops trying members a response timeout past
/// its deadline and gives back what it took (2.9 s measured), instead of trying every
/// member with a fresh bound of its own (7.2 s measured); it leaves nothing held. The bound
/// checked lies between the two.
#[test]
fn a_try_over_many_members_on_a_slow_server_keeps_the_caller_s_deadline() {
    let server = Server::start();
    let proxy = support::Proxy::start(server.port());
    let client = redmutex::LockClient::builder(&proxy.url())
        .response_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let multi = (0..12).fold(MultiLock::new(), |multi, i| {
        multi.and(client.fair_lock(format!("m14:{i:02}")))
    });
    // Every script loaded, connections open: only the replies are slow.
    drop(multi.try_lock().unwrap().expect("free"));
    proxy.delay_replies(Duration::from_millis(600));
    let started = std::time::Instant::now();
    let result = multi.try_lock_for(Duration::from_millis(100));
    let took = started.elapsed();
    proxy.delay_replies(Duration::ZERO);
    assert!(
        took < Duration::from_millis(4500),
        "took {took:?}: {result:?}"
    );
    let free = support::eventually(NO_HANG, || {
        (0..12).all(|i| !server.exists(&format!("m14:{i:02}")))
    });
    assert!(free, "a member was left held");
    assert!(multi.try_lock().unwrap().is_some());
}

/// A multi-lock attempt over 6 reentrant members (one script) on a server that stops
/// answering: what the script may have taken is given back for all six in one round, so the
/// call returns within about two response timeouts (the attempt's and the give-back's), not
/// one more per member. The bound checked is below what one round per member took.
#[test]
fn a_lost_batch_is_given_back_for_every_member_in_one_round() {
    let server = Server::start();
    let timeout = Duration::from_secs(2);
    let client = redmutex::LockClient::builder(&server.url())
        .response_timeout(timeout)
        .build()
        .unwrap();
    let multi = client.multi_lock((0..6).map(|i| format!("m15:{i}")));
    drop(multi.try_lock().unwrap().expect("free"));
    server.pause();
    let started = std::time::Instant::now();
    let result = multi.try_lock();
    let took = started.elapsed();
    server.resume();
    let err = result.expect_err("no reply");
    assert!(err.is_outcome_unknown() || err.is_connection(), "{err:#}");
    assert!(took < timeout * 4, "took {took:?}");
    let free = support::eventually(NO_HANG, || {
        (0..6).all(|i| !server.exists(&format!("m15:{i}")))
    });
    assert!(free, "a member was left held");
}

#[test]
fn on_redlock_each_member_is_taken_on_a_quorum_by_its_own_attempt() {
    let servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls: Vec<String> = servers.iter().map(Server::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let (ours, theirs) = (
        redmutex::LockClient::redlock(&urls).build().unwrap(),
        redmutex::LockClient::redlock(&urls).build().unwrap(),
    );
    let names = ["m11:a", "m11:b"];
    let guard = ours.multi_lock(names).try_lock().unwrap().expect("free");
    for server in &servers {
        for name in names {
            assert_eq!(holders(server, name).len(), 1, "{name} on every node");
        }
    }
    assert!(theirs.multi_lock(["m11:b"]).try_lock().unwrap().is_none());
    assert!(theirs.lock("m11:a").try_lock().unwrap().is_none());
    guard.unlock().unwrap();
    for server in &servers {
        assert!(names.iter().all(|name| !server.exists(name)));
    }
    assert!(theirs.multi_lock(names).try_lock().unwrap().is_some());
}
