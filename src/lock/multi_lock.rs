//! The multi-lock: several locks, of any kinds, taken all or none as one.

use std::any::Any;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::base::config::check_lease;
use crate::base::error::{Error, Result, Subject};
use crate::base::health::Health;
use crate::base::metrics;
use crate::base::subject::Noun;
use crate::kinds::call::Call;
use crate::kinds::holding::Holding;
use crate::kinds::kind::sealed::Machinery;
use crate::kinds::kind::{Grant, Kind};
use crate::kinds::multi::{self, Batch};
use crate::kinds::reentrant::Reentrant;
use crate::lease::hold::Hold;
use crate::lock::guard::LockGuard;
use crate::lock::handle::Lock;
use crate::lock::hold_watch::HoldWatch;
use crate::notify::cancel::Cancel;

/// Several locks taken as one: all of them, or none. Made by
/// [`LockClient::multi_lock`](crate::LockClient::multi_lock) over reentrant locks, or by
/// [`MultiLock::new`] and [`and`](Self::and) over locks of any kinds (a fair lock, the write
/// side of a read-write lock, a token lock, each of any client). Redisson's
/// `RedissonMultiLock` keeps its members in their own layouts, and so does this one, so a
/// Java `RMultiLock` (or a plain `RLock`) over one of the same names excludes it.
///
/// An acquisition never holds one member while it waits for another, so multi-locks over
/// the same locks, named in any order, never deadlock each other:
///
/// 1. It tries every member, in the order of their keys, without waiting for any. The
///    [`Reentrant`] members of one client on one server (on a Cluster, in one slot) go
///    together by one script, which takes all of them or, finding one busy, none; the
///    others are tried one by one.
/// 2. If all are taken, it returns their [`MultiGuard`].
/// 3. Otherwise it gives back the members it took, and waits for the busy one as that lock
///    waits (woken by its release, with its kind's back-off and bounds), up to the
///    deadline. Once it holds that one, it tries the others again as in step 1.
///
/// The acquisition quartet is the same as a [`Lock`]'s, with one deadline for the whole:
/// [`lock`](Self::lock) waits without bound (unless a member's client has a
/// [`max_wait`](crate::LockClientBuilder::max_wait): the shortest applies),
/// [`try_lock`](Self::try_lock) tries once, and `try_lock_for` and `try_lock_until` wait at
/// most until their deadline. Without an explicit lease, each member's hold is renewed by
/// the watchdog while held; with one, every member gets it.
///
/// A member is a reentrant lock of the thread that takes it where its kind is: a thread
/// that holds one of the locks already takes it again (a [`NonReentrant`](crate::NonReentrant)
/// member refuses it, with [`Error::Reentry`]). A lock may be a member once: a multi-lock
/// that names one key of one client twice (both sides of one read-write lock included) is
/// refused with [`Error::InvalidArgument`], as is one without members.
///
/// ```no_run
/// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
/// let transfer = client.multi_lock(["account:17", "account:42"]);
/// let guard = transfer.lock()?; // both accounts, or a wait holding neither
/// guard.unlock()?;
///
/// let mixed = redmutex::MultiLock::new()
///     .and(client.fair_lock("queue"))
///     .and(client.read_write_lock("prices").write().clone());
/// let guard = mixed.try_lock_for(std::time::Duration::from_secs(5))?;
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone, Default)]
pub struct MultiLock {
    members: Vec<Arc<dyn Member>>,
}

/// The holds of every member of a [`MultiLock`]; dropping it gives them all back. Not
/// `Send`: a member's hold may belong to the thread that took it.
#[must_use = "the locks are released as soon as the guard is dropped"]
pub struct MultiGuard {
    holds: Vec<Box<dyn Held>>,
    /// Told to the watches when the guard is released or dropped.
    watched_release: OnceLock<Arc<AtomicBool>>,
}

/// How an acquisition takes the members: in this order, by these units (indices into it).
struct Plan<'a> {
    members: Vec<&'a dyn Member>,
    units: Vec<Vec<usize>>,
}

/// A lock of some kind, as a member.
trait Member: Send + Sync {
    /// The lock's key and client, which order the members and find one named twice.
    fn key(&self) -> Result<(Vec<u8>, String)>;
    fn name(&self) -> &str;
    /// Its acquisition, with its waits bounded by `deadline`.
    fn take(
        &self,
        lease: Option<Duration>,
        deadline: Option<Instant>,
    ) -> Result<Option<Box<dyn Held>>>;
    fn max_wait(&self) -> Option<Duration>;
    /// How long its client waits for a reply.
    fn response_timeout(&self) -> Duration;
    fn cancellable(&self, cancel: &Cancel) -> Arc<dyn Member>;
    /// The member as a reentrant lock, which may be taken with others by one script.
    fn reentrant(&self) -> Option<&Lock<Reentrant>>;
}

/// A member's hold, as its guard keeps it.
trait Held {
    fn unlock(self: Box<Self>) -> Result<()>;
    fn is_lost(&self) -> bool;
    fn health(&self) -> Health;
    fn valid_until(&self) -> Instant;
    fn is_watched(&self) -> bool;
    fn holding(&self) -> Arc<Holding>;
    fn name(&self) -> &str;
}

impl<K: Kind> Member for Lock<K> {
    fn key(&self) -> Result<(Vec<u8>, String)> {
        let key = self.target.key()?.to_vec();
        Ok((key, self.target.shared.id().to_owned()))
    }

    fn name(&self) -> &str {
        Lock::name(self)
    }

    fn take(
        &self,
        lease: Option<Duration>,
        deadline: Option<Instant>,
    ) -> Result<Option<Box<dyn Held>>> {
        let guard = self.acquire(lease, deadline)?;
        Ok(guard.map(|guard| Box::new(guard) as Box<dyn Held>))
    }

    fn max_wait(&self) -> Option<Duration> {
        self.target.shared.config().max_wait
    }

    fn response_timeout(&self) -> Duration {
        self.target.shared.config().response_timeout
    }

    fn cancellable(&self, cancel: &Cancel) -> Arc<dyn Member> {
        Arc::new(self.with_cancel(cancel))
    }

    fn reentrant(&self) -> Option<&Lock<Reentrant>> {
        (self as &dyn Any).downcast_ref()
    }
}

impl<K: Kind> Held for LockGuard<K> {
    fn unlock(self: Box<Self>) -> Result<()> {
        LockGuard::unlock(*self)
    }

    fn is_lost(&self) -> bool {
        LockGuard::is_lost(self)
    }

    fn health(&self) -> Health {
        LockGuard::health(self)
    }

    fn valid_until(&self) -> Instant {
        LockGuard::valid_until(self)
    }

    fn is_watched(&self) -> bool {
        LockGuard::is_watched(self)
    }

    fn holding(&self) -> Arc<Holding> {
        self.hold.holding.clone()
    }

    fn name(&self) -> &str {
        self.lock().name()
    }
}

impl MultiLock {
    /// A multi-lock without members; add them with [`and`](Self::and).
    pub fn new() -> Self {
        MultiLock::default()
    }

    /// This multi-lock with `lock` as one more member.
    pub fn and<K: Kind>(mut self, lock: Lock<K>) -> Self {
        self.members.push(Arc::new(lock));
        self
    }

    /// This multi-lock, with its blocking acquisitions cancellable by `cancel`: once it is
    /// cancelled, a wait in progress and every later one end with [`Error::Cancelled`]
    /// within one round trip with Redis, holding none of the locks (see
    /// [`Lock::with_cancel`]).
    pub fn with_cancel(&self, cancel: &Cancel) -> Self {
        let members = self.members.iter();
        MultiLock {
            members: members.map(|member| member.cancellable(cancel)).collect(),
        }
    }

    /// The members' names, in the order they were added.
    pub fn names(&self) -> Vec<&str> {
        self.members.iter().map(|member| member.name()).collect()
    }

    /// Waits until every member is taken, then returns their guard; see [`Lock::lock`].
    /// Past the shortest [`max_wait`](crate::LockClientBuilder::max_wait) of the members'
    /// clients, it returns [`Error::Timeout`].
    pub fn lock(&self) -> Result<MultiGuard> {
        self.lock_inner(None)
    }

    /// Takes every member if each is free (or held by this thread, for a reentrant kind);
    /// `None`, holding none of them, when any is busy.
    pub fn try_lock(&self) -> Result<Option<MultiGuard>> {
        self.acquire(None, Some(Instant::now()))
    }

    /// Waits at most `timeout` for every member; `None` when some stayed busy. A timeout
    /// whose end the clock cannot hold sets no deadline.
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<MultiGuard>> {
        self.acquire(None, Instant::now().checked_add(timeout))
    }

    /// Waits until `deadline` at most for every member; `None` when some stayed busy.
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<MultiGuard>> {
        self.acquire(None, Some(deadline))
    }

    /// Like [`lock`](Self::lock), with a fixed lease for every member and no watchdog.
    pub fn lock_with_lease(&self, lease: Duration) -> Result<MultiGuard> {
        self.lock_inner(Some(lease))
    }

    /// Like [`try_lock`](Self::try_lock), with a fixed lease for every member.
    pub fn try_lock_with_lease(&self, lease: Duration) -> Result<Option<MultiGuard>> {
        self.acquire(Some(lease), Some(Instant::now()))
    }

    /// Like [`try_lock_for`](Self::try_lock_for), with a fixed lease for every member.
    pub fn try_lock_with_lease_for(
        &self,
        timeout: Duration,
        lease: Duration,
    ) -> Result<Option<MultiGuard>> {
        self.acquire(Some(lease), Instant::now().checked_add(timeout))
    }

    /// Like [`try_lock_until`](Self::try_lock_until), with a fixed lease for every member.
    pub fn try_lock_with_lease_until(
        &self,
        deadline: Instant,
        lease: Duration,
    ) -> Result<Option<MultiGuard>> {
        self.acquire(Some(lease), Some(deadline))
    }

    /// What errors name: the multi-lock, by its members' names.
    fn subject(&self) -> Subject {
        Subject::new(Noun::MultiLock, self.names().join(", "))
    }

    fn lock_inner(&self, lease: Option<Duration>) -> Result<MultiGuard> {
        let started = Instant::now();
        let max_wait = self.members.iter().filter_map(|m| m.max_wait()).min();
        let deadline = max_wait.and_then(|wait| started.checked_add(wait));
        self.acquire(lease, deadline)?
            .ok_or_else(|| Error::Timeout {
                lock: self.subject(),
                waited: started.elapsed(),
                held_by: None,
            })
    }

    /// The members in the order they are taken, by key, then client; and the units an
    /// attempt takes them in: reentrant locks of one client and one slot together (by one
    /// script), every other member alone. Refuses none, a bad lease, and a lock named twice.
    fn ordered(&self, lease: Option<Duration>) -> Result<Plan<'_>> {
        let invalid = |argument, reason: String| Error::InvalidArgument {
            lock: self.subject(),
            argument,
            reason,
        };
        if self.members.is_empty() {
            return Err(invalid("locks", "no locks: add at least one".into()));
        }
        if let Some(lease) = lease {
            check_lease(lease).map_err(|reason| invalid("lease", reason))?;
        }
        let mut keyed = (self.members.iter())
            .map(|member| Ok((member.key()?, member.as_ref())))
            .collect::<Result<Vec<_>>>()?;
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(pair) = keyed.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            let name = pair[0].1.name();
            return Err(invalid("locks", format!("{name:?} is named twice")));
        }
        let members: Vec<_> = keyed.into_iter().map(|(_, member)| member).collect();
        // Each unit with the batch its members share, if they may share one.
        let mut units: Vec<(_, Vec<usize>)> = Vec::new();
        for (at, member) in members.iter().enumerate() {
            let batch = member
                .reentrant()
                .and_then(|lock| multi::batch_of(&lock.target));
            match units
                .iter_mut()
                .find(|(b, _)| batch.is_some() && *b == batch)
            {
                Some((_, unit)) => unit.push(at),
                None => units.push((batch, vec![at])),
            }
        }
        let units = units.into_iter().map(|(_, unit)| unit).collect();
        Ok(Plan { members, units })
    }

    /// The loop: try every member without waiting; where one is busy, give back the others
    /// and wait for it alone, then try the rest again.
    fn acquire(
        &self,
        lease: Option<Duration>,
        deadline: Option<Instant>,
    ) -> Result<Option<MultiGuard>> {
        let Plan { members, units } = self.ordered(lease)?;
        // A member waited for and taken, kept for the next round.
        let mut waited: Option<(usize, Box<dyn Held>)> = None;
        loop {
            let mut holds = Vec::with_capacity(members.len());
            let mut busy = None;
            for unit in &units {
                let mut rest = unit.clone();
                if let Some((at, _)) = &waited
                    && let Some(index) = rest.iter().position(|i| i == at)
                {
                    rest.remove(index);
                    holds.extend(waited.take().map(|(_, hold)| hold));
                }
                match take_unit(&members, &rest, lease, deadline) {
                    Ok(Ok(taken)) => holds.extend(taken),
                    Ok(Err(at)) => {
                        busy = Some(at);
                        break;
                    }
                    Err(err) => {
                        holds.extend(waited.map(|(_, hold)| hold));
                        give_back(holds, &members, "after an error");
                        return Err(err);
                    }
                }
            }
            let Some(busy) = busy else {
                return Ok(Some(MultiGuard {
                    holds,
                    watched_release: OnceLock::new(),
                }));
            };
            holds.extend(waited.take().map(|(_, hold)| hold));
            give_back(holds, &members, "to wait");
            if deadline.is_some_and(|deadline| deadline <= Instant::now()) {
                return Ok(None);
            }
            match members[busy].take(lease, deadline)? {
                Some(hold) => waited = Some((busy, hold)),
                None => return Ok(None),
            }
        }
    }
}

/// Takes the members `unit` (indices into `members`) without waiting: their holds, or the
/// index of one that is busy (or in a cluster slot still moving), having taken none of
/// them. Several go by one script; where that cannot serve (a slot being migrated), each
/// is taken alone. Each try is bounded as a try of the caller's `deadline` is (a response
/// timeout past it at most), and none starts once that has passed: the member is then
/// taken as busy.
fn take_unit(
    members: &[&dyn Member],
    unit: &[usize],
    lease: Option<Duration>,
    deadline: Option<Instant>,
) -> Result<std::result::Result<Vec<Box<dyn Held>>, usize>> {
    // The deadline of one try started now: now, or the caller's if that has passed.
    let try_deadline = || {
        let now = Instant::now();
        deadline.map_or(now, |deadline| deadline.min(now))
    };
    let spent = |at: usize| {
        let end = deadline.and_then(|d| d.checked_add(members[at].response_timeout()));
        end.is_some_and(|end| end <= Instant::now())
    };
    let locks: Option<Vec<&Lock<Reentrant>>> =
        unit.iter().map(|&at| members[at].reentrant()).collect();
    if let Some(locks) = locks.filter(|locks| locks.len() > 1) {
        for lock in &locks {
            lock.target.check_cancelled(lock.cancel.as_ref())?;
        }
        let targets: Vec<&dyn Call> = locks.iter().map(|lock| &lock.target as _).collect();
        let config = locks[0].target.shared.config();
        if spent(unit[0]) {
            return Ok(Err(unit[0]));
        }
        let started = Instant::now();
        let limit = try_deadline().checked_add(config.response_timeout);
        match multi::take(&targets, lease, limit) {
            Ok(Batch::Taken(grants)) => {
                let holds = holds_of(&locks, grants)?;
                for _ in &holds {
                    metrics::acquisition(Reentrant::LABEL, "acquired", started.elapsed());
                }
                let guards = locks.iter().zip(holds).map(|(lock, hold)| {
                    Box::new(LockGuard::new((*lock).clone(), hold)) as Box<dyn Held>
                });
                return Ok(Ok(guards.collect()));
            }
            Ok(Batch::Busy(at)) => return Ok(Err(unit[at])),
            // Taken too slowly, and given back: waited for as the first one is.
            Ok(Batch::Slow) => return Ok(Err(unit[0])),
            // A slot being migrated, or every pooled connection busy: each alone.
            Err(err) if err.is_slot_moving() || err.is_pool_busy() => {}
            Err(err) => return Err(err),
        }
    }
    let mut holds = Vec::with_capacity(unit.len());
    for &at in unit {
        if spent(at) {
            give_back(holds, members, "to wait");
            return Ok(Err(at));
        }
        let taken = match members[at].take(lease, Some(try_deadline())) {
            // Its slot still moving when the try's bound passed, or every pooled
            // connection busy: waited for as a busy member is, within the caller's deadline.
            Err(err) if err.is_slot_moving() || err.is_pool_busy() => Ok(None),
            taken => taken,
        };
        match taken {
            Ok(Some(hold)) => holds.push(hold),
            Ok(None) => {
                give_back(holds, members, "to wait");
                return Ok(Err(at));
            }
            Err(err) => {
                give_back(holds, members, "after an error");
                return Err(err);
            }
        }
    }
    Ok(Ok(holds))
}

/// The holds that the grants of one batch make, one per lock of `locks`, in order. Where
/// no watchdog can start for one, what it took was given back: so are the holds made
/// before it, and what the grants after it took, in one round.
fn holds_of(locks: &[&Lock<Reentrant>], grants: Vec<Grant<()>>) -> Result<Vec<Hold<()>>> {
    let mut holds = Vec::with_capacity(grants.len());
    let mut grants = grants.into_iter();
    for (lock, grant) in locks.iter().zip(grants.by_ref()) {
        let err = match Hold::new(&lock.target, grant) {
            Ok(hold) => {
                holds.push(hold);
                continue;
            }
            Err(err) => err,
        };
        for (lock, hold) in locks.iter().zip(&holds) {
            let _ = hold.release::<Reentrant>(&lock.target);
        }
        let rest = (locks[holds.len() + 1..].iter().zip(grants)).filter_map(|(lock, grant)| {
            let (_, renewal) = grant.renew?;
            let held = grant.slot.map_or(0, |(_, held)| held);
            Some((lock.target.subject(), renewal.undo(&lock.target, held)))
        });
        lock.target.shared.give_back_all(rest);
        return Err(err);
    }
    Ok(holds)
}

/// Gives back the holds of a round that did not take every member, logging what failed:
/// a hold not given back stays until its lease runs out, unrenewed.
fn give_back(holds: Vec<Box<dyn Held>>, members: &[&dyn Member], why: &str) {
    for hold in holds.into_iter().rev() {
        if let Err(err) = hold.unlock() {
            let names: Vec<_> = members.iter().map(|member| member.name()).collect();
            log::warn!("a multi-lock over {names:?} gave back a member {why}: {err:#}");
        }
    }
}

impl MultiGuard {
    /// Gives every member back, the last taken first, and reports the first error (see
    /// [`LockGuard::unlock`]); the others are given back whatever it was.
    pub fn unlock(mut self) -> Result<()> {
        let holds = std::mem::take(&mut self.holds);
        let holdings: Vec<_> = holds.iter().map(|hold| hold.holding()).collect();
        let mut first = Ok(());
        for hold in holds.into_iter().rev() {
            if let (Err(err), Ok(())) = (hold.unlock(), &first) {
                first = Err(err);
            }
        }
        self.released(&holdings);
        first
    }

    /// Whether any member's hold is lost (see [`LockGuard::is_lost`]).
    pub fn is_lost(&self) -> bool {
        self.holds.iter().any(|hold| hold.is_lost())
    }

    /// The least sure of the members' [`health`](LockGuard::health): lost if any is,
    /// uncertain if any is, otherwise held.
    pub fn health(&self) -> Health {
        Health::worst(self.holds.iter().map(|hold| hold.health()))
    }

    /// Until when every member is surely held: the soonest of their
    /// [`valid_until`](LockGuard::valid_until).
    pub fn valid_until(&self) -> Instant {
        let ends = self.holds.iter().map(|hold| hold.valid_until());
        ends.min().unwrap_or_else(Instant::now)
    }

    /// A watch on every member's hold that other threads may keep and wait on (see
    /// [`LockGuard::watch`]): lost when any member is, and released with this guard.
    pub fn watch(&self) -> HoldWatch {
        let released = self.watched_release.get_or_init(Arc::default).clone();
        let holdings = self.holds.iter().map(|hold| hold.holding()).collect();
        let names: Vec<_> = self.holds.iter().map(|hold| hold.name()).collect();
        HoldWatch::new(holdings, released, &names.join(", "))
    }

    /// Whether the watchdog renews the members' holds (taken without an explicit lease).
    pub fn is_watched(&self) -> bool {
        self.holds.iter().all(|hold| hold.is_watched())
    }

    /// Tells the watches that the guard was released, once its members are.
    fn released(&self, holdings: &[Arc<Holding>]) {
        if let Some(released) = self.watched_release.get() {
            released.store(true, Ordering::Release);
            holdings.iter().for_each(|holding| holding.wake_watchers());
        }
    }
}

impl Drop for MultiGuard {
    fn drop(&mut self) {
        let holds = std::mem::take(&mut self.holds);
        let holdings: Vec<_> = holds.iter().map(|hold| hold.holding()).collect();
        for hold in holds.into_iter().rev() {
            match hold.unlock() {
                // In a forked child nothing is released, and nothing logged (see LockGuard).
                Ok(()) | Err(Error::Forked { .. }) => {}
                Err(err) => log::warn!("releasing a multi-lock's member on drop failed: {err:#}"),
            }
        }
        self.released(&holdings);
    }
}

impl fmt::Debug for MultiLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiLock")
            .field("names", &self.names())
            .finish()
    }
}

impl fmt::Debug for MultiGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiGuard")
            .field("members", &self.holds.len())
            .field("lost", &self.is_lost())
            .finish()
    }
}
