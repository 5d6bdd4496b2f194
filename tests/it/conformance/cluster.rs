//! The Cluster properties: every entry taken, waited for and woken on one Cluster, each
//! name on whichever shard owns its slot; and given back and taken while its slot migrates.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::entries::Coverage;
use super::properties::{Seen, quartet_on};
use super::{ALL, Property};
use crate::support::{Cluster, key_slot};

/// How long a take may wait for a slot to settle: past any migration here.
const LONG: Duration = Duration::from_secs(60);

#[test]
fn every_kind_takes_waits_and_wakes_on_a_cluster() {
    let cluster = Cluster::start();
    let ours = cluster.client();
    let theirs = (cluster.builder())
        .retry_base(Duration::from_secs(30))
        .retry_cap(Duration::from_secs(30))
        .build()
        .unwrap();
    let seen = Seen {
        calls: Box::new(|| cluster.primaries().iter().map(|s| s.calls("evalsha")).sum()),
        // Sharded subscriptions only: every node runs Redis 7 (or Valkey 8), where a
        // waiter subscribes with SSUBSCRIBE on the shard serving its lock.
        channels: Box::new(|pattern| {
            let primaries = cluster.primaries();
            (primaries.iter())
                .map(|s| s.any_channels(pattern) - s.channels(pattern))
                .sum()
        }),
    };
    for entry in ALL {
        if (entry.coverage)(Property::Cluster) == Coverage::Here {
            let name = format!("{}-on-a-cluster", entry.name);
            quartet_on(entry, &ours, &theirs, &name, &seen);
        }
    }
}

/// A name of `prefix` whose keys all live in `slot`.
fn name_in_slot(slot: u16, prefix: &str) -> String {
    (0..)
        .map(|i| format!("{prefix}:{i}"))
        .find(|name| key_slot(name) == slot)
        .unwrap()
}

/// Every entry held in one slot of thousands of keys, which then migrates for ten seconds
/// at least while its keys move in small batches: each hold is given back and taken by
/// another client, never failing. A call whose keys are split between the two primaries
/// (a fenced lock's counter moved, its hash not yet) waits for the slot to settle; the
/// releases that can go without their latch go at once (see
/// `cluster::a_migration_longer_than_a_lease_lets_releases_through_and_try_calls_answer`).
/// Meanwhile a watched hold with a lease shorter than the migration stays held, a cancelled
/// wait ends while the slot still migrates, and looks and forced unlocks get through.
#[test]
fn every_kind_is_released_and_taken_while_its_slot_migrates() {
    let cluster = Cluster::start();
    let (ours, theirs) = (cluster.client(), cluster.client());
    let short = (cluster.builder())
        .lease(Duration::from_secs(2))
        .build()
        .unwrap();
    let slot = cluster.slot("migrating");
    cluster.fill("migrating", 3000);
    let entries: Vec<_> = (ALL.iter())
        .filter(|entry| (entry.coverage)(Property::Migration) == Coverage::Here)
        .collect();
    let names: Vec<String> = entries.iter().map(|e| name_in_slot(slot, e.name)).collect();
    let mut held = Vec::new();
    for (entry, name) in entries.iter().zip(&names) {
        (entry.prepare)(&ours, name);
        held.push(entry.occupy(&ours, name));
    }
    let renewed = short.lock(name_in_slot(slot, "short")).lock().unwrap();
    let forced = ours.lock(name_in_slot(slot, "forced"));
    let forced_guard = forced.lock().unwrap();
    // Held, so that the cancelled wait below waits, on a fair lock, whose queue's keys do
    // not exist yet: its attempts wait for the slot to settle.
    let blocked = name_in_slot(slot, "cancelled");
    let _blocker = ours.fair_lock(&blocked).lock().unwrap();
    let source = cluster.owner(slot);
    let to = (cluster.primaries().into_iter())
        .find(|s| s.port() != source.port())
        .unwrap();
    let (mover, finished) = cluster.begin_migration(slot, to).finish_slowly();
    // It keeps migrating for ten seconds at least: the calls below meet it migrating
    // unless the machine stalled for that long.
    assert!(
        !finished.load(Ordering::SeqCst),
        "the slot was moved at once"
    );

    // A cancelled wait ends at once, the slot still migrating: cancelled once its attempt
    // reached the source (run, or turned away for the moving slot).
    let scripts = || source.calls("evalsha") + source.rejected_calls("evalsha");
    let before = scripts();
    let cancel = redmutex::Cancel::new();
    let waiter = theirs.fair_lock(&blocked).with_cancel(&cancel);
    let waiting = std::thread::spawn(move || waiter.try_lock_for(LONG).map(|g| g.is_some()));
    assert!(crate::support::eventually(LONG, || scripts() > before));
    cancel.cancel();
    let cancelled = waiting.join().unwrap();
    assert!(
        matches!(&cancelled, Err(err) if err.is_cancelled()),
        "{cancelled:?}"
    );
    assert!(
        !finished.load(Ordering::SeqCst),
        "the cancelled wait ended only with the migration"
    );

    // Looks and forced unlocks get through.
    assert!(forced.is_locked().unwrap());
    assert_eq!(forced.hold_count().unwrap(), 1);
    let info = ours.inspect(forced.name()).unwrap();
    assert_eq!(info.kind, redmutex::LockKind::Reentrant);
    assert_eq!(info.holders.len(), 1);
    assert!(forced.force_unlock().unwrap());
    assert!(!forced.is_locked().unwrap());
    assert!(forced_guard.unlock().unwrap_err().is_lost());

    for ((entry, name), held) in entries.iter().zip(&names).zip(held) {
        let released = held();
        assert!(released.is_ok(), "{}: {released:?}", entry.name);
        let rival = (entry.rival)(&theirs, name);
        let taken = rival.take_until(Instant::now() + LONG).unwrap();
        let taken = taken.unwrap_or_else(|| panic!("{}: not taken", entry.name));
        taken().unwrap();
    }
    mover.join().unwrap();
    assert!(finished.load(Ordering::SeqCst));
    assert_eq!(cluster.owner(slot).port(), to.port());
    assert!(
        !renewed.is_lost(),
        "a watched hold was lost during the migration"
    );
    renewed.unlock().unwrap();
}
