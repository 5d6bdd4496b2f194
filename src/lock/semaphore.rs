//! The leased semaphore's handle and its permits: a lock handle of the permits kind, with
//! the calls of a semaphore.

use std::fmt;
use std::time::{Duration, Instant};

use crate::base::error::Result;
use crate::kinds::call::Call;
use crate::kinds::permits::scripts;
use crate::kinds::permits::{self, Permits};
use crate::layout::names;
use crate::lease::target::Target;
use crate::lock::guard::LockGuard;
use crate::lock::handle::Lock;
use crate::lock::hold_watch::HoldWatch;
use crate::notify::cancel::Cancel;

use crate::kinds::counted::{MAX_PERMITS, MAX_TOTAL};

/// A leased semaphore: up to its number of permits may be held at once, by any threads and
/// processes, each permit with a lease. Made by
/// [`LockClient::leased_semaphore`](crate::LockClient::leased_semaphore); Redisson's
/// `RPermitExpirableSemaphore` layout, so Java services share it.
///
/// A permit taken without a lease is renewed by the watchdog while held, like a lock; one
/// taken `*_with_lease` expires. Either way, the permits of a holder that crashed come back
/// when their leases run out. Acquiring waits like a lock does: woken by a release (Redisson's
/// message, the number of permits available, wakes that many waiters), and at the latest
/// when the first held lease ends, since a permit whose lease ran out comes back without a
/// message.
///
/// ```no_run
/// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
/// let pool = client.leased_semaphore("db-connections");
/// pool.try_set_permits(3)?; // only if not set yet
/// let permit = pool.acquire()?; // one of three
/// println!("holding {}", permit.id());
/// permit.release()?;
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone)]
pub struct LeasedSemaphore {
    permits: Lock<Permits>,
}

/// One held permit of a [`LeasedSemaphore`]; gives it back when dropped. `Send`: any thread may
/// release it.
#[must_use = "a permit is given back when dropped"]
pub struct LeasedPermit {
    guard: LockGuard<Permits>,
}

impl LeasedSemaphore {
    pub(crate) fn new(target: Target) -> Self {
        LeasedSemaphore {
            permits: Lock::new(target),
        }
    }

    /// The semaphore's whole name, lossily decoded as [`Lock::name`] says.
    pub fn name(&self) -> &str {
        self.permits.name()
    }

    /// This semaphore, with its blocking acquisitions cancellable by `cancel`: once it is
    /// cancelled, a wait in progress and every later one end with
    /// [`Error::Cancelled`](crate::Error::Cancelled) within one round trip with Redis (see
    /// [`Lock::with_cancel`]; an attempt that took a permit as the token was cancelled
    /// returns it).
    pub fn with_cancel(&self, cancel: &Cancel) -> Self {
        LeasedSemaphore {
            permits: self.permits.with_cancel(cancel),
        }
    }

    fn target(&self) -> &Target {
        &self.permits.target
    }

    /// Sets the number of permits to `permits` (1 to 2^40) if it has none yet; false, with
    /// nothing changed, when it has.
    pub fn try_set_permits(&self, permits: u64) -> Result<bool> {
        Ok(self.change(true, permits)? >= 0)
    }

    /// Adds `permits` (1 to 2^40) to the permits available, waking as many waiters;
    /// returns the number available after.
    pub fn add_permits(&self, permits: u64) -> Result<i64> {
        self.change(false, permits)
    }

    /// Sets the number of permits available now to `permits` (1 to 2^40), whatever it
    /// was, waking as many waiters; returns the number available before (0 when it had
    /// none). Held permits stay held and come back on top of `permits` when released;
    /// held permits whose leases had run out are dropped. For an operator who resizes the
    /// pool; [`try_set_permits`](Self::try_set_permits) is the one for start-up.
    ///
    /// ```no_run
    /// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
    /// let pool = client.leased_semaphore("db-connections");
    /// pool.set_permits(10)?; // 10 available now, whatever there were
    /// let left = pool.reduce_permits(4)?; // up to 4 fewer, never below zero
    /// println!("{left} left, {} taken", pool.drain_permits()?);
    /// pool.delete()?; // gone: held permits fail to release
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn set_permits(&self, permits: u64) -> Result<i64> {
        let target = self.target();
        check_permits(target, permits)?;
        let key = target.open()?;
        let timeouts = names::semaphore_timeouts(key);
        let cmd = scripts::semaphore_set(key, &timeouts, &names::semaphore_channel(key), permits);
        self.run(&cmd).map(|before| before.max(0))
    }

    /// Takes up to `permits` (1 to 2^40) away from the permits available, never below
    /// zero, and returns the number available after (0 when fewer were available than
    /// asked). Held permits are left alone: each comes back when released, so to shrink a
    /// pool whose permits are held, reduce what is available and let the holders release.
    /// Held permits whose leases had run out come back first and count as available. A
    /// semaphore without permits is left as it is (0).
    pub fn reduce_permits(&self, permits: u64) -> Result<i64> {
        check_permits(self.target(), permits)?;
        self.reduce(permits).map(|(_, left)| left)
    }

    /// Takes every permit available and returns how many, without a guard: they are gone
    /// until someone adds permits. Held permits are left alone; those whose leases had run
    /// out come back first and are taken too.
    pub fn drain_permits(&self) -> Result<u64> {
        self.reduce(MAX_TOTAL).map(|(taken, _)| taken)
    }

    /// Takes up to `permits` away: how many it took, and how many are left.
    fn reduce(&self, permits: u64) -> Result<(u64, i64)> {
        let target = self.target();
        let key = target.open()?;
        let timeouts = names::semaphore_timeouts(key);
        let cmd =
            scripts::semaphore_reduce(key, &timeouts, &names::semaphore_channel(key), permits);
        let nodes = target.shared.nodes();
        let (taken, left): (i64, i64) = nodes
            .agreed(nodes.run_all_unhurried(&cmd))
            .map_err(|err| target.wrong_kind(err))?;
        Ok((u64::try_from(taken).unwrap_or_default(), left.max(0)))
    }

    /// Deletes the semaphore: its permits and its record of held permits. Returns whether
    /// there was anything to delete. Permits held when it was deleted are not held any
    /// more: their release fails with [`Error::Lost`](crate::Error::Lost) (by
    /// [`LeasedPermit`]; [`Error::NotHeld`](crate::Error::NotHeld) by id), their watchdog marks
    /// them lost at its next renewal, and waiters wait for permits to be set again. A key
    /// of another kind is [`Error::WrongKind`](crate::Error::WrongKind), left as it is.
    pub fn delete(&self) -> Result<bool> {
        let target = self.target();
        let key = target.open()?;
        let cmd = scripts::semaphore_delete(key, &names::semaphore_timeouts(key));
        self.run(&cmd).map(|deleted| deleted == 1)
    }

    /// `cmd` on every node, and the answer a quorum agrees on at least.
    fn run(&self, cmd: &redis::Cmd) -> Result<i64> {
        let target = self.target();
        let nodes = target.shared.nodes();
        nodes
            .agreed(nodes.run_all_unhurried::<i64>(cmd))
            .map_err(|err| target.wrong_kind(err))
    }

    fn change(&self, set: bool, permits: u64) -> Result<i64> {
        let target = self.target();
        check_permits(target, permits)?;
        let key = target.open()?;
        let cmd = scripts::semaphore_add(key, &names::semaphore_channel(key), set, permits);
        self.run(&cmd)
    }

    /// The permits available now, counting those whose leases have run out (they come back
    /// at the next acquisition). Never below zero. Reads only.
    pub fn available_permits(&self) -> Result<i64> {
        let target = self.target();
        let key = target.open()?;
        let cmd = scripts::semaphore_available(key, &names::semaphore_timeouts(key));
        self.run(&cmd).map(|count| count.max(0))
    }

    /// Waits until a permit is free and takes it; the watchdog renews its lease until it
    /// is released. Waits without bound unless the client has a
    /// [`max_wait`](crate::LockClientBuilder::max_wait).
    pub fn acquire(&self) -> Result<LeasedPermit> {
        self.permits.lock().map(LeasedPermit::new)
    }

    /// Takes a permit if one is free; `None` when none is.
    pub fn try_acquire(&self) -> Result<Option<LeasedPermit>> {
        Ok(self.permits.try_lock()?.map(LeasedPermit::new))
    }

    /// Waits at most `timeout` for a permit; a timeout whose end the clock cannot hold
    /// (such as `Duration::MAX`) sets no deadline, as in [`Lock::try_lock_for`].
    pub fn try_acquire_for(&self, timeout: Duration) -> Result<Option<LeasedPermit>> {
        Ok(self.permits.try_lock_for(timeout)?.map(LeasedPermit::new))
    }

    /// Waits until `deadline` at most for a permit.
    pub fn try_acquire_until(&self, deadline: Instant) -> Result<Option<LeasedPermit>> {
        Ok(self
            .permits
            .try_lock_until(deadline)?
            .map(LeasedPermit::new))
    }

    /// Like [`acquire`](Self::acquire), for a permit with a fixed lease and no watchdog.
    pub fn acquire_with_lease(&self, lease: Duration) -> Result<LeasedPermit> {
        self.permits.lock_with_lease(lease).map(LeasedPermit::new)
    }

    /// Like [`try_acquire`](Self::try_acquire), with a fixed lease and no watchdog.
    pub fn try_acquire_with_lease(&self, lease: Duration) -> Result<Option<LeasedPermit>> {
        Ok(self
            .permits
            .try_lock_with_lease(lease)?
            .map(LeasedPermit::new))
    }

    /// Like [`try_acquire_for`](Self::try_acquire_for), with a fixed lease and no watchdog.
    pub fn try_acquire_with_lease_for(
        &self,
        timeout: Duration,
        lease: Duration,
    ) -> Result<Option<LeasedPermit>> {
        let taken = self.permits.try_lock_with_lease_for(timeout, lease)?;
        Ok(taken.map(LeasedPermit::new))
    }

    /// Like [`try_acquire_until`](Self::try_acquire_until), with a fixed lease and no
    /// watchdog.
    pub fn try_acquire_with_lease_until(
        &self,
        deadline: Instant,
        lease: Duration,
    ) -> Result<Option<LeasedPermit>> {
        let taken = self.permits.try_lock_with_lease_until(deadline, lease)?;
        Ok(taken.map(LeasedPermit::new))
    }

    /// Gives back the permit `id` (as [`LeasedPermit::id`] shows it), held by anyone: a permit
    /// taken in another process, say. [`Error::NotHeld`](crate::Error::NotHeld) when it is
    /// not held (never, given back already, or its lease ran out); an id that is not 32
    /// lowercase hex digits (no sign, no spaces) is
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument), and nothing is sent.
    pub fn release(&self, id: &str) -> Result<()> {
        let target = self.target();
        let parsed = names::parse_hex_id(id).ok_or_else(|| {
            target.invalid_argument("id", "must be 32 lowercase hex digits".into())
        })?;
        target.begin()?;
        permits::release_id(target, parsed)
    }
}

/// [`Error::InvalidArgument`](crate::Error::InvalidArgument) unless `permits` is 1 to 2^40.
pub(crate) fn check_permits(target: &Target, permits: u64) -> Result<()> {
    if !(1..=MAX_PERMITS).contains(&permits) {
        let reason = format!("must be 1..={MAX_PERMITS}");
        return Err(target.invalid_argument("permits", reason));
    }
    Ok(())
}

impl fmt::Debug for LeasedSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeasedSemaphore")
            .field("name", &self.name())
            .finish()
    }
}

impl LeasedPermit {
    fn new(guard: LockGuard<Permits>) -> Self {
        LeasedPermit { guard }
    }

    /// The permit's id: 32 lowercase hex digits, as Redisson shows them.
    pub fn id(&self) -> String {
        self.guard.hold.held.id()
    }

    /// Gives the permit back and reports the result: [`Error::Lost`](crate::Error::Lost)
    /// when its lease had run out (it was others' again). Where Redis could not be reached,
    /// did not answer or the cluster slot was moving, the client sends the release again in
    /// the background until it gets through or the lease has run out.
    pub fn release(self) -> Result<()> {
        self.guard.unlock()
    }

    /// Sets the permit's remaining lease to `lease` ([`MIN_LEASE`](crate::MIN_LEASE) to
    /// [`MAX_LEASE`](crate::MAX_LEASE)), from now. [`Error::Lost`](crate::Error::Lost) when
    /// the permit is no longer held (its lease had run out, it was released by id, or the
    /// semaphore was deleted). On a permit the watchdog renews, the next renewal sets the
    /// client's lease again.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
    /// let pool = client.leased_semaphore("db-connections");
    /// let permit = pool.acquire_with_lease(Duration::from_secs(10))?;
    /// permit.extend(Duration::from_secs(60))?; // the job runs longer than planned
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn extend(&self, lease: Duration) -> Result<()> {
        let hold = &self.guard.hold;
        permits::extend(&self.guard.lock().target, &hold.holding, &hold.held, lease)
    }

    /// Whether the permit is lost (see [`LockGuard::is_lost`]): its lease ran out, or the
    /// watchdog or a release found it gone.
    pub fn is_lost(&self) -> bool {
        self.guard.is_lost()
    }

    /// Where the permit stands (see [`LockGuard::health`]).
    pub fn health(&self) -> crate::Health {
        self.guard.health()
    }

    /// A watch on this permit that other threads may keep and wait on (see
    /// [`LockGuard::watch`]).
    pub fn watch(&self) -> HoldWatch {
        self.guard.watch()
    }

    /// Until when the permit is surely held (see [`LockGuard::valid_until`]).
    pub fn valid_until(&self) -> Instant {
        self.guard.valid_until()
    }

    /// Whether the watchdog renews the permit (taken without an explicit lease).
    pub fn is_watched(&self) -> bool {
        self.guard.is_watched()
    }
}

impl fmt::Debug for LeasedPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeasedPermit")
            .field("semaphore", &self.guard.lock().name())
            .field("id", &self.id())
            .finish()
    }
}
