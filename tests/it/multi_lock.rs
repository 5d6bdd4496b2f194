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
