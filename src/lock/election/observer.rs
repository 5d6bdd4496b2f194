//! Observing an election: who leads now, then every change of leader in order, woken by
//! the election's messages.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::base::config::Config;
use crate::base::error::{Error, Result};
use crate::base::retry::Backoff;
use crate::kinds::election::{self, RECORD, Snapshot};
use crate::layout::names;
use crate::lease::target::Target;
use crate::lock::election::leader::Leader;
use crate::notify::cancel::Cancel;
use crate::notify::hub::Signal;
use crate::notify::notifier::Subscription;

/// A change of an election's leader, as an [`Observer`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaderChange {
    /// This leader was elected (or, first, leads as the observer starts).
    Elected(Leader),
    /// The leader reported last published a new value
    /// ([`Leadership::proclaim`](crate::Leadership::proclaim)): the same leader, with it.
    Proclaimed(Leader),
    /// Nobody leads: the last leader resigned or its lease ran out (or, first, nobody leads
    /// as the observer starts).
    Vacant,
}

/// Tells who leads an election, then every change of leader, in order: made by
/// [`Election::observe`](crate::Election::observe), for anyone, candidate or not.
///
/// The first change reported is the state found at the first wait: the leader, or
/// [`LeaderChange::Vacant`]. After it, every leader elected since is reported, each once, in the
/// order of their epochs (a leader that came and went between two reads included), and
/// [`LeaderChange::Vacant`] when a read finds nobody leading after a leader was reported. A
/// leader is reported with the value it published as the read found it (a leader known
/// only from the record of past leaders, with none); a value the reported leader
/// proclaims later is [`LeaderChange::Proclaimed`] (of several proclaimed between two reads, the
/// last).
///
/// Elections and resignations are announced on the election's channel, which the observer
/// subscribes to on the client's subscriber connection: it waits for them rather than
/// asking Redis in a loop. A lease that runs out is announced by nobody, so while someone
/// leads the observer also reads again when that leader's lease would end; while nobody
/// does, about every second (the client's retry cap if longer, its lease if shorter), so
/// that a lost message is made up for soon. Without notifications (a subscription Redis
/// refuses) it reads every retry cap.
///
/// Redis keeps the last 100 leaders of an election: an observer that falls further
/// behind (not reading while more than 100 leaders come and go) misses the oldest of them,
/// and logs a warning saying how many.
///
/// A Redis that lost the election's data (a restart without persistence, a failover to a
/// replica that missed writes) hands out epochs again from where its copy was, and its
/// record of leaders lost them too. An observer tells a leader by its epoch and name: when
/// it finds the counter below the last epoch it reported, or a leader at an epoch it has
/// reported that is not the one it reported, it logs a warning that the epochs went
/// backwards and from then on reports every leader since the loss, in order. A loss goes
/// unnoticed when, before the observer reads again, the counter is back at or past the
/// last epoch it reported and the leader at that epoch has the same name as before (or it
/// has reported no leader yet).
///
/// Errors that another read may cure (Redis unreachable, a broken connection, no reply in
/// time, Redis loading its data, a cluster slot moving) are logged, a warning at the first
/// of a row and then at debug level, and the observer reads again after a jittered pause
/// (the client's retry delays); [`recv`](Self::recv) and the iterator go on until a read
/// gets through. Other errors (a key of another kind, a Redlock client, missing rights)
/// are returned.
///
/// ```no_run
/// # use std::time::Duration;
/// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
/// let mut observer = client.election("cron").observe();
/// while let Some(change) = observer.recv_timeout(Duration::from_secs(60))? {
///     match change {
///         redmutex::LeaderChange::Elected(leader) => {
///             println!("{} leads (epoch {})", leader.name(), leader.epoch())
///         }
///         redmutex::LeaderChange::Vacant => println!("nobody leads"),
///         _ => {}
///     }
/// }
/// # Ok::<(), redmutex::Error>(())
/// ```
///
/// It is also an [`Iterator`] of `Result<LeaderChange>` that waits without bound, and ends when
/// the election's [`Cancel`] token is cancelled or the client closed; its items are errors
/// only when no retry can help.
pub struct Observer {
    target: Target,
    cancel: Option<Cancel>,
    signal: Arc<Signal>,
    subscriptions: Vec<Subscription>,
    /// Whether notifications are to be had; false once subscribing failed everywhere.
    notifications: bool,
    /// The last epoch reported, or known to be over when the observer started.
    epoch: u64,
    /// The last leader reported, by epoch and name.
    last: Option<(u64, String)>,
    /// The value of the leader reported last, as reported.
    value: Option<String>,
    /// What was reported last: `None` before the first report, `Some(true)` for a leader,
    /// `Some(false)` for vacant.
    leading: Option<bool>,
    pending: VecDeque<LeaderChange>,
    /// The leader's lease left at the last read, and when that read was.
    lease_left: Option<(Duration, Instant)>,
    backoff: Backoff,
    /// The pauses between reads that fail; `None` while reads get through.
    failing: Option<Backoff>,
}

impl Observer {
    pub(crate) fn new(target: Target, cancel: Option<Cancel>) -> Self {
        let backoff = fresh_backoff(target.shared.config());
        Observer {
            target,
            cancel,
            signal: Arc::default(),
            subscriptions: Vec::new(),
            notifications: true,
            epoch: 0,
            last: None,
            value: None,
            leading: None,
            pending: VecDeque::new(),
            lease_left: None,
            backoff,
            failing: None,
        }
    }

    /// The next change, waiting for it without bound. Errors that another read may cure
    /// are logged and the read tried again after a pause, for as long as they last; others
    /// are returned. Ends with [`Error::Cancelled`](crate::Error::Cancelled) once the
    /// election's token is cancelled or the client closed.
    pub fn recv(&mut self) -> Result<LeaderChange> {
        loop {
            if let Some(change) = self.wait(None)? {
                return Ok(change);
            }
        }
    }

    /// The next change, waiting at most `timeout`; `None` when nothing changed meanwhile.
    /// A call with a zero timeout reads once and does not wait.
    ///
    /// Errors that another read may cure are retried as by [`recv`](Self::recv) until the
    /// timeout; when no read of this call got through, the last of them is returned, so
    /// that a caller learns that Redis cannot be reached.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Option<LeaderChange>> {
        self.wait(Instant::now().checked_add(timeout))
    }

    /// Waits until `deadline` (`None`: without bound) for a change.
    fn wait(&mut self, deadline: Option<Instant>) -> Result<Option<LeaderChange>> {
        if let Some(change) = self.pending.pop_front() {
            return Ok(Some(change));
        }
        // A cancel, or closing the client, raises the signal this observer sleeps on.
        let _closing = self.target.shared.closing().register(&self.signal);
        let _cancel = self.cancel.as_ref().map(|c| c.register(&self.signal));
        // Whether a read of this call got through.
        let mut read = false;
        loop {
            // Lowered before the read: a message after it raises it again, and a cancel
            // before it is seen by the check.
            self.signal.take();
            self.target.check_cancelled(self.cancel.as_ref())?;
            if self.notifications && !self.subscriptions.iter().any(Subscription::is_live) {
                self.subscribe(deadline);
            }
            // The pause before the next read after an error, and the error, for the caller
            // when this call ends with no read through.
            let (retry, unread) = match self.read() {
                Ok(()) => {
                    read = true;
                    if let Some(change) = self.pending.pop_front() {
                        return Ok(Some(change));
                    }
                    (None, None)
                }
                Err(err) => {
                    // A cancel or a close may be what ended the read.
                    self.target.check_cancelled(self.cancel.as_ref())?;
                    if !passing(&err) {
                        return Err(err);
                    }
                    let pause = self.failed(&err, deadline);
                    (Some(pause), (!read).then_some(err))
                }
            };
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left == Some(Duration::ZERO) {
                return unread.map_or(Ok(None), Err);
            }
            let bound = retry.unwrap_or_else(|| self.bound());
            self.signal.wait(left.map_or(bound, |left| left.min(bound)));
        }
    }

    /// Reads the election and queues what it shows that was not reported yet.
    fn read(&mut self) -> Result<()> {
        let after = match (&self.last, self.leading) {
            (_, None) => u64::MAX,
            // The last leader reported is read again, to tell whether it is still there.
            (Some((epoch, _)), _) if *epoch == self.epoch => epoch - 1,
            _ => self.epoch,
        };
        let mut snapshot = self.read_after(after)?;
        if self.went_back(&snapshot) {
            log::warn!(
                "the epochs of {} went backwards (epoch {} seen before, the counter now at \
                 {}): Redis lost data, by a restart without persistence or a failover to a \
                 replica that missed writes; reporting the leaders since",
                self.target.subject(),
                self.epoch,
                snapshot.counter,
            );
            // The record was lost with the counter: every leader it holds came since.
            self.epoch = 0;
            self.last = None;
            snapshot = self.read_after(0)?;
        }
        self.failing = None;
        self.update(snapshot);
        Ok(())
    }

    fn read_after(&self, after: u64) -> Result<Snapshot> {
        let end = Instant::now() + self.target.shared.config().response_timeout;
        election::read(&self.target, after, end)
    }

    /// Whether `snapshot` shows the election's epochs gone backwards since the last read:
    /// the counter below an epoch reported, or a leader at an epoch reported that is not
    /// the one reported.
    fn went_back(&self, snapshot: &Snapshot) -> bool {
        if self.leading.is_none() {
            return false;
        }
        let leader = (snapshot.leader.iter()).map(|(epoch, name, _)| (*epoch, name));
        let recorded = snapshot.record.iter().map(|(epoch, name)| (*epoch, name));
        let mut leaders = leader.chain(recorded);
        snapshot.counter < self.epoch
            || leaders.any(|(epoch, name)| {
                epoch <= self.epoch
                    && (self.last.as_ref())
                        .is_none_or(|(last, known)| (*last, known) != (epoch, name))
            })
    }

    /// Logs a read's error that may pass, a warning at the first of a row; the pause
    /// before the next read, cut to `deadline`.
    fn failed(&mut self, err: &Error, deadline: Option<Instant>) -> Duration {
        let first = self.failing.is_none();
        let config = self.target.shared.config();
        let backoff = (self.failing).get_or_insert_with(|| fresh_backoff(config));
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let pause = backoff.next_delay(left);
        let subject = self.target.subject();
        if first {
            log::warn!("observing {subject}: {err:#}; reading again in {pause:?}");
        } else {
            log::debug!("observing {subject}: {err:#}; reading again in {pause:?}");
        }
        pause
    }

    /// How long to wait before reading again when no message comes.
    fn bound(&mut self) -> Duration {
        let confirmed = self.subscriptions.iter().any(Subscription::is_confirmed);
        let pause = self.backoff.next_delay(None);
        if !confirmed {
            return pause;
        }
        let config = self.target.shared.config();
        match self.lease_left {
            Some((left, at)) => left.saturating_sub(at.elapsed()) + pause,
            // Nobody leads: a leader elected now is announced, so this read only makes up
            // for a message lost (published while the subscriber reconnected, or never, by
            // a writer that announces nothing). About a second keeps that short at one
            // small read a second; a client that asked for longer pauses (its retry cap)
            // gets them, and none is longer than a lease, which this was before.
            None if self.leading == Some(false) => {
                (config.retry_cap.max(Duration::from_secs(1))).min(config.lease)
            }
            // A leader without expiry: its lease never runs out, so its end is announced,
            // and a read per lease makes up for a message lost.
            None => config.lease,
        }
    }

    /// Queues what `snapshot` shows that was not reported yet.
    fn update(&mut self, snapshot: Snapshot) {
        let Snapshot {
            leader,
            counter,
            record,
            value,
            candidate,
            ..
        } = snapshot;
        // The leader now, as reported with its value and candidate id.
        let now = (leader.as_ref()).map(|(epoch, name, _)| {
            Leader::new(name.clone(), *epoch).with(value.clone(), candidate.clone())
        });
        if self.leading.is_none() {
            // The first read: the state now, nothing before it.
            self.epoch = counter;
        }
        if let Some((first, _)) = record.iter().find(|(epoch, _)| *epoch > self.epoch)
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
                let leader = match &now {
                    Some(now) if now.epoch() == epoch && now.name() == name => now.clone(),
                    _ => Leader::new(name, epoch),
                };
                self.elected(leader);
            }
        }
        match (leader, now) {
            (Some((epoch, _, left)), Some(now)) => {
                if epoch > self.epoch || self.leading.is_none() {
                    self.elected(now);
                } else if self.leading == Some(true)
                    && (self.last.as_ref()).is_some_and(|(last, _)| *last == epoch)
                    && self.value.as_deref() != now.value()
                {
                    self.value = now.value().map(str::to_owned);
                    self.pending.push_back(LeaderChange::Proclaimed(now));
                }
                self.lease_left = left.map(|left| (left, Instant::now()));
                self.backoff = fresh_backoff(self.target.shared.config());
            }
            _ => {
                self.lease_left = None;
                if self.leading != Some(false) {
                    self.pending.push_back(LeaderChange::Vacant);
                    self.leading = Some(false);
                }
            }
        }
    }

    fn elected(&mut self, leader: Leader) {
        self.epoch = self.epoch.max(leader.epoch());
        self.leading = Some(true);
        self.last = Some((leader.epoch(), leader.name().to_owned()));
        self.value = leader.value().map(str::to_owned);
        self.pending.push_back(LeaderChange::Elected(leader));
    }

    /// Subscribes to the observers' channel, waiting for the confirmation until `deadline`
    /// at most; not on a client without pub/sub, whose observers re-read.
    fn subscribe(&mut self, deadline: Option<Instant>) {
        self.subscriptions.clear();
        let Ok(key) = self.target.key() else {
            return;
        };
        if !self.target.shared.config().pubsub {
            self.notifications = false;
            return;
        }
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
}

/// The client's retry delays, from the first.
fn fresh_backoff(config: &Config) -> Backoff {
    Backoff::new(config.retry_base, config.retry_cap)
}

/// Whether a read's error may pass by itself, so that the observer reads again: Redis
/// unreachable, a connection broken or silent, Redis loading its data, a cluster slot
/// moving or without a primary.
fn passing(err: &Error) -> bool {
    err.is_connection() || err.is_loading() || err.is_slot_moving()
}

impl Iterator for Observer {
    type Item = Result<LeaderChange>;

    /// The next change, waiting without bound; `None` once the election's token is
    /// cancelled or the client closed.
    fn next(&mut self) -> Option<Result<LeaderChange>> {
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
