//! The fenced lock's script: the reentrant acquire that also draws a fencing token.

use std::time::Duration;

use redis::Cmd;

use crate::transport::scripts::{Lua, evalsha, millis};

static FENCED_ACQUIRE: Lua = Lua::new(&[include_str!("fenced_acquire.lua")]);

/// Every script above, declared to the registry before a client sends any.
pub(crate) static SCRIPTS: &[&Lua] = &[&FENCED_ACQUIRE];

/// Take one hold of a fenced lock for `field`, who believes it has `held` holds already,
/// drawing a token from `counter`. Replies `{1, token}` (taken), `{2, token}` (taken,
/// earlier holds gone), `{0, pttl}` (busy), or `WRONGKIND <type>`.
pub(crate) fn fenced_acquire(
    key: &[u8],
    counter: &[u8],
    lease: Duration,
    field: &str,
    held: u32,
) -> Cmd {
    let mut cmd = evalsha(&FENCED_ACQUIRE, &[key, counter]);
    cmd.arg(millis(lease)).arg(field).arg(held);
    cmd
}
