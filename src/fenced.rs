//! The fenced lock, Redisson's `RFencedLock`: the reentrant lock whose every acquisition
//! draws a fencing token from a counter beside it.

use std::time::{Duration, Instant};

use redis::{Cmd, Value};

use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::kind::{Attempt, sealed::Machinery};
use crate::layout;
use crate::lock::Lock;
use crate::reentrant::{Grant, Hashed};
use crate::scripts;

/// The fenced kind: a [`Reentrant`](crate::Reentrant) lock whose every acquisition,
/// re-entries included, also takes a fencing token, [`LockGuard::token`], from a counter at
/// `redisson_lock_token:{<key>}` — Redisson's `RFencedLock` layout, so a Java service draws
/// from the same counter.
///
/// A token is greater than every token issued before it for that name, across clients and
/// processes, and across restarts of a Redis that persists its data. A resource that records
/// the highest token it has seen and refuses any lower one is safe from a holder that was
/// paused past its lease: see the README. Fencing needs one counter, so a fenced lock on a
/// Redlock client (several independent masters) refuses every call with
/// [`Error::Unsupported`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Fenced;

impl Machinery for Fenced {
    type Held = u64;
    type Affinity = *const ();

    fn attempt(
        lock: &Lock<Self>,
        lease: Option<Duration>,
        limit: Option<Instant>,
    ) -> Result<Attempt<Self>> {
        if lock.client.inner.nodes.list().len() > 1 {
            return Err(Error::Unsupported {
                lock: lock.name().to_owned(),
                reason: "fencing tokens need one counter, and Redlock's masters each keep their own",
            });
        }
        lock.take(lease, limit)
    }

    fn release(guard: &LockGuard<Self>) -> Result<()> {
        guard.lock.release(&guard.holding, guard.watched)
    }
}

impl Hashed for Fenced {
    fn acquire_cmd(_: &Lock<Self>, key: &[u8], lease: Duration, field: &str, held: u32) -> Cmd {
        scripts::fenced_acquire(key, &layout::fence_counter(key), lease, field, held)
    }

    fn grant(reply: Value) -> redis::RedisResult<Grant> {
        let (status, number): (i64, i64) = redis::from_redis_value(reply)?;
        Ok(match status {
            0 => Grant::Busy(number),
            _ => Grant::Taken {
                fresh: status == 2,
                token: u64::try_from(number).ok(),
            },
        })
    }

    fn held(token: Option<u64>) -> u64 {
        token.unwrap_or_default()
    }
}

impl LockGuard<Fenced> {
    /// This hold's fencing token: greater than every token issued before it for this lock.
    /// Hand it to the resource with each write; the resource refuses a token lower than one
    /// it has already seen.
    pub fn token(&self) -> u64 {
        self.held
    }
}
