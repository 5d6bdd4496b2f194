//! The token lock's scripts: why a key is taken, and a hold owned by a token given back
//! and renewed (it is taken by a plain `SET NX`).

use std::time::Duration;

use redis::Cmd;

use crate::transport::common::unlock_message;
use crate::transport::scripts::{Lua, evalsha, millis};

static TOKEN_PROBE: Lua = Lua::new(&[include_str!("token_probe.lua")]);
static TOKEN_RELEASE: Lua = Lua::latched(&[include_str!("token_release.lua")]);
static TOKEN_RENEW: Lua = Lua::new(&[include_str!("token_renew.lua")]);

/// Every script above, declared to the registry before a client sends any.
pub(crate) static SCRIPTS: &[&Lua] = &[&TOKEN_PROBE, &TOKEN_RELEASE, &TOKEN_RENEW];

/// Why a token lock's key is taken, and whether it holds `token` (then its `lease` is set
/// again). Replies `{type, pttl, mine}`.
pub(crate) fn token_probe(key: &[u8], token: &str, lease: Duration) -> Cmd {
    let mut cmd = evalsha(&TOKEN_PROBE, &[key]);
    cmd.arg(token).arg(millis(lease));
    cmd
}

/// Release a token lock if the key holds `token`, publishing on `channel` if it is to
/// `wake` a waiter, and leaving `latch`. Replies [`Released`]: deleted or not ours.
///
/// [`Released`]: crate::transport::common::Released
pub(crate) fn token_release(
    key: &[u8],
    channel: &[u8],
    latch: &[u8],
    token: &str,
    latch_ttl: Duration,
    wake: bool,
) -> Cmd {
    let mut cmd = evalsha(&TOKEN_RELEASE, &[key, latch]);
    cmd.arg(token)
        .arg(unlock_message(wake))
        .arg(millis(latch_ttl))
        .arg(channel);
    cmd
}

/// Extend a token lock that holds `token` to `lease`; with `restore`, put it back where the
/// key is gone. Replies [`Renewed`].
///
/// [`Renewed`]: crate::transport::common::Renewed
pub(crate) fn token_renew(key: &[u8], token: &str, lease: Duration, restore: bool) -> Cmd {
    let mut cmd = evalsha(&TOKEN_RENEW, &[key]);
    cmd.arg(token).arg(millis(lease)).arg(u8::from(restore));
    cmd
}
