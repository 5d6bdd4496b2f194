//! Redis Cluster: three primaries with a replica each, started by the tests. Every kind takes,
//! waits, wakes and releases there; a counter under 200 locks spread over the slots stays
//! exact through a live resharding of a slot with held locks and a `CLUSTER FAILOVER`; a
//! SIGKILLed shard's locks are renewed on its promoted replica or reported lost while the
//! other shards' locks stay as they were; names whose keys would cross slots are refused;
//! releases get through a migration that outlasts their lease, and try calls made during it
//! answer within a response timeout, with a typed error where the slot's keys are split.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redmutex::{LockClient, Read};
use support::history::History;
use support::{Cluster, eventually};

const LONG: Duration = Duration::from_secs(60);

/// The number of the lock's channels (of any kind) subscribed on `server`, sharded (as on
/// Redis 7) or not.
fn subscribed(server: &support::Server, name: &str) -> usize {
    let pattern = format!("*{{{name}}}*");
    server.any_channels(&pattern)
}

/// What is particular to some kinds on a cluster (taking, waiting and waking for every kind
/// is the conformance list's): fencing tokens grow, reentrancy counts, readers share, a
/// semaphore's release wakes a waiter where it is served, a forced unlock routes alike.
#[test]
fn kinds_keep_their_own_rules_on_a_cluster() {
    let cluster = Cluster::start();
    let client = cluster.client();

    // Fencing tokens still grow, reentrancy still counts.
    let fenced = client.fenced_lock("fenced:tokens");
    let first = fenced.lock().unwrap().token();
    let second = fenced.lock().unwrap().token();
    assert!(second > first);
    let lock = client.lock("reentrant:twice");
    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 2);
    drop(inner);
    drop(outer);
    assert!(!lock.is_locked().unwrap());

    // Readers share, a writer waits for them, a reader waits for a writer.
    let rw = client.read_write_lock("rw:shared");
    let other = cluster.client().read_write_lock("rw:shared");
    let read = rw.read().lock().unwrap();
    let also = other.read().try_lock().unwrap().expect("readers share");
    let writer = cluster.client().read_write_lock("rw:shared");
    assert!(writer.write().try_lock().unwrap().is_none());
    drop((read, also));
    let write = other.write().try_lock().unwrap().expect("readers gone");
    let reader: redmutex::Lock<Read> = rw.read().clone();
    let waiter = std::thread::spawn(move || reader.try_lock_for(LONG).unwrap().is_some());
    let owner = cluster.owner_of("rw:shared");
    assert!(eventually(LONG, || subscribed(owner, "rw:shared") >= 1));
    write.unlock().unwrap();
    assert!(waiter.join().unwrap());

    // A semaphore's release wakes a waiter on the shard serving it.
    let semaphore = client.leased_semaphore("permits");
    assert!(semaphore.try_set_permits(1).unwrap());
    let permit = semaphore.acquire().unwrap();
    let rival = cluster.client().leased_semaphore("permits");
    let waiter = std::thread::spawn(move || rival.try_acquire_for(LONG).unwrap().is_some());
    let owner = cluster.owner_of("permits");
    assert!(eventually(LONG, || subscribed(owner, "permits") >= 1));
    permit.release().unwrap();
    assert!(waiter.join().unwrap());
    assert_eq!(semaphore.available_permits().unwrap(), 1);

    // Force unlock and introspection route like the rest.
    let held = client.lock("forced");
    let guard = held.lock().unwrap();
    assert!(cluster.client().lock("forced").force_unlock().unwrap());
    assert!(!held.is_locked().unwrap());
    assert!(guard.unlock().unwrap_err().is_lost());
    assert_eq!(client.stats().locks_lost, 1);
}

#[test]
fn a_name_whose_keys_would_cross_slots_is_refused_before_anything_is_sent() {
    let cluster = Cluster::start();
    let client = cluster.client();
    let before: Vec<u64> = cluster.servers.iter().map(|s| s.calls("evalsha")).collect();
    for name in ["a{}b", "a{b", "a}b", "{"] {
        let err = client.lock(name).try_lock().map(drop).unwrap_err();
        assert!(err.is_invalid_input(), "{name}: {err}");
        let err = client
            .leased_semaphore(name)
            .try_acquire()
            .map(drop)
            .unwrap_err();
        assert!(err.is_invalid_input(), "{name}: {err}");
    }
    let after: Vec<u64> = cluster.servers.iter().map(|s| s.calls("evalsha")).collect();
    assert_eq!(before, after, "nothing was sent");
    // Hash tags that keep a lock's keys together are taken; two locks with one tag share a
    // slot and so a primary.
    let a = client.lock("{user:7}:profile").lock().unwrap();
    let b = client.lock("{user:7}:cart").lock().unwrap();
    assert_eq!(
        cluster.owner_of("{user:7}:profile").port(),
        cluster.owner_of("{user:7}:cart").port()
    );
    drop((a, b));
    // The same names are fine where keys are not placed by slot.
    let single = support::Server::start();
    assert!(single.client().lock("a{}b").try_lock().unwrap().is_some());
}

/// 200 names over all the slots, ten of them in one slot ("{hot}") that is migrated to
/// another primary while its locks are held and waited for, with thousands of other keys
/// that keep it migrating for ten seconds; then a replica of another shard
/// is promoted. Counters incremented without atomicity under the locks come out exact, no
/// two holders' windows of a name overlap, no bounded wait overruns its bound, and no
/// thread panics.
#[test]
fn a_counter_stays_exact_through_a_resharding_and_a_failover() {
    let cluster = Cluster::start();
    let names: Vec<String> = (0..190)
        .map(|i| format!("counter:{i}"))
        .chain((0..10).map(|i| format!("{{hot}}:{i}")))
        .collect();
    let counters: Arc<Vec<AtomicU64>> = Arc::new(names.iter().map(|_| AtomicU64::new(0)).collect());
    let taken: Arc<Vec<AtomicU64>> = Arc::new(names.iter().map(|_| AtomicU64::new(0)).collect());
    let histories: Arc<Vec<History>> = Arc::new(names.iter().map(|_| History::default()).collect());
    let names = Arc::new(names);
    let stop = Arc::new(AtomicBool::new(false));
    let bound = Duration::from_secs(10);
    let response_timeout = Duration::from_secs(2);
    let clients: Vec<LockClient> = (0..3)
        .map(|_| {
            cluster
                .builder()
                .response_timeout(response_timeout)
                .build()
                .unwrap()
        })
        .collect();
    // One hot lock held by the test throughout the migration.
    let held_client = cluster.client();
    let held = held_client.lock("{hot}:held");
    let held_guard = held.lock().unwrap();

    let workers: Vec<_> = (0..12)
        .map(|t| {
            let client = clients[t % clients.len()].clone();
            let (names, counters, taken, stop) =
                (names.clone(), counters.clone(), taken.clone(), stop.clone());
            let histories = histories.clone();
            std::thread::spawn(move || {
                let mut overruns = Vec::new();
                let mut i = t * 17;
                while !stop.load(Ordering::Relaxed) {
                    // Every third pick is a hot name, so that the migrated slot is busy.
                    let at = match i % 3 {
                        0 => 190 + i % 10,
                        _ => i % 190,
                    };
                    i += 1;
                    let started = Instant::now();
                    let guard = match client.lock(&names[at]).try_lock_for(bound) {
                        Ok(Some(guard)) => guard,
                        Ok(None) => continue,
                        Err(err) => {
                            // Give up only within the bound: routing retries inside it.
                            if started.elapsed() > bound + response_timeout * 3 {
                                overruns.push(format!("{}: {err}", names[at]));
                            }
                            continue;
                        }
                    };
                    let got = Instant::now();
                    let waited = started.elapsed();
                    if waited > bound + response_timeout * 3 {
                        overruns.push(format!("{} waited {waited:?}", names[at]));
                    }
                    let value = counters[at].load(Ordering::SeqCst);
                    std::thread::yield_now();
                    counters[at].store(value + 1, Ordering::SeqCst);
                    taken[at].fetch_add(1, Ordering::SeqCst);
                    let holder = format!("thread-{t}");
                    histories[at].record(&holder, got, Instant::now(), guard.valid_until());
                    // An error here may only be a lost hold, which would show in the counts.
                    let _ = guard.unlock();
                }
                overruns
            })
        })
        .collect();

    let progress = |n: u64| {
        let total = || taken.iter().map(|t| t.load(Ordering::SeqCst)).sum::<u64>();
        let start = total();
        assert!(
            eventually(LONG, || total() >= start + n),
            "the workers made no progress"
        );
    };
    progress(500);
    // Reshard the hot slot to another primary while its locks are held and contended.
    let hot = cluster.slot("{hot}:0");
    let from = cluster.owner(hot).port();
    let to = cluster
        .primaries()
        .into_iter()
        .find(|s| s.port() != from)
        .unwrap();
    // The slot holds thousands of keys and stays migrating for ten seconds at least.
    cluster.fill("hot", 3000);
    let (mover, finished) = cluster.begin_migration(hot, to).finish_slowly();
    mover.join().unwrap();
    assert!(finished.load(Ordering::SeqCst));
    assert_eq!(cluster.owner(hot).port(), to.port());
    progress(500);
    // Promote the replica of a shard that does not serve the hot slot.
    let other = cluster
        .primaries()
        .into_iter()
        .find(|s| s.port() != to.port())
        .unwrap();
    cluster.failover(other);
    progress(500);
    stop.store(true, Ordering::Relaxed);
    let mut overruns = Vec::new();
    for worker in workers {
        overruns.extend(worker.join().expect("no worker panicked"));
    }
    assert!(overruns.is_empty(), "waits past their bound: {overruns:?}");
    for (at, name) in names.iter().enumerate() {
        assert_eq!(
            counters[at].load(Ordering::SeqCst),
            taken[at].load(Ordering::SeqCst),
            "lost update under {name}"
        );
        histories[at].assert_exclusive();
    }
    // The lock held through the migration is still held, and was never reported lost.
    assert!(!held_guard.is_lost());
    assert!(cluster.owner_of("{hot}:held").exists("{hot}:held"));
    held_guard.unlock().unwrap();
    for client in clients.iter().chain([&held_client]) {
        assert_eq!(client.stats().locks_lost, 0);
    }
}

/// Locks on all three shards, each acknowledged by a replica; one primary is SIGKILLed and
/// its replica promoted. Its locks are renewed on the promoted replica (or reported lost, if
/// the promotion outlasted their lease); the other shards' locks are never touched.
#[test]
fn a_killed_shard_s_locks_move_to_its_promoted_replica_and_the_others_stay() {
    let mut cluster = Cluster::start();
    let lease = Duration::from_secs(6);
    let client = cluster
        .builder()
        .lease(lease)
        .min_replica_acks(1, Duration::from_secs(1))
        .build()
        .unwrap();
    let names: Vec<String> = (0..30).map(|i| format!("kill:{i}")).collect();
    let guards: Vec<_> = names
        .iter()
        .map(|name| client.lock(name).lock().unwrap())
        .collect();
    let owners: Vec<u16> = names.iter().map(|n| cluster.owner_of(n).port()).collect();
    let victim = owners[0];
    assert!(
        owners
            .iter()
            .collect::<std::collections::HashSet<_>>()
            .len()
            == 3,
        "the names cover every shard"
    );
    // A waiter on one of the killed shard's locks.
    let waited = owners.iter().position(|&o| o == victim).unwrap();
    let rival = cluster.client().lock(&names[waited]);
    let waiter = std::thread::spawn(move || rival.try_lock_for(LONG).unwrap().is_some());
    assert!(eventually(LONG, || subscribed(
        cluster.by_port(victim),
        &names[waited]
    ) == 1));
    let promoted = cluster.kill(victim);
    let renewals = client.stats().renewals;
    let live = |i: usize| !guards[i].is_lost();
    // Every hold of the killed shard is renewed on the promoted replica or reported lost;
    // the renewals after the promotion cover every hold still live.
    assert!(
        eventually(LONG, || {
            let live_now = (0..names.len()).filter(|&i| live(i)).count() as u64;
            client.stats().renewals >= renewals + live_now
        }),
        "the holds were not renewed after the promotion: {:?} before, now {:?}, {} live",
        renewals,
        client.stats(),
        (0..names.len()).filter(|&i| live(i)).count()
    );
    // One look at every hold: a hold of the killed shard may still be lost after it.
    let lives: Vec<bool> = (0..names.len()).map(live).collect();
    let mut moved = 0;
    for (i, name) in names.iter().enumerate() {
        let owner = cluster.owner_of(name);
        if owners[i] == victim {
            assert_eq!(owner.port(), promoted, "{name}");
            if lives[i] {
                assert!(owner.exists(name), "{name} is held on the promoted replica");
                moved += 1;
            }
        } else {
            assert!(live(i), "{name} on an untouched shard was lost");
            assert_eq!(owner.port(), owners[i], "{name} did not move");
            assert!(owner.exists(name), "{name}");
        }
    }
    // Unless the hold it waits for is found lost meanwhile: the waiter may then take it
    // and leave the channel.
    if live(waited) {
        assert!(
            eventually(LONG, || !live(waited)
                || subscribed(cluster.by_port(promoted), &names[waited]) == 1),
            "the waiter subscribed again on the promoted replica"
        );
    }
    let lost = lives.iter().filter(|&&live| !live).count();
    let victims = owners.iter().filter(|&&o| o == victim).count();
    assert_eq!(moved + lost, victims);
    let counted = client.stats().locks_lost as usize;
    assert!(
        lost <= counted && counted <= victims,
        "{counted} lost, only the killed shard's"
    );
    for (i, guard) in guards.into_iter().enumerate() {
        let lost = guard.is_lost();
        match guard.unlock() {
            Ok(()) => assert!(!lost),
            // Lost by now, if not when looked at.
            Err(err) => assert!(err.is_lost() && owners[i] == victim, "{err}"),
        }
    }
    assert!(waiter.join().unwrap(), "the waiter got the lock");
}

/// A waiter's sharded subscription follows its lock's slot: when the slot migrates, the old
/// primary drops the subscription, the waiter subscribes on the new one, and the release
/// there wakes it.
#[test]
fn a_waiter_follows_its_lock_s_slot_to_another_primary() {
    let cluster = Cluster::start();
    let holder = cluster.client();
    let guard = holder.lock("moving").lock().unwrap();
    let rival = cluster.client().lock("moving");
    let waiter = std::thread::spawn(move || rival.try_lock_for(LONG).unwrap().is_some());
    let from = cluster.owner_of("moving").port();
    assert!(eventually(LONG, || subscribed(
        cluster.by_port(from),
        "moving"
    ) == 1));
    let to = cluster
        .primaries()
        .into_iter()
        .find(|s| s.port() != from)
        .unwrap();
    cluster.migrate(cluster.slot("moving"), to);
    assert!(
        eventually(LONG, || subscribed(to, "moving") == 1),
        "the waiter subscribed where the slot is now"
    );
    // Its unsubscription from the old primary may be read there a moment later.
    assert!(
        eventually(LONG, || subscribed(cluster.by_port(from), "moving") == 0),
        "the waiter left the old primary's channel"
    );
    guard.unlock().unwrap();
    assert!(waiter.join().unwrap());
}

/// A sharded subscription sent to a primary that no longer serves the channel's slot is
/// answered `MOVED`, an ordinary reply: the subscriber must see it even after reads of its
/// connection timed out (the `redis` crate drops one later ordinary reply for each), and
/// take the channel as moved, not refused, so that its waiter subscribes where the slot
/// is now rather than polling.
#[test]
fn a_subscription_answered_moved_after_timed_out_reads_follows_the_slot() {
    let cluster = Cluster::start();
    // No probe during the test: the only timed-out read is the one below.
    let ours = cluster
        .builder()
        .ping_interval(Duration::from_secs(600))
        .build()
        .unwrap();
    let theirs = cluster.client();
    let from = cluster.owner_of("after-timeouts").port();
    // Three names on that primary, in three slots.
    let mut names: Vec<String> = Vec::new();
    for i in 0.. {
        let name = format!("after-timeouts:{i}");
        let slot = cluster.slot(&name);
        if cluster.owner(slot).port() == from && names.iter().all(|n| cluster.slot(n) != slot) {
            names.push(name);
        }
        if names.len() == 3 {
            break;
        }
    }
    let (left, kept, moving) = (&names[0], &names[1], &names[2]);
    let at_from = || cluster.by_port(from);

    // A waiter of ours subscribes `left`, is woken, takes the lock and leaves: the channel
    // lingers.
    let guard = theirs.lock(left).lock().unwrap();
    let lock = ours.lock(left);
    let waiter = std::thread::spawn(move || lock.try_lock_for(LONG).unwrap().is_some());
    assert!(eventually(LONG, || subscribed(at_from(), left) == 1));
    guard.unlock().unwrap();
    assert!(waiter.join().unwrap());
    // Another waits on `kept`; with nothing to read until the linger ends, the subscriber's
    // read times out then, and it unsubscribes `left`.
    let guard = theirs.lock(kept).lock().unwrap();
    let lock = ours.lock(kept);
    let waiter = std::thread::spawn(move || lock.try_lock_for(LONG).unwrap().is_some());
    assert!(eventually(LONG, || subscribed(at_from(), kept) == 1));
    assert!(
        eventually(LONG, || subscribed(at_from(), left) == 0),
        "the linger ended"
    );

    // The slot of an election moves away behind our client's back.
    let to = (cluster.primaries().into_iter())
        .find(|s| s.port() != from)
        .unwrap();
    cluster.migrate(cluster.slot(moving), to);
    let mut observer = ours.election(moving).observe();
    // Subscribes where the map said, waiting for the answer (MOVED), then reads,
    // following the MOVED; the next wait subscribes again, where the slot is now.
    assert_eq!(
        observer.recv_timeout(LONG).unwrap(),
        Some(redmutex::LeaderChange::Vacant)
    );
    assert_eq!(observer.recv_timeout(Duration::ZERO).unwrap(), None);
    assert!(
        eventually(LONG, || subscribed(to, moving) == 1),
        "the observer subscribed where the slot is now"
    );
    assert_eq!(subscribed(at_from(), moving), 0);
    guard.unlock().unwrap();
    assert!(waiter.join().unwrap());
}

/// Redlock stays a quorum over independent deployments, one of which is a cluster: the lock
/// is taken on all three, a rival waits, and the release frees it everywhere.
#[test]
fn redlock_takes_a_cluster_as_one_of_its_nodes() {
    let cluster = Cluster::start();
    let (a, b) = (support::Server::start(), support::Server::start());
    let clients = [cluster.client(), a.client(), b.client()];
    let ours = LockClient::redlock_from(&clients).unwrap();
    let theirs = LockClient::redlock_from(&[cluster.client(), a.client(), b.client()]).unwrap();
    let name = "redlocked";
    let guard = ours.lock(name).lock().unwrap();
    assert!(cluster.owner_of(name).exists(name) && a.exists(name) && b.exists(name));
    let rival = theirs.lock(name);
    let waiter = std::thread::spawn(move || rival.try_lock_for(LONG).unwrap().is_some());
    guard.unlock().unwrap();
    assert!(waiter.join().unwrap());
    assert!(!ours.lock(name).is_locked().unwrap());
    let err = ours.lock("a{}b").try_lock().map(drop).unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
}

/// Names whose keys all live in `slot`, one per `kind`.
fn names_in_slot(slot: u16, kinds: &[&str]) -> Vec<String> {
    kinds
        .iter()
        .map(|kind| {
            (0..)
                .map(|i| format!("{kind}:{i}"))
                .find(|name| support::key_slot(name) == slot)
                .unwrap()
        })
        .collect()
}

/// A key whose name has an unclosed hash tag (`half{open`) cannot name a lock on a cluster:
/// a listing shows it as unreadable and lists the rest.
#[test]
fn a_listing_goes_on_past_a_name_with_an_unclosed_tag() {
    let cluster = Cluster::start();
    let client = cluster.client();
    let _guard = client.lock("whole").lock().unwrap();
    let () = redis::cmd("SET")
        .arg("half{open")
        .arg("1")
        .query(&mut cluster.owner_of("half{open").conn())
        .unwrap();
    let listed = client.scan("*").unwrap();
    let whole = listed.iter().find(|info| info.name == "whole");
    assert!(
        whole.is_some_and(|info| info.kind == redmutex::LockKind::Reentrant),
        "{listed:?}"
    );
    let half = listed.iter().find(|info| info.name == "half{open");
    assert!(
        half.is_some_and(|info| matches!(info.kind, redmutex::LockKind::Unreadable(_))),
        "{listed:?}"
    );
}

/// A listing of locks on a cluster whose one primary does not answer: the locks of the
/// others are listed, and the one that could not be read is named as unreadable.
#[test]
fn a_listing_goes_on_past_a_primary_that_does_not_answer_and_names_it() {
    let cluster = Cluster::start();
    let client = (cluster.builder())
        .response_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let mut guards = Vec::new();
    let mut by_shard = std::collections::HashMap::new();
    for i in 0.. {
        let name = format!("listed:{i}");
        let owner = cluster.owner_of(&name).port();
        if by_shard.contains_key(&owner) {
            continue;
        }
        guards.push(client.lock(&name).lock().unwrap());
        by_shard.insert(owner, name);
        if by_shard.len() == 3 {
            break;
        }
    }
    let (&stopped, silent) = by_shard.iter().next().unwrap();
    let server = cluster.by_port(stopped);
    server.pause();
    let listed = client.locks("listed:*");
    server.resume();
    let listed = listed.unwrap();
    let names: Vec<&str> = listed.iter().map(|info| info.name.as_str()).collect();
    for (port, name) in &by_shard {
        assert_eq!(
            names.contains(&name.as_str()),
            *port != stopped,
            "{listed:?}"
        );
    }
    let unread: Vec<_> = (listed.iter())
        .filter(|info| matches!(info.kind, redmutex::LockKind::Unreadable(_)))
        .collect();
    assert_eq!(unread.len(), 1, "{listed:?}");
    assert!(
        unread[0].server.ends_with(&format!(":{stopped}")),
        "{listed:?}"
    );
    assert!(!names.contains(&silent.as_str()));
    drop(guards);
}

/// The PTTL of `key` on `server`, asked as a client redirected there by `ASK` would: the
/// importing primary of a slot being migrated answers for the keys it has.
fn pttl_asking(server: &support::Server, key: &str) -> i64 {
    let (pttl,): (i64,) = redis::pipe()
        .cmd("ASKING")
        .ignore()
        .cmd("PTTL")
        .arg(key)
        .query(&mut server.conn())
        .unwrap();
    pttl
}

/// Waits until the lease of `key` on `server` was extended: its PTTL only falls otherwise.
/// Each look is held against the one before, not against the first: a first look just
/// after a renewal may be higher than any later look catches.
fn renewed_on(server: &support::Server, key: &str) -> bool {
    let mut last = pttl_asking(server, key);
    assert!(last > 0, "{key} is not on {}", server.port());
    eventually(LONG, || {
        let now = pttl_asking(server, key);
        std::mem::replace(&mut last, now) < now
    })
}

/// A read-write lock's read holds, watched with a lease of five seconds, and an election's
/// leadership, through a ten-second migration of their slot (thousands of keys). The read
/// holds' lease keys are renewed while they and the hash are on different primaries, either
/// way round; a reader, a writer and a candidate that come meanwhile wait for the slot to
/// settle; the leader's resignation made meanwhile hands over to the candidate, which an
/// observer sees, and the readers' releases to the writer.
#[test]
fn read_holds_and_a_leadership_keep_through_a_long_migration_and_hand_over() {
    let cluster = Cluster::start();
    let client = cluster.client();
    let short = (cluster.builder())
        .lease(Duration::from_secs(5))
        .build()
        .unwrap();
    let slot = cluster.slot("moving");
    let names = names_in_slot(slot, &["read", "elected"]);
    let from = cluster.owner(slot);
    let to = (cluster.primaries().into_iter())
        .find(|s| s.port() != from.port())
        .unwrap();
    cluster.fill("moving", 3000);

    // Two read holds in this thread, one in another; each owner's lease keys apart.
    let rw = short.read_write_lock(&names[0]);
    let reads = (rw.read().lock().unwrap(), rw.read().lock().unwrap());
    let (to_release, release) = crossbeam_channel::bounded::<()>(0);
    let (taken_tx, taken) = crossbeam_channel::bounded::<()>(0);
    let other = {
        let rw = rw.clone();
        std::thread::spawn(move || {
            let guard = rw.read().lock().unwrap();
            taken_tx.send(()).unwrap();
            release.recv().unwrap();
            (guard.is_lost(), guard.unlock().map_err(|e| e.to_string()))
        })
    };
    taken.recv().unwrap();
    let lease_keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{{{}}}:*:rwlock_timeout:*", names[0]))
        .query(&mut from.conn())
        .unwrap();
    assert_eq!(lease_keys.len(), 3, "{lease_keys:?}");
    let owner_of = |key: &String| key.rsplit_once(':').unwrap().0.to_owned();
    let ours: Vec<String> = (lease_keys.iter())
        .filter(|k| {
            lease_keys
                .iter()
                .filter(|o| owner_of(o) == owner_of(k))
                .count()
                == 2
        })
        .cloned()
        .collect();
    let theirs = (lease_keys.iter())
        .find(|k| !ours.contains(k))
        .unwrap()
        .clone();

    // The leader's lease outlasts the migration: its resignation, made meanwhile, waits
    // for the slot to settle, bounded by the leadership's validity.
    let leadership = client.election(&names[1]).campaign().unwrap();
    let mut observer = client.election(&names[1]).observe();
    assert!(matches!(
        observer.recv_timeout(LONG).unwrap(),
        Some(redmutex::LeaderChange::Elected(_))
    ));

    let mut migration = cluster.begin_migration(slot, to);
    // Our lease keys move first: the renewal, run where the hash is, cannot reach them.
    migration.move_named(&ours);
    for key in &ours {
        assert!(renewed_on(to, key), "{key} was not renewed where it moved");
    }
    // Then the hash: the renewal, run where it is now, does not find their lease key.
    migration.move_named(&[names[0].clone()]);
    assert!(
        renewed_on(from, &theirs),
        "{theirs} was not renewed where it stayed"
    );
    let (mover, finished) = migration.finish_slowly();

    // A reader, a writer and a candidate that come now wait for the slot to settle.
    let reader = {
        let rw = client.read_write_lock(&names[0]);
        std::thread::spawn(move || rw.read().try_lock_for(LONG).map(|g| g.is_some()))
    };
    let writer = {
        let rw = client.read_write_lock(&names[0]);
        std::thread::spawn(move || rw.write().try_lock_for(LONG).map(|g| g.is_some()))
    };
    let candidate = {
        let election = client.election(&names[1]);
        std::thread::spawn(move || {
            let won = election.try_campaign_for(LONG).unwrap().unwrap();
            (won.epoch(), won.resign().is_ok())
        })
    };
    // Looks at both, meanwhile.
    let looked = {
        let (client, names) = (client.clone(), names.clone());
        std::thread::spawn(move || {
            let info = client.inspect(&names[0]).unwrap();
            (info, client.election(&names[1]).leader().unwrap())
        })
    };
    let epoch = leadership.epoch();
    assert!(!leadership.is_lost());
    leadership.resign().unwrap();
    assert!(reader.join().unwrap().unwrap());
    let (next, resigned) = candidate.join().unwrap();
    assert!(resigned && next > epoch);
    let seen =
        std::iter::from_fn(|| observer.recv_timeout(LONG).unwrap()).find_map(
            |change| match change {
                redmutex::LeaderChange::Elected(leader) if leader.epoch() >= next => {
                    Some(leader.epoch())
                }
                _ => None,
            },
        );
    assert_eq!(seen, Some(next));
    let (info, leader) = looked.join().unwrap();
    assert_eq!(info.kind, redmutex::LockKind::ReadWrite);
    assert!(info.holders.len() >= 2, "{info:?}");
    assert!(leader.is_none_or(|l| l.epoch() == epoch || l.epoch() == next));

    assert!(!reads.0.is_lost() && !reads.1.is_lost());
    reads.1.unlock().unwrap();
    reads.0.unlock().unwrap();
    to_release.send(()).unwrap();
    let (lost, released) = other.join().unwrap();
    assert!(!lost);
    released.unwrap();
    assert!(writer.join().unwrap().unwrap());
    mover.join().unwrap();
    assert!(finished.load(Ordering::SeqCst));
    assert_eq!(cluster.owner(slot).port(), to.port());
    assert_eq!(short.stats().locks_lost, 0);
}

/// Whether `key` exists on `server`, asked as a client redirected there by `ASK` would.
fn exists_asking(server: &support::Server, key: &str) -> bool {
    let (found,): (bool,) = redis::pipe()
        .cmd("ASKING")
        .ignore()
        .cmd("EXISTS")
        .arg(key)
        .query(&mut server.conn())
        .unwrap();
    found
}

/// Whether `key` exists on `server`, the primary of a slot being migrated, which answers
/// `ASK` for a key it does not have.
fn exists_migrating(server: &support::Server, key: &str) -> bool {
    match redis::cmd("EXISTS").arg(key).query(&mut server.conn()) {
        Ok(found) => found,
        Err(err) if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::Ask) => false,
        Err(err) => panic!("EXISTS {key}: {err}"),
    }
}

/// A slot that stays MIGRATING for longer than a lease, as a slow reshard of a big slot
/// does: releases and a resignation made meanwhile get through, whether the lock's key is
/// still on the migrating primary or already moved to the importing one, instead of
/// waiting out the hold's validity for the slot to settle (a release's latch is a key the
/// migrating slot refuses). A try call, which has no wait of its own, answers within a
/// response timeout: it takes a free name whose one key can go to the importing primary,
/// and a call whose keys the migration splits gets the typed "slot moving" error, with
/// no redirect in its message and nothing left behind.
#[test]
fn a_migration_longer_than_a_lease_lets_releases_through_and_try_calls_answer() {
    let cluster = Cluster::start();
    // The holds' lease is shorter than the migration, which lasts as long as the test.
    let client = (cluster.builder())
        .lease(Duration::from_secs(2))
        .response_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let slot = cluster.slot("long");
    let kinds = [
        "stays", "moved", "write", "token", "elected", "permits", "free", "fair", "campaign",
    ];
    let names = names_in_slot(slot, &kinds);
    let from = cluster.owner(slot);
    let to = (cluster.primaries().into_iter())
        .find(|s| s.port() != from.port())
        .unwrap();

    let stays = client.lock(&names[0]).lock().unwrap();
    let moved = client.lock(&names[1]).lock().unwrap();
    let write = client.read_write_lock(&names[2]).write().lock().unwrap();
    let token = client.token_lock(&names[3]).lock().unwrap();
    let leadership = client.election(&names[4]).campaign().unwrap();
    let semaphore = client.leased_semaphore(&names[5]);
    assert!(semaphore.try_set_permits(1).unwrap());
    let permit = semaphore.acquire().unwrap();

    let mut migration = cluster.begin_migration(slot, to);
    migration.move_named(&[names[1].clone()]);
    assert!(exists_asking(to, &names[1]) && !exists_migrating(from, &names[1]));

    stays.unlock().unwrap();
    moved.unlock().unwrap();
    write.unlock().unwrap();
    token.unlock().unwrap();
    leadership.resign().unwrap();
    permit.release().unwrap();
    for name in &names[..5] {
        assert!(
            !exists_migrating(from, name),
            "{name} is still on the migrating primary"
        );
        assert!(
            !exists_asking(to, name),
            "{name} is on the importing primary"
        );
    }

    // Try calls answer within a response timeout, not the lease (bounded here by half a
    // lease of a client whose lease is a minute, far from a response timeout).
    let patient = (cluster.builder())
        .lease(Duration::from_secs(60))
        .response_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let started = Instant::now();
    let free = patient.lock(&names[6]).try_lock().unwrap();
    assert!(free.is_some(), "a free name whose key can move is taken");
    assert!(exists_asking(to, &names[6]));
    drop(free);
    let fair = patient.fair_lock(&names[7]).try_lock().map(|g| g.is_some());
    let campaign = (patient.election(&names[8]).try_campaign()).map(|l| l.is_some());
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the try calls waited"
    );
    for (what, result) in [("fair", fair), ("campaign", campaign)] {
        let err = result.expect_err(what);
        assert!(err.is_slot_moving(), "{what}: {err:#}");
        assert!(!err.is_outcome_unknown(), "{what}: {err:#}");
        let said = err.to_string();
        for raw in ["ASK", "MOVED", "TRYAGAIN"] {
            assert!(!said.contains(raw), "{what}: {said}");
        }
    }
    // Nothing of theirs is left on either side: no queue place, no candidate listing.
    for server in [from, to] {
        let left: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query(&mut server.conn())
            .unwrap();
        let left: Vec<&String> = (left.iter())
            .filter(|key| key.contains(&names[7]) || key.contains(&names[8]))
            .collect();
        assert!(left.is_empty(), "{}: {left:?}", server.port());
    }

    // Once the slot settles, they are taken, and the permit is back.
    migration.finish();
    assert_eq!(semaphore.available_permits().unwrap(), 1);
    assert!(patient.fair_lock(&names[7]).try_lock().unwrap().is_some());
    assert!(
        patient
            .election(&names[8])
            .try_campaign()
            .unwrap()
            .is_some()
    );
}
