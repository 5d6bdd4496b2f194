//! Taking a lock, written once for every kind: the acquisition quartet and the waiting loop
//! with its deadlines, jittered retries and pub/sub wake-ups.

use std::time::{Duration, Instant};

use crate::base::config::check_lease;
use crate::base::error::{Error, Result};
use crate::base::held_by::HeldBy;
use crate::base::metrics;
use crate::kinds::call::Call;
use crate::kinds::kind::{Attempt, Kind};
use crate::lease::hold::Hold;
use crate::lock::deadlock::DeadlockWatch;
use crate::lock::guard::LockGuard;
use crate::lock::handle::Lock;
use crate::lock::waiting::Waiting;
use crate::notify::interrupt;

impl<K: Kind> Lock<K> {
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

    /// Waits at most `timeout` for the lock; `None` when it stayed busy. A timeout whose
    /// end the clock cannot hold (such as `Duration::MAX`) sets no deadline: the call waits
    /// until it gets the lock, as [`lock`](Self::lock) without a `max_wait` does.
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<LockGuard<K>>> {
        self.acquire(None, deadline(timeout))
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
        self.acquire(Some(lease), deadline(timeout))
    }

    /// Like [`try_lock_until`](Self::try_lock_until), with a fixed lease and no watchdog.
    pub fn try_lock_with_lease_until(
        &self,
        deadline: Instant,
        lease: Duration,
    ) -> Result<Option<LockGuard<K>>> {
        self.acquire(Some(lease), Some(deadline))
    }

    fn lock_inner(&self, lease: Option<Duration>) -> Result<LockGuard<K>> {
        let started = Instant::now();
        let max_wait = self.target.shared.config().max_wait;
        let deadline = max_wait.map(|wait| started + wait);
        self.acquire_explained(lease, deadline, true)?
            .map_err(|held_by| Error::Timeout {
                lock: self.target.subject().clone(),
                waited: started.elapsed(),
                held_by: held_by.map(Box::new),
            })
    }

    /// The waiting loop. Attempt; when busy, subscribe to the unlock channel and attempt
    /// again at once (an unlock before the subscription would otherwise go unseen); then
    /// wait for an unlock message, at most until the holder's lease runs out (plus a
    /// jittered backoff no longer than that lease: a lease that runs out is announced by
    /// nobody) and never past `deadline`. Without notifications (the subscriber
    /// cannot connect, may not subscribe, or its subscription was not confirmed before the
    /// attempt; a kind or a client that does not subscribe) the wait is the backoff alone,
    /// at most its cap (the retry cap, or the kind's own). Every round with Redis
    /// ends within a response timeout of `deadline`. A kind may bound each wait further and
    /// undo its attempt when the loop gives up (a fair lock's queue).
    pub(crate) fn acquire(
        &self,
        lease: Option<Duration>,
        deadline: Option<Instant>,
    ) -> Result<Option<LockGuard<K>>> {
        Ok(self.acquire_explained(lease, deadline, false)?.ok())
    }

    /// [`acquire`](Self::acquire), with what held the lock when a wait gave up: asked of
    /// Redis (within the deadline's response timeout) when `explain`, or when it is logged
    /// at debug level. A call that was not to wait asks nothing.
    fn acquire_explained(
        &self,
        lease: Option<Duration>,
        deadline: Option<Instant>,
        explain: bool,
    ) -> Result<Result<LockGuard<K>, Option<HeldBy>>> {
        let mut queued = false;
        let started = Instant::now();
        // A pause inside an attempt (a cluster slot being migrated) ends with a cancel too.
        let tokens = (self.cancel.iter().cloned())
            .chain([self.target.shared.closing().clone()])
            .collect();
        let result = interrupt::with(tokens, || self.wait_for(lease, deadline, &mut queued));
        // Whatever ended the call, an attempt that reached Redis may have queued this waiter
        // (a fair lock queues it in the same script that finds the lock busy, and then a
        // lost reply or a hold found lost is an error): leave, or the next waiter waits for
        // the place to run out on a free lock.
        if queued && !matches!(result, Ok(Some(_))) {
            K::give_up(&self.target, &self.request);
        }
        let outcome = match &result {
            Ok(Some(_)) => "acquired",
            Err(err) if err.is_cancelled() => "cancelled",
            Err(err) if err.is_deadlock() => "deadlock",
            // A call that was not to wait (`try_lock`, a deadline already past) found it busy.
            Ok(None) if deadline.is_some_and(|deadline| deadline <= started) => "busy",
            Ok(None) => "timeout",
            Err(err) => {
                metrics::error(err);
                "error"
            }
        };
        metrics::acquisition(K::LABEL, outcome, started.elapsed());
        if let Some(guard) = result? {
            return Ok(Ok(guard));
        }
        if deadline.is_none_or(|deadline| deadline <= started) {
            return Ok(Err(None));
        }
        let debug = log::log_enabled!(log::Level::Debug);
        let held_by = (explain || debug)
            .then(|| {
                let limit = deadline.and_then(|d| d.checked_add(self.config().response_timeout));
                limit
                    .is_some_and(|limit| limit > Instant::now())
                    .then(|| K::describe(&self.target, &self.request, limit))
                    .flatten()
            })
            .flatten();
        if debug {
            let why = held_by
                .as_ref()
                .map_or("what held it is not known".into(), ToString::to_string);
            log::debug!(
                "gave up waiting for {} after {:?}: {why}",
                self.target.subject(),
                started.elapsed()
            );
        }
        Ok(Err(held_by))
    }

    fn config(&self) -> &crate::base::config::Config {
        self.target.shared.config()
    }

    /// The loop of [`acquire`](Self::acquire); `queued` is set once an attempt may have
    /// queued this waiter: it found the lock busy, or failed in a way that may have come
    /// after its script ran (anything but getting no connection at all).
    fn wait_for(
        &self,
        lease: Option<Duration>,
        deadline: Option<Instant>,
        queued: &mut bool,
    ) -> Result<Option<LockGuard<K>>> {
        let target = &self.target;
        target.key()?;
        if let Some(lease) = lease {
            check_lease(lease).map_err(|reason| target.invalid_argument("lease", reason))?;
        }
        target.open()?;
        let config = target.shared.config();
        let limit = deadline.and_then(|d| d.checked_add(config.response_timeout));
        let mut backoff = K::backoff(target);
        // Whether this waiter takes grants on a release's word (see `Kind::takes_grants`).
        let grants = K::takes_grants(target, lease);
        let mut waiting = Waiting::new();
        // A kind whose releases publish nothing, or a client without pub/sub, only polls.
        waiting.notifications = K::SUBSCRIBES && config.pubsub;
        // A cancel, or closing the client, raises the signal this waiter sleeps on.
        let _closing = target.shared.closing().register(&waiting.signal);
        let _cancel = self.cancel.as_ref().map(|c| c.register(&waiting.signal));
        // When an unlock message last woke this waiter, for the hand-off it lets in.
        let mut woken_at = None;
        // Waiters poll at least every retry cap, notifications or not, where a lock can be
        // freed without a message: by a library that publishes none, or on Redlock, where
        // a failed attempt gives back what it took without waking anyone.
        let polls = K::POLLS || target.shared.nodes().list().len() > 1;
        // Whether this wait has looked at a holder without expiry yet (once per wait).
        let mut explained = false;
        // When the last attempt that found the lock busy was sent, and where it put this
        // waiter in a queue: a grant comes after it, and names that place.
        let mut busy_since;
        let mut held_for_ever;
        // The deadlock check of this wait, from the first busy attempt of a call that waits.
        let mut deadlock = None;
        loop {
            self.target.check_cancelled(self.cancel.as_ref())?;
            // Whether an unlock after this attempt is sure to wake us: only then may the
            // wait below last until the holder's lease runs out.
            let notified = waiting.confirmed() && !polls;
            let claim = K::claim(target, &self.request, lease);
            let sent = Instant::now();
            let attempt = K::attempt(target, &claim, lease, limit);
            // Its reply lost, late or an error after the command may have run: what it may
            // have taken goes back, within a round of its own, before the caller hears.
            if let Err(err) = &attempt
                && err.outcome_unknown()
            {
                target.give_back(K::undo(target, &claim));
            }
            // What it granted becomes a hold; where no watchdog can start for it, what it
            // took was given back, and the attempt failed.
            let attempt = attempt.and_then(|attempt| attempt.acquired(|g| Hold::new(target, g)));
            *queued |= attempt
                .as_ref()
                .map_or_else(Error::may_have_run, |attempt| {
                    !matches!(attempt, Attempt::Acquired(_))
                });
            // An attempt cut short by a cancel (a pause for a cluster slot) says so.
            if attempt.is_err() {
                self.target.check_cancelled(self.cancel.as_ref())?;
            }
            // A cluster slot still being migrated (or without a primary) when the attempt's
            // bound passed: a call without a deadline tries again after a pause. Every
            // pooled connection busy (other threads' calls), nothing failing: a call with
            // time left tries again after a pause, within its deadline and its cancel.
            let attempt = match attempt {
                Err(err) if deadline.is_none() && err.is_slot_moving() => Ok(Attempt::Retry(err)),
                Err(err) if err.is_pool_busy() => Ok(Attempt::Retry(err)),
                attempt => attempt,
            };
            let ttl = match attempt? {
                Attempt::Acquired(hold) => {
                    if let Some(woken) = woken_at {
                        metrics::handoff(K::LABEL, Instant::elapsed(&woken));
                    }
                    waiting.woken = false;
                    waiting.signal.take();
                    return Ok(Some(LockGuard::new(self.clone(), hold)));
                }
                Attempt::Busy(busy) => {
                    // Someone holds it, and their release will wake a waiter again; or
                    // others are ahead. Woken for what it cannot use (more permits than
                    // a release gave): the wake-up goes to a waiter of this client that
                    // has not had it.
                    if busy.queued && K::HANDS_ON {
                        waiting.pass_on();
                    }
                    waiting.woken = false;
                    woken_at = None;
                    held_for_ever = !busy.queued && busy.ttl.is_none();
                    busy_since = (sent, busy.place);
                    busy.ttl
                }
                Attempt::Retry(err) => {
                    let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
                    if left == Some(Duration::ZERO) {
                        return Err(err);
                    }
                    // Listening before the pause, so that an unlock during it wakes this
                    // waiter; one that may have come before the subscription was confirmed
                    // is looked for at once.
                    if waiting.needs_subscription() {
                        let channel = K::wait_channel(target);
                        let caught_up = waiting.subscribe(target, &channel, grants, deadline, sent);
                        if !caught_up && waiting.confirmed() {
                            continue;
                        }
                    }
                    let pause = backoff.next_delay(left);
                    log::debug!("{err:#}; retrying in {pause:?}");
                    // On the signal, so that a cancel ends the pause; an unlock that
                    // raises it meanwhile is used by the next attempt.
                    waiting.woken |= waiting.signal.wait(pause);
                    continue;
                }
            };
            let left = deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
            if left == Some(Duration::ZERO) {
                return Ok(None);
            }
            let deadlock = deadlock.get_or_insert_with(|| DeadlockWatch::new(target, K::LABEL));
            if let Some(deadlock) = deadlock
                && deadlock.due() <= Instant::now()
            {
                deadlock.tick(limit)?;
            }
            // A waiter (not a call that was not to wait) that finds a holder without expiry.
            if held_for_ever && !explained {
                explained = true;
                self.warn_if_held_for_ever(limit);
            }
            self.target.check_cancelled(self.cancel.as_ref())?;
            let mut notified = notified;
            if waiting.needs_subscription() {
                let channel = K::wait_channel(target);
                // Subscribed before the attempt was sent, nothing since is missed; else an
                // unlock may have come between the two, and the next attempt finds it.
                if waiting.subscribe(target, &channel, grants, deadline, sent) {
                    notified = !polls;
                } else if waiting.notifications {
                    continue;
                }
            }
            let pause = backoff.next_delay(None);
            let bound = match (notified, ttl) {
                (true, Some(ttl)) => ttl + pause.min(ttl),
                _ => ttl.map_or(pause, |ttl| ttl.min(pause)),
            };
            let bound = K::longest_wait(target).map_or(bound, |most| bound.min(most));
            // Awake when the deadlock check has something to do.
            let bound = (deadlock.as_ref()).map_or(bound, |deadlock| {
                bound.min(deadlock.due().saturating_duration_since(Instant::now()))
            });
            waiting.woken = waiting
                .signal
                .wait(left.map_or(bound, |left| bound.min(left)));
            if waiting.woken {
                let woken = Instant::now();
                woken_at = Some(woken);
                // A direct hand-off: the release made this waiter the holder. A cancelled
                // wait takes nothing: its give-up passes the grant on.
                let grant = waiting.signal.take_grant();
                if grant.is_some() {
                    self.target.check_cancelled(self.cancel.as_ref())?;
                }
                if let Some(grant) = grant
                    && let Some(Attempt::Acquired(grant)) =
                        K::granted(target, lease, busy_since.0, busy_since.1, grant).transpose()?
                {
                    let hold = Hold::new(target, grant)?;
                    target.shared.counters().grant_taken();
                    metrics::handoff(K::LABEL, woken.elapsed());
                    waiting.woken = false;
                    waiting.signal.take();
                    return Ok(Some(LockGuard::new(self.clone(), hold)));
                }
            }
        }
    }

    /// Logs a warning when what holds the lock has no expiry: nothing frees it by itself,
    /// so without it every waiter would wait for ever in silence.
    fn warn_if_held_for_ever(&self, limit: Option<Instant>) {
        let held_by = K::describe(&self.target, &self.request, limit);
        if let Some(held_by) = held_by.filter(|h| h.ttl.is_none()) {
            log::warn!(
                "waiting for {}, which nothing frees by itself: {held_by}; waiters wait \
                 until it is deleted or changed",
                self.target.subject()
            );
        }
    }
}

/// The deadline `timeout` from now; `None`, no deadline, when the clock cannot hold it.
fn deadline(timeout: Duration) -> Option<Instant> {
    Instant::now().checked_add(timeout)
}
