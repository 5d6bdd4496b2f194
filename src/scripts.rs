//! The Lua scripts, sent as EVALSHA and loaded when Redis answers NOSCRIPT.

use std::sync::LazyLock;

use redis::{Cmd, Connection, RedisResult, Script};

/// Take one hold; replies nil, [`FRESH`], or the key's PTTL. See `scripts/acquire.lua`.
pub(crate) static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/acquire.lua")));

/// Take one hold of a fenced lock; replies {1|2, token} or {0, PTTL}. See
/// `scripts/fenced_acquire.lua`.
pub(crate) static FENCED_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/fenced_acquire.lua")));

/// Give back one hold; replies nil (not ours), 0 (still held) or 1 (deleted, now or by an
/// earlier attempt of the same call).
pub(crate) static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/release.lua")));

/// Extend the lease of a hold that is still ours; replies 1, 2 (put back) or 0.
pub(crate) static RENEW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/renew.lua")));

/// Delete the lock whoever holds it; replies 1 or 0, the same on a retry of the same call.
pub(crate) static FORCE_UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/force_unlock.lua")));

/// Why a token lock's key is taken; replies its type and PTTL. See `scripts/token_probe.lua`.
pub(crate) static TOKEN_PROBE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/token_probe.lua")));

/// Release a token lock if it holds our token; replies 1 (released) or 0 (not ours).
pub(crate) static TOKEN_RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/token_release.lua")));

/// Extend a token lock that holds our token; replies 1, 2 (put back) or 0 (gone).
pub(crate) static TOKEN_RENEW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/token_renew.lua")));

/// What the Redis user may not run; replies a list of denied commands.
pub(crate) static CHECK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/check.lua")));

/// The acquire reply for a hold taken while the owner's earlier holds were gone.
pub(crate) const FRESH: i64 = -3;

/// The renew reply for a hold put back on a node that had lost the key.
pub(crate) const RESTORED: i64 = 2;

/// `EVALSHA <sha> <number of keys> <keys...>`; the caller appends the arguments (room is
/// made for up to 6 of them, so that building the command does not grow it piecemeal).
pub(crate) fn evalsha(script: &Script, keys: &[&[u8]]) -> Cmd {
    let key_bytes: usize = keys.iter().map(|key| key.len()).sum();
    let mut cmd = Cmd::with_capacity(3 + keys.len() + 6, 64 + key_bytes + 160);
    cmd.arg("EVALSHA").arg(script.get_hash()).arg(keys.len());
    for key in keys {
        cmd.arg(*key);
    }
    cmd
}

/// Loads every script on `conn`, after Redis answered NOSCRIPT (a restart, SCRIPT FLUSH).
pub(crate) fn load_all(conn: &mut Connection) -> RedisResult<()> {
    for script in [
        &ACQUIRE,
        &FENCED_ACQUIRE,
        &RELEASE,
        &RENEW,
        &FORCE_UNLOCK,
        &CHECK,
        &TOKEN_PROBE,
        &TOKEN_RELEASE,
        &TOKEN_RENEW,
    ] {
        script.load(conn)?;
    }
    Ok(())
}
