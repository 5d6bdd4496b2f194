//! The fair lock against real Redisson (3.52.0 and 4.7.0, `RFairLock`): Java and Rust
//! waiters share one queue and are served in the order they joined it, through the crash of
//! a waiter or a holder on either side, forced unlocks from either side, and re-entry.

use crate::support;

use std::thread::Scope;
use std::time::Duration;

use redmutex::{Fair, Lock, LockClient};
use serde_json::{Value, json};
use support::java::{Jvm, Redisson, Thread as JavaThread};
use support::toolchain::{Toolchain, skip_without};
use support::{SHORT_LEASE, Server, eventually, spawn_worker};

const NAME: &str = "jfair";
const QUEUE: &str = "redisson_lock_queue:{jfair}";
const TIMEOUTS: &str = "redisson_lock_timeout:{jfair}";
/// The waiters' own channels, `redisson_lock__channel:{jfair}:<owner>`.
const CHANNELS: &str = "redisson_lock__channel:{jfair}:*";
/// Where each holder writes its name once it has the lock, before it releases it.
const ORDER: &str = "order";
const NO_HANG: Duration = Duration::from_secs(60);
/// A Java waiter's `tryLock` wait, in milliseconds: the place Redisson gives it in the queue.
const JAVA_WAIT: u64 = 30_000;
/// The watchdog lease of a Java holder that is killed.
const JAVA_LEASE: Duration = Duration::from_secs(5);

const URL_VAR: &str = "REDMUTEX_TEST_URL";
const LEASE_VAR: &str = "REDMUTEX_TEST_LEASE_MS";
const QUEUE_WAIT_VAR: &str = "REDMUTEX_TEST_QUEUE_WAIT_MS";

fn queued(server: &Server) -> usize {
    redis::cmd("LLEN")
        .arg(QUEUE)
        .query(&mut server.conn())
        .unwrap()
}

/// Waits until `n` waiters are in the queue, and, with `subscribed`, as many listen on
/// their channels.
fn await_queued(server: &Server, n: usize, subscribed: bool) {
    assert!(
        eventually(NO_HANG, || queued(server) == n
            && (!subscribed || server.channels(CHANNELS) == n)),
        "expected {n} waiters, saw {} queued and {} subscribed",
        queued(server),
        server.channels(CHANNELS)
    );
}

/// The waiter at `index` of the queue.
fn in_queue(server: &Server, index: isize) -> String {
    redis::cmd("LINDEX")
        .arg(QUEUE)
        .arg(index)
        .query(&mut server.conn())
        .unwrap()
}

fn record(server: &Server, who: &str) {
    let _: () = redis::cmd("RPUSH")
        .arg(ORDER)
        .arg(who)
        .query(&mut server.conn())
        .unwrap();
}

fn order(server: &Server) -> Vec<String> {
    redis::cmd("LRANGE")
        .arg(ORDER)
        .arg(0)
        .arg(-1)
        .query(&mut server.conn())
        .unwrap()
}

/// Nothing of the lock is left: no hold, no waiter, no place.
fn assert_all_gone(server: &Server) {
    assert_eq!(queued(server), 0, "waiters left in the queue");
    assert!(!server.exists(TIMEOUTS), "places left behind");
    assert!(!server.exists(NAME), "a hold left behind");
}

/// The Java thread `thread` queues now: with `tryLock` and [`JAVA_WAIT`], or with `lock`
/// (Redisson's own place of 5 minutes) when `wait` is `None`. Once it has the lock, it
/// records `who` and releases.
fn java_in_turn<'scope>(
    scope: &'scope Scope<'scope, '_>,
    server: &'scope Server,
    thread: &'scope JavaThread<'_, '_>,
    who: &'static str,
    wait: Option<u64>,
) {
    let (pending, taken) = match wait {
        Some(wait) => (
            thread.send("tryLock", "fair", NAME, json!({"wait": wait})),
            json!(true),
        ),
        None => (thread.send("lock", "fair", NAME, Value::Null), Value::Null),
    };
    scope.spawn(move || {
        assert_eq!(pending.wait(), Ok(taken), "{who} did not take the lock");
        record(server, who);
        thread.ok("unlock", "fair", NAME, Value::Null);
    });
}

/// A waiter of ours on a thread of the scope, queued now: once it has the lock, it records
/// `who` and releases.
fn ours_in_turn<'scope>(
    scope: &'scope Scope<'scope, '_>,
    server: &'scope Server,
    lock: Lock<Fair>,
    who: &'static str,
) {
    scope.spawn(move || {
        let guard = lock.try_lock_for(NO_HANG).unwrap();
        let guard = guard.unwrap_or_else(|| panic!("{who} did not take the lock"));
        record(server, who);
        guard.unlock().unwrap();
    });
}

/// A waiter of ours on a thread of its own, queued now: sends whether it took the lock.
fn ours_waiting(lock: Lock<Fair>, wait: Duration) -> std::sync::mpsc::Receiver<bool> {
    let (taken, got) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let guard = lock.try_lock_for(wait).unwrap();
        let _ = taken.send(guard.map(|guard| guard.unlock().unwrap()).is_some());
    });
    got
}

/// A client of ours whose waiters come back on their own almost never: one of them that
/// returns in time was woken by a message. With `handoff`, its releases grant the lock
/// to a waiter of ours at the head.
fn sleepy(server: &Server, handoff: bool) -> LockClient {
    server
        .builder()
        .retry_base(Duration::from_secs(300))
        .retry_cap(Duration::from_secs(600))
        .fair_queue_wait(Duration::from_secs(3600))
        .direct_handoff(handoff)
        .build()
        .unwrap()
}

/// A process of ours (the worker below) that takes the fair lock, or waits for it, with
/// watchdog lease `lease` and queue wait `queue_wait`, and is then killed by the test.
fn our_process(server: &Server, lease: Duration, queue_wait: Duration) -> std::process::Child {
    spawn_worker(
        "java_fair::fair_worker",
        &[
            (URL_VAR, server.url()),
            (LEASE_VAR, lease.as_millis().to_string()),
            (QUEUE_WAIT_VAR, queue_wait.as_millis().to_string()),
        ],
    )
}

/// The process of [`our_process`]: takes the lock (or waits in its queue) and holds it
/// until killed.
#[test]
#[ignore = "run as a child process by the crash tests of java_fair"]
fn fair_worker() {
    let url = std::env::var(URL_VAR).expect("started by the parent test");
    let ms = |var| Duration::from_millis(std::env::var(var).unwrap().parse().unwrap());
    let lease = ms(LEASE_VAR);
    let client = LockClient::builder(&url)
        .lease(lease)
        .response_timeout(support::response_timeout_for(lease))
        .fair_queue_wait(ms(QUEUE_WAIT_VAR))
        .build()
        .unwrap();
    let _guard = client.fair_lock(NAME).lock().unwrap();
    std::thread::sleep(NO_HANG);
}

#[test]
fn a_mixed_queue_is_served_in_the_order_it_joined_with_and_without_direct_handoff() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    for version in Redisson::ALL {
        for handoff in [true, false] {
            let server = Server::start();
            let java = Jvm::shared(version).connect(&server.url(), None);
            let (j1, j2) = (java.thread("j1"), java.thread("j2"));
            // Each waiter of ours comes back only when woken: the grant message o3 gets
            // cannot cross an attempt of its own.
            let ours = sleepy(&server, handoff);
            let holder = ours.fair_lock(NAME).lock().unwrap();
            std::thread::scope(|scope| {
                // Java, ours, Java, ours, and one more of ours, so that one release of ours
                // has a waiter of ours at the head.
                java_in_turn(scope, &server, &j1, "j1", Some(JAVA_WAIT));
                await_queued(&server, 1, true);
                ours_in_turn(scope, &server, ours.fair_lock(NAME), "o1");
                await_queued(&server, 2, true);
                java_in_turn(scope, &server, &j2, "j2", Some(JAVA_WAIT));
                await_queued(&server, 3, true);
                ours_in_turn(scope, &server, ours.fair_lock(NAME), "o2");
                await_queued(&server, 4, true);
                ours_in_turn(scope, &server, ours.fair_lock(NAME), "o3");
                await_queued(&server, 5, true);
                holder.unlock().unwrap();
            });
            assert_eq!(
                order(&server),
                ["j1", "o1", "j2", "o2", "o3"],
                "Redisson {version:?}, direct hand-off {handoff}"
            );
            // Only o2's release found a waiter of ours at the head.
            assert_eq!(
                ours.stats().grants_taken,
                u64::from(handoff),
                "Redisson {version:?}, direct hand-off {handoff}"
            );
            assert_all_gone(&server);
        }
    }
}

#[test]
fn a_killed_java_waiter_in_the_middle_lets_the_waiters_behind_it_in_in_order() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    for version in Redisson::ALL {
        let server = Server::start();
        let doomed_jvm = Jvm::private(version);
        let doomed = doomed_jvm.connect(&server.url(), None);
        let d = doomed.thread("d");
        let doomed_owner = d.owner();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let (j1, j2) = (java.thread("j1"), java.thread("j2"));
        let ours = server.client();
        // A lease of a second or two: the place Redisson gives the doomed waiter is what was
        // left of it when the waiter queued, plus the waiter's wait.
        let holder_client = server.builder_with_lease(SHORT_LEASE).build().unwrap();
        let holder = holder_client.fair_lock(NAME).lock().unwrap();
        std::thread::scope(|scope| {
            java_in_turn(scope, &server, &j1, "j1", Some(JAVA_WAIT));
            await_queued(&server, 1, true);
            let _never = d.send("tryLock", "fair", NAME, json!({"wait": 3_000}));
            await_queued(&server, 2, false);
            doomed_jvm.kill();
            ours_in_turn(scope, &server, ours.fair_lock(NAME), "o1");
            await_queued(&server, 3, false);
            java_in_turn(scope, &server, &j2, "j2", Some(JAVA_WAIT));
            await_queued(&server, 4, false);
            assert_eq!(in_queue(&server, 1), doomed_owner);
            holder.unlock().unwrap();
        });
        assert_eq!(order(&server), ["j1", "o1", "j2"], "Redisson {version:?}");
        assert_all_gone(&server);
    }
}

#[test]
fn a_killed_waiter_of_ours_in_the_middle_lets_the_java_waiters_behind_it_in() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    for version in Redisson::ALL {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let (j0, j1) = (java.thread("j0"), java.thread("j1"));
        let ours = server.client();
        let holder = ours.fair_lock(NAME).lock().unwrap();
        std::thread::scope(|scope| {
            // Ahead of the doomed waiter, a Java waiter with Redisson's own place (5
            // minutes), all of which it takes off the places behind it when it acquires.
            // j1, queued behind the doomed waiter, sleeps until the place the doomed one
            // had then (minutes: it keeps a reserve for j0) or the lease the lock had at
            // j1's last attempt (30 s, ours or j0's), unless it is woken: j0's release
            // wakes the doomed waiter (its place of 5 s has not passed by then), so only
            // the client that drops the doomed waiter can tell j1 its turn has come.
            java_in_turn(scope, &server, &j0, "j0", None);
            await_queued(&server, 1, true);
            let mut doomed = our_process(&server, Duration::from_secs(30), Duration::from_secs(5));
            await_queued(&server, 2, true);
            doomed.kill().unwrap();
            doomed.wait().unwrap();
            let doomed_owner = in_queue(&server, 1);
            java_in_turn(scope, &server, &j1, "j1", Some(JAVA_WAIT));
            await_queued(&server, 3, false);
            ours_in_turn(scope, &server, ours.fair_lock(NAME), "o1");
            await_queued(&server, 4, false);
            assert_eq!(in_queue(&server, 1), doomed_owner);
            holder.unlock().unwrap();
        });
        assert_eq!(order(&server), ["j0", "j1", "o1"], "Redisson {version:?}");
        assert_all_gone(&server);
    }
}

#[test]
fn a_killed_java_holder_lets_our_head_waiter_in_when_its_lease_runs_out() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    for version in Redisson::ALL {
        let server = Server::start();
        let doomed_jvm = Jvm::private(version);
        // Its watchdog lease is short for the test, and long enough to be renewed on a busy
        // machine.
        let doomed = doomed_jvm.connect(&server.url(), Some(JAVA_LEASE));
        let h = doomed.thread("h");
        h.ok("lock", "fair", NAME, Value::Null);
        let java_owner = h.owner();
        let ours = server.client();
        let got = ours_waiting(ours.fair_lock(NAME), NO_HANG);
        await_queued(&server, 1, true);
        assert_eq!(
            support::hash(&mut server.conn(), NAME),
            [(java_owner, 1)],
            "Redisson {version:?}"
        );
        doomed_jvm.kill();
        assert_eq!(
            got.recv_timeout(NO_HANG * 2),
            Ok(true),
            "Redisson {version:?}"
        );
        assert_all_gone(&server);
    }
}

#[test]
fn a_killed_holder_of_ours_lets_the_java_head_waiter_in_when_its_lease_runs_out() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    for version in Redisson::ALL {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let j = java.thread("j");
        // A lease a busy machine's renewals keep alive until the kill, well below JAVA_WAIT.
        let mut doomed = our_process(&server, Duration::from_secs(5), Duration::from_secs(5));
        assert!(eventually(NO_HANG, || server.exists(NAME)));
        let pending = j.send("tryLock", "fair", NAME, json!({"wait": JAVA_WAIT}));
        await_queued(&server, 1, true);
        doomed.kill().unwrap();
        doomed.wait().unwrap();
        assert_eq!(pending.wait(), Ok(json!(true)), "Redisson {version:?}");
        assert_eq!(j.ok("holdCount", "fair", NAME, Value::Null), json!(1));
        j.ok("unlock", "fair", NAME, Value::Null);
        assert_all_gone(&server);
    }
}

#[test]
fn a_forced_unlock_of_either_side_wakes_the_other_side_s_head_waiter() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    // Holds far longer than a waiter is given to be woken: only the force's message can
    // let it in in time.
    let lease = NO_HANG * 2;
    for version in Redisson::ALL {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let (h, j, f) = (java.thread("h"), java.thread("j"), java.thread("f"));

        // Java forces, ours is woken.
        h.ok(
            "lock",
            "fair",
            NAME,
            json!({"lease": lease.as_millis() as u64}),
        );
        let ours = sleepy(&server, true);
        let got = ours_waiting(ours.fair_lock(NAME), NO_HANG * 3);
        await_queued(&server, 1, true);
        assert_eq!(f.ok("forceUnlock", "fair", NAME, Value::Null), json!(true));
        assert_eq!(
            got.recv_timeout(NO_HANG),
            Ok(true),
            "Redisson {version:?}'s force did not wake our waiter"
        );
        assert_eq!(h.ok("holdCount", "fair", NAME, Value::Null), json!(0));
        assert_all_gone(&server);

        // Ours forces, Java's is woken.
        let holder_client = server.builder_with_lease(lease).build().unwrap();
        let held = holder_client.fair_lock(NAME).lock().unwrap();
        let wait = (NO_HANG * 3).as_millis() as u64;
        let pending = j.send("tryLock", "fair", NAME, json!({"wait": wait}));
        await_queued(&server, 1, true);
        assert!(server.client().fair_lock(NAME).force_unlock().unwrap());
        assert_eq!(
            pending.wait_for(NO_HANG),
            Some(Ok(json!(true))),
            "our force did not wake Redisson {version:?}'s waiter"
        );
        // The forced-out guard's release leaves the new holder alone.
        drop(held);
        assert_eq!(j.ok("holdCount", "fair", NAME, Value::Null), json!(1));
        j.ok("unlock", "fair", NAME, Value::Null);
        assert_all_gone(&server);
    }
}

#[test]
fn hold_counts_of_fair_reentry_agree_on_both_sides_with_a_waiter_queued() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    for version in Redisson::ALL {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let (h, other) = (java.thread("h"), java.thread("other"));
        let ours = server.client();
        let holds = |owner: &str| -> u64 {
            let info = ours.inspect(NAME).unwrap();
            let holder = info.holders.iter().find(|holder| holder.id == owner);
            holder.map_or(0, |holder| holder.holds)
        };

        // Java re-enters while a waiter of ours is queued, then leaves one hold at a time.
        let java_owner = h.owner();
        h.ok("lock", "fair", NAME, Value::Null);
        let got = ours_waiting(ours.fair_lock(NAME), NO_HANG);
        await_queued(&server, 1, true);
        h.ok("lock", "fair", NAME, Value::Null);
        assert_eq!(h.ok("holdCount", "fair", NAME, Value::Null), json!(2));
        assert_eq!(holds(&java_owner), 2, "Redisson {version:?}");
        assert_eq!(ours.fair_lock(NAME).hold_count().unwrap(), 0);
        h.ok("unlock", "fair", NAME, Value::Null);
        assert_eq!(h.ok("holdCount", "fair", NAME, Value::Null), json!(1));
        assert_eq!(holds(&java_owner), 1);
        assert_eq!(queued(&server), 1, "our waiter left the queue");
        assert!(got.try_recv().is_err(), "our waiter got in beside a hold");
        h.ok("unlock", "fair", NAME, Value::Null);
        assert_eq!(got.recv_timeout(NO_HANG), Ok(true));
        assert_all_gone(&server);

        // Ours re-enters while a Java waiter is queued.
        let lock = ours.fair_lock(NAME);
        let outer = lock.lock().unwrap();
        let pending = h.send("tryLock", "fair", NAME, json!({"wait": JAVA_WAIT}));
        await_queued(&server, 1, true);
        let inner = lock.lock().unwrap();
        assert_eq!(lock.hold_count().unwrap(), 2);
        let our_owner = ours
            .inspect(NAME)
            .unwrap()
            .holders
            .into_iter()
            .map(|holder| holder.id)
            .find(|id| *id != java_owner)
            .expect("our hold");
        assert_eq!(holds(&our_owner), 2);
        assert_eq!(
            other.ok("holdCount", "fair", NAME, Value::Null),
            json!(0),
            "Redisson {version:?}"
        );
        assert_eq!(other.ok("isLocked", "fair", NAME, Value::Null), json!(true));
        assert_eq!(
            other.ok("heldByMe", "fair", NAME, Value::Null),
            json!(false)
        );
        inner.unlock().unwrap();
        assert_eq!(lock.hold_count().unwrap(), 1);
        assert_eq!(queued(&server), 1, "the Java waiter left the queue");
        assert_eq!(pending.is_done(), None, "Redisson got in beside a hold");
        outer.unlock().unwrap();
        assert_eq!(pending.wait(), Ok(json!(true)));
        // Java re-enters the hold it was given after ours.
        h.ok("lock", "fair", NAME, Value::Null);
        assert_eq!(h.ok("holdCount", "fair", NAME, Value::Null), json!(2));
        assert_eq!(holds(&java_owner), 2);
        h.ok("unlock", "fair", NAME, Value::Null);
        h.ok("unlock", "fair", NAME, Value::Null);
        assert_all_gone(&server);
    }
}
