//! The non-reentrant locks, Redisson's `RNonReentrantLock` and `RNonReentrantFairLock`:
//! the reentrant and fair locks' layouts, taken once by their holder.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use redis::{Cmd, Value};

use crate::base::error::{Error, Result};
use crate::base::held_by::HeldBy;
use crate::kinds::call::Call;
use crate::kinds::fair::Fair;
use crate::kinds::kind::Kind;
use crate::kinds::kind::{Attempt, Grant, sealed::Machinery};
use crate::kinds::reentrant::ThreadOwned;
use crate::kinds::reentrant::{self, Answer, Hashed, Reentrant};
use crate::layout::names::Granted;
use crate::layout::owner::current_thread;
use crate::transport::common;

/// The non-reentrant kind, Redisson's `RNonReentrantLock` layout: the [`Reentrant`] lock's
/// hash, written, renewed and released exactly as that is, so Java services using
/// Redisson's non-reentrant lock share it, and so do those using its `RLock` of the same
/// name, since the hash is the same. The owner's field counts one hold, never more.
/// [`NonReentrantFair`] is the same over the [`Fair`] lock.
///
/// A hold belongs to the thread that took it (its guard is not `Send`). A thread that
/// holds it and asks for it again, by [`lock`](crate::Lock::lock),
/// [`try_lock`](crate::Lock::try_lock) or any other acquisition, gets [`Error::Reentry`]
/// at once, with nothing sent, where a [`Reentrant`] lock would count a second hold;
/// Redisson's non-reentrant locks throw `IllegalMonitorStateException` alike. So does a
/// thread that holds the reentrant (or fair) lock of the same name through this client.
/// Redisson refuses by what it finds in Redis; this crate knows its own holds, and an
/// attempt whose reply was lost is retried as the reentrant lock retries it: the retry
/// finds the thread's field and keeps the one hold.
///
/// ```no_run
/// let client = redmutex::LockClient::open("redis://127.0.0.1/")?;
/// let lock = client.non_reentrant_lock("orders:42");
/// let guard = lock.lock()?;
/// assert!(lock.try_lock().is_err_and(|err| err.is_reentry()));
/// guard.unlock()?;
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct NonReentrant;

/// The non-reentrant fair kind, Redisson's `RNonReentrantFairLock`: the [`Fair`] lock,
/// taken once by its holder. See [`NonReentrant`].
///
/// ```no_run
/// let client = redmutex::LockClient::open("redis://127.0.0.1/")?;
/// let lock = client.non_reentrant_fair_lock("orders:42");
/// let guard = lock.lock()?;
/// assert!(lock.lock().is_err_and(|err| err.is_reentry()));
/// drop(guard);
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct NonReentrantFair;

/// A kind taken once by its holder, and the kind whose layout and machinery it uses.
pub trait Once: Send + Sync + 'static {
    /// The kind it is taken once of.
    type Of: Hashed<Held = (), Affinity = *const (), Request = (), Claim = reentrant::Claim>;
    /// The name in metrics.
    const NAME: &'static str;
}

impl Once for NonReentrant {
    type Of = Reentrant;
    const NAME: &'static str = "non_reentrant";
}

impl Once for NonReentrantFair {
    type Of = Fair;
    const NAME: &'static str = "non_reentrant_fair";
}

/// Refuses a second hold by this thread, before anything is sent.
fn once<K: Hashed>(target: &dyn Call) -> Result<()> {
    let id = (target.shared_key(), current_thread(), K::MODE);
    match target.holds(&id).0 {
        0 => Ok(()),
        _ => Err(Error::Reentry {
            lock: target.subject().clone(),
        }),
    }
}

impl Kind for NonReentrant {}
impl ThreadOwned for NonReentrant {}
impl Kind for NonReentrantFair {}
impl ThreadOwned for NonReentrantFair {}

impl<T: Once> Machinery for T {
    const POLLS: bool = <T::Of as Machinery>::POLLS;
    const LABEL: &'static str = T::NAME;
    const STORED_AS: &'static str = <T::Of as Machinery>::STORED_AS;

    type Held = ();
    type Affinity = *const ();
    type Request = ();
    reentrant::hashed_calls!();

    fn wait_channel(target: &dyn Call) -> Cow<'_, [u8]> {
        <T::Of as Machinery>::wait_channel(target)
    }

    fn force_unlock_cmd(target: &dyn Call, key: &[u8], forced: &common::Forced<'_>) -> Cmd {
        <T::Of as Machinery>::force_unlock_cmd(target, key, forced)
    }

    fn longest_wait(target: &dyn Call) -> Option<Duration> {
        <T::Of as Machinery>::longest_wait(target)
    }

    fn describe(target: &dyn Call, _: &(), limit: Option<Instant>) -> Option<HeldBy> {
        <T::Of as Machinery>::describe(target, &(), limit)
    }

    fn takes_grants(target: &dyn Call, lease: Option<Duration>) -> bool {
        <T::Of as Machinery>::takes_grants(target, lease)
    }

    /// A grant is one hold, which this thread cannot have had: taken as the fair lock
    /// takes it.
    fn granted(
        target: &dyn Call,
        lease: Option<Duration>,
        since: Instant,
        place: Option<u64>,
        grant: Granted,
    ) -> Option<Result<Attempt<Grant<()>>>> {
        <T::Of as Machinery>::granted(target, lease, since, place, grant)
    }

    fn give_up(target: &dyn Call, _: &()) {
        <T::Of as Machinery>::give_up(target, &())
    }
}

/// The hash of the kind it is taken once of, field for field.
impl<T: Once> Hashed for T {
    const MODE: crate::kinds::slot::Mode = <T::Of as Hashed>::MODE;
    const RELEASE_SETS_LEASE: bool = <T::Of as Hashed>::RELEASE_SETS_LEASE;

    fn field(target: &dyn Call) -> String {
        <T::Of as Hashed>::field(target)
    }

    /// As the kind it is taken once of refuses, and a second hold by this thread.
    fn refuse(target: &dyn Call) -> Result<()> {
        <T::Of as Hashed>::refuse(target)?;
        once::<T::Of>(target)
    }

    fn renew_cmd(
        key: &[u8],
        lease: Duration,
        field: &str,
        held: &dyn Fn() -> u32,
        restore: bool,
    ) -> Cmd {
        <T::Of as Hashed>::renew_cmd(key, lease, field, held, restore)
    }

    fn acquire_cmd(target: &dyn Call, key: &[u8], lease: Duration, field: &str, held: u32) -> Cmd {
        <T::Of as Hashed>::acquire_cmd(target, key, lease, field, held)
    }

    fn release_cmd(target: &dyn Call, field: &str, held: u32, lease: Duration, wake: bool) -> Cmd {
        <T::Of as Hashed>::release_cmd(target, field, held, lease, wake)
    }

    fn grant(reply: Value) -> redis::RedisResult<Answer> {
        <T::Of as Hashed>::grant(reply)
    }

    fn held(_: Option<u64>) -> Self::Held {}
}
