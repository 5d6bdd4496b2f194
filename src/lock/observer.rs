//! Observing an election: who leads now, then every change of leader in order, woken by
//! the election's messages.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::base::error::{Error, Result};
use crate::base::retry::Backoff;
use crate::kinds::election::{self, RECORD, Snapshot};
use crate::layout::names;
use crate::lease::target::Target;
use crate::lock::leader::Leader;
use crate::notify::cancel::Cancel;
use crate::notify::hub::Signal;
use crate::notify::notifier::Subscription;

/// A change of an election's leader, as an [`Observer`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Change {
    /// This leader was elected (or, first, leads as the observer starts).
    Elected(Leader),
    /// Nobody leads: the last leader resigned or its lease ran out (or, first, nobody leads
    /// as the observer starts).
    Vacant,
}

/// Tells who leads an election, then every change of leader, in order: made by
/// [`Election::observe`](crate::Election::observe), for anyone, candidate or not.
///
/// The first change reported is the state found at the first wait: the leader, or
/// [`Change::Vacant`]. After it, every leader elected since is reported, each once, in the
/// order of their epochs (a leader that came and went between two reads included), and
/// [`Change::Vacant`] when a read finds nobody leading after a leader was reported.
///
/// Elections and resignations are announced on the election's channel, which the observer
/// subscribes to on the client's subscriber connection: it waits for them rather than
/// asking Redis in a loop. A lease that runs out is announced by nobody, so while someone
/// leads the observer also reads again when that leader's lease would end; while nobody
/// does, once per client lease in case a message was lost. Without notifications (a
/// subscription Redis refuses) it reads every retry cap.
///
/// Redis keeps the last 100 leaders of an election: an observer that falls further
/// behind (not reading while more than 100 leaders come and go) misses the oldest of them,
/// and logs a warning saying how many.
///
/// ```no_run
/// # use std::time::Duration;
/// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
/// let mut observer = client.election("cron").observe();
/// while let Some(change) = observer.recv_timeout(Duration::from_secs(60))? {
///     match change {
///         redmutex::Change::Elected(leader) => {
///             println!("{} leads (epoch {})", leader.name(), leader.epoch())
///         }
///         redmutex::Change::Vacant => println!("nobody leads"),
///         _ => {}
///     }
/// }
/// # Ok::<(), redmutex::Error>(())
/// ```
///
/// It is also an [`Iterator`] of `Result<Change>` that waits without bound, and ends when
/// the election's [`Cancel`] token is cancelled or the client closed.
pub struct Observer {
    target: Target,
    cancel: Option<Cancel>,
    signal: Arc<Signal>,
    subscriptions: Vec<Subscription>,
    /// Whether notifications are to be had; false once subscribing failed everywhere.
    notifications: bool,
    /// The last epoch reported, or known to be over when the observer started.
    epoch: u64,
    /// What was reported last: `None` before the first report, `Some(true)` for a leader,
    /// `Some(false)` for vacant.
    leading: Option<bool>,
    pending: VecDeque<Change>,
    /// The leader's lease left at the last read, and when that read was.
    lease_left: Option<(Duration, Instant)>,
    backoff: Backoff,
}

impl Observer {
    pub(crate) fn new(target: Target, cancel: Option<Cancel>) -> Self {
        let config = target.shared.config();
        let backoff = Backoff::new(config.retry_base, config.retry_cap);
        Observer {
            target,
            cancel,
            signal: Arc::default(),
            subscriptions: Vec::new(),
            notifications: true,
            epoch: 0,
            leading: None,
            pending: VecDeque::new(),
            lease_left: None,
            backoff,
        }
    }

    /// The next change, waiting for it without bound. Ends with
    /// [`Error::Cancelled`](crate::Error::Cancelled) once the election's token is cancelled
    /// or the client closed.
    pub fn recv(&mut self) -> Result<Change> {
        loop {
            if let Some(change) = self.wait(None)? {
                return Ok(change);
            }
        }
    }

    /// The next change, waiting at most `timeout`; `None` when nothing changed meanwhile.
    /// A call with a zero timeout reads once and does not wait.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Option<Change>> {
        self.wait(Instant::now().checked_add(timeout))
    }

    /// Waits until `deadline` (`None`: without bound) for a change.
    fn wait(&mut self, deadline: Option<Instant>) -> Result<Option<Change>> {
        if let Some(change) = self.pending.pop_front() {
            return Ok(Some(change));
        }
        // A cancel, or closing the client, raises the signal this observer sleeps on.
        let _closing = self.target.shared.closing().register(&self.signal);
        let _cancel = self.cancel.as_ref().map(|c| c.register(&self.signal));
        loop {
            // Lowered before the read: a message after it raises it again, and a cancel
            // before it is seen by the check.
            self.signal.take();
            self.check_cancelled()?;
            if self.notifications && !self.subscriptions.iter().any(Subscription::is_live) {
                self.subscribe(deadline);
            }
            let end = Instant::now() + self.target.shared.config().response_timeout;
            let after = if self.leading.is_none() {
                u64::MAX
            } else {
                self.epoch
            };
            self.update(election::read(&self.target, after, end)?);
            if let Some(change) = self.pending.pop_front() {
                return Ok(Some(change));
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left == Some(Duration::ZERO) {
                return Ok(None);
            }
            let bound = self.bound();
            self.signal.wait(left.map_or(bound, |left| left.min(bound)));
        }
    }

    /// How long to wait before reading again when no message comes.
    fn bound(&mut self) -> Duration {
        let confirmed = self.subscriptions.iter().any(Subscription::is_confirmed);
        let pause = self.backoff.next_delay(None);
        if !confirmed {
            return pause;
        }
        match self.lease_left {
            Some((left, at)) => left.saturating_sub(at.elapsed()) + pause,
            None => self.target.shared.config().lease,
        }
    }

    /// Queues what `snapshot` shows that was not reported yet.
    fn update(&mut self, snapshot: Snapshot) {
        let Snapshot {
            leader,
            counter,
            record,
            ..
        } = snapshot;
        if self.leading.is_none() {
            // The first read: the state now, nothing before it.
            self.epoch = counter;
        }
        if let Some((first, _)) = record.first()
            && *first > self.epoch + 1
            && self.leading.is_some()
        {
            log::warn!(
                "an observer of {} missed {} leaders: Redis keeps the last {RECORD}",
                self.target.subject(),
                first - self.epoch - 1
            );
        }
        for (epoch, name) in record {
            if epoch > self.epoch {
                self.elected(epoch, name);
            }
        }
        match leader {
            Some((epoch, name, left)) => {
                if epoch > self.epoch || self.leading.is_none() {
                    self.elected(epoch, name);
                }
                self.lease_left = left.map(|left| (left, Instant::now()));
                self.backoff = self.fresh_backoff();
            }
            None => {
                self.lease_left = None;
                if self.leading != Some(false) {
                    self.pending.push_back(Change::Vacant);
                    self.leading = Some(false);
                }
            }
        }
    }

    fn elected(&mut self, epoch: u64, name: String) {
        self.epoch = self.epoch.max(epoch);
        self.leading = Some(true);
        self.pending
            .push_back(Change::Elected(Leader::new(name, epoch)));
    }

    fn fresh_backoff(&self) -> Backoff {
        let config = self.target.shared.config();
        Backoff::new(config.retry_base, config.retry_cap)
    }

    /// Subscribes to the observers' channel, waiting for the confirmation until `deadline`
    /// at most.
    fn subscribe(&mut self, deadline: Option<Instant>) {
        self.subscriptions.clear();
        let Ok(key) = self.target.key() else {
            return;
        };
        let channel = names::election_channel(key);
        for node in self.target.shared.nodes().list() {
            let subscribed = match node.notifier(&channel) {
                Ok(notifier) => (notifier.subscribe(&channel, &self.signal, deadline, false, None))
                    .map_err(|err| err.to_string()),
                Err(err) => Err(format!("{err:#}")),
            };
            match subscribed {
                Ok(subscription) => self.subscriptions.push(subscription),
                Err(err) => log::debug!(
                    "no election messages from {} for {}: {err}",
                    node.name,
                    self.target.subject()
                ),
            }
        }
        self.notifications = !self.subscriptions.is_empty();
    }

    /// [`Error::Cancelled`] once the client is closed or the election's token cancelled.
    fn check_cancelled(&self) -> Result<()> {
        let closed = self.target.shared.closing().is_cancelled();
        if closed || self.cancel.as_ref().is_some_and(Cancel::is_cancelled) {
            return Err(Error::Cancelled {
                lock: self.target.subject().clone(),
                closed,
            });
        }
        Ok(())
    }
}

impl Iterator for Observer {
    type Item = Result<Change>;

    /// The next change, waiting without bound; `None` once the election's token is
    /// cancelled or the client closed.
    fn next(&mut self) -> Option<Result<Change>> {
        match self.recv() {
            Err(err) if err.is_cancelled() => None,
            result => Some(result),
        }
    }
}

impl fmt::Debug for Observer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observer")
            .field("election", &self.target.name())
            .field("epoch", &self.epoch)
            .finish()
    }
}
