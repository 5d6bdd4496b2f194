//! The reentrant lock handle: acquisition, release and introspection.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::LockClient;
use crate::config::{MAX_LEASE, MAX_NAME_LEN, check_lease};
use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::holds::{Hold, HoldId, Holding};
use crate::notify::{Signal, Subscription};
use crate::owner::{current_thread, field};
use crate::retry::Backoff;
use crate::scripts::{self, FRESH, UNLOCK_MESSAGE};
use crate::watchdog::{self, Job};

/// A reentrant lock on one Redis key, shared by every thread and process that names it.
///
/// The key is a hash whose field `"<client-uuid>:<thread-id>"` counts the holds of its one
/// owner, the layout Redisson uses, so Java services can share the lock. The handle is
/// cheap to clone and `Send + Sync`; holds belong to the thread that took them.
///
/// Acquisition comes in the usual four forms — [`lock`](Self::lock) (wait),
/// [`try_lock`](Self::try_lock) (do not wait), [`try_lock_for`](Self::try_lock_for) and
/// [`try_lock_until`](Self::try_lock_until) — each also with an explicit lease
/// (`*_with_lease`), which gets no watchdog: the hold simply expires after the lease.
#[derive(Clone)]
pub struct Lock {
    pub(crate) client: LockClient,
    name: Arc<Name>,
}

struct Name {
    /// For messages: the name lossily decoded.
    display: String,
    key: Arc<[u8]>,
    /// `redisson_lock__channel:{<key>}`
    channel: Vec<u8>,
    invalid: Option<&'static str>,
}

/// Whether one attempt got the lock, or how long the holder's lease has left.
enum Attempt {
    Acquired(LockGuard),
    /// `None`: the key has no expiry.
    Busy(Option<Duration>),
}

impl Lock {
    pub(crate) fn new(client: LockClient, name: &[u8]) -> Lock {
        let invalid = if name.is_empty() {
            Some("empty")
        } else if name.len() > MAX_NAME_LEN {
            Some("longer than MAX_NAME_LEN bytes")
        } else {
            None
        };
        let mut display = String::from_utf8_lossy(name).into_owned();
        if display.len() > 64 {
            let cut = (0..=64)
                .rev()
                .find(|&i| display.is_char_boundary(i))
                .unwrap_or(0);
            display.truncate(cut);
        }
        let key: Arc<[u8]> = [&client.inner.config.key_prefix[..], name].concat().into();
        let channel = [&b"redisson_lock__channel:{"[..], &key, b"}"].concat();
        Lock {
            client,
            name: Arc::new(Name {
                display,
                key,
                channel,
                invalid,
            }),
        }
    }

    /// The lock's name (lossily decoded, cut to 64 bytes).
    pub fn name(&self) -> &str {
        &self.name.display
    }

    /// Waits until the lock is taken, then returns its guard. The watchdog renews the lease
    /// until the last hold of this thread is released.
    ///
    /// Waits without bound unless the client has a [`max_wait`](crate::LockClientBuilder::max_wait),
    /// past which it returns [`Error::Timeout`].
    pub fn lock(&self) -> Result<LockGuard> {
        self.lock_inner(None)
    }

    /// Takes the lock if it is free or already held by this thread; `None` when busy.
    pub fn try_lock(&self) -> Result<Option<LockGuard>> {
        self.acquire(None, Some(Instant::now()))
    }

    /// Waits at most `timeout` for the lock; `None` when it stayed busy.
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<LockGuard>> {
        self.acquire(None, Some(self.deadline(timeout)?))
    }

    /// Waits until `deadline` at most for the lock; `None` when it stayed busy.
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<LockGuard>> {
        self.acquire(None, Some(deadline))
    }

    /// Like [`lock`](Self::lock), with a fixed lease and no watchdog: unless released
    /// first, the hold expires after `lease` (1 ms to [`MAX_LEASE`](crate::MAX_LEASE)).
    pub fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        self.lock_inner(Some(lease))
    }

    /// Like [`try_lock`](Self::try_lock), with a fixed lease and no watchdog.
    pub fn try_lock_with_lease(&self, lease: Duration) -> Result<Option<LockGuard>> {
        self.acquire(Some(lease), Some(Instant::now()))
    }

    /// Like [`try_lock_for`](Self::try_lock_for), with a fixed lease and no watchdog.
    pub fn try_lock_with_lease_for(
        &self,
        timeout: Duration,
        lease: Duration,
    ) -> Result<Option<LockGuard>> {
        self.acquire(Some(lease), Some(self.deadline(timeout)?))
    }

    /// Like [`try_lock_until`](Self::try_lock_until), with a fixed lease and no watchdog.
    pub fn try_lock_with_lease_until(
        &self,
        deadline: Instant,
        lease: Duration,
    ) -> Result<Option<LockGuard>> {
        self.acquire(Some(lease), Some(deadline))
    }

    /// Whether anyone holds the lock.
    pub fn is_locked(&self) -> Result<bool> {
        let key = self.key()?;
        self.query(|c| redis::cmd("EXISTS").arg(key).query(c))
    }

    /// Whether the current thread holds the lock, as Redis sees it.
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        Ok(self.hold_count()? > 0)
    }

    /// How many holds the current thread has, as Redis sees it.
    pub fn hold_count(&self) -> Result<u32> {
        let key = self.key()?;
        let field = self.field();
        let count: Option<u32> =
            self.query(|c| redis::cmd("HGET").arg(key).arg(&field).query(c))?;
        Ok(count.unwrap_or(0))
    }

    /// How long the current holder's lease has left; `None` when the lock is free (or
    /// was set by someone else without an expiry).
    pub fn remaining_lease(&self) -> Result<Option<Duration>> {
        let key = self.key()?;
        let ttl: i64 = self.query(|c| redis::cmd("PTTL").arg(key).query(c))?;
        Ok(u64::try_from(ttl).ok().map(Duration::from_millis))
    }

    /// Deletes the lock whoever holds it and wakes its waiters. Returns whether there was
    /// one to delete. The holders' watchdogs find out at their next renewal and mark their
    /// guards lost.
    pub fn force_unlock(&self) -> Result<bool> {
        let key = self.key()?;
        let deleted: i64 = self.query(|c| {
            scripts::FORCE_UNLOCK
                .key(key)
                .key(&self.name.channel)
                .arg(UNLOCK_MESSAGE)
                .invoke(c)
        })?;
        Ok(deleted == 1)
    }

    fn lock_inner(&self, lease: Option<Duration>) -> Result<LockGuard> {
        let started = Instant::now();
        let max_wait = self.client.inner.config.max_wait;
        let deadline = max_wait.map(|wait| started + wait);
        self.acquire(lease, deadline)?
            .ok_or_else(|| Error::Timeout {
                lock: self.name().to_owned(),
                waited: started.elapsed(),
            })
    }

    fn deadline(&self, timeout: Duration) -> Result<Instant> {
        Instant::now()
            .checked_add(timeout)
            .ok_or_else(|| Error::InvalidArgument {
                lock: self.name().to_owned(),
                argument: "timeout",
                reason: format!("{timeout:?} is beyond the clock's range"),
            })
    }

    /// The waiting loop. Attempt; when busy, subscribe to the unlock channel and attempt
    /// again at once (an unlock before the subscription would otherwise go unseen); then
    /// wait for an unlock message, at most until the holder's lease runs out (plus a
    /// jittered backoff) and never past `deadline`. Without notifications (the subscriber
    /// cannot connect) the wait is the backoff alone.
    fn acquire(
        &self,
        lease: Option<Duration>,
        deadline: Option<Instant>,
    ) -> Result<Option<LockGuard>> {
        self.key()?;
        if let Some(lease) = lease {
            check_lease(lease).map_err(|reason| Error::InvalidArgument {
                lock: self.name().to_owned(),
                argument: "lease",
                reason,
            })?;
        }
        let inner = &self.client.inner;
        let mut backoff = Backoff::new(inner.config.retry_base, inner.config.retry_cap);
        let signal = Arc::new(Signal::default());
        let mut subscription: Option<Subscription> = None;
        let mut notifications = true;
        loop {
            let ttl = match self.attempt(lease)? {
                Attempt::Acquired(guard) => return Ok(Some(guard)),
                Attempt::Busy(ttl) => ttl,
            };
            let left = deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
            if left == Some(Duration::ZERO) {
                return Ok(None);
            }
            if notifications && !subscription.as_ref().is_some_and(Subscription::is_live) {
                match inner.notifier.subscribe(&self.name.channel, &signal) {
                    Ok(subscribed) => {
                        subscription = Some(subscribed);
                        continue;
                    }
                    Err(err) => {
                        log::debug!("no unlock notifications for {:?}: {err}", self.name());
                        notifications = false;
                    }
                }
            }
            let pause = backoff.next_delay(None);
            let bound = match (&subscription, ttl) {
                (Some(_), Some(ttl)) => ttl + pause,
                _ => ttl.map_or(pause, |ttl| ttl.min(pause)),
            };
            signal.wait(left.map_or(bound, |left| bound.min(left)));
        }
    }

    /// One round trip: take a hold, or learn the holder's remaining lease.
    fn attempt(&self, lease: Option<Duration>) -> Result<Attempt> {
        let inner = &self.client.inner;
        let id: HoldId = (self.name.key.clone(), current_thread());
        let (held, watchdog_running) = inner
            .holds
            .lock()
            .get(&id)
            .map_or((0, false), |hold| (hold.count, hold.watched > 0));
        // A watchdog-backed holding keeps the watchdog lease even when re-entered with an
        // explicit one, so a short explicit lease cannot outrun the renewals.
        let script_lease = match lease {
            Some(lease) if !watchdog_running => lease,
            _ => inner.config.lease,
        };
        let field = self.field();
        let sent = Instant::now();
        let reply: Option<i64> = self.query(|c| {
            scripts::ACQUIRE
                .key(&*id.0)
                .arg(script_lease.as_millis() as u64)
                .arg(&field)
                .arg(held)
                .invoke(c)
        })?;
        let fresh = match reply {
            None => false,
            Some(FRESH) => true,
            // -1: no expiry; -2: gone since the check, worth retrying at once.
            Some(-1) => return Ok(Attempt::Busy(None)),
            Some(ttl) => {
                let ttl = Duration::from_millis(ttl.max(0) as u64).min(MAX_LEASE);
                return Ok(Attempt::Busy(Some(ttl)));
            }
        };

        let mut holds = inner.holds.lock();
        if fresh && let Some(stale) = holds.remove(&id) {
            log::warn!(
                "lock {:?} was lost while held; this hold starts afresh",
                self.name()
            );
            stale.holding.mark_lost();
        }
        let hold = holds
            .entry(id.clone())
            .or_insert_with(|| Hold::new(inner.config.lease));
        hold.count += 1;
        match lease {
            Some(lease) => hold.lease = lease,
            None => hold.watched += 1,
        }
        let holding = hold.holding.clone();
        if lease.is_none() && hold.watchdog.is_none() {
            let job = Job {
                client: Arc::downgrade(inner),
                id,
                field,
                name: self.name().to_owned(),
                holding: holding.clone(),
                since: sent,
            };
            match watchdog::start(&inner.parked, inner.config.watchdog_stack_size, job) {
                Ok(ticket) => hold.watchdog = Some(ticket),
                Err(source) => {
                    drop(holds);
                    let guard = LockGuard::new(self.clone(), holding, true);
                    if let Err(err) = guard.unlock() {
                        log::warn!("giving back lock {:?} failed: {err}", self.name());
                    }
                    return Err(Error::Watchdog {
                        lock: self.name().to_owned(),
                        source,
                    });
                }
            }
        }
        drop(holds);
        Ok(Attempt::Acquired(LockGuard::new(
            self.clone(),
            holding,
            lease.is_none(),
        )))
    }

    /// Gives back one hold of `holding`, taken with (`watched`) or without the watchdog.
    pub(crate) fn release(&self, holding: &Arc<Holding>, watched: bool) -> Result<()> {
        let inner = &self.client.inner;
        let id: HoldId = (self.name.key.clone(), current_thread());
        let (held, lease) = {
            let mut holds = inner.holds.lock();
            let Some(hold) = holds
                .get_mut(&id)
                .filter(|hold| Arc::ptr_eq(&hold.holding, holding))
            else {
                // Lost, or already ended: the key may be someone else's now. Leave it.
                return Err(self.not_held());
            };
            let held = hold.count;
            hold.count -= 1;
            if watched {
                hold.watched -= 1;
                if hold.watched == 0 {
                    hold.watchdog = None;
                }
            }
            let lease = if hold.watched > 0 {
                inner.config.lease
            } else {
                hold.lease
            };
            if hold.count == 0 {
                holds.remove(&id);
            }
            (held, lease)
        };
        let field = self.field();
        // Safe to retry: the script sets the count rather than decrementing it.
        let reply: Option<i64> = self.query(|c| {
            scripts::RELEASE
                .key(&*id.0)
                .key(&self.name.channel)
                .arg(UNLOCK_MESSAGE)
                .arg(lease.as_millis() as u64)
                .arg(&field)
                .arg(held)
                .invoke(c)
        })?;
        if reply.is_some() {
            return Ok(());
        }
        // Redis no longer has our field (expired): every guard of this holding is stale.
        holding.mark_lost();
        let mut holds = inner.holds.lock();
        if holds
            .get(&id)
            .is_some_and(|hold| Arc::ptr_eq(&hold.holding, holding))
        {
            holds.remove(&id);
        }
        Err(self.not_held())
    }

    fn not_held(&self) -> Error {
        Error::NotHeld {
            lock: self.name().to_owned(),
        }
    }

    fn key(&self) -> Result<&[u8]> {
        match self.name.invalid {
            None => Ok(&self.name.key),
            Some(reason) => Err(Error::InvalidName {
                name: self.name().to_owned(),
                reason,
            }),
        }
    }

    fn field(&self) -> String {
        field(&self.client.inner.id, current_thread())
    }

    fn query<T>(
        &self,
        f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        self.client
            .inner
            .query(true, f)
            .map_err(|err| err.with_lock(self.name()))
    }
}

impl fmt::Debug for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock").field("name", &self.name()).finish()
    }
}
