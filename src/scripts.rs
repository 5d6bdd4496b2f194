//! The Lua scripts, each run by `redis::Script` (EVALSHA, with a load on NOSCRIPT).

use std::sync::LazyLock;

use redis::Script;

/// Take one hold; replies nil, [`FRESH`], or the key's PTTL. See `scripts/acquire.lua`.
pub(crate) static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/acquire.lua")));

/// Give back one hold; replies nil (not ours), 0 (still held) or 1 (deleted).
pub(crate) static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/release.lua")));

/// Extend the lease of a hold that is still ours; replies 1 or 0.
pub(crate) static RENEW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/renew.lua")));

/// Delete the lock whoever holds it; replies 1 or 0.
pub(crate) static FORCE_UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/force_unlock.lua")));

/// The acquire reply for a hold taken while the owner's earlier holds were gone.
pub(crate) const FRESH: i64 = -3;

/// The message Redisson publishes on the unlock channel.
pub(crate) const UNLOCK_MESSAGE: &str = "0";
