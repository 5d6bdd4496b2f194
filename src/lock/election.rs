//! Leader election's handle and its leadership: a lock handle of the leading kind, with the
//! calls of an election, and the selector loop that leads whenever it can.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::base::error::{Error, Result};
use crate::base::health::Health;
use crate::base::retry::Backoff;
use crate::kinds::election::{self, Leading};
use crate::lease::target::Target;
use crate::lock::guard::LockGuard;
use crate::lock::handle::Lock;
use crate::lock::hold_watch::HoldWatch;
use crate::lock::leader::Leader;
use crate::lock::observer::Observer;
use crate::notify::cancel::Cancel;
use crate::notify::hub::Signal;

/// A leader election among the clients that name it: at most one of them leads at a time.
/// Made by [`LockClient::election`](crate::LockClient::election); `Clone + Send + Sync`.
///
/// A candidate [campaigns](Self::campaign) until it leads, and gets a [`Leadership`]: its
/// [epoch](Leadership::epoch) is greater than every earlier leader's of the election, so a
/// resource that remembers the highest epoch it has seen refuses a leader that was paused
/// past its lease. While held, the watchdog renews the leadership's lease; dropping it or
/// [`resign`](Leadership::resign)ing wakes the next candidate at once. A leader that
/// crashes is followed once its lease runs out.
///
/// Anyone, candidate or not, can ask [who leads](Self::leader), or
/// [observe](Self::observe) every change of leader. [`lead`](Self::lead) runs a closure
/// each time this client leads, the way a selector does.
///
/// ```no_run
/// let client = redmutex::LockClient::builder("redis://127.0.0.1:6379/")
///     .client_name("scheduler-1")
///     .build()?;
/// let election = client.election("cron");
/// let leadership = election.campaign()?; // waits until this client leads
/// println!("leading with epoch {}", leadership.epoch());
/// // ... run the cron jobs, handing leadership.epoch() to what they write ...
/// leadership.resign()?;
/// # Ok::<(), redmutex::Error>(())
/// ```
///
/// An election needs one counter for its epochs, so a Redlock client refuses every call
/// with [`Error::Unsupported`](crate::Error::Unsupported).
#[derive(Clone)]
pub struct Election {
    lock: Lock<Leading>,
}

/// This client's leadership of an [`Election`]: `Send`, so it may move to the thread that
/// does the leader's work. Renewed by the watchdog while held; dropping it resigns.
#[must_use = "leadership is given up as soon as it is dropped"]
pub struct Leadership {
    guard: LockGuard<Leading>,
}

impl Election {
    pub(crate) fn new(target: Target) -> Self {
        Election {
            lock: Lock::new(target),
        }
    }

    /// The election's whole name, lossily decoded as [`Lock::name`] says.
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    fn target(&self) -> &Target {
        &self.lock.target
    }

    /// This election, with its blocking calls ([`campaign`](Self::campaign),
    /// [`try_campaign_for`](Self::try_campaign_for),
    /// [`try_campaign_until`](Self::try_campaign_until), [`lead`](Self::lead) and the
    /// waits of its [observers](Self::observe)) cancellable by `cancel`: once it is
    /// cancelled they end with [`Error::Cancelled`](crate::Error::Cancelled) within one
    /// round trip with Redis (`lead` returns `Ok(())`). An attempt already on its way when
    /// the token is cancelled finishes: if it won, the call returns the leadership.
    pub fn with_cancel(&self, cancel: &Cancel) -> Self {
        Election {
            lock: self.lock.with_cancel(cancel),
        }
    }

    /// Waits until this client leads, and returns its leadership. Woken by a resignation
    /// at once, and at the latest when the leader's lease runs out.
    ///
    /// Waits without bound unless the client has a
    /// [`max_wait`](crate::LockClientBuilder::max_wait), past which it returns
    /// [`Error::Timeout`](crate::Error::Timeout).
    pub fn campaign(&self) -> Result<Leadership> {
        self.lock.lock().map(Leadership::new)
    }

    /// Takes the lead if nobody leads; `None` when someone does.
    pub fn try_campaign(&self) -> Result<Option<Leadership>> {
        Ok(self.lock.try_lock()?.map(Leadership::new))
    }

    /// Campaigns for at most `timeout`; `None` when someone else led all along. A timeout
    /// whose end the clock cannot hold (such as `Duration::MAX`) sets no deadline, as in
    /// [`Lock::try_lock_for`].
    pub fn try_campaign_for(&self, timeout: Duration) -> Result<Option<Leadership>> {
        Ok(self.lock.try_lock_for(timeout)?.map(Leadership::new))
    }

    /// Campaigns until `deadline` at most; `None` when someone else led all along.
    pub fn try_campaign_until(&self, deadline: Instant) -> Result<Option<Leadership>> {
        Ok(self.lock.try_lock_until(deadline)?.map(Leadership::new))
    }

    /// Who leads now, read from Redis: `None` when nobody does (no leader was ever
    /// elected, the last one resigned, or its lease ran out). Needs no candidacy.
    pub fn leader(&self) -> Result<Option<Leader>> {
        let end = Instant::now() + self.target().shared.config().response_timeout;
        let snapshot = election::read(self.target(), u64::MAX, end)?;
        Ok(snapshot
            .leader
            .map(|(epoch, name, _)| Leader::new(name, epoch)))
    }

    /// Ends the current leadership, whoever holds it, as its resignation would: the next
    /// candidate and every observer are woken, and the leader finds it `Lost` at its next
    /// renewal. For an operator ending a stuck leadership; `true` when one was ended,
    /// `false` when nobody led (or another leader came in meanwhile, and was left alone).
    /// A resignation whose reply is lost or late is sent again, for as long as one call
    /// may take to connect and be answered; when none is answered, the error's
    /// [`is_outcome_unknown`](crate::Error::is_outcome_unknown) is true.
    ///
    /// ```no_run
    /// # fn main() -> redmutex::Result<()> {
    /// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
    /// if client.election("cron").force_resign()? {
    ///     println!("the leader was removed");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn force_resign(&self) -> Result<bool> {
        election::force_resign(self.target(), None)
    }

    /// Ends the leadership of the leader whose token is `token` (as
    /// [`LockClient::inspect`](crate::LockClient::inspect) shows it), as
    /// [`force_resign`](Self::force_resign) does, and only while that leader leads: a
    /// leader elected since is left alone. `false` when it no longer leads.
    pub fn force_resign_leader(&self, token: &str) -> Result<bool> {
        election::force_resign(self.target(), Some(token))
    }

    /// How long the current leader's lease has left; `None` when nobody leads (or the key
    /// has no expiry).
    pub fn remaining_lease(&self) -> Result<Option<Duration>> {
        let end = Instant::now() + self.target().shared.config().response_timeout;
        let snapshot = election::read(self.target(), u64::MAX, end)?;
        Ok(snapshot.leader.and_then(|(_, _, left)| left))
    }

    /// An [`Observer`] of this election: it tells who leads now, then every change of
    /// leader, in order, woken by the election's messages rather than by polling.
    /// Nothing is sent until its first wait.
    pub fn observe(&self) -> Observer {
        Observer::new(self.target().clone(), self.lock.cancel.clone())
    }

    /// Leads whenever it can, the way a selector does: campaigns, runs `work` with the
    /// leadership at hand, resigns when `work` returns, and campaigns again, until the
    /// election's [`Cancel`] token ([`with_cancel`](Self::with_cancel)) is cancelled or the
    /// client closed; then returns `Ok(())`.
    ///
    /// `work` should return once the leadership is lost or no longer healthy: check
    /// [`Leadership::health`] between steps, or block on
    /// [`watch().wait_lost(..)`](HoldWatch::wait_lost). After `work` returns, this client
    /// waits a short jittered pause (the client's retry delays) before it campaigns again,
    /// so that the candidates woken by its resignation get the first chance.
    ///
    /// Errors that another try may cure (connections, timeouts, a lost leadership's
    /// release) are logged and retried after a pause; any other error (a wrong kind of key,
    /// a Redlock client, missing rights) is returned.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
    /// let stop = redmutex::Cancel::new();
    /// let election = client.election("queue-drainer").with_cancel(&stop);
    /// let runner = std::thread::spawn(move || {
    ///     election.lead(|leadership| {
    ///         while leadership.health() == redmutex::Health::Held {
    ///             // ... drain a batch, fenced by leadership.epoch() ...
    ///             # break;
    ///         }
    ///     })
    /// });
    /// // on shutdown:
    /// stop.cancel();
    /// runner.join().expect("no panic")?;
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn lead(&self, mut work: impl FnMut(&Leadership)) -> Result<()> {
        let config = self.target().shared.config();
        let mut backoff = Backoff::new(config.retry_base, config.retry_cap);
        loop {
            match self.campaign() {
                Ok(leadership) => {
                    work(&leadership);
                    match leadership.resign() {
                        Ok(()) => {}
                        Err(err) if err.is_lost() || err.is_cancelled() => {}
                        Err(err) => log::warn!("resigning {}: {err:#}", self.target().subject()),
                    }
                }
                Err(err) if err.is_cancelled() => return Ok(()),
                Err(err) if passing(&err) => {
                    log::warn!("campaigning in {}: {err:#}", self.target().subject());
                }
                Err(err) => return Err(err),
            }
            if !self.pause(backoff.next_delay(None)) {
                return Ok(());
            }
        }
    }

    /// Sleeps `delay` unless the election's token is cancelled or the client closed
    /// meanwhile; whether it slept to the end.
    fn pause(&self, delay: Duration) -> bool {
        let signal = Arc::new(Signal::default());
        let shared = &self.target().shared;
        let _closing = shared.closing().register(&signal);
        let _cancel = self.lock.cancel.as_ref().map(|c| c.register(&signal));
        !signal.wait(delay) && !self.cancelled()
    }

    fn cancelled(&self) -> bool {
        self.target().shared.closing().is_cancelled()
            || self.lock.cancel.as_ref().is_some_and(Cancel::is_cancelled)
    }
}

/// Whether a campaign's error may pass by itself, so that a selector tries again.
fn passing(err: &Error) -> bool {
    err.is_connection()
        || err.is_timeout()
        || err.is_not_replicated()
        || err.is_no_quorum()
        || err.is_validity_exhausted()
        || err.is_lost()
}

impl fmt::Debug for Election {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Election")
            .field("name", &self.name())
            .finish()
    }
}

impl Leadership {
    fn new(guard: LockGuard<Leading>) -> Self {
        Leadership { guard }
    }

    /// This leadership's epoch: greater than every earlier leader's of the election, so
    /// usable as a fencing token. Hand it to the resource with each write; the resource
    /// refuses an epoch lower than one it has seen.
    pub fn epoch(&self) -> u64 {
        self.guard.hold.held.epoch()
    }

    /// The election's name.
    pub fn election(&self) -> &str {
        self.guard.lock().name()
    }

    /// Where the leadership stands: [`Health::Held`] while its last renewal got through
    /// and is valid, [`Health::Uncertain`] once a renewal failed (until one gets through)
    /// or its validity ran out, [`Health::Lost`] once another leader is known to have it
    /// or its key is gone. A leader pauses its work while not `Held`.
    pub fn health(&self) -> Health {
        self.guard.health()
    }

    /// Whether the leadership is known to be gone (found by the watchdog's renewal or a
    /// resignation).
    pub fn is_lost(&self) -> bool {
        self.guard.is_lost()
    }

    /// Until when this client surely leads: the last renewal plus the lease, less an
    /// allowance for clock drift. Past it, another candidate may lead.
    pub fn valid_until(&self) -> Instant {
        self.guard.valid_until()
    }

    /// A watch on this leadership that other threads may keep and block on until it is
    /// lost (see [`HoldWatch`]).
    pub fn watch(&self) -> HoldWatch {
        self.guard.watch()
    }

    /// Gives the leadership up, waking the next candidate and every observer, and reports
    /// the result: [`Error::Lost`](crate::Error::Lost) when it was lost already (another
    /// leader may lead by now; nothing is changed).
    ///
    /// A resignation whose reply is lost or late is sent again, with backoff, until one is
    /// answered or the leadership's validity ends; a send after one that resigned answers
    /// that it did, so the call returns `Ok(())`. When none is answered, the error's
    /// [`is_outcome_unknown`](crate::Error::is_outcome_unknown) is true: it may have
    /// resigned, and if it did not, the lease ends the leadership by
    /// [`valid_until`](Self::valid_until). Dropping the leadership resigns in the same way.
    pub fn resign(self) -> Result<()> {
        self.guard.unlock()
    }
}

impl fmt::Debug for Leadership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leadership")
            .field("election", &self.election())
            .field("epoch", &self.epoch())
            .field("lost", &self.is_lost())
            .finish()
    }
}
