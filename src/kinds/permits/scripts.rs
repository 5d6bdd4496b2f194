//! The leased semaphore's scripts: a permit taken under its id, given back and renewed,
//! and the semaphore's permits read and set.

use std::time::Duration;

use redis::Cmd;

use crate::transport::common::UNLOCK_MESSAGE;
use crate::transport::scripts::{Lua, evalsha, millis};

static SEMAPHORE_ACQUIRE: Lua = Lua::new(&[include_str!("semaphore_acquire.lua")]);
static SEMAPHORE_RELEASE: Lua = Lua::latched(&[include_str!("semaphore_release.lua")]);
static SEMAPHORE_RENEW: Lua = Lua::new(&[include_str!("semaphore_renew.lua")]);
static SEMAPHORE_AVAILABLE: Lua = Lua::new(&[include_str!("semaphore_available.lua")]);
static SEMAPHORE_ADD: Lua = Lua::new(&[include_str!("semaphore_add.lua")]);
static SEMAPHORE_BUSY: Lua = Lua::new(&[include_str!("semaphore_busy.lua")]);
static SEMAPHORE_SET: Lua = Lua::new(&[include_str!("semaphore_set.lua")]);
static SEMAPHORE_REDUCE: Lua = Lua::new(&[include_str!("semaphore_reduce.lua")]);
static SEMAPHORE_DELETE: Lua = Lua::new(&[include_str!("semaphore_delete.lua")]);

/// Every script above, declared to the registry before a client sends any.
pub(crate) static SCRIPTS: &[&Lua] = &[
    &SEMAPHORE_ACQUIRE,
    &SEMAPHORE_RELEASE,
    &SEMAPHORE_RENEW,
    &SEMAPHORE_AVAILABLE,
    &SEMAPHORE_ADD,
    &SEMAPHORE_BUSY,
    &SEMAPHORE_SET,
    &SEMAPHORE_REDUCE,
    &SEMAPHORE_DELETE,
];

/// Take the permit `id` of the semaphore whose permits are at `key` and held ones in
/// `timeouts`, for `lease`; permits whose leases ran out come back first, announced on
/// `channel` if they are to `wake` waiters. Replies `{1, 0}` (taken), or when busy `{0, the
/// milliseconds until the first held lease ends}` (`{0, -1}`: none held).
pub(crate) fn semaphore_acquire(
    (key, timeouts, channel): (&[u8], &[u8], &[u8]),
    id: &[u8],
    lease: Duration,
    wake: bool,
) -> Cmd {
    let mut cmd = evalsha(&SEMAPHORE_ACQUIRE, &[key, timeouts]);
    cmd.arg(channel)
        .arg(id)
        .arg(millis(lease))
        .arg(if wake { UNLOCK_MESSAGE } else { "" });
    cmd
}

/// Give the permit `id` back, waking one waiter on `channel` and leaving `latch` for
/// `latch_ttl`. Replies 1 (given back) or 0 (not held, or its lease had run out).
pub(crate) fn semaphore_release(
    (key, timeouts, channel): (&[u8], &[u8], &[u8]),
    latch: &[u8],
    id: &[u8],
    latch_ttl: Duration,
) -> Cmd {
    let mut cmd = evalsha(&SEMAPHORE_RELEASE, &[key, timeouts, latch]);
    cmd.arg(channel).arg(id).arg(millis(latch_ttl));
    cmd
}

/// Extend the lease of the held permit `id` to `lease` from now. Replies [`Renewed`]: kept
/// or gone.
///
/// [`Renewed`]: crate::transport::common::Renewed
pub(crate) fn semaphore_renew(timeouts: &[u8], id: &[u8], lease: Duration) -> Cmd {
    let mut cmd = evalsha(&SEMAPHORE_RENEW, &[timeouts]);
    cmd.arg(id).arg(millis(lease));
    cmd
}

/// The permits available at `key`, counting those held in `timeouts` whose leases ran out.
/// Replies the number.
pub(crate) fn semaphore_available(key: &[u8], timeouts: &[u8]) -> Cmd {
    evalsha(&SEMAPHORE_AVAILABLE, &[key, timeouts])
}

/// Where the semaphore's permits stand. Replies `{type, available, held, ms to the first
/// lease's end}`.
pub(crate) fn semaphore_busy(key: &[u8], timeouts: &[u8]) -> Cmd {
    evalsha(&SEMAPHORE_BUSY, &[key, timeouts])
}

/// Set the permits available to `n`, whatever they were, announcing `n` on `channel`.
/// Replies the number available before.
pub(crate) fn semaphore_set(key: &[u8], timeouts: &[u8], channel: &[u8], n: u64) -> Cmd {
    let mut cmd = evalsha(&SEMAPHORE_SET, &[key, timeouts]);
    cmd.arg(n).arg(channel);
    cmd
}

/// Take `n` permits away from those available, not below zero. Replies how many were
/// taken away and how many are left.
pub(crate) fn semaphore_reduce(key: &[u8], timeouts: &[u8], channel: &[u8], n: u64) -> Cmd {
    let mut cmd = evalsha(&SEMAPHORE_REDUCE, &[key, timeouts]);
    cmd.arg(n).arg(channel);
    cmd
}

/// Delete the semaphore's keys. Replies 1 when one existed.
pub(crate) fn semaphore_delete(key: &[u8], timeouts: &[u8]) -> Cmd {
    evalsha(&SEMAPHORE_DELETE, &[key, timeouts])
}

/// Set the semaphore's permits to `n` if it has none yet (`set`), or add `n`, announcing
/// the number available on `channel`. Replies that number, or -1 when `set` found the
/// permits there.
pub(crate) fn semaphore_add(key: &[u8], channel: &[u8], set: bool, n: u64) -> Cmd {
    let mut cmd = evalsha(&SEMAPHORE_ADD, &[key]);
    cmd.arg(if set { "set" } else { "add" }).arg(n).arg(channel);
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::scripts::unlatched;

    #[test]
    fn a_permits_release_leaves_out_its_latch_only() {
        let permit = semaphore_release((b"k", b"t", b"c"), b"latch", b"id", Duration::ZERO);
        let bare = unlatched(&permit).unwrap();
        let args: Vec<&[u8]> = (bare.args_iter())
            .map(|arg| match arg {
                redis::Arg::Simple(bytes) => bytes,
                _ => &[],
            })
            .collect();
        assert_eq!(
            args[2..5],
            [&b"2"[..], b"k", b"t"],
            "two keys, the latch left out"
        );
    }
}
