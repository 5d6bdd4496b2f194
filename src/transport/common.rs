//! What is no one kind's in the scripts: the replies of releases and renewals that several
//! kinds give, the message a release publishes, the functions that judge whether a key is
//! a lock (`scripts/shape.lua`), and the scripts the lock machine and the tool run on a
//! lock of any kind: what holds it, a forced unlock, the rights check and the inspection.

use std::time::Duration;

use redis::{Cmd, FromRedisValue, ParsingError, Value};

use crate::transport::scripts::{Lua, evalsha, millis};

/// The functions that judge whether a key is a lock, which a script that needs them comes
/// after (`Lua::new(&[SHAPE, include_str!(..)])`).
pub(crate) const SHAPE: &str = include_str!("scripts/shape.lua");

static FORCE_UNLOCK: Lua = Lua::new(&[SHAPE, include_str!("scripts/force_unlock.lua")]);
static CHECK: Lua = Lua::new(&[include_str!("scripts/check.lua")]);
static INSPECT: Lua = Lua::new(&[SHAPE, include_str!("scripts/inspect.lua")]);
static BUSY: Lua = Lua::new(&[include_str!("scripts/busy.lua")]);

/// Every script above, declared to the registry before a client sends any.
pub(crate) static SCRIPTS: &[&Lua] = &[&FORCE_UNLOCK, &CHECK, &INSPECT, &BUSY];

/// How many fields of a hash (queued owners, held permits) a script that judges whether a
/// key is a lock reads at most (`scripts/shape.lua`): a lock has a few; a key with more is
/// judged by a sample, and never read whole.
pub(crate) const JUDGED_FIELDS: usize = 64;

/// The message Redisson publishes on a lock's channel when its last hold goes.
pub(crate) const UNLOCK_MESSAGE: &str = "0";

/// The message a release publishes: Redisson's, or none (empty) when it gives back what a
/// failed attempt took, which woke nobody when it was taken.
pub(crate) fn unlock_message(wake: bool) -> &'static str {
    if wake { UNLOCK_MESSAGE } else { "" }
}

/// What a renewal found on one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renewed {
    /// The hold was there; its lease was extended.
    Kept,
    /// The key was gone and the hold was put back.
    Restored,
    /// The hold was there and extended where its key is, but some of the keys that keep
    /// its leases were not: in a slot being migrated, on the other node. The caller
    /// extends those ([`Renewal::strays`](crate::kinds::renewal::Renewal::strays)).
    Partly,
    /// The hold is gone.
    Gone,
}

impl FromRedisValue for Renewed {
    fn from_redis_value(value: Value) -> Result<Self, ParsingError> {
        Ok(match i64::from_redis_value(value)? {
            1 => Renewed::Kept,
            2 => Renewed::Restored,
            3 => Renewed::Partly,
            _ => Renewed::Gone,
        })
    }
}

/// What a release did on one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Released {
    /// The hold was not the caller's (any more); nothing changed.
    NotOurs,
    /// One hold was given back and others remain.
    Kept,
    /// One hold was given back and the owner's others remain with the leases they had:
    /// the longest of them ends within this many milliseconds (0: all have ended).
    KeptFor(u64),
    /// The key was deleted, by this call or by an earlier attempt of it.
    Deleted,
}

impl FromRedisValue for Released {
    fn from_redis_value(value: Value) -> Result<Self, ParsingError> {
        if let Value::Array(_) = value {
            let (_, left) = <(i64, i64)>::from_redis_value(value)?;
            return Ok(Released::KeptFor(left.max(0) as u64));
        }
        Ok(match Option::<i64>::from_redis_value(value)? {
            None => Released::NotOurs,
            Some(0) => Released::Kept,
            Some(_) => Released::Deleted,
        })
    }
}

/// What a forced unlock leaves and checks: its `latch`, kept `latch_ttl`, and the
/// `holder` the caller names ("" for none): with one, the key is deleted only while that
/// holder holds it, and then even without an expiry.
pub struct Forced<'a> {
    pub latch: &'a [u8],
    pub latch_ttl: Duration,
    pub holder: &'a str,
}

/// Delete the lock whoever holds it (or only `forced.holder`), publishing `message` on
/// `channel` and leaving `forced.latch`, if the key has the whole shape of `stored`
/// (`"hash"`, `"string"`, or a read-write lock in the mode `"read"` or `"write"`). Replies
/// 1 or 0, the same on a retry of the same call, or the error `WRONGKIND <kind>` or
/// `NOTALOCK <why>`.
pub(crate) fn force_unlock(
    key: &[u8],
    channel: &[u8],
    message: &str,
    stored: &str,
    forced: &Forced<'_>,
) -> Cmd {
    let mut cmd = evalsha(&FORCE_UNLOCK, &[key, forced.latch]);
    cmd.arg(message)
        .arg(millis(forced.latch_ttl))
        .arg(stored)
        .arg(channel)
        .arg(forced.holder)
        .arg(JUDGED_FIELDS);
    cmd
}

/// Which commands the locks need the user may not run, tried on a lock key, its channel
/// and a latch of it (the channel and the latch are only names to check rights on, passed
/// as arguments). Replies a list of what is denied.
pub(crate) fn check(key: &[u8], channel: &[u8], latch: &[u8]) -> Cmd {
    let mut cmd = evalsha(&CHECK, &[key]);
    cmd.arg(channel).arg(latch);
    cmd
}

/// What holds the lock `key`. Replies `{type, pttl, holder or false}`.
pub(crate) fn busy(key: &[u8]) -> Cmd {
    evalsha(&BUSY, &[key])
}

/// Read what the lock at `keys[0]` is made of, writing nothing: `keys` are the lock key,
/// the fair queue and timeouts, the fencing counter and the semaphore's held permits;
/// `channels` the lock's, the read-write lock's, the semaphore's and the count-down
/// latch's channels, whose subscribers it counts. Replies as `scripts/inspect.lua` says.
pub(crate) fn inspect(keys: &[&[u8]; 5], channels: &[&[u8]; 4]) -> Cmd {
    let mut cmd = evalsha(&INSPECT, keys);
    for channel in channels {
        cmd.arg(*channel);
    }
    cmd.arg(JUDGED_FIELDS);
    cmd
}
