//! The RAII guard of one hold.

use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::base::error::{Error, Result};
use crate::base::metrics;
use crate::kinds::fenced::Fenced;
use crate::kinds::kind::Kind;
use crate::kinds::reentrant::Reentrant;
use crate::kinds::token::{self, Token};
use crate::lease::hold::Hold;
use crate::lock::handle::Lock;
use crate::lock::hold_watch::HoldWatch;

/// One hold of a [`Lock`]; dropping it gives the hold back.
///
/// Dropping releases within the connect and response timeouts and logs a failure;
/// [`unlock`](Self::unlock) releases and reports the result. When the last hold goes, the
/// key is deleted and waiters are told.
///
/// Which guards may move between threads:
///
/// | kind | guard | why |
/// |---|---|---|
/// | every [`ThreadOwned`](crate::ThreadOwned) kind ([`Reentrant`], [`Fenced`], [`Fair`](crate::Fair), [`Spin`](crate::Spin), the non-reentrant ones, [`Read`](crate::Read), [`Write`](crate::Write)) | not `Send` | the hold belongs to the thread that took it: a release from another thread would name the wrong owner |
/// | [`Token`] | `Send` | the hold belongs to its token |
/// | a leased semaphore's [`LeasedPermit`](crate::LeasedPermit) | `Send` | the permit belongs to its id |
/// | a counting semaphore's [`CountedPermits`](crate::CountedPermits) | `Send` | permits are counted, not owned |
///
/// ```compile_fail
/// fn hand_over(lock: redmutex::Lock) -> redmutex::Result<()> {
///     let guard = lock.lock()?;
///     // error: `*const ()` cannot be sent between threads safely
///     std::thread::spawn(move || drop(guard));
///     Ok(())
/// }
/// ```
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct LockGuard<K: Kind = Reentrant> {
    lock: Lock<K>,
    pub(crate) hold: Hold<K::Held>,
    released: bool,
    /// When the hold was taken, for the hold time.
    taken: Instant,
    /// Set at release for the watches of this guard; made by the first watch.
    watched_release: OnceLock<Arc<AtomicBool>>,
    _affinity: PhantomData<K::Affinity>,
}

impl<K: Kind> LockGuard<K> {
    pub(crate) fn new(lock: Lock<K>, hold: Hold<K::Held>) -> Self {
        LockGuard {
            lock,
            hold,
            released: false,
            taken: Instant::now(),
            watched_release: OnceLock::new(),
            _affinity: PhantomData,
        }
    }

    /// Gives the hold back and reports the result: [`Error::Lost`](crate::Error::Lost) when
    /// the hold had already been lost or had expired (the key is then left alone, and the
    /// loss is reported to [`on_lock_lost`](crate::LockClientBuilder::on_lock_lost) if this
    /// release is what found it). On any other error the holds are no longer renewed, and
    /// stay on the server until their lease runs out, except where Redis could not be
    /// reached, did not answer or the cluster slot was moving: the client then sends the
    /// release again in the background until it gets through or the lease has run out, so
    /// that the lock is freed as soon as Redis can be reached. This thread's next
    /// acquisition or release of the lock supersedes that.
    pub fn unlock(mut self) -> Result<()> {
        self.released = true;
        self.release()
    }

    /// Gives the hold back, recording the hold time and any error, and tells the watches.
    fn release(&self) -> Result<()> {
        metrics::released(K::LABEL, self.taken.elapsed());
        let result = self.hold.release::<K>(&self.lock.target);
        if let Some(released) = self.watched_release.get() {
            released.store(true, Ordering::Release);
            self.hold.holding.wake_watchers();
        }
        if let Err(err) = &result {
            metrics::error(err);
        }
        result
    }

    /// Whether the hold is lost: its validity ([`valid_until`](Self::valid_until)) has ended
    /// by this process's clock without a renewal getting through first, or the watchdog, a
    /// release or a re-entry of the same holding found it gone. Once true, it stays true.
    ///
    /// `false` is not a promise: a key deleted from outside is found at the next renewal.
    pub fn is_lost(&self) -> bool {
        self.hold.holding.is_lost()
    }

    /// Where the hold stands: [`Health::Held`](crate::Health::Held) while its last
    /// acquisition or renewal got through and is valid;
    /// [`Uncertain`](crate::Health::Uncertain) once a renewal failed, until one gets
    /// through within the validity; [`Lost`](crate::Health::Lost) once the hold is lost (as
    /// [`is_lost`](Self::is_lost)), its validity ended included.
    pub fn health(&self) -> crate::Health {
        self.hold.holding.health()
    }

    /// Until when the lock is surely held: the last acquisition or renewal that reached a
    /// quorum, plus the lease, less an allowance for clock drift (1% of the lease + 2 ms).
    /// A read hold's validity also shortens when the thread releases another of its read
    /// holds: to the longest lease left among its own (each read hold has its own lease).
    /// Check it before a side effect that must not happen without the lock; past it, the
    /// lock may have expired and been taken by someone else.
    pub fn valid_until(&self) -> Instant {
        self.hold.holding.valid_until()
    }

    /// A watch on this hold that other threads may keep and wait on: `Send + Sync +
    /// Clone`, with [`is_lost`](HoldWatch::is_lost), [`health`](HoldWatch::health),
    /// [`valid_until`](HoldWatch::valid_until) and [`wait_lost`](HoldWatch::wait_lost).
    pub fn watch(&self) -> HoldWatch {
        let released = self.watched_release.get_or_init(Arc::default).clone();
        HoldWatch::new(vec![self.hold.holding.clone()], released, self.lock.name())
    }

    /// Whether the watchdog renews this hold (taken without an explicit lease).
    pub fn is_watched(&self) -> bool {
        self.hold.watched
    }

    /// The lock this guard holds.
    pub fn lock(&self) -> &Lock<K> {
        &self.lock
    }
}

impl LockGuard<Fenced> {
    /// This hold's fencing token: greater than every token issued before it for this lock.
    /// Hand it to the resource with each write; the resource refuses a token lower than one
    /// it has already seen.
    pub fn token(&self) -> u64 {
        self.hold.held
    }
}

impl LockGuard<Token> {
    /// The token this hold is stored under: the value of the lock's key.
    pub fn token(&self) -> &str {
        self.hold.held.token()
    }

    /// Sets the hold's remaining lease to `lease` ([`MIN_LEASE`](crate::MIN_LEASE) to
    /// [`MAX_LEASE`](crate::MAX_LEASE)), if the key still holds this guard's token (on a
    /// quorum of nodes). Returns [`Error::Lost`](crate::Error::Lost) when it no longer does.
    /// On a hold the watchdog renews, the next renewal sets the client's lease again.
    pub fn extend(&self, lease: Duration) -> Result<()> {
        let hold = &self.hold;
        token::extend(&self.lock.target, &hold.holding, &hold.held, lease)
    }
}

impl<K: Kind> Drop for LockGuard<K> {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        match self.release() {
            // In a forked child nothing is released, and nothing logged either: the
            // application's logger may wait on a lock a thread of the parent held.
            Ok(()) | Err(Error::Forked { .. }) => {}
            Err(err) => log::warn!(
                "releasing {} on drop failed: {err:#}",
                self.lock.target.subject()
            ),
        }
    }
}

impl<K: Kind> fmt::Debug for LockGuard<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("lock", &self.lock.name())
            .field("watched", &self.hold.watched)
            .field("lost", &self.is_lost())
            .finish()
    }
}
