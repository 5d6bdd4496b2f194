//! What the properties act on, whatever its kind: something a party takes (a lock, a permit,
//! a leadership, a latch's opening), waits for, and gives back.

use std::time::Instant;

use redmutex::{
    Cancel, CountDownLatch, CountingSemaphore, Election, Kind, LeasedSemaphore, Lock, MultiLock,
    Result,
};

/// A hold, given back by calling it.
pub type Held = Box<dyn FnOnce() -> Result<()>>;

/// The acquisition calls every kind has, in its own words.
pub trait Subject: Send + Sync {
    /// Takes it if it is free now.
    fn try_now(&self) -> Result<Option<Held>>;
    /// Takes it, waiting until `deadline` at most.
    fn take_until(&self, deadline: Instant) -> Result<Option<Held>>;
    /// Takes it, waiting as long as it takes.
    fn take(&self) -> Result<Held>;
}

fn held(release: impl FnOnce() -> Result<()> + 'static) -> Held {
    Box::new(release)
}

/// Any lock kind, the read and write sides included.
pub struct OfLock<K: Kind>(pub Lock<K>);

impl<K: Kind> Subject for OfLock<K>
where
    Lock<K>: Send + Sync,
{
    fn try_now(&self) -> Result<Option<Held>> {
        Ok(self.0.try_lock()?.map(|g| held(move || g.unlock())))
    }
    fn take_until(&self, deadline: Instant) -> Result<Option<Held>> {
        Ok(self
            .0
            .try_lock_until(deadline)?
            .map(|g| held(move || g.unlock())))
    }
    fn take(&self) -> Result<Held> {
        let guard = self.0.lock()?;
        Ok(held(move || guard.unlock()))
    }
}

pub fn lock<K: Kind>(lock: Lock<K>, cancel: Option<&Cancel>) -> Box<dyn Subject>
where
    Lock<K>: Send + Sync,
{
    Box::new(OfLock(match cancel {
        Some(cancel) => lock.with_cancel(cancel),
        None => lock,
    }))
}

impl Subject for MultiLock {
    fn try_now(&self) -> Result<Option<Held>> {
        Ok(self.try_lock()?.map(|g| held(move || g.unlock())))
    }
    fn take_until(&self, deadline: Instant) -> Result<Option<Held>> {
        Ok(self
            .try_lock_until(deadline)?
            .map(|g| held(move || g.unlock())))
    }
    fn take(&self) -> Result<Held> {
        let guard = self.lock()?;
        Ok(held(move || guard.unlock()))
    }
}

/// One leased permit.
impl Subject for LeasedSemaphore {
    fn try_now(&self) -> Result<Option<Held>> {
        Ok(self.try_acquire()?.map(|p| held(move || p.release())))
    }
    fn take_until(&self, deadline: Instant) -> Result<Option<Held>> {
        Ok(self
            .try_acquire_until(deadline)?
            .map(|p| held(move || p.release())))
    }
    fn take(&self) -> Result<Held> {
        let permit = self.acquire()?;
        Ok(held(move || permit.release()))
    }
}

/// One counted permit.
impl Subject for CountingSemaphore {
    fn try_now(&self) -> Result<Option<Held>> {
        Ok(self.try_acquire()?.map(|p| held(move || p.release())))
    }
    fn take_until(&self, deadline: Instant) -> Result<Option<Held>> {
        Ok(self
            .try_acquire_until(deadline)?
            .map(|p| held(move || p.release())))
    }
    fn take(&self) -> Result<Held> {
        let permits = self.acquire()?;
        Ok(held(move || permits.release()))
    }
}

/// The leadership.
impl Subject for Election {
    fn try_now(&self) -> Result<Option<Held>> {
        Ok(self.try_campaign()?.map(|l| held(move || l.resign())))
    }
    fn take_until(&self, deadline: Instant) -> Result<Option<Held>> {
        Ok(self
            .try_campaign_until(deadline)?
            .map(|l| held(move || l.resign())))
    }
    fn take(&self) -> Result<Held> {
        let leadership = self.campaign()?;
        Ok(held(move || leadership.resign()))
    }
}

/// The latch's opening: taking it is seeing its count at zero, which holds nothing.
impl Subject for CountDownLatch {
    fn try_now(&self) -> Result<Option<Held>> {
        self.take_until(Instant::now())
    }
    fn take_until(&self, deadline: Instant) -> Result<Option<Held>> {
        Ok(self.wait_until(deadline)?.then(|| held(|| Ok(()))))
    }
    fn take(&self) -> Result<Held> {
        self.wait()?;
        Ok(held(|| Ok(())))
    }
}
