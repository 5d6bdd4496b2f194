//! The semaphore without leases: a lock handle of the counted kind, with the calls of a
//! semaphore whose permits anyone may give back or add.

use std::fmt;
use std::time::{Duration, Instant};

use crate::base::error::Result;
use crate::kinds::call::Call;
use crate::kinds::counted::scripts::{self, CsemRead};
use crate::kinds::counted::{self, Counted};
use crate::layout::names;
use crate::lease::target::Target;
use crate::lock::guard::LockGuard;
use crate::lock::handle::Lock;
use crate::lock::semaphore::check_permits;
use crate::notify::cancel::Cancel;

/// A semaphore without leases: a number of permits that acquisitions take and releases give
/// back, by any threads and processes. Made by
/// [`LockClient::counting_semaphore`](crate::LockClient::counting_semaphore); Redisson's
/// `RSemaphore` layout (one string holding the number available), so Java services share
/// it.
///
/// **The permits of a holder that crashes are not given back**: nothing records who holds
/// what, and nothing expires. Someone has to give them back with
/// [`release`](Self::release) or [`add_permits`](Self::add_permits). Where a holder may die
/// without releasing, use the leased [`LeasedSemaphore`](crate::LeasedSemaphore), whose permits come
/// back when their leases run out.
///
/// Acquiring waits like a lock does: woken by a release (Redisson's message, the number of
/// permits available, wakes that many waiters), and polling at the client's retry cap in
/// case a change came without one. An attempt whose reply is lost takes nothing for good: what
/// it took is given back by its own record of it, and a release retried after a lost reply
/// counts once.
///
/// ```no_run
/// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
/// let slots = client.counting_semaphore("upload-slots");
/// slots.try_set_permits(4)?; // only if not set yet
/// let two = slots.acquire_many(2)?; // two of four
/// println!("{} left", slots.available_permits()?);
/// two.release()?;
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone)]
pub struct CountingSemaphore {
    permits: Lock<Counted>,
}

/// Permits taken from a [`CountingSemaphore`]; gives them back when dropped. `Send`: any
/// thread may release them.
#[must_use = "the permits are given back when dropped"]
pub struct CountedPermits {
    guard: LockGuard<Counted>,
}

impl CountingSemaphore {
    pub(crate) fn new(target: Target) -> Self {
        CountingSemaphore {
            permits: Lock::new(target),
        }
    }

    /// The semaphore's whole name, lossily decoded as [`Lock::name`] says.
    pub fn name(&self) -> &str {
        self.permits.name()
    }

    /// This semaphore, with its blocking acquisitions cancellable by `cancel` (see
    /// [`Lock::with_cancel`]): a wait in progress and every later one end with
    /// [`Error::Cancelled`](crate::Error::Cancelled) within one round trip with Redis.
    pub fn with_cancel(&self, cancel: &Cancel) -> Self {
        CountingSemaphore {
            permits: self.permits.with_cancel(cancel),
        }
    }

    fn target(&self) -> &Target {
        &self.permits.target
    }

    /// The handle whose attempts take `n` permits (1 to 2^40).
    fn taking(&self, n: u64) -> Result<Lock<Counted>> {
        check_permits(self.target(), n)?;
        let mut lock = self.permits.clone();
        lock.request = n;
        Ok(lock)
    }

    /// Waits until a permit is available and takes it. Waits without bound unless the
    /// client has a [`max_wait`](crate::LockClientBuilder::max_wait).
    pub fn acquire(&self) -> Result<CountedPermits> {
        self.acquire_many(1)
    }

    /// Waits until `n` permits (1 to 2^40) are available at once and takes them together.
    pub fn acquire_many(&self, n: u64) -> Result<CountedPermits> {
        self.taking(n)?.lock().map(CountedPermits::new)
    }

    /// Takes a permit if one is available; `None` when none is.
    pub fn try_acquire(&self) -> Result<Option<CountedPermits>> {
        self.try_acquire_many(1)
    }

    /// Takes `n` permits (1 to 2^40) if as many are available; `None`, taking none, when
    /// fewer are.
    pub fn try_acquire_many(&self, n: u64) -> Result<Option<CountedPermits>> {
        Ok(self.taking(n)?.try_lock()?.map(CountedPermits::new))
    }

    /// Waits at most `timeout` for a permit; a timeout whose end the clock cannot hold
    /// (such as `Duration::MAX`) sets no deadline, as in [`Lock::try_lock_for`].
    pub fn try_acquire_for(&self, timeout: Duration) -> Result<Option<CountedPermits>> {
        self.try_acquire_many_for(1, timeout)
    }

    /// Waits at most `timeout` for `n` permits (1 to 2^40) at once.
    pub fn try_acquire_many_for(
        &self,
        n: u64,
        timeout: Duration,
    ) -> Result<Option<CountedPermits>> {
        Ok(self
            .taking(n)?
            .try_lock_for(timeout)?
            .map(CountedPermits::new))
    }

    /// Waits until `deadline` at most for a permit.
    pub fn try_acquire_until(&self, deadline: Instant) -> Result<Option<CountedPermits>> {
        self.try_acquire_many_until(1, deadline)
    }

    /// Waits until `deadline` at most for `n` permits (1 to 2^40) at once.
    pub fn try_acquire_many_until(
        &self,
        n: u64,
        deadline: Instant,
    ) -> Result<Option<CountedPermits>> {
        Ok(self
            .taking(n)?
            .try_lock_until(deadline)?
            .map(CountedPermits::new))
    }

    /// Gives `n` permits (1 to 2^40) back, taken by anyone (a holder that crashed, another
    /// process, a Java service), waking as many waiters; returns the number available
    /// after. Nothing checks that they were taken: like Redisson's `release`, this adds to
    /// the count, and creates it when missing. Retried after a lost reply, it counts once.
    pub fn release(&self, n: u64) -> Result<i64> {
        let target = self.target();
        check_permits(target, n)?;
        target.open()?;
        counted::add(target, n as i64, None)
    }

    /// Adds `n` permits (1 to 2^40), waking waiters for the number then available;
    /// returns that number. Nothing checks that they were taken: see
    /// [`release`](Self::release), which is the same call for permits given back. A count
    /// that would pass 2^50 is [`Error::InvalidArgument`](crate::Error::InvalidArgument),
    /// with nothing changed.
    pub fn add_permits(&self, n: u64) -> Result<i64> {
        let target = self.target();
        check_permits(target, n)?;
        target.open()?;
        counted::add(target, n as i64, None)
    }

    /// Takes `n` permits (1 to 2^40) away from those available, down below zero if need
    /// be, as Redisson's `reducePermits` does; returns the number available after. Permits
    /// below zero are owed: releases pay them back before anyone may acquire. A count that
    /// would pass -2^50 is [`Error::InvalidArgument`](crate::Error::InvalidArgument), with
    /// nothing changed.
    pub fn reduce_permits(&self, n: u64) -> Result<i64> {
        let target = self.target();
        check_permits(target, n)?;
        target.open()?;
        counted::add(target, -(n as i64), None)
    }

    /// Sets the number of permits to `n` (1 to 2^40) if it has none yet; false, with
    /// nothing changed, when it has. Retried after a lost reply, it answers what the first
    /// try did.
    pub fn try_set_permits(&self, n: u64) -> Result<bool> {
        let target = self.target();
        check_permits(target, n)?;
        let key = target.open()?;
        counted::node(target)?;
        let latch = names::unlock_latch(key, &names::random_id());
        let latch_ttl = target.shared.config().latch_ttl();
        let channel = names::semaphore_channel(key);
        let cmd = scripts::csem_set((key, &latch), &channel, n, latch_ttl);
        self.run(&cmd).map(|set| set == 1)
    }

    /// The number of permits available now: 0 when never set, below zero when more were
    /// taken away than there were. Reads only.
    pub fn available_permits(&self) -> Result<i64> {
        let target = self.target();
        let key = target.open()?;
        counted::node(target)?;
        self.run(&scripts::csem_read(key, CsemRead::Get))
    }

    /// Takes every permit available and returns how many, without a guard: they are gone
    /// until someone adds or releases permits. A count at or below zero is left as it is
    /// (0).
    ///
    /// Retried after a lost reply, it answers what the first try did.
    pub fn drain_permits(&self) -> Result<u64> {
        self.change(|latch, ttl| CsemRead::Drain(latch, ttl))
            .map(|drained| u64::try_from(drained).unwrap_or_default())
    }

    /// Deletes the semaphore's count; returns whether there was one. Waiters wait for
    /// permits to be set again; permits held and released later create it again. Retried
    /// after a lost reply, it answers what the first try did.
    pub fn delete(&self) -> Result<bool> {
        self.change(|latch, ttl| CsemRead::Delete(latch, ttl))
            .map(|deleted| deleted == 1)
    }

    /// Runs `op` with a latch of its own call.
    fn change(&self, op: impl FnOnce(&[u8], Duration) -> CsemRead<'_>) -> Result<i64> {
        let target = self.target();
        let key = target.open()?;
        counted::node(target)?;
        let latch = names::unlock_latch(key, &names::random_id());
        let op = op(&latch, target.shared.config().latch_ttl());
        self.run(&scripts::csem_read(key, op))
    }

    fn run(&self, cmd: &redis::Cmd) -> Result<i64> {
        let target = self.target();
        let nodes = target.shared.nodes();
        nodes
            .agreed(nodes.run_all_unhurried::<i64>(cmd))
            .map_err(|err| target.wrong_kind(err))
    }
}

impl fmt::Debug for CountingSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountingSemaphore")
            .field("name", &self.name())
            .finish()
    }
}

impl CountedPermits {
    fn new(guard: LockGuard<Counted>) -> Self {
        CountedPermits { guard }
    }

    /// How many permits these are.
    pub fn count(&self) -> u64 {
        self.guard.hold.held.count
    }

    /// Gives the permits back, waking as many waiters, and reports the result. A retry
    /// within the call after a lost reply counts once. When Redis could not be reached, did
    /// not answer or the cluster slot was moving, the client makes sure of it itself: what
    /// the acquisition took is given back once (and nothing if this release did run), in
    /// the background, until Redis can be reached, for up to an hour after the
    /// acquisition. Do not give them back again by [`CountingSemaphore::release`].
    pub fn release(self) -> Result<()> {
        self.guard.unlock()
    }
}

impl fmt::Debug for CountedPermits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountedPermits")
            .field("semaphore", &self.guard.lock().name())
            .field("count", &self.count())
            .finish()
    }
}
