//! The count-down latch's scripts: its count set, counted down, deleted and read.

use std::time::Duration;

use redis::Cmd;

use crate::transport::scripts::{Lua, evalsha, millis};

static LATCH_SET: Lua = Lua::new(&[include_str!("latch_set.lua")]);
static LATCH_COUNT_DOWN: Lua = Lua::new(&[include_str!("latch_count_down.lua")]);
static LATCH_DELETE: Lua = Lua::new(&[include_str!("latch_delete.lua")]);
static LATCH_COUNT: Lua = Lua::new(&[include_str!("latch_count.lua")]);

/// Every script above, declared to the registry before a client sends any.
pub(crate) static SCRIPTS: &[&Lua] = &[&LATCH_SET, &LATCH_COUNT_DOWN, &LATCH_DELETE, &LATCH_COUNT];

/// Set a count-down latch's count to `count` unless it has one, announced on `channel`,
/// leaving `latch` for `latch_ttl`. Replies 1 when set, 0 when it had one.
pub(crate) fn latch_set(
    (key, channel): (&[u8], &[u8]),
    (latch, latch_ttl): (&[u8], Duration),
    count: u64,
) -> Cmd {
    let mut cmd = evalsha(&LATCH_SET, &[key, latch]);
    cmd.arg(count).arg(channel).arg(millis(latch_ttl));
    cmd
}

/// Count a count-down latch down by one, opening it on `channel` at zero, leaving `latch`
/// for `latch_ttl`. Replies the count left.
pub(crate) fn latch_count_down(
    (key, channel): (&[u8], &[u8]),
    (latch, latch_ttl): (&[u8], Duration),
) -> Cmd {
    let mut cmd = evalsha(&LATCH_COUNT_DOWN, &[key, latch]);
    cmd.arg(channel).arg(millis(latch_ttl));
    cmd
}

/// Delete a count-down latch, announced on `channel`, leaving `latch` for `latch_ttl`.
/// Replies 1 when it was there.
pub(crate) fn latch_delete(
    (key, channel): (&[u8], &[u8]),
    (latch, latch_ttl): (&[u8], Duration),
) -> Cmd {
    let mut cmd = evalsha(&LATCH_DELETE, &[key, latch]);
    cmd.arg(channel).arg(millis(latch_ttl));
    cmd
}

/// A count-down latch's count; 0 when it is open.
pub(crate) fn latch_count(key: &[u8]) -> Cmd {
    evalsha(&LATCH_COUNT, &[key])
}
