//! A Cluster primary SIGKILLed or failed over, as an operator's bad day goes: every waiting
//! call of every kind (one list, which `sentinel.rs` runs behind Sentinel too) is woken
//! where its name's slot is served now; a client whose slot map is older than the failover
//! follows the new map instead of failing on the dead address; a leader forced out after its
//! slot failed over learns it at once.
//!
//! Leases are long (five minutes): no renewal or expiry may stand in for what the failover
//! must cause, and every bound below is shorter than a lease.

use crate::support;

use std::time::Duration;

use std::sync::Arc;
use std::time::Instant;

use redmutex::{LeaderChange, LockClient};
use support::{Cluster, eventually};

use crate::conformance::{self, Coverage, Property};

/// The holders' lease: longer than any wait below, so that only the failover can end one.
const LEASE: Duration = Duration::from_secs(300);
/// How long the promotion and what follows it may take, far below [`LEASE`].
const BOUND: Duration = Duration::from_secs(45);

/// The number of `name`'s channels (of any kind) subscribed on `server`.
fn subscribed(server: &support::Server, name: &str) -> usize {
    server.any_channels(&format!("*{{{name}}}*"))
}

/// Names whose slot the primary on `port` serves, `count` of them, beginning with `prefix`.
fn names_on(cluster: &Cluster, port: u16, prefix: &str, count: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("{prefix}:{i}"))
        .filter(|name| cluster.owner_of(name).port() == port)
        .take(count)
        .collect()
}

/// Blocks a call on a name from the holding client; returns what ends the wait.
type Block = Box<dyn Fn(&LockClient, &str) -> Box<dyn FnOnce()>>;

/// One waiting call: what makes it wait, and the call.
pub struct WaitingCall {
    pub what: &'static str,
    /// Whether it waits on pub/sub; a spin lock only polls, so nothing shows where it waits.
    pub subscribes: bool,
    /// Makes the call on `name` wait, from the holding client; returns what ends the wait.
    pub block: Block,
    /// The call, on a thread of its own: true when it got what it waited for.
    pub wait: Arc<dyn Fn(LockClient, String) -> bool + Send + Sync>,
}

/// How long a waiting call may wait: past any lease here, so that only a wake-up ends it.
const WAIT: Duration = Duration::from_secs(900);

/// Every kind's waiting call, from the conformance list (each entry's acquisition, the
/// latch's wait, a candidate's campaign), and an observer's wait for the next change.
pub fn every_waiting_call() -> Vec<WaitingCall> {
    let mut calls: Vec<WaitingCall> = (conformance::ALL.iter())
        .filter(|entry| (entry.coverage)(Property::Failover) == Coverage::Here)
        .map(|&entry| WaitingCall {
            what: entry.name,
            subscribes: entry.subscribes,
            block: Box::new(move |holder, name| {
                (entry.prepare)(holder, name);
                let held = entry.occupy(holder, name);
                Box::new(move || held().unwrap())
            }),
            wait: Arc::new(move |waiter, name| {
                let taken = (entry.make)(&waiter, &name, None).take_until(Instant::now() + WAIT);
                taken.unwrap().map(|held| held().unwrap()).is_some()
            }),
        })
        .collect();
    calls.push(WaitingCall {
        what: "observer",
        subscribes: true,
        block: Box::new(|holder, name| {
            let leadership = holder.election(name).campaign().unwrap();
            Box::new(move || leadership.resign().unwrap())
        }),
        wait: Arc::new(|waiter, name| {
            let mut observer = waiter.election(&name).observe();
            matches!(observer.recv().unwrap(), LeaderChange::Elected(_))
                && matches!(
                    observer.recv_timeout(WAIT).unwrap(),
                    Some(LeaderChange::Vacant)
                )
        }),
    });
    calls
}

/// Runs every waiting call on a name of its own, each blocked by `holder` (which should not
/// subscribe anything itself, so that what is subscribed is the waiters'); `names` gives
/// each call's name. Once all wait where `before` counts their channels, `replace` kills
/// the server and returns when another serves the names; every call that subscribes must
/// then be subscribed where `after` counts, and every release made there must end its wait.
pub fn every_waiting_call_follows(
    holder: &LockClient,
    waiters: &LockClient,
    names: impl Fn(&str) -> String,
    before: impl Fn(&str) -> usize,
    replace: impl FnOnce(),
    after: impl Fn(&str) -> usize,
) {
    let calls = every_waiting_call();
    let names: Vec<String> = calls.iter().map(|call| names(call.what)).collect();
    let mut releases = Vec::new();
    let mut waiting = Vec::new();
    for (call, name) in calls.iter().zip(&names) {
        releases.push((call.block)(holder, name));
        let (waiter, name, wait) = (waiters.clone(), name.clone(), call.wait.clone());
        waiting.push(std::thread::spawn(move || wait(waiter, name)));
    }
    for (call, name) in calls.iter().zip(&names).filter(|(call, _)| call.subscribes) {
        assert!(
            eventually(BOUND, || before(name) >= 1),
            "{}: waiting where the lock is served",
            call.what
        );
    }
    replace();
    for (call, name) in calls.iter().zip(&names).filter(|(call, _)| call.subscribes) {
        assert!(
            eventually(BOUND, || after(name) >= 1),
            "{}: the waiter subscribed where the lock is served now",
            call.what
        );
    }
    for release in releases {
        release();
    }
    for (call, waited) in calls.iter().zip(waiting) {
        assert!(waited.join().unwrap(), "{}: woken and served", call.what);
    }
}

/// Waits until `replica` has every write `primary` had made when this was called.
pub fn replicated(primary: &support::Server, replica: &support::Server) {
    let offset = |server, field: &str| {
        (support::info(server, "replication").lines())
            .find_map(|line| line.strip_prefix(field)?.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    let written = offset(primary, "master_repl_offset:");
    assert!(
        eventually(BOUND, || offset(replica, "slave_repl_offset:") >= written),
        "the replica on {} did not catch up",
        replica.port()
    );
}

/// Every waiting call of a client that does nothing but wait, on a primary that is killed:
/// its subscriber's connection to the dead address is not waited on for ever. Once the
/// replica is promoted, the waiters subscribe there, and the releases made there wake them,
/// long before the holder's lease could.
#[test]
fn every_waiting_call_on_a_killed_primary_follows_to_its_promoted_replica() {
    let cluster = std::cell::RefCell::new(Cluster::start());
    let victim = cluster.borrow().primaries()[0].port();
    // Subscribes nothing: what is subscribed below is the waiters'.
    let holder = cluster
        .borrow()
        .builder()
        .lease(LEASE)
        .pubsub(false)
        .build()
        .unwrap();
    let waiters = cluster.borrow().builder().lease(LEASE).build().unwrap();
    let promoted = std::cell::Cell::new(0);
    every_waiting_call_follows(
        &holder,
        &waiters,
        |what| names_on(&cluster.borrow(), victim, what, 1).remove(0),
        |name| subscribed(cluster.borrow().by_port(victim), name),
        || {
            let replica = cluster
                .borrow()
                .replica_of(cluster.borrow().by_port(victim))
                .port();
            replicated(
                cluster.borrow().by_port(victim),
                cluster.borrow().by_port(replica),
            );
            promoted.set(cluster.borrow_mut().kill(victim));
        },
        |name| subscribed(cluster.borrow().by_port(promoted.get()), name),
    );
}

/// A client whose slot map still names a killed primary, the cluster healthy again: each
/// call, several at once, reads the map again and runs on the promoted replica, whatever
/// kind it is, instead of failing on the dead address.
#[test]
fn calls_with_a_map_older_than_the_failover_follow_the_new_map() {
    let mut cluster = Cluster::start();
    let victim = cluster.primaries()[0].port();
    // Without pub/sub: no subscriber connection to the dead address finds the failover
    // first; only the calls below can.
    let stale = cluster
        .builder()
        .lease(LEASE)
        .pubsub(false)
        .build()
        .unwrap();
    let names = names_on(&cluster, victim, "stale", 8);
    // Every shard known, with pooled connections, before the kill.
    let election = stale.election(&names[0]);
    let leadership = election.campaign().unwrap();
    let semaphore = stale.counting_semaphore(&names[1]);
    assert!(semaphore.try_set_permits(6).unwrap());
    let permits: Vec<_> = (0..6).map(|_| semaphore.acquire().unwrap()).collect();

    let promoted = cluster.kill(victim);
    assert_ne!(promoted, victim);
    assert!(
        election.leader().unwrap().is_some(),
        "the leader is read on the promoted replica"
    );
    leadership.resign().unwrap();
    let releases: Vec<_> = permits
        .into_iter()
        .map(|permit| std::thread::spawn(move || permit.release()))
        .collect();
    for release in releases {
        release.join().unwrap().unwrap();
    }
    assert_eq!(semaphore.available_permits().unwrap(), 6);
    let multi = stale.multi_lock([&names[2], &names[3]]);
    let held = multi.try_lock_for(Duration::from_secs(10)).unwrap();
    assert!(held.is_some(), "two free locks are taken");
    let locks: Vec<_> = (names[4..].iter().cloned())
        .map(|name| {
            let lock = stale.lock(name);
            std::thread::spawn(move || {
                lock.try_lock_for(Duration::from_secs(10))
                    .map(|g| g.is_some())
            })
        })
        .collect();
    for lock in locks {
        assert!(lock.join().unwrap().unwrap(), "a free lock is taken");
    }
}

/// A leader whose election's slot fails over to the replica (`CLUSTER FAILOVER`) keeps
/// listening for its removal where the slot is served now. The demoted primary may relay
/// the shard's messages for a while, but once the client has read the new map (here: its
/// next call on another slot of that shard) it retires its subscriber there, and the
/// listening must be made again on the new primary. Forced out by another client, which then
/// leads, the old leader finds its leadership lost within a round trip of the message, not
/// at its next renewal a third of a lease later.
#[test]
fn a_leader_forced_out_after_its_slot_failed_over_learns_it_at_once() {
    let cluster = Cluster::start();
    let leading = cluster.builder().lease(LEASE).build().unwrap();
    let name = "forced";
    let leadership = leading.election(name).campaign().unwrap();
    let from = cluster.owner_of(name).port();
    assert!(eventually(BOUND, || subscribed(
        cluster.by_port(from),
        name
    ) == 1));
    // A name on the same shard in another slot: a call on it finds the slot moved.
    let probe = (names_on(&cluster, from, "probe", 64).into_iter())
        .find(|probe| cluster.slot(probe) != cluster.slot(name))
        .unwrap();
    let to = cluster.failover(cluster.by_port(from));
    assert!(
        eventually(BOUND, || {
            leading.lock(&probe).is_locked().unwrap();
            subscribed(cluster.by_port(to), name) == 1
        }),
        "the leader listens on the new primary"
    );
    let other = cluster.builder().lease(LEASE).build().unwrap();
    let election = other.election(name);
    assert!(election.force_resign().unwrap());
    let successor = election.campaign().unwrap();
    assert!(successor.epoch() > leadership.epoch());
    assert!(
        eventually(BOUND, || leadership.is_lost()),
        "the old leader found its leadership lost"
    );
    successor.resign().unwrap();
}

/// Polls `condition` every two milliseconds, for a measurement; when it first held.
fn when(mut condition: impl FnMut() -> bool) -> std::time::Instant {
    let end = std::time::Instant::now() + BOUND;
    while !condition() {
        assert!(std::time::Instant::now() < end, "never happened");
        std::thread::sleep(Duration::from_millis(2));
    }
    std::time::Instant::now()
}

/// The figures for a killed primary in `docs/deploying.md` ("Redis Cluster"): how long from
/// the promotion (as the test sees it) until a waiter is subscribed on the promoted replica,
/// from a release there until the waiter holds the lock, and the first call of a client whose
/// map predates the failover.
/// `cargo test --all-features failover::measure -- --ignored --nocapture`
#[test]
#[ignore = "a measurement: run by hand"]
fn measure_a_killed_primary() {
    use std::time::Instant;
    let mut cluster = Cluster::start();
    let victim = cluster.primaries()[0].port();
    let holder = cluster.builder().lease(LEASE).build().unwrap();
    let waiters = cluster.builder().lease(LEASE).build().unwrap();
    let stale = cluster
        .builder()
        .lease(LEASE)
        .pubsub(false)
        .build()
        .unwrap();
    let names = names_on(&cluster, victim, "measured", 2);
    let guard = holder.lock(&names[0]).lock().unwrap();
    stale.lock(&names[1]).lock().unwrap().unlock().unwrap();
    let rival = waiters.lock(&names[0]);
    let (took, taken) = crossbeam_channel::bounded(1);
    let waiter = std::thread::spawn(move || {
        let guard = rival.try_lock_for(WAIT).unwrap();
        took.send(Instant::now()).unwrap();
        guard.is_some()
    });
    assert!(eventually(BOUND, || subscribed(
        cluster.by_port(victim),
        &names[0]
    ) == 1));
    let killed = Instant::now();
    let promoted = cluster.kill(victim);
    let seen = Instant::now();
    let moved = when(|| subscribed(cluster.by_port(promoted), &names[0]) == 1);
    let asked = Instant::now();
    assert!(stale.lock(&names[1]).try_lock().unwrap().is_some());
    let answered = asked.elapsed();
    let released = Instant::now();
    guard.unlock().unwrap();
    let woken = taken.recv().unwrap();
    assert!(waiter.join().unwrap());
    eprintln!(
        "kill to promotion seen {:?}; promotion seen to the waiter subscribed there {:?}; \
         release there to the waiter holding {:?}; a stale client's first try_lock {:?}",
        seen - killed,
        moved.saturating_duration_since(seen),
        woken - released,
        answered
    );
}
