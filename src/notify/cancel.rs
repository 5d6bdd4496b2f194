//! Cancelling waits from another thread: a token that raises the signal of every wait
//! registered with it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::notify::hub::Signal;

/// A cancellation token for blocking acquisitions: [`cancel`](Self::cancel) ends every wait
/// made with it, now and later, with [`Error::Cancelled`](crate::Error::Cancelled).
///
/// Cheap to clone (clones are the same token), `Send + Sync`. Hand it to a handle with
/// `with_cancel`, which every handle that waits has ([`Lock`](crate::Lock::with_cancel),
/// [`ReadWriteLock`](crate::ReadWriteLock::with_cancel),
/// [`MultiLock`](crate::MultiLock::with_cancel),
/// [`LeasedSemaphore`](crate::LeasedSemaphore::with_cancel),
/// [`CountingSemaphore`](crate::CountingSemaphore::with_cancel),
/// [`CountDownLatch`](crate::CountDownLatch::with_cancel) and
/// [`Election`](crate::Election::with_cancel)); the handle it returns
/// has every acquisition call of the original, and each of them ends within one round trip
/// with Redis once the token is cancelled. A cancelled token stays cancelled.
///
/// ```no_run
/// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
/// let stop = redmutex::Cancel::new();
/// let lock = client.lock("orders:42").with_cancel(&stop);
/// let waiter = std::thread::spawn(move || lock.lock().map(drop));
/// stop.cancel(); // the waiter returns Err(Error::Cancelled { .. }) unless it got the lock
/// # let _ = waiter.join();
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone, Default)]
pub struct Cancel {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    cancelled: AtomicBool,
    /// The signals of the waits in progress with this token, by their address: a client's
    /// token has every wait of the client, so each comes and goes in constant time.
    waits: Mutex<HashMap<usize, Weak<Signal>>>,
}

impl Cancel {
    /// A token not cancelled yet.
    pub fn new() -> Self {
        Cancel::default()
    }

    /// Cancels every wait made with this token, those in progress and those to come.
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::SeqCst);
        let waits = std::mem::take(&mut *self.inner.waits.lock());
        for signal in waits.values().filter_map(Weak::upgrade) {
            signal.raise();
        }
    }

    /// Whether [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// Registers a wait's signal, raised by a cancel until the returned registration is
    /// dropped. A token cancelled already raises it at once.
    pub(crate) fn register(&self, signal: &Arc<Signal>) -> Registration {
        let address = Arc::as_ptr(signal) as usize;
        (self.inner.waits.lock()).insert(address, Arc::downgrade(signal));
        // A cancel that set the flag before the insert may have taken the waits already.
        if self.is_cancelled() {
            signal.raise();
        }
        Registration {
            inner: self.inner.clone(),
            address,
        }
    }
}

impl std::fmt::Debug for Cancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cancel")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

/// A wait registered with a [`Cancel`]; dropping it unregisters the wait.
pub(crate) struct Registration {
    inner: Arc<Inner>,
    /// The signal's address, its key among the waits; the registration's owner keeps the
    /// signal alive until the registration is dropped, so no other wait can have it.
    address: usize,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.inner.waits.lock().remove(&self.address);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_cancel_raises_registered_waits_and_later_ones() {
        let cancel = Cancel::new();
        let signal = Arc::new(Signal::default());
        let registration = cancel.register(&signal);
        let other = cancel.clone();
        let thread = std::thread::spawn(move || other.cancel());
        assert!(signal.wait(Duration::from_secs(60)), "woken by the cancel");
        thread.join().unwrap();
        drop(registration);
        assert!(cancel.is_cancelled());
        let late = Arc::new(Signal::default());
        let _registration = cancel.register(&late);
        assert!(
            late.take(),
            "raised at once when registered after the cancel"
        );
    }

    #[test]
    fn a_dropped_registration_is_forgotten() {
        let cancel = Cancel::new();
        let signal = Arc::new(Signal::default());
        drop(cancel.register(&signal));
        assert!(cancel.inner.waits.lock().is_empty());
        cancel.cancel();
        assert!(!signal.take(), "not raised once unregistered");
    }
}
