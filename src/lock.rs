//! The reentrant lock handle: acquisition, release and introspection.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::LockClient;
use crate::config::{MAX_LEASE, MAX_NAME_LEN, check_lease};
use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::holds::{Hold, HoldId, Holding, validity_end};
use crate::layout::{self, UNLOCK_MESSAGE};
use crate::notify::{Signal, Subscription};
use crate::owner::{current_thread, field};
use crate::retry::Backoff;
use crate::scripts::{self, FRESH};
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
///
/// On a client over several nodes (Redlock) every call goes to all of them: acquisitions
/// fail at once with [`Error::NoQuorum`] when too few nodes answer, and a quorum that grants
/// too slowly is retried within the deadline and reported as [`Error::ValidityExhausted`]
/// when time runs out; introspection reports what a quorum agrees on.
#[derive(Clone)]
pub struct Lock {
    pub(crate) client: LockClient,
    name: Arc<Name>,
}

struct Name {
    /// For messages: the name lossily decoded.
    display: String,
    key: Arc<[u8]>,
    /// The unlock channel, named by Redisson's rule (see `layout`).
    channel: Vec<u8>,
    invalid: Option<&'static str>,
}

/// What one attempt on every node came to.
enum Attempt {
    Acquired(LockGuard),
    /// Held by someone else; `None`: with no expiry.
    Busy(Option<Duration>),
    /// Not taken for a reason another try may cure (granted too slowly, or earlier holds
    /// not confirmed on a quorum); retried after a pause within the deadline, and returned
    /// as the error when the deadline has passed.
    Retry(Error),
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
        let channel = layout::channel(&key);
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
    /// first, the hold expires after `lease` ([`MIN_LEASE`](crate::MIN_LEASE) to
    /// [`MAX_LEASE`](crate::MAX_LEASE)).
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

    /// Whether anyone holds the lock (on a quorum of nodes).
    pub fn is_locked(&self) -> Result<bool> {
        let mut cmd = redis::cmd("EXISTS");
        cmd.arg(self.key()?);
        self.agreed(&cmd)
    }

    /// Whether the current thread holds the lock, as Redis sees it.
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        Ok(self.hold_count()? > 0)
    }

    /// How many holds the current thread has, as Redis sees it (on a quorum of nodes).
    pub fn hold_count(&self) -> Result<u32> {
        let mut cmd = redis::cmd("HGET");
        cmd.arg(self.key()?).arg(self.field());
        self.client.inner.check_process()?;
        let counts = self.client.inner.nodes.run_all::<Option<u32>>(&cmd, None);
        // A key of another type is someone else's lock: no holds of ours.
        let counts = counts.into_iter().map(|count| match count {
            Err(err) if err.is_wrong_type() => Ok(0),
            count => count.map(Option::unwrap_or_default),
        });
        self.client
            .inner
            .nodes
            .agreed(counts.collect())
            .map_err(|err| err.with_lock(self.name()))
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
        let latch = layout::unlock_latch(key, &layout::request_id());
        let mut cmd = scripts::evalsha(&scripts::FORCE_UNLOCK, &[key, &self.name.channel, &latch]);
        cmd.arg(UNLOCK_MESSAGE)
            .arg(millis(inner.config.latch_ttl()));
        let nodes = &inner.nodes;
        let deleted = nodes
            .answers(nodes.run_all::<i64>(&cmd, None))
            .map_err(|err| err.with_lock(self.name()))?;
        Ok(deleted.contains(&1))
    }

    /// `cmd` on every node, and the answer a quorum agrees on at least.
    fn agreed<T: redis::FromRedisValue + Ord + Copy>(&self, cmd: &redis::Cmd) -> Result<T> {
        self.client.inner.check_process()?;
        let nodes = &self.client.inner.nodes;
        nodes
            .agreed(nodes.run_all(cmd, None))
            .map_err(|err| err.with_lock(self.name()))
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
    /// cannot connect, or may not subscribe) the wait is the backoff alone, at most the
    /// retry cap. Every round with Redis ends within a response timeout of `deadline`.
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
        inner.check_process()?;
        let limit = deadline.and_then(|d| d.checked_add(inner.config.response_timeout));
        let mut backoff = Backoff::new(inner.config.retry_base, inner.config.retry_cap);
        let mut waiting = Waiting::new();
        loop {
            let ttl = match self.attempt(lease, limit)? {
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
            let bound = match (waiting.notifications, ttl) {
                (true, Some(ttl)) => ttl + pause,
                _ => ttl.map_or(pause, |ttl| ttl.min(pause)),
            };
            waiting.woken = waiting
                .signal
                .wait(left.map_or(bound, |left| bound.min(left)));
        }
    }

    /// One round on every node: take a hold, or learn why not. Taken when a quorum granted
    /// it with validity left (lease − elapsed − drift); otherwise whatever was granted is
    /// given back on every node.
    fn attempt(&self, lease: Option<Duration>, limit: Option<Instant>) -> Result<Attempt> {
        let inner = &self.client.inner;
        let nodes = &inner.nodes;
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
        let mut cmd = scripts::evalsha(&scripts::ACQUIRE, &[&id.0]);
        cmd.arg(millis(script_lease)).arg(&field).arg(held);
        let sent = Instant::now();
        let (answers, failed) = nodes.split(nodes.run_all::<Option<i64>>(&cmd, limit));
        let elapsed = sent.elapsed();

        let kept = answers.iter().filter(|reply| reply.is_none()).count();
        let granted = kept + answers.iter().filter(|&&r| r == Some(FRESH)).count();
        let valid_until = validity_end(sent, script_lease).filter(|end| *end > Instant::now());
        let quorum = nodes.quorum();
        if kept >= quorum
            && let Some(valid_until) = valid_until
        {
            return self.acquired(lease, id, field, sent, valid_until);
        }

        // Not taken. If this thread held the lock before, and too few nodes still have its
        // holds even counting every node that failed as one that does, they are gone: the
        // code around this re-entry was not protected all along. Undo this attempt, report
        // the loss and say so, rather than quietly taking a fresh hold.
        if held > 0 && kept + failed.len() < quorum {
            self.give_back(&id.0, &field, 1, script_lease, None, limit);
            if let Some(stale) = inner.holds.lock().remove(&id) {
                inner.report_lost(self.name(), &stale.holding, None);
            }
            return Err(Error::Lost {
                lock: self.name().to_owned(),
            });
        }
        // Otherwise undo this attempt wherever it may have counted, leaving earlier holds.
        if granted > 0 || failed.iter().any(|f| f.error.may_have_run()) {
            let holding = inner.holds.lock().get(&id).map(|hold| hold.holding.clone());
            self.give_back(
                &id.0,
                &field,
                held + 1,
                script_lease,
                holding.as_deref(),
                limit,
            );
        }
        if nodes.list().len() - failed.len() < quorum {
            return Err(nodes.no_quorum(failed).with_lock(self.name()));
        }
        if granted >= quorum && valid_until.is_none() {
            return Ok(Attempt::Retry(Error::ValidityExhausted {
                lock: self.name().to_owned(),
                elapsed,
                lease: script_lease,
            }));
        }
        if held > 0 && kept < quorum {
            // Earlier holds confirmed on too few nodes, but the failed ones may have them.
            return Ok(Attempt::Retry(
                nodes.no_quorum(failed).with_lock(self.name()),
            ));
        }
        // Busy: the lock may free up when the earliest of the holder's leases runs out.
        let ttl = answers
            .iter()
            .filter_map(|reply| match *reply {
                Some(ttl) if ttl >= 0 => Some(Duration::from_millis(ttl as u64).min(MAX_LEASE)),
                _ => None,
            })
            .min();
        Ok(Attempt::Busy(ttl))
    }

    /// Records a granted hold, starting the watchdog for the first watched one.
    fn acquired(
        &self,
        lease: Option<Duration>,
        id: HoldId,
        field: String,
        sent: Instant,
        valid_until: Instant,
    ) -> Result<Attempt> {
        let inner = &self.client.inner;
        let mut holds = inner.holds.lock();
        let hold = holds
            .entry(id.clone())
            .or_insert_with(|| Hold::new(inner.config.lease));
        hold.count += 1;
        match lease {
            Some(lease) => hold.lease = lease,
            None => hold.watched += 1,
        }
        let holding = hold.holding.clone();
        holding.set_valid_until(valid_until);
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

    /// Sets this thread's count back to `held - 1` on every node (deleting the key at 0), as
    /// after a failed attempt; failures are only logged, the leases clean up after them.
    /// The key's expiry is reset to `lease` where holds remain, so `holding` (if any) can
    /// count on no more than that.
    fn give_back(
        &self,
        key: &[u8],
        field: &str,
        held: u32,
        lease: Duration,
        holding: Option<&Holding>,
        limit: Option<Instant>,
    ) {
        let nodes = &self.client.inner.nodes;
        let cmd = self.release_cmd(key, field, held, lease);
        let sent = Instant::now();
        let results = nodes.run_all::<Option<i64>>(&cmd, limit);
        for (node, result) in nodes.list().iter().zip(results) {
            if let Err(err) = result {
                log::warn!(
                    "giving back lock {:?} on {} failed: {err}",
                    self.name(),
                    node.name
                );
            }
        }
        if let Some(holding) = holding {
            let end = validity_end(sent, lease).unwrap_or(sent);
            holding.set_valid_until(holding.valid_until().min(end));
        }
    }

    /// The release script for one call, with a latch of its own: a retry of this command
    /// after a lost reply reports the first attempt's release instead of "not ours".
    fn release_cmd(&self, key: &[u8], field: &str, held: u32, lease: Duration) -> redis::Cmd {
        let latch = layout::unlock_latch(key, &layout::request_id());
        let mut cmd = scripts::evalsha(&scripts::RELEASE, &[key, &self.name.channel, &latch]);
        cmd.arg(UNLOCK_MESSAGE)
            .arg(millis(lease))
            .arg(field)
            .arg(held)
            .arg(millis(self.client.inner.config.latch_ttl()));
        cmd
    }

    /// Gives back one hold of `holding`, taken with (`watched`) or without the watchdog.
    pub(crate) fn release(&self, holding: &Arc<Holding>, watched: bool) -> Result<()> {
        let inner = &self.client.inner;
        inner.check_process()?;
        let nodes = &inner.nodes;
        let id: HoldId = (self.name.key.clone(), current_thread());
        let (held, lease) = {
            let mut holds = inner.holds.lock();
            let Some(hold) = holds
                .get_mut(&id)
                .filter(|hold| Arc::ptr_eq(&hold.holding, holding))
            else {
                // Lost, or already ended: the key may be someone else's now. Leave it.
                return Err(match holding.is_lost() {
                    true => self.lost(),
                    false => self.not_held(),
                });
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
        let cmd = self.release_cmd(&id.0, &self.field(), held, lease);
        // Not while a renewal round is on its way: it could put back what this deletes.
        let round = holding.round.lock();
        let sent = Instant::now();
        let (answers, failed) = nodes.split(nodes.run_all::<Option<i64>>(&cmd, None));
        drop(round);
        let released = answers.iter().filter(|reply| reply.is_some()).count();
        let not_ours = answers.len() - released;
        let quorum = nodes.quorum();
        if released >= quorum {
            if held > 1 {
                // The remaining holds now expire `lease` after this release.
                holding.set_valid_until(validity_end(sent, lease).unwrap_or(sent));
            }
            if failed.is_empty() {
                return Ok(());
            }
            return Err(Error::PartialRelease {
                lock: self.name().to_owned(),
                released,
                of: nodes.list().len(),
                failed,
            });
        }
        if not_ours <= nodes.list().len() - quorum {
            // Too few answers to tell whether a quorum still has our holds.
            return Err(nodes.no_quorum(failed).with_lock(self.name()));
        }
        // Too many nodes no longer have our field for a quorum to: the holds expired or were
        // deleted, and every guard of this holding is stale.
        inner.forget(&id, holding);
        inner.report_lost(self.name(), holding, None);
        Err(self.lost())
    }

    fn not_held(&self) -> Error {
        Error::NotHeld {
            lock: self.name().to_owned(),
        }
    }

    fn lost(&self) -> Error {
        Error::Lost {
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
    fn subscribe(&mut self, lock: &Lock, deadline: Option<Instant>) {
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

/// A lease in whole milliseconds, as Redis takes it.
fn millis(lease: Duration) -> u64 {
    lease.as_millis() as u64
}

impl fmt::Debug for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock").field("name", &self.name()).finish()
    }
}
