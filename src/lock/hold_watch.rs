//! A view of one hold that other threads may keep: whether it was lost, its health and
//! validity, and a wait for its loss.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::base::health::Health;
use crate::kinds::holding::{self, Holding};

/// A watch on the holds of a guard or permit, made by
/// [`LockGuard::watch`](crate::LockGuard::watch),
/// [`LeasedPermit::watch`](crate::LeasedPermit::watch),
/// [`MultiGuard::watch`](crate::MultiGuard::watch) (every member: lost when any is) or
/// [`Leadership::watch`](crate::Leadership::watch): `Send + Sync + Clone`, so a helper thread can
/// check the hold (a guard of a reentrant lock cannot leave its thread) or block until it
/// is lost, where [`on_lock_lost`](crate::LockClientBuilder::on_lock_lost) hears every
/// lock of the client.
///
/// It sees what the guard sees: the hold is lost when its validity ends without a renewal
/// getting through, or when the watchdog, a release or a re-entry finds it gone. A watch
/// kept after the guard is released reports what was last known, and
/// [`is_released`](Self::is_released).
///
/// ```no_run
/// # use std::time::Duration;
/// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
/// let guard = client.lock("orders:42").lock()?;
/// let watch = guard.watch();
/// let stop_work = std::thread::spawn(move || {
///     if watch.wait_lost(Duration::from_secs(60)) {
///         // the lock is gone: stop the work it protects
///     }
/// });
/// # drop(guard);
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone)]
pub struct HoldWatch {
    /// One holding, or a multi-lock's members'.
    holdings: Arc<[Arc<Holding>]>,
    /// Set when the guard or permit watched is released or dropped.
    released: Arc<AtomicBool>,
    name: Arc<str>,
}

impl HoldWatch {
    pub(crate) fn new(holdings: Vec<Arc<Holding>>, released: Arc<AtomicBool>, name: &str) -> Self {
        HoldWatch {
            holdings: holdings.into(),
            released,
            name: name.into(),
        }
    }

    /// Whether the guard or permit watched was released or dropped.
    pub fn is_released(&self) -> bool {
        self.released.load(Ordering::Acquire)
    }

    /// The name of the lock or semaphore held.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the hold is lost (as [`LockGuard::is_lost`](crate::LockGuard::is_lost));
    /// for a multi-lock, whether any member's is.
    pub fn is_lost(&self) -> bool {
        self.holdings.iter().any(|holding| holding.is_lost())
    }

    /// Where the hold stands (as [`LockGuard::health`](crate::LockGuard::health)); for a
    /// multi-lock, the least sure of its members'.
    pub fn health(&self) -> Health {
        Health::worst(self.holdings.iter().map(|holding| holding.health()))
    }

    /// Until when the hold is surely held (as
    /// [`LockGuard::valid_until`](crate::LockGuard::valid_until)); for a multi-lock, the
    /// soonest of its members'.
    pub fn valid_until(&self) -> Instant {
        let ends = self.holdings.iter().map(|holding| holding.valid_until());
        ends.min().unwrap_or_else(Instant::now)
    }

    /// Blocks until the hold is lost, at most `timeout`, and returns whether it was. Woken
    /// by whatever finds the loss (the watchdog, a release, a re-entry) or by the end of
    /// the hold's validity, not by polling; returns at once if it is lost already. It also returns, `false`, once the
    /// guard or permit watched is released or dropped ([`is_released`](Self::is_released)),
    /// so a helper thread waiting on it ends with the hold.
    pub fn wait_lost(&self, timeout: Duration) -> bool {
        holding::wait_lost(&self.holdings, timeout, || self.is_released())
    }
}

impl fmt::Debug for HoldWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HoldWatch")
            .field("lock", &self.name())
            .field("lost", &self.is_lost())
            .finish()
    }
}
