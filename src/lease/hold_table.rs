//! What a client holds of its hash-kept locks: per lock key, thread and field, the hold
//! count and its watchdog.
//!
//! Redis is the truth; this table mirrors this client's own fields so that a release knows
//! which lease to leave behind, when to stop the watchdog, and whether a guard still refers
//! to the holding it was part of.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::kinds::holding::Holding;
use crate::kinds::slot::{HoldId, Mode};
use crate::lease::workers::Ticket;

/// The table of one client.
#[derive(Default)]
pub(crate) struct HoldTable {
    table: Mutex<HashMap<HoldId, Entry>>,
}

/// The local state of one holding.
struct Entry {
    /// HoldTable taken and not yet released; equals the hash field's value.
    count: u32,
    /// How many of them were taken without an explicit lease (watchdog-backed).
    watched: u32,
    /// Lease left on the key when only explicit-lease holds remain.
    lease: Duration,
    /// Runs while `watched > 0`; dropping it stops the renewals.
    watchdog: Option<Ticket>,
    holding: Arc<Holding>,
}

/// What a release must do: the owner's count before it and the lease to leave on the holds
/// that remain.
pub(crate) struct Release {
    pub held: u32,
    pub lease: Duration,
}

impl HoldTable {
    /// How many holds `id` has, and whether the watchdog renews them.
    pub fn state(&self, id: &HoldId) -> (u32, bool) {
        self.table
            .lock()
            .get(id)
            .map_or((0, false), |hold| (hold.count, hold.watched > 0))
    }

    /// Whether thread `thread` holds any lock.
    pub fn holds_any(&self, thread: u64) -> bool {
        let table = self.table.lock();
        table
            .iter()
            .any(|(id, hold)| id.1 == thread && hold.count > 0)
    }

    /// The locks thread `thread` holds: each key and which of its fields.
    pub fn held_by(&self, thread: u64) -> Vec<(Arc<[u8]>, Mode)> {
        let table = self.table.lock();
        let held = table
            .iter()
            .filter(|(id, hold)| id.1 == thread && hold.count > 0);
        held.map(|(id, _)| (id.0.clone(), id.2)).collect()
    }

    /// The current holding of `id`, if any.
    pub fn holding(&self, id: &HoldId) -> Option<Arc<Holding>> {
        self.table.lock().get(id).map(|hold| hold.holding.clone())
    }

    /// Records one more hold of `id`, valid until `valid_until`, taken with an explicit
    /// `lease` or (`None`) watched; `watch` starts the watchdog for the first watched hold.
    /// When it fails, nothing is recorded, and the holding is returned with the error for
    /// the caller to give back.
    ///
    /// `watch` runs outside the table's lock: starting a watchdog may start a thread, and
    /// every acquire and release of the client goes through this table.
    pub fn add(
        &self,
        id: &HoldId,
        held_before: u32,
        lease: Option<Duration>,
        default_lease: Duration,
        valid_until: Instant,
        watch: impl Fn(&Arc<Holding>) -> std::io::Result<Ticket>,
    ) -> Result<Arc<Holding>, (Arc<Holding>, std::io::Error)> {
        // A watchdog started for the holding it was started for.
        let mut started: Option<(Arc<Holding>, Ticket)> = None;
        loop {
            let mut table = self.table.lock();
            let hold = table.entry(id.clone()).or_insert_with(|| Entry {
                count: 0,
                watched: 0,
                lease: default_lease,
                watchdog: None,
                // Taken as a re-entry of a holding that ended meanwhile (found lost, and
                // maybe given back): a hold that is lost from the start.
                holding: Arc::new(Holding::new(match held_before {
                    0 => valid_until,
                    _ => Instant::now(),
                })),
            });
            let holding = hold.holding.clone();
            if lease.is_none() && hold.watchdog.is_none() {
                match started.take() {
                    Some((of, ticket)) if Arc::ptr_eq(&of, &holding) => {
                        hold.watchdog = Some(ticket);
                    }
                    // None yet, or one for a holding that ended meanwhile (its loss found).
                    stale => {
                        drop(table);
                        drop(stale);
                        match watch(&holding) {
                            Ok(ticket) => started = Some((holding, ticket)),
                            Err(err) => {
                                self.forget_unheld(id, &holding);
                                return Err((holding, err));
                            }
                        }
                        continue;
                    }
                }
            }
            hold.count += 1;
            match lease {
                Some(lease) => hold.lease = lease,
                None => hold.watched += 1,
            }
            holding.set_valid_until(valid_until);
            drop(table);
            return Ok(holding);
        }
    }

    /// Removes `holding` if it is the current one of `id` and has no holds yet.
    fn forget_unheld(&self, id: &HoldId, holding: &Arc<Holding>) {
        let mut table = self.table.lock();
        if table
            .get(id)
            .is_some_and(|hold| hold.count == 0 && Arc::ptr_eq(&hold.holding, holding))
        {
            table.remove(id);
        }
    }

    /// Takes one hold of `holding` off the table, stopping the watchdog with the last
    /// watched one. `None` when `holding` is no longer the current holding of `id`.
    pub fn release(
        &self,
        id: &HoldId,
        holding: &Arc<Holding>,
        watched: bool,
        default_lease: Duration,
    ) -> Option<Release> {
        let mut table = self.table.lock();
        let hold = table
            .get_mut(id)
            .filter(|hold| Arc::ptr_eq(&hold.holding, holding))?;
        let held = hold.count;
        hold.count -= 1;
        let mut stopped = None;
        if watched {
            hold.watched -= 1;
            if hold.watched == 0 {
                stopped = hold.watchdog.take();
            }
        }
        let lease = match hold.watched {
            0 => hold.lease,
            _ => default_lease,
        };
        if hold.count == 0 {
            table.remove(id);
        }
        drop(table);
        drop(stopped); // stops the renewals, outside the table's lock
        Some(Release { held, lease })
    }

    /// How many holds `id` has (0 when none).
    pub fn count(&self, id: &HoldId) -> u32 {
        self.table.lock().get(id).map_or(0, |hold| hold.count)
    }

    /// Removes whatever holding `id` has; returns it.
    pub fn remove(&self, id: &HoldId) -> Option<Arc<Holding>> {
        let removed = self.table.lock().remove(id);
        removed.map(|hold| hold.holding)
    }

    /// Removes `holding` if it is still the current one of `id` and, with `watched`, if its
    /// watchdog still runs; true if it was removed.
    pub fn forget(&self, id: &HoldId, holding: &Arc<Holding>, watched: bool) -> bool {
        let mut table = self.table.lock();
        let current = table.get(id).is_some_and(|hold| {
            Arc::ptr_eq(&hold.holding, holding) && (!watched || hold.watchdog.is_some())
        });
        let removed = current.then(|| table.remove(id));
        drop(table);
        drop(removed); // stops the renewals, outside the table's lock
        current
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::slot::Mode;
    use crate::lease::workers::Workers;

    #[test]
    fn the_watchdog_starts_outside_the_table_lock() {
        let holds = HoldTable::default();
        let workers = Workers::new(64 * 1024, Duration::from_secs(60));
        let id: HoldId = (Arc::from(&b"lock"[..]), 1, Mode::Only);
        let valid_until = Instant::now() + Duration::from_secs(10);
        let watch = |_: &Arc<Holding>| {
            assert!(
                holds.table.try_lock().is_some(),
                "the watchdog was started under the table's lock"
            );
            workers.start(valid_until, Box::new(|_| {}))
        };
        let lease = Duration::from_secs(30);
        let first = holds
            .add(&id, 0, None, lease, valid_until, watch)
            .ok()
            .unwrap();
        let again = holds
            .add(&id, 0, None, lease, valid_until, watch)
            .ok()
            .unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(holds.state(&id), (2, true));

        // A watchdog that cannot start leaves no trace of a first hold.
        let other: HoldId = (Arc::from(&b"other"[..]), 1, Mode::Only);
        let refused = |_: &Arc<Holding>| Err(std::io::Error::other("no threads"));
        assert!(
            holds
                .add(&other, 0, None, lease, valid_until, refused)
                .is_err()
        );
        assert_eq!(holds.state(&other), (0, false));
    }
}
