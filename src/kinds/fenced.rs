//! The fenced lock, Redisson's `RFencedLock`: the reentrant lock whose every acquisition
//! draws a fencing token from a counter beside it.

pub(crate) mod scripts;

use std::time::Duration;

use redis::{Cmd, Value};

use crate::base::error::Result;
use crate::kinds::call::Call;
use crate::kinds::kind::Kind;
use crate::kinds::kind::sealed::Machinery;
use crate::kinds::reentrant::ThreadOwned;
use crate::kinds::reentrant::{self, Answer, Hashed};
use crate::layout::names;

/// The fenced kind: a [`Reentrant`](crate::Reentrant) lock whose every acquisition,
/// re-entries included, also takes a fencing token, `guard.token()`, from a counter at
/// `redisson_lock_token:{<key>}` — Redisson's `RFencedLock` layout, so a Java service draws
/// from the same counter.
///
/// A token is greater than every token issued before it for that name, across clients and
/// processes, and across restarts of a Redis that persists its data. A resource that records
/// the highest token it has seen and refuses any lower one is safe from a holder that was
/// paused past its lease: see "Fencing tokens" in `docs/kinds.md`. Fencing needs one
/// counter, so a fenced lock on a Redlock client (several independent masters) refuses every
/// call with [`Error::Unsupported`](crate::Error::Unsupported).
#[derive(Debug, Clone, Copy, Default)]
pub struct Fenced;

impl Kind for Fenced {}
impl ThreadOwned for Fenced {}

impl Machinery for Fenced {
    const LABEL: &'static str = "fenced";

    type Held = u64;
    type Affinity = *const ();
    type Request = ();

    reentrant::hashed_calls!();
}

impl Hashed for Fenced {
    fn refuse(target: &dyn Call) -> Result<()> {
        reentrant::one_node(
            target,
            "fencing tokens need one counter, and Redlock's masters each keep their own",
        )
    }

    fn acquire_cmd(_: &dyn Call, key: &[u8], lease: Duration, field: &str, held: u32) -> Cmd {
        scripts::fenced_acquire(key, &names::fence_counter(key), lease, field, held)
    }

    fn grant(reply: Value) -> redis::RedisResult<Answer> {
        let (status, number): (i64, i64) = redis::from_redis_value(reply)?;
        Ok(match status {
            0 => Answer::Busy {
                ttl: number,
                place: None,
            },
            _ => Answer::Taken {
                fresh: status == 2,
                token: u64::try_from(number).ok(),
            },
        })
    }

    fn held(token: Option<u64>) -> u64 {
        token.unwrap_or_default()
    }
}
