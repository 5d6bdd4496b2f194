//! The counting semaphore's scripts: permits without leases, taken by an attempt that
//! leaves a marker, given back once, and read, set, drained or deleted.

use std::time::Duration;

use redis::Cmd;

use crate::transport::scripts::{Lua, evalsha, millis};

static CSEM_ACQUIRE: Lua = Lua::new(&[include_str!("csem_acquire.lua")]);
static CSEM_UNDO: Lua = Lua::new(&[include_str!("csem_undo.lua")]);
static CSEM_ADD: Lua = Lua::new(&[include_str!("csem_add.lua")]);
static CSEM_SET: Lua = Lua::new(&[include_str!("csem_set.lua")]);
static CSEM_READ: Lua = Lua::new(&[include_str!("csem_read.lua")]);

/// Every script above, declared to the registry before a client sends any.
pub(crate) static SCRIPTS: &[&Lua] = &[&CSEM_ACQUIRE, &CSEM_UNDO, &CSEM_ADD, &CSEM_SET, &CSEM_READ];

/// Take `n` permits of the semaphore without leases at `key`, recording them in the
/// attempt's `marker` for `marker_ttl`. Replies 1 (taken) or 0 (too few available).
pub(crate) fn csem_acquire(key: &[u8], marker: &[u8], n: u64, marker_ttl: Duration) -> Cmd {
    let mut cmd = evalsha(&CSEM_ACQUIRE, &[key, marker]);
    cmd.arg(n).arg(millis(marker_ttl));
    cmd
}

/// Give back what the attempt of `marker` took, announcing the permits available on
/// `channel`; an attempt not come yet is marked undone for `marker_ttl`. Replies how many
/// it gave back.
pub(crate) fn csem_undo(key: &[u8], marker: &[u8], channel: &[u8], marker_ttl: Duration) -> Cmd {
    let mut cmd = evalsha(&CSEM_UNDO, &[key, marker]);
    cmd.arg(channel).arg(millis(marker_ttl));
    cmd
}

/// The marker of the attempt whose permits a release gives back, and whether it must still
/// be there (see [`csem_add`]).
pub(crate) type Marker<'a> = (&'a [u8], bool);

/// Add `delta` permits (below zero: take away) at `key`, announcing the number available on
/// `channel`, leaving `latch` for `latch_ttl`, and deleting `marker` if given (the release
/// of what an attempt took; with `true`, the marker must still be there, else its undo gave
/// them back and nothing is added); refused past `bound` either way. Replies the number
/// available after.
pub(crate) fn csem_add(
    (key, latch, marker): (&[u8], &[u8], Option<Marker>),
    channel: &[u8],
    delta: i64,
    latch_ttl: Duration,
    bound: u64,
) -> Cmd {
    let mut cmd = match marker {
        Some((marker, _)) => evalsha(&CSEM_ADD, &[key, latch, marker]),
        None => evalsha(&CSEM_ADD, &[key, latch]),
    };
    cmd.arg(channel)
        .arg(delta)
        .arg(millis(latch_ttl))
        .arg(bound);
    if let Some((_, alive)) = marker {
        cmd.arg(if alive { "1" } else { "0" });
    }
    cmd
}

/// Set the permits at `key` to `n` if it has none, announcing them on `channel`, leaving
/// `latch` for `latch_ttl`. Replies 1 (set) or 0 (there already).
pub(crate) fn csem_set(
    (key, latch): (&[u8], &[u8]),
    channel: &[u8],
    n: u64,
    latch_ttl: Duration,
) -> Cmd {
    let mut cmd = evalsha(&CSEM_SET, &[key, latch]);
    cmd.arg(channel).arg(n).arg(millis(latch_ttl));
    cmd
}

/// What to do with the permits at a key in [`csem_read`]; a change leaves the latch of its
/// call (a key, and how long it lasts), so that a retry answers as the first try did.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CsemRead<'a> {
    /// Read them. Replies the number.
    Get,
    /// Take every one available. Replies how many.
    Drain(&'a [u8], Duration),
    /// Delete the key. Replies 1 when it existed.
    Delete(&'a [u8], Duration),
}

/// Read, drain or delete the permits at `key`, as `op` says.
pub(crate) fn csem_read(key: &[u8], op: CsemRead) -> Cmd {
    match op {
        CsemRead::Get => {
            let mut cmd = evalsha(&CSEM_READ, &[key]);
            cmd.arg("get");
            cmd
        }
        CsemRead::Drain(latch, ttl) | CsemRead::Delete(latch, ttl) => {
            let mut cmd = evalsha(&CSEM_READ, &[key, latch]);
            let op = if matches!(op, CsemRead::Drain(..)) {
                "drain"
            } else {
                "delete"
            };
            cmd.arg(op).arg(millis(ttl));
            cmd
        }
    }
}
