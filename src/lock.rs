//! The lock handle, written once for every kind: naming, the acquisition quartet, the waiting
//! loop and introspection. What differs between kinds lives in their own files.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::LockClient;
use crate::config::{MAX_NAME_LEN, check_lease};
use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::kind::{Attempt, Kind};
use crate::layout;
use crate::notify::{Signal, Subscription};
use crate::reentrant::Reentrant;
use crate::retry::Backoff;
use crate::scripts;

/// A lock on one Redis key, shared by every thread and process that names it. `K` is its
/// kind: [`Reentrant`] (the default, Redisson's `RLock`), [`Fenced`](crate::Fenced) or
/// [`Token`](crate::Token).
///
/// The handle is cheap to clone and `Send + Sync`. Acquisition comes in the usual four
/// forms — [`lock`](Self::lock) (wait), [`try_lock`](Self::try_lock) (do not wait),
/// [`try_lock_for`](Self::try_lock_for) and [`try_lock_until`](Self::try_lock_until) — each
/// also with an explicit lease (`*_with_lease`), which gets no watchdog: the hold simply
/// expires after the lease. Without one, a watchdog thread renews the lease while it is held.
///
/// On a client over several nodes (Redlock) every call goes to all of them: acquisitions
/// fail at once with [`Error::NoQuorum`] when too few nodes answer, and a quorum that grants
/// too slowly is retried within the deadline and reported as [`Error::ValidityExhausted`]
/// when time runs out; introspection reports what a quorum agrees on.
pub struct Lock<K: Kind = Reentrant> {
    pub(crate) client: LockClient,
    pub(crate) name: Arc<Name>,
    kind: PhantomData<fn() -> K>,
}

/// A lock's name and the Redis names made of it.
pub(crate) struct Name {
    /// For messages: the name lossily decoded.
    display: String,
    pub key: Arc<[u8]>,
    /// The unlock channel, named by Redisson's rule (see `layout`).
    pub channel: Vec<u8>,
    invalid: Option<&'static str>,
}

impl<K: Kind> Lock<K> {
    pub(crate) fn new(client: LockClient, name: &[u8]) -> Self {
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
        let channel = layout::channel(&key);
        Lock {
            client,
            name: Arc::new(Name {
                display,
                key,
                channel,
                invalid,
            }),
            kind: PhantomData,
        }
    }

    /// The lock's name (lossily decoded, cut to 64 bytes).
    pub fn name(&self) -> &str {
        &self.name.display
    }

    /// Waits until the lock is taken, then returns its guard. The watchdog renews the lease
    /// until the hold is released.
    ///
    /// Waits without bound unless the client has a [`max_wait`](crate::LockClientBuilder::max_wait),
    /// past which it returns [`Error::Timeout`].
    pub fn lock(&self) -> Result<LockGuard<K>> {
        self.lock_inner(None)
    }

    /// Takes the lock if it is free (or, for a reentrant kind, already held by this thread);
    /// `None` when busy.
    pub fn try_lock(&self) -> Result<Option<LockGuard<K>>> {
        self.acquire(None, Some(Instant::now()))
    }

    /// Waits at most `timeout` for the lock; `None` when it stayed busy.
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<LockGuard<K>>> {
        self.acquire(None, Some(self.deadline(timeout)?))
    }

    /// Waits until `deadline` at most for the lock; `None` when it stayed busy.
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<LockGuard<K>>> {
        self.acquire(None, Some(deadline))
    }

    /// Like [`lock`](Self::lock), with a fixed lease and no watchdog: unless released
    /// first, the hold expires after `lease` ([`MIN_LEASE`](crate::MIN_LEASE) to
    /// [`MAX_LEASE`](crate::MAX_LEASE)).
    pub fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard<K>> {
        self.lock_inner(Some(lease))
    }

    /// Like [`try_lock`](Self::try_lock), with a fixed lease and no watchdog.
    pub fn try_lock_with_lease(&self, lease: Duration) -> Result<Option<LockGuard<K>>> {
        self.acquire(Some(lease), Some(Instant::now()))
    }

    /// Like [`try_lock_for`](Self::try_lock_for), with a fixed lease and no watchdog.
    pub fn try_lock_with_lease_for(
        &self,
        timeout: Duration,
        lease: Duration,
    ) -> Result<Option<LockGuard<K>>> {
        self.acquire(Some(lease), Some(self.deadline(timeout)?))
    }

    /// Like [`try_lock_until`](Self::try_lock_until), with a fixed lease and no watchdog.
    pub fn try_lock_with_lease_until(
        &self,
        deadline: Instant,
        lease: Duration,
    ) -> Result<Option<LockGuard<K>>> {
        self.acquire(Some(lease), Some(deadline))
    }

    /// Whether anyone holds the lock (on a quorum of nodes).
    pub fn is_locked(&self) -> Result<bool> {
        let mut cmd = redis::cmd("EXISTS");
        cmd.arg(self.key()?);
        self.agreed(&cmd)
    }

    /// How long the current holder's lease has left (on a quorum of nodes); `None` when the
    /// lock is free (or was set by someone else without an expiry).
    pub fn remaining_lease(&self) -> Result<Option<Duration>> {
        let mut cmd = redis::cmd("PTTL");
        cmd.arg(self.key()?);
        let ttl: i64 = self.agreed(&cmd)?;
        Ok(u64::try_from(ttl).ok().map(Duration::from_millis))
    }

    /// Deletes the lock whoever holds it, on every node, and wakes its waiters. Returns
    /// whether there was one to delete. The holders' watchdogs find out at their next
    /// renewal and mark their guards lost.
    ///
    /// A retry after a lost reply (the connection dropped under the command) reports what
    /// the first attempt did, and never deletes a lock someone took in between.
    pub fn force_unlock(&self) -> Result<bool> {
        let key = self.key()?;
        let inner = &self.client.inner;
        inner.check_process()?;
        let latch = layout::unlock_latch(key, &layout::random_id());
        let cmd = scripts::force_unlock(key, &self.name.channel, &latch, inner.config.latch_ttl());
        let nodes = &inner.nodes;
        let deleted = nodes
            .answers(nodes.run_all::<i64>(&cmd, None))
            .map_err(|err| err.with_lock(self.name()))?;
        Ok(deleted.contains(&1))
    }

    /// `cmd` on every node, and the answer a quorum agrees on at least.
    pub(crate) fn agreed<T: redis::FromRedisValue + Ord + Copy>(
        &self,
        cmd: &redis::Cmd,
    ) -> Result<T> {
        self.client.inner.check_process()?;
        let nodes = &self.client.inner.nodes;
        nodes
            .agreed(nodes.run_all(cmd, None))
            .map_err(|err| err.with_lock(self.name()))
    }

    fn lock_inner(&self, lease: Option<Duration>) -> Result<LockGuard<K>> {
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
    /// cannot connect, or may not subscribe) the wait is the backoff alone, at most the
    /// retry cap. Every round with Redis ends within a response timeout of `deadline`.
    fn acquire(
        &self,
        lease: Option<Duration>,
        deadline: Option<Instant>,
    ) -> Result<Option<LockGuard<K>>> {
        self.key()?;
        if let Some(lease) = lease {
            check_lease(lease).map_err(|reason| Error::InvalidArgument {
                lock: self.name().to_owned(),
                argument: "lease",
                reason,
            })?;
        }
        let inner = &self.client.inner;
        inner.check_process()?;
        let limit = deadline.and_then(|d| d.checked_add(inner.config.response_timeout));
        let mut backoff = Backoff::new(inner.config.retry_base, inner.config.retry_cap);
        let mut waiting = Waiting::new();
        loop {
            let ttl = match K::attempt(self, lease, limit)? {
                Attempt::Acquired(guard) => {
                    waiting.woken = false;
                    waiting.signal.take();
                    return Ok(Some(guard));
                }
                Attempt::Busy(ttl) => {
                    // Someone holds it; their release will wake a waiter again.
                    waiting.woken = false;
                    ttl
                }
                Attempt::Retry(err) => {
                    let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
                    if left == Some(Duration::ZERO) {
                        return Err(err);
                    }
                    let pause = backoff.next_delay(left);
                    log::debug!("{err}; retrying in {pause:?}");
                    std::thread::sleep(pause);
                    continue;
                }
            };
            let left = deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
            if left == Some(Duration::ZERO) {
                return Ok(None);
            }
            if waiting.needs_subscription() {
                waiting.subscribe(self, deadline);
                if waiting.notifications {
                    continue;
                }
            }
            let pause = backoff.next_delay(None);
            let bound = match (waiting.notifications && !K::POLLS, ttl) {
                (true, Some(ttl)) => ttl + pause,
                _ => ttl.map_or(pause, |ttl| ttl.min(pause)),
            };
            waiting.woken = waiting
                .signal
                .wait(left.map_or(bound, |left| bound.min(left)));
        }
    }

    /// The key, or the error for a name that cannot be one.
    pub(crate) fn key(&self) -> Result<&[u8]> {
        match self.name.invalid {
            None => Ok(&self.name.key),
            Some(reason) => Err(Error::InvalidName {
                name: self.name().to_owned(),
                reason,
            }),
        }
    }

    pub(crate) fn not_held(&self) -> Error {
        Error::NotHeld {
            lock: self.name().to_owned(),
        }
    }

    pub(crate) fn lost(&self) -> Error {
        Error::Lost {
            lock: self.name().to_owned(),
        }
    }
}

/// The waiting state of one acquisition: its signal, its subscriptions and whether it holds
/// a wake-up it has not used. Dropped without using one, it hands the wake-up on to the next
/// waiter, so that a waiter that leaves (deadline, error) never swallows an unlock.
struct Waiting {
    signal: Arc<Signal>,
    subscriptions: Vec<Subscription>,
    /// Whether notifications are to be had; false once subscribing failed everywhere.
    notifications: bool,
    /// Woken by a message whose attempt has not found the lock busy or taken it yet.
    woken: bool,
}

impl Waiting {
    fn new() -> Self {
        Waiting {
            signal: Arc::default(),
            subscriptions: Vec::new(),
            notifications: true,
            woken: false,
        }
    }

    fn needs_subscription(&self) -> bool {
        self.notifications && !self.subscriptions.iter().any(Subscription::is_live)
    }

    /// Subscribes on every node that will have it, waiting for confirmations until
    /// `deadline` at most.
    fn subscribe<K: Kind>(&mut self, lock: &Lock<K>, deadline: Option<Instant>) {
        self.subscriptions.clear();
        for node in lock.client.inner.nodes.list() {
            match node
                .notifier
                .subscribe(&lock.name.channel, &self.signal, deadline)
            {
                Ok(subscription) => self.subscriptions.push(subscription),
                Err(err) => log::debug!(
                    "no unlock notifications from {} for {:?}: {err}",
                    node.name,
                    lock.name()
                ),
            }
        }
        self.notifications = !self.subscriptions.is_empty();
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.woken | self.signal.take() {
            for subscription in &self.subscriptions {
                subscription.pass_on();
            }
        }
    }
}

impl<K: Kind> Clone for Lock<K> {
    fn clone(&self) -> Self {
        Lock {
            client: self.client.clone(),
            name: self.name.clone(),
            kind: PhantomData,
        }
    }
}

impl<K: Kind> fmt::Debug for Lock<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock").field("name", &self.name()).finish()
    }
}
