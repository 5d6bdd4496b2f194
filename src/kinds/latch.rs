//! The count-down latch's protocol, Redisson's `RCountDownLatch`: the count is a decimal
//! string at the latch's key, absent once the latch is open; its channel is
//! `redisson_countdownlatch__channel__{<key>}`, on which reaching zero publishes `0` and
//! setting a count or deleting the latch publishes `1`.
//!
//! A latch is not a hold: nothing is taken, given back or renewed, and a waiter waits for
//! the count to reach zero, not for a turn. So it does not implement the lock machine's
//! seam ([`Machinery`](crate::kinds::kind::sealed::Machinery)), whose attempt would have to
//! report a hold it does not have; its handle waits on the notify layer with the waiting
//! state the lock machine's loop uses too (`lock::waiting`), and this file keeps what is
//! the latch's own: its keys, its scripts' calls and their typed replies.
//!
//! Every write leaves a latch key of its own call (`redisson_unlock_latch:{<key>}:<id>`,
//! as a forced unlock does) recording its reply: the transport sends a command again on a
//! fresh connection when the first one dropped, and the second run then answers what the
//! first did instead of counting down twice.

pub(crate) mod scripts;

use std::time::Instant;

use crate::base::error::{Error, Result};
use crate::kinds::call::Call;
use crate::layout::names;
use crate::topology::slots::slot;

/// Most a count may be set to: beyond any count a service counts down one by one.
pub(crate) const MAX_COUNT: u64 = 1 << 40;

/// The latch's key, after the checks every call makes: the client is open, the name
/// valid, the client on one deployment (a count cannot be split over Redlock's masters),
/// and on a cluster the channel in the key's slot (Redisson names the channel with the
/// key in braces, whatever braces the key holds itself).
pub(crate) fn key(target: &dyn Call) -> Result<&[u8]> {
    let key = target.open()?;
    let nodes = target.nodes();
    if nodes.list().len() > 1 {
        return Err(Error::Unsupported {
            lock: target.subject().clone(),
            reason: "a count-down latch needs one count, and Redlock's masters each keep their own",
        });
    }
    if nodes.routes_by_slot() && slot(&names::latch_channel(key)) != slot(key) {
        return Err(Error::Unsupported {
            lock: target.subject().clone(),
            reason: "on a cluster, a latch whose name holds a hash tag has its channel in \
                     another slot than its key",
        });
    }
    Ok(key)
}

/// Sets the count to `count` (checked by the caller) unless the latch has one.
pub(crate) fn try_set(target: &dyn Call, count: u64) -> Result<bool> {
    let key = key(target)?;
    let (latch, ttl) = call_latch(target, key);
    let cmd = scripts::latch_set((key, &names::latch_channel(key)), (&latch, ttl), count);
    Ok(run(target, &cmd, None)? == 1)
}

/// Counts down by one; the count left.
pub(crate) fn count_down(target: &dyn Call) -> Result<u64> {
    let key = key(target)?;
    let (latch, ttl) = call_latch(target, key);
    let cmd = scripts::latch_count_down((key, &names::latch_channel(key)), (&latch, ttl));
    let left = run(target, &cmd, None).map_err(|err| {
        err.unsettled("the count-down may have been counted; it is not sent again")
    })?;
    Ok(u64::try_from(left).unwrap_or_default())
}

/// Deletes the latch; whether it had a count.
pub(crate) fn delete(target: &dyn Call) -> Result<bool> {
    let key = key(target)?;
    let (latch, ttl) = call_latch(target, key);
    let cmd = scripts::latch_delete((key, &names::latch_channel(key)), (&latch, ttl));
    Ok(run(target, &cmd, None)? == 1)
}

/// The count, 0 when open; the first try ends by `end` at the latest.
pub(crate) fn count(target: &dyn Call, end: Option<Instant>) -> Result<u64> {
    let cmd = scripts::latch_count(key(target)?);
    Ok(u64::try_from(run(target, &cmd, end)?).unwrap_or_default())
}

/// The latch key of one call, and how long it lasts.
fn call_latch(target: &dyn Call, key: &[u8]) -> (Vec<u8>, std::time::Duration) {
    let latch = names::unlock_latch(key, &names::random_id());
    (latch, target.config().latch_ttl())
}

/// `cmd` on the one node, within a round (and by `end` at the latest).
fn run(target: &dyn Call, cmd: &redis::Cmd, end: Option<Instant>) -> Result<i64> {
    let nodes = target.nodes();
    let results = match end {
        Some(end) => nodes.run_all::<i64>(cmd, Some(end)),
        None => nodes.run_all_unhurried::<i64>(cmd),
    };
    nodes.agreed(results).map_err(|err| target.wrong_kind(err))
}
