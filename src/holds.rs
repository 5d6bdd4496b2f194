//! What this process holds: per lock key and thread, the hold count and its watchdog.
//!
//! Redis is the truth; this table mirrors this client's own fields so that a release knows
//! which lease to leave behind, when to stop the watchdog, and whether a guard still refers
//! to the holding it was part of.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::watchdog::Ticket;

/// A lock key and the owning thread's number.
pub(crate) type HoldId = (Arc<[u8]>, u64);

/// One uninterrupted holding of a lock by one thread: from the first hold to the last
/// release, or until it is found lost. Guards keep it to tell whether they still belong.
#[derive(Debug)]
pub(crate) struct Holding {
    lost: AtomicBool,
    valid_until: Mutex<Instant>,
    /// Held by the watchdog for a renewal round and by a release while it runs, so that a
    /// late renewal cannot put back a hold that the release just deleted.
    pub round: Mutex<()>,
}

impl Default for Holding {
    fn default() -> Self {
        Holding {
            lost: AtomicBool::new(false),
            valid_until: Mutex::new(Instant::now()),
            round: Mutex::new(()),
        }
    }
}

impl Holding {
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    /// Marks the holding lost; true the first time.
    pub fn mark_lost(&self) -> bool {
        !self.lost.swap(true, Ordering::AcqRel)
    }

    /// Until when the lock is surely held, as of the last acquisition or renewal.
    pub fn valid_until(&self) -> Instant {
        *self.valid_until.lock()
    }

    pub fn set_valid_until(&self, until: Instant) {
        *self.valid_until.lock() = until;
    }
}

/// Until when a lease granted by a command sent at `sent` surely lasts: the lease less the
/// allowance for clock drift between this process and the nodes (1% of the lease + 2 ms, as
/// the Redlock description in the Redis documentation suggests). `None` if nothing is left.
pub(crate) fn validity_end(sent: Instant, lease: Duration) -> Option<Instant> {
    let drift = lease / 100 + Duration::from_millis(2);
    lease.checked_sub(drift).map(|validity| sent + validity)
}

/// The local state of one holding.
pub(crate) struct Hold {
    /// Holds taken and not yet released; equals the hash field's value.
    pub count: u32,
    /// How many of them were taken without an explicit lease (watchdog-backed).
    pub watched: u32,
    /// Lease left on the key when only explicit-lease holds remain.
    pub lease: Duration,
    /// Runs while `watched > 0`; dropping it stops the renewals.
    pub watchdog: Option<Ticket>,
    pub holding: Arc<Holding>,
}

impl Hold {
    pub fn new(lease: Duration) -> Self {
        Hold {
            count: 0,
            watched: 0,
            lease,
            watchdog: None,
            holding: Arc::default(),
        }
    }
}

pub(crate) type Holds = HashMap<HoldId, Hold>;
