//! What this process holds: per lock key and thread, the hold count and its watchdog.
//!
//! Redis is the truth; this table mirrors this client's own fields so that a release knows
//! which lease to leave behind, when to stop the watchdog, and whether a guard still refers
//! to the holding it was part of.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::watchdog::Ticket;

/// A lock key and the owning thread's number.
pub(crate) type HoldId = (Arc<[u8]>, u64);

/// One uninterrupted holding of a lock by one thread: from the first hold to the last
/// release, or until it is found lost. Guards keep it to tell whether they still belong.
#[derive(Debug, Default)]
pub(crate) struct Holding {
    lost: AtomicBool,
}

impl Holding {
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    pub fn mark_lost(&self) {
        self.lost.store(true, Ordering::Release);
    }
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
