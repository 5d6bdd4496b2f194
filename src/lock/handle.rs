//! The lock handle, written once for every kind: its name and what can be asked of it
//! without holding it. Acquisition is in `acquire`; what differs between kinds lives in
//! their own files.

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use crate::base::error::Result;
use crate::kinds::call::Call;
use crate::kinds::kind::Kind;
use crate::kinds::reentrant::{self, Reentrant, ThreadOwned};
use crate::layout::names;
use crate::lease::target::Target;
use crate::notify::cancel::Cancel;
use crate::transport::common;

/// A lock on one Redis key, shared by every thread and process that names it. `K` is its
/// [`Kind`]: [`Reentrant`] (the default, Redisson's `RLock`) or another (see the
/// implementors of [`Kind`]), each made by its constructor on
/// [`LockClient`](crate::LockClient).
///
/// The handle is cheap to clone and `Send + Sync`. Acquisition comes in the usual four
/// forms — [`lock`](Self::lock) (wait), [`try_lock`](Self::try_lock) (do not wait),
/// [`try_lock_for`](Self::try_lock_for) and [`try_lock_until`](Self::try_lock_until) — each
/// also with an explicit lease (`*_with_lease`), which gets no watchdog: the hold simply
/// expires after the lease. Without one, a watchdog thread renews the lease while it is held.
///
/// [`with_cancel`](Self::with_cancel) gives the same handle with its waits cancellable from
/// another thread by a [`Cancel`] token.
///
/// On a client over several nodes (Redlock) every call goes to all of them: acquisitions
/// fail at once with [`Error::NoQuorum`](crate::Error::NoQuorum) when too few nodes answer, and a quorum that grants
/// too slowly is retried within the deadline and reported as [`Error::ValidityExhausted`](crate::Error::ValidityExhausted)
/// when time runs out; introspection reports what a quorum agrees on.
pub struct Lock<K: Kind = Reentrant> {
    pub(crate) target: Target,
    /// What each acquisition asks for besides its lease (see `Machinery::Request`).
    pub(crate) request: K::Request,
    /// The token whose cancel ends this handle's waits.
    pub(crate) cancel: Option<Cancel>,
    kind: PhantomData<fn() -> K>,
}

impl<K: Kind> Lock<K> {
    pub(crate) fn new(target: Target) -> Self {
        Lock {
            target,
            request: K::Request::default(),
            cancel: None,
            kind: PhantomData,
        }
    }

    /// This handle, with its blocking acquisitions cancellable by `cancel`: once it is
    /// cancelled, a wait in progress and every later one end with
    /// [`Error::Cancelled`](crate::Error::Cancelled) within one round trip with Redis. The
    /// acquisition calls are the same as the original's; guards are unchanged. An attempt
    /// already on its way to Redis when the token is cancelled finishes: if it took the
    /// lock, the call returns the guard (drop it to give the lock back), otherwise the
    /// cancellation. A fair lock's waiter leaves the queue.
    ///
    /// ```no_run
    /// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
    /// let stop = redmutex::Cancel::new();
    /// let lock = client.lock("orders:42").with_cancel(&stop);
    /// match lock.lock() {
    ///     Ok(guard) => drop(guard),
    ///     Err(err) if err.is_cancelled() => println!("stopped waiting"),
    ///     Err(err) => return Err(err),
    /// }
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn with_cancel(&self, cancel: &Cancel) -> Self {
        Lock {
            cancel: Some(cancel.clone()),
            ..self.clone()
        }
    }

    /// The lock's whole name, as given to the client (without its key prefix). A name is
    /// bytes: any sequence of them that is not UTF-8 reads as U+FFFD here
    /// (`String::from_utf8_lossy`), while the key keeps them as they are.
    pub fn name(&self) -> &str {
        self.target.name()
    }

    /// Whether anyone holds the lock (on a quorum of nodes).
    pub fn is_locked(&self) -> Result<bool> {
        let mut cmd = redis::cmd("EXISTS");
        cmd.arg(self.target.key()?);
        self.agreed(&cmd)
    }

    /// How long the current holder's lease has left (on a quorum of nodes); `None` when the
    /// lock is free (or was set by someone else without an expiry).
    pub fn remaining_lease(&self) -> Result<Option<Duration>> {
        let mut cmd = redis::cmd("PTTL");
        cmd.arg(self.target.key()?);
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
        self.force_unlock_as("")
    }

    /// Deletes the lock only while `holder` holds it, as [`force_unlock`](Self::force_unlock)
    /// does otherwise: `holder` is the holder's id as [`LockClient::inspect`] shows it (a
    /// SET-NX lock's token, or an owner field `<client-uuid>:<thread-id>`). A compare and
    /// delete: it also removes a key that has a lock's shape but no expiry (which
    /// [`force_unlock`](Self::force_unlock) leaves alone, as it may be application data),
    /// the caller having confirmed, by naming its holder, that it is the lock. Returns
    /// whether it deleted one: false when the lock is free or held by someone else. A
    /// hash's holder is an owner field (`mode` or any other field matches nothing).
    ///
    /// ```no_run
    /// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
    /// let lock = client.token_lock("jobs:nightly");
    /// let removed = lock.force_unlock_held_by("0123456789abcdef0123456789abcdef")?;
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    ///
    /// [`LockClient::inspect`]: crate::LockClient::inspect
    pub fn force_unlock_held_by(&self, holder: &str) -> Result<bool> {
        if holder.is_empty() {
            return Err(self.target.invalid_argument(
                "holder",
                "empty: name the token or owner field that holds the lock".into(),
            ));
        }
        self.force_unlock_as(holder)
    }

    fn force_unlock_as(&self, holder: &str) -> Result<bool> {
        let target = &self.target;
        let key = target.open()?;
        let latch = names::unlock_latch(key, &names::random_id());
        let forced = common::Forced {
            latch: &latch,
            latch_ttl: target.shared.config().latch_ttl(),
            holder,
        };
        let cmd = K::force_unlock_cmd(target, key, &forced);
        let nodes = target.shared.nodes();
        let deleted = nodes
            .answers(nodes.run_all_unhurried::<i64>(&cmd))
            .map_err(|err| target.wrong_kind(err))?;
        Ok(deleted.contains(&1))
    }

    /// `cmd` on every node, and the answer a quorum agrees on at least.
    fn agreed<T: redis::FromRedisValue + Ord + Copy>(&self, cmd: &redis::Cmd) -> Result<T> {
        self.target.open()?;
        let nodes = self.target.shared.nodes();
        nodes
            .agreed(nodes.run_all_unhurried(cmd))
            .map_err(|err| err.with_lock(self.target.subject()))
    }
}

/// For the kinds a thread owns ([`ThreadOwned`]), which count each thread's holds. A
/// [`Token`](crate::Token) lock has one hold, which its guard knows.
impl<K: ThreadOwned> Lock<K> {
    /// Whether the current thread holds the lock, as Redis sees it.
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        Ok(self.hold_count()? > 0)
    }

    /// How many holds the current thread has, as Redis sees it (on a quorum of nodes).
    pub fn hold_count(&self) -> Result<u32> {
        reentrant::hold_count::<K>(&self.target)
    }
}

impl<K: Kind> Clone for Lock<K> {
    fn clone(&self) -> Self {
        Lock {
            target: self.target.clone(),
            request: self.request.clone(),
            cancel: self.cancel.clone(),
            kind: PhantomData,
        }
    }
}

impl<K: Kind> fmt::Debug for Lock<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock").field("name", &self.name()).finish()
    }
}
