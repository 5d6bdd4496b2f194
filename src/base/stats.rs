//! Counters a client keeps about renewals and losses, for monitoring.

use crate::base::metrics;
use std::sync::atomic::{AtomicU64, Ordering};

/// What a client's watchdogs renewed and what its holds lost since it was built; see [`LockClient::stats`](crate::LockClient::stats).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Lease renewals that Redis confirmed.
    pub renewals: u64,
    /// Renewals that failed with a Redis or connection error (each retried until the lease
    /// would have run out).
    pub renewal_failures: u64,
    /// Holdings found lost: by the watchdog, by a release or by a re-entry.
    pub locks_lost: u64,
    /// Holds this client's waiters took on a release's word, without an attempt of their
    /// own: a fair lock's direct hand-off (see
    /// [`direct_handoff`](crate::LockClientBuilder::direct_handoff)).
    pub grants_taken: u64,
}

/// The live counters behind [`Stats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    renewals: AtomicU64,
    renewal_failures: AtomicU64,
    locks_lost: AtomicU64,
    grants_taken: AtomicU64,
}

impl Counters {
    pub fn renewed(&self) {
        self.renewals.fetch_add(1, Ordering::Relaxed);
        metrics::renewal(true);
    }

    pub fn renewal_failed(&self) {
        self.renewal_failures.fetch_add(1, Ordering::Relaxed);
        metrics::renewal(false);
    }

    pub fn lost(&self) {
        self.locks_lost.fetch_add(1, Ordering::Relaxed);
        metrics::lost();
    }

    pub fn grant_taken(&self) {
        self.grants_taken.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> Stats {
        Stats {
            renewals: self.renewals.load(Ordering::Relaxed),
            renewal_failures: self.renewal_failures.load(Ordering::Relaxed),
            locks_lost: self.locks_lost.load(Ordering::Relaxed),
            grants_taken: self.grants_taken.load(Ordering::Relaxed),
        }
    }
}
