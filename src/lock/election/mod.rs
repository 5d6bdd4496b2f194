//! Leader election's handle and its leadership: a lock handle of the leading kind, with the
//! calls of an election, and the selector loop that leads whenever it can. The rest of the
//! election's handle side is in this folder: who leads (`leader`), its candidates
//! (`candidate`), a candidate's own listener (`listener`), the observers (`observer`), the
//! first-come-first-served queue (`queue`), and how a removed leader learns it at once
//! (`removal`). Its protocol is `kinds::election`.

pub(crate) mod candidate;
pub(crate) mod leader;
pub(crate) mod listener;
pub(crate) mod observer;
mod queue;
mod removal;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use crate::base::error::{Error, Result};
use crate::base::health::Health;
use crate::base::retry::Backoff;
use crate::kinds::call::Call;
use crate::kinds::candidacy::Candidacy;
use crate::kinds::election::{self, Leading};
use crate::lease::target::Target;
use crate::lock::election::candidate::Candidate;
use crate::lock::election::leader::Leader;
use crate::lock::election::listener::{LeadershipEvent, Listener, Telling};
use crate::lock::election::observer::Observer;
use crate::lock::election::queue::Queue;
use crate::lock::election::removal::Removal;
use crate::lock::guard::LockGuard;
use crate::lock::handle::Lock;
use crate::lock::hold_watch::HoldWatch;
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
/// each time this client leads, the way a selector does; a
/// [listener](Self::with_listener) hears this client's own leaderships begin and end.
/// Candidates lead in no order unless they campaign
/// [first come, first served](Self::first_come_first_served).
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
    listener: Option<Listener>,
    /// Where candidates queue before they campaign, when first come, first served.
    queue: Option<Queue>,
}

/// This client's leadership of an [`Election`]: `Send`, so it may move to the thread that
/// does the leader's work. Renewed by the watchdog while held; dropping it resigns, as
/// [`resign`](Self::resign) does (when Redis does not answer, the drop too waits until an
/// answer comes or the leadership's validity ends).
///
/// While it leads, the client listens for the election's announcements: when another
/// client [forces it out](Election::force_resign), or is elected after its key was deleted,
/// the watchdog renews at once, finds another leader's token or none, and reports the
/// leadership lost, within a round trip of that message.
#[must_use = "leadership is given up as soon as it is dropped"]
pub struct Leadership {
    /// Hears the election's messages while leading; dropped before the resignation.
    removal: Option<Removal>,
    guard: LockGuard<Leading>,
    /// Tells the election's listener of the end; dropped after the resignation.
    telling: Option<Telling>,
}

impl Election {
    pub(crate) fn new(target: Target) -> Self {
        Election {
            lock: Lock::new(target),
            listener: None,
            queue: None,
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
            listener: self.listener.clone(),
            queue: self.queue.clone(),
        }
    }

    /// This election, whose campaigns ([`campaign`](Self::campaign),
    /// [`try_campaign`](Self::try_campaign), [`try_campaign_for`](Self::try_campaign_for),
    /// [`try_campaign_until`](Self::try_campaign_until) and [`lead`](Self::lead)) tell
    /// `listener` of each leadership they win: [`LeadershipEvent::Leading`] when it begins,
    /// then [`LeadershipEvent::NotLeading`] exactly once when it ends (see there on which
    /// thread each is told). It replaces any listener of this handle; its clones, and the
    /// handles made from it by [`with_cancel`](Self::with_cancel), share it.
    ///
    /// The listener runs on the library's threads (the watchdog's for a loss), so it must
    /// not block for long: hand the event to the application's own thread instead. A
    /// listener that panics is logged, and nothing else is disturbed.
    ///
    /// ```no_run
    /// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
    /// let (events, received) = std::sync::mpsc::channel();
    /// let election = client.election("cron").with_listener(move |event| {
    ///     let _ = events.send(*event);
    /// });
    /// let leadership = election.campaign()?;
    /// // received: Leading { epoch }, later NotLeading { epoch, lost }
    /// # drop((leadership, received));
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn with_listener(
        &self,
        listener: impl Fn(&LeadershipEvent) + Send + Sync + 'static,
    ) -> Self {
        Election {
            listener: Some(Arc::new(listener)),
            ..self.clone()
        }
    }

    /// The leadership of `guard`, won by a campaign of this handle.
    fn leadership(&self, guard: LockGuard<Leading>) -> Leadership {
        let (target, held) = (&guard.lock().target, &guard.hold);
        let telling = (self.listener.as_ref()).map(|listener| {
            Telling::start(listener, target.subject(), held.held.epoch(), &held.holding)
        });
        Leadership {
            removal: removal::listen(target, held),
            guard,
            telling,
        }
    }

    /// This election, with its candidates served first come, first served: a campaign
    /// through the returned handle first queues on a [fair lock](crate::Fair) beside the
    /// election, and only the candidate at the head of that queue campaigns. Once it leads,
    /// or its call ends without leading, it leaves the queue, and the next one campaigns. A
    /// candidate that has waited long is thus never overtaken by one that retries fast, as
    /// in Curator's recipes, which order candidates by their sequential znodes.
    ///
    /// Every call keeps its meaning, across both steps: [`try_campaign`](Self::try_campaign)
    /// leads only if nobody leads and nobody is queued; [`campaign`](Self::campaign)'s
    /// [`max_wait`](crate::LockClientBuilder::max_wait),
    /// [`try_campaign_for`](Self::try_campaign_for)'s timeout and
    /// [`try_campaign_until`](Self::try_campaign_until)'s deadline bound the wait in the
    /// queue and the campaign together; a [cancel](Self::with_cancel) or closing the client
    /// ends either. A call that ends without leading, however it ends, leaves the queue at
    /// once. [`lead`](Self::lead) campaigns this way each time, so a selector that
    /// resigns joins the back of the queue.
    ///
    /// A candidate with an id ([`as_candidate`](Self::as_candidate)) that finds the
    /// election led under that id takes its leadership back at once, without queuing.
    ///
    /// [`candidates`](Self::candidates) lists the head of the queue, which campaigns, and
    /// then those queued behind it, in their order.
    ///
    /// Only the candidates of handles made by this call queue. A plain candidate of the
    /// same election campaigns at once and competes with the head of the queue only, so it
    /// may overtake everyone queued behind it.
    ///
    /// A candidate whose process crashes while queued keeps its place until the
    /// [`fair_queue_wait`](crate::LockClientBuilder::fair_queue_wait) of its client (5 s by
    /// default) after its last attempt; one that crashes at the head of the queue, where it
    /// holds the fair lock while it campaigns, keeps the head until the lock's lease (the
    /// client's [`lease`](crate::LockClientBuilder::lease)) runs out. Either holds up the
    /// candidates behind it meanwhile, never the leader.
    ///
    /// The queue is the fair lock `{<key>}:redmutex_queue` (`<key>:redmutex_queue` when the
    /// key holds a hash tag), in the election's cluster slot, with its own queue keys beside
    /// it. Taking and giving back its turn costs each campaign two round trips more; the
    /// client's stats, metrics and callbacks count that lock's holds as a fair lock's,
    /// under its key.
    ///
    /// ```no_run
    /// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
    /// let election = client.election("cron").first_come_first_served();
    /// let leadership = election.campaign()?; // after every candidate queued before it
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn first_come_first_served(&self) -> Election {
        Election {
            queue: Some(Queue::beside(self.target())),
            ..self.clone()
        }
    }

    /// Waits until this client leads, and returns its leadership. Woken by a resignation
    /// at once, and at the latest when the leader's lease runs out.
    ///
    /// Waits without bound unless the client has a
    /// [`max_wait`](crate::LockClientBuilder::max_wait), past which it returns
    /// [`Error::Timeout`](crate::Error::Timeout).
    pub fn campaign(&self) -> Result<Leadership> {
        match &self.queue {
            Some(queue) => queue.campaign(&self.lock),
            None => self.lock.lock(),
        }
        .map(|guard| self.leadership(guard))
    }

    /// Takes the lead if nobody leads; `None` when someone does.
    pub fn try_campaign(&self) -> Result<Option<Leadership>> {
        self.campaign_until(Some(Instant::now()))
    }

    /// Campaigns for at most `timeout`; `None` when someone else led all along. A timeout
    /// whose end the clock cannot hold (such as `Duration::MAX`) sets no deadline, as in
    /// [`Lock::try_lock_for`].
    pub fn try_campaign_for(&self, timeout: Duration) -> Result<Option<Leadership>> {
        self.campaign_until(Instant::now().checked_add(timeout))
    }

    /// Campaigns until `deadline` at most; `None` when someone else led all along.
    pub fn try_campaign_until(&self, deadline: Instant) -> Result<Option<Leadership>> {
        self.campaign_until(Some(deadline))
    }

    /// Campaigns until `deadline` at most (`None`: without one), in the queue first if
    /// there is one.
    fn campaign_until(&self, deadline: Option<Instant>) -> Result<Option<Leadership>> {
        let led = match &self.queue {
            Some(queue) => queue.campaign_until(&self.lock, deadline)?,
            None => self.lock.acquire(None, deadline)?,
        };
        Ok(led.map(|guard| self.leadership(guard)))
    }

    /// Campaigns as [`campaign`](Self::campaign) does, and leads publishing `value` (its
    /// address, say) from the moment it is elected: [`leader`](Self::leader) and the
    /// observers tell it with the leader. Short for `with_value(value).campaign()`.
    ///
    /// ```no_run
    /// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
    /// let election = client.election("primary");
    /// let leadership = election.campaign_with("10.0.0.7:8080")?;
    /// // followers: election.leader()?.and_then(|l| l.value().map(str::to_owned))
    /// # drop(leadership);
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn campaign_with(&self, value: impl Into<String>) -> Result<Leadership> {
        self.with_value(value).campaign()
    }

    /// This election, its campaigns publishing `value` from the moment they win (see
    /// [`campaign_with`](Self::campaign_with)); at most 64 KiB, or the campaigns fail with
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) and send nothing. A
    /// leader changes it with [`Leadership::proclaim`].
    pub fn with_value(&self, value: impl Into<String>) -> Self {
        let mut candidacy = self.candidacy();
        candidacy.value = Some(value.into());
        self.with_candidacy(candidacy)
    }

    /// This election, its campaigns made as the candidate `id`, which a restarted process
    /// gives again to take back its own leadership while it is still valid (etcd's
    /// `ResumeElection`): a campaign that finds the election led under its own id takes
    /// that leadership over at once, with its epoch and name (so the resources it writes
    /// to and the observers see no change of leader), under a new token and a fresh lease;
    /// its value stays unless this handle has one ([`with_value`](Self::with_value)). The leadership it took over
    /// is lost to whoever held it, which learns so within a round trip. An id names one
    /// candidate: two live processes must not share one. At most 256 bytes, not empty,
    /// without control characters, or the campaigns fail with
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) and send nothing.
    ///
    /// Without it, a campaign's candidate id is its client's id and thread, and a campaign
    /// never takes a leadership over.
    ///
    /// ```no_run
    /// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
    /// // the same id after a restart: the leadership, if still valid, is this process's again
    /// let election = client.election("scheduler").as_candidate("scheduler-host-3");
    /// let leadership = election.campaign()?;
    /// # drop(leadership);
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn as_candidate(&self, id: impl Into<String>) -> Self {
        let mut candidacy = self.candidacy();
        candidacy.id = Some(id.into());
        self.with_candidacy(candidacy)
    }

    /// How this handle's campaigns present their candidate.
    fn candidacy(&self) -> Candidacy {
        self.lock.request.as_deref().cloned().unwrap_or_default()
    }

    fn with_candidacy(&self, candidacy: Candidacy) -> Self {
        let mut lock = self.lock.clone();
        lock.request = Some(Arc::new(candidacy));
        Election {
            lock,
            listener: self.listener.clone(),
            queue: self.queue.clone(),
        }
    }

    /// Who leads now, read from Redis: `None` when nobody does (no leader was ever
    /// elected, the last one resigned, or its lease ran out). Needs no candidacy.
    pub fn leader(&self) -> Result<Option<Leader>> {
        let end = Instant::now() + self.target().shared.config().response_timeout;
        let snapshot = election::read(self.target(), u64::MAX, end)?;
        let (value, candidate) = (snapshot.value, snapshot.candidate);
        Ok((snapshot.leader)
            .map(|(epoch, name, _)| Leader::new(name, epoch).with(value, candidate)))
    }

    /// The election's candidates, read from Redis at once: its leader first, then the
    /// clients whose campaigns wait to lead, longest waiting first (as Curator's
    /// `getParticipants` lists them). A waiting campaign is listed from its first attempt
    /// until it leads or ends (a timeout, a cancel, an error); one whose process died stays
    /// listed until the leader's lease it last saw has run out and one client lease more.
    /// In a [first-come-first-served](Self::first_come_first_served) election, those
    /// queued behind the one whose turn it is follow, in their order (the first 64), each
    /// for as long as it keeps its place in the queue.
    pub fn candidates(&self) -> Result<Vec<Candidate>> {
        let end = Instant::now() + self.target().shared.config().response_timeout;
        let snapshot = election::read_candidates(self.target(), end)?;
        let at = |millis: u64| (millis > 0).then(|| UNIX_EPOCH + Duration::from_millis(millis));
        let mut candidates = Vec::with_capacity(snapshot.waiting.len() + 1);
        if let Some((_, name, _)) = snapshot.leader {
            let since = at(snapshot.since);
            candidates.push(Candidate::new(snapshot.candidate, name, since, true));
        }
        let mut waiting = snapshot.waiting;
        waiting.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
        candidates.extend(
            (waiting.into_iter().chain(snapshot.queued))
                .map(|(id, since, name)| Candidate::new(id, name, at(since), false)),
        );
        Ok(candidates)
    }

    /// Ends the current leadership, whoever holds it, as its resignation would: the next
    /// candidate and every observer are woken, and the leader, told by the same message,
    /// finds it `Lost` within a round trip (at its next renewal if its subscriber
    /// connection missed the message). For an operator ending a stuck leadership; `true`
    /// when one was ended, `false` when nobody led (or another leader came in meanwhile,
    /// and was left alone).
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

    /// Ends the leadership of the leader whose token is `holder` (its holder's id, as
    /// [`LockClient::inspect`](crate::LockClient::inspect) shows it), as
    /// [`force_resign`](Self::force_resign) does, and only while that leader leads: a
    /// leader elected since is left alone. `false` when it no longer leads. The locks'
    /// [`Lock::force_unlock_held_by`](crate::Lock::force_unlock_held_by) is the same call.
    pub fn force_resign_held_by(&self, holder: &str) -> Result<bool> {
        election::force_resign(self.target(), Some(holder))
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
            .field("first_come_first_served", &self.queue.is_some())
            .finish()
    }
}

impl Leadership {
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

    /// Publishes `value` as this leader's (its address, say), replacing the one it had:
    /// [`Election::leader`] and the observers tell it from now on. At most 64 KiB
    /// ([`Error::InvalidArgument`](crate::Error::InvalidArgument) otherwise, nothing
    /// changed); [`Error::Lost`](crate::Error::Lost) when this client no longer leads
    /// (nothing changed).
    pub fn proclaim(&self, value: &str) -> Result<()> {
        let target = &self.guard.lock().target;
        if self.is_lost() {
            return Err(target.lost());
        }
        match election::proclaim(target, self.guard.hold.held.token(), value)? {
            true => Ok(()),
            false => Err(target.found_lost(&self.guard.hold.holding)),
        }
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
        let Leadership {
            removal,
            guard,
            telling,
        } = self;
        drop(removal);
        let resigned = guard.unlock();
        drop(telling);
        resigned
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
