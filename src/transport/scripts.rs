//! The Lua scripts, sent as EVALSHA and loaded when Redis answers NOSCRIPT.
//!
//! Each script has one function here that builds its call: the keys and arguments in the
//! order its header (`scripts/*.lua`) states, so no call site knows that order. Its doc says
//! what the script replies.
//!
//! Pub/sub channels go among a script's arguments, never its keys: a channel is never a
//! key, so it is always absent, and declared as a key it would make a Cluster turn the call
//! away (`TRYAGAIN`, as for any call whose keys are partly absent) while the lock's slot
//! migrates. Named with the lock's hash tag, it stays in the lock's slot.

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Duration;

use redis::{Arg, Cmd, Connection, FromRedisValue, ParsingError, RedisResult, Script, Value};

/// The message Redisson publishes on a lock's channel when its last hold goes.
const UNLOCK_MESSAGE: &str = "0";

/// The message a release publishes: Redisson's, or none (empty) when it gives back what a
/// failed attempt took, which woke nobody when it was taken.
fn unlock_message(wake: bool) -> &'static str {
    if wake { UNLOCK_MESSAGE } else { "" }
}

/// The source of a script: its file, after the file of the functions it uses if any.
macro_rules! source {
    ($file:literal) => {
        include_str!(concat!("scripts/", $file))
    };
    ($prelude:literal, $file:literal) => {
        concat!(
            include_str!(concat!("scripts/", $prelude)),
            include_str!(concat!("scripts/", $file))
        )
    };
}

/// Declares each script as a static, and lists every script's source in [`SOURCES`].
macro_rules! scripts {
    ($($name:ident => $($part:literal)&+,)*) => {
        $(static $name: LazyLock<Script> =
            LazyLock::new(|| Script::new(source!($($part),+)));)*
        /// The source of every script.
        const SOURCES: &[&str] = &[$(source!($($part),+)),*];
    };
}

/// How many fields of a hash (queued owners, held permits) a script that judges whether a
/// key is a lock reads at most (`scripts/shape.lua`): a lock has a few; a key with more is
/// judged by a sample, and never read whole.
pub(crate) const JUDGED_FIELDS: usize = 64;

scripts! {
    ACQUIRE => "acquire.lua",
    MULTI_ACQUIRE => "multi_acquire.lua",
    FENCED_ACQUIRE => "fenced_acquire.lua",
    RELEASE => "release.lua",
    RENEW => "renew.lua",
    FORCE_UNLOCK => "shape.lua" & "force_unlock.lua",
    CHECK => "check.lua",
    INSPECT => "shape.lua" & "inspect.lua",
    FAIR_ACQUIRE => "fair_acquire.lua",
    FAIR_RELEASE => "fair_release.lua",
    FAIR_GIVE_UP => "fair_give_up.lua",
    FAIR_FORCE_UNLOCK => "shape.lua" & "fair_force_unlock.lua",
    READ_ACQUIRE => "read_acquire.lua",
    READ_RELEASE => "read_release.lua",
    READ_RENEW => "read_renew.lua",
    WRITE_ACQUIRE => "write_acquire.lua",
    WRITE_RELEASE => "write_release.lua",
    WRITE_RENEW => "write_renew.lua",
    SEMAPHORE_ACQUIRE => "semaphore_acquire.lua",
    SEMAPHORE_RELEASE => "semaphore_release.lua",
    SEMAPHORE_RENEW => "semaphore_renew.lua",
    SEMAPHORE_AVAILABLE => "semaphore_available.lua",
    SEMAPHORE_ADD => "semaphore_add.lua",
    TOKEN_PROBE => "token_probe.lua",
    TOKEN_RELEASE => "token_release.lua",
    TOKEN_RENEW => "token_renew.lua",
    BUSY => "busy.lua",
    SEMAPHORE_BUSY => "semaphore_busy.lua",
    SEMAPHORE_SET => "semaphore_set.lua",
    SEMAPHORE_REDUCE => "semaphore_reduce.lua",
    SEMAPHORE_DELETE => "semaphore_delete.lua",
    ELECTION_ACQUIRE => "shape.lua" & "election_acquire.lua",
    ELECTION_RENEW => "election_renew.lua",
    ELECTION_RESIGN => "election_resign.lua",
    ELECTION_PROCLAIM => "election_proclaim.lua",
    ELECTION_ENLIST => "election_enlist.lua",
    ELECTION_READ => "shape.lua" & "election_read.lua",
    CSEM_ACQUIRE => "csem_acquire.lua",
    CSEM_UNDO => "csem_undo.lua",
    CSEM_ADD => "csem_add.lua",
    CSEM_SET => "csem_set.lua",
    CSEM_READ => "csem_read.lua",
    LATCH_SET => "latch_set.lua",
    LATCH_COUNT_DOWN => "latch_count_down.lua",
    LATCH_DELETE => "latch_delete.lua",
    LATCH_COUNT => "latch_count.lua",
}

/// The scripts that publish or count subscribers, in the flavour for a cluster's sharded
/// pub/sub: `'publish'` (the call and the ACL check) becomes `'spublish'`, and `'numsub'`
/// `'shardnumsub'`. By the hash of the classic flavour: the sharded flavour's source and
/// hash.
static SHARDED: LazyLock<HashMap<String, (String, String)>> = LazyLock::new(|| {
    let classic = |source: &&&str| source.contains("'publish'") || source.contains("'numsub'");
    SOURCES
        .iter()
        .filter(classic)
        .map(|source| {
            let sharded =
                (source.replace("'publish'", "'spublish'")).replace("'numsub'", "'shardnumsub'");
            let hash = Script::new(&sharded).get_hash().to_owned();
            (Script::new(source).get_hash().to_owned(), (sharded, hash))
        })
        .collect()
});

/// `cmd` (an `EVALSHA`) in the sharded flavour, if its script publishes.
pub(crate) fn sharded(cmd: &Cmd) -> Option<Cmd> {
    let mut args = cmd.args_iter().map(|arg| match arg {
        Arg::Simple(bytes) => bytes,
        _ => &[],
    });
    if !args.next()?.eq_ignore_ascii_case(b"EVALSHA") {
        return None;
    }
    let (_, hash) = SHARDED.get(std::str::from_utf8(args.next()?).ok()?)?;
    let mut flavoured = redis::cmd("EVALSHA");
    flavoured.arg(hash.as_str());
    for arg in args {
        flavoured.arg(arg);
    }
    Some(flavoured)
}

/// The releases whose latch, their last key, may be left out (see [`unlatched`]), by the
/// hash of each flavour.
static UNLATCHABLE: LazyLock<Vec<String>> = LazyLock::new(|| {
    let scripts = [
        &RELEASE,
        &WRITE_RELEASE,
        &TOKEN_RELEASE,
        &ELECTION_RESIGN,
        &SEMAPHORE_RELEASE,
    ];
    let classic = scripts.map(|script| script.get_hash().to_owned());
    let sharded = (classic.iter()).filter_map(|hash| Some(SHARDED.get(hash)?.1.clone()));
    sharded.chain(classic.iter().cloned()).collect()
});

/// `cmd`, a release with a latch of its own, without it: for a cluster slot that is being
/// migrated, which refuses (`TRYAGAIN`) a script whose keys are partly absent, as a latch
/// that is yet to be written is. Only for a release that surely has not run yet: a resend
/// of it would not find what an earlier send did. `None` for any other command (the read
/// release, which reads every reader's lease keys, needs a settled slot anyway).
pub(crate) fn unlatched(cmd: &Cmd) -> Option<Cmd> {
    let args: Vec<&[u8]> = (cmd.args_iter())
        .map(|arg| match arg {
            Arg::Simple(bytes) => Some(bytes),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let [name, hash, keys, rest @ ..] = &args[..] else {
        return None;
    };
    let known = std::str::from_utf8(hash).is_ok_and(|hash| UNLATCHABLE.iter().any(|h| h == hash));
    if !name.eq_ignore_ascii_case(b"EVALSHA") || !known {
        return None;
    }
    let keys: usize = std::str::from_utf8(keys).ok()?.parse().ok()?;
    let latch = keys.checked_sub(1)?;
    let mut bare = redis::cmd("EVALSHA");
    bare.arg(*hash).arg(latch);
    for (i, arg) in rest.iter().enumerate() {
        if i != latch {
            bare.arg(*arg);
        }
    }
    Some(bare)
}

/// The acquire reply for a hold taken while the owner's earlier holds were gone.
pub(crate) const FRESH: i64 = -3;

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

/// Take one hold of a reentrant lock for `field`, who believes it has `held` holds already.
/// Replies nil (taken), [`FRESH`] (taken, earlier holds gone), the key's PTTL (busy), or the
/// error `WRONGKIND <type>`.
pub(crate) fn acquire(key: &[u8], lease: Duration, field: &str, held: u32) -> Cmd {
    let mut cmd = evalsha(&ACQUIRE, &[key]);
    cmd.arg(millis(lease)).arg(field).arg(held);
    cmd
}

/// One hold of each of `keys` for `field`, all or none: `claims[i]` is the holds the owner
/// believes it has of `keys[i]` and the lease the attempt sets on it. Replies [`MultiTaken`].
pub(crate) fn multi_acquire(keys: &[&[u8]], field: &str, claims: &[(u32, Duration)]) -> Cmd {
    let mut cmd = evalsha(&MULTI_ACQUIRE, keys);
    cmd.arg(field);
    for (held, lease) in claims {
        cmd.arg(held).arg(millis(*lease));
    }
    cmd
}

/// What a multi-lock's attempt on several reentrant locks did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MultiTaken {
    /// Every hold taken; per key, whether the owner's earlier holds were gone.
    Taken(Vec<bool>),
    /// The key at this index (from 0) is someone else's; nothing written.
    Busy(usize),
    /// The key at this index holds another kind of data, of this type; nothing written.
    WrongKind(usize, String),
}

impl FromRedisValue for MultiTaken {
    fn from_redis_value(value: Value) -> Result<Self, ParsingError> {
        let mut items = Vec::<Value>::from_redis_value(value)?.into_iter();
        let code = i64::from_redis_value(items.next().ok_or("an empty reply")?)?;
        let mut at = || -> Result<usize, ParsingError> {
            let at = i64::from_redis_value(items.next().ok_or("no index")?)?;
            Ok(usize::try_from(at - 1).map_err(|_| "a bad index")?)
        };
        Ok(match code {
            0 => MultiTaken::Taken(
                (items.map(|fresh| Ok(i64::from_redis_value(fresh)? == 1)))
                    .collect::<Result<_, ParsingError>>()?,
            ),
            1 => MultiTaken::Busy(at()?),
            2 => {
                let at = at()?;
                let found = String::from_redis_value(items.next().ok_or("no type")?)?;
                MultiTaken::WrongKind(at, found)
            }
            _ => return Err("an unknown reply".into()),
        })
    }
}

/// The same for a fenced lock, drawing a token from `counter`. Replies `{1, token}` (taken),
/// `{2, token}` (taken, earlier holds gone), `{0, pttl}` (busy), or `WRONGKIND <type>`.
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

/// Give back one of `field`'s `held` holds, leaving `lease` on the ones that remain; the
/// last one publishes on `channel` if it is to `wake` a waiter, and leaves `latch` for
/// `latch_ttl`. Replies [`Released`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn release(
    key: &[u8],
    channel: &[u8],
    latch: &[u8],
    lease: Duration,
    field: &str,
    held: u32,
    latch_ttl: Duration,
    wake: bool,
) -> Cmd {
    let mut cmd = evalsha(&RELEASE, &[key, latch]);
    cmd.arg(unlock_message(wake))
        .arg(millis(lease))
        .arg(field)
        .arg(held)
        .arg(millis(latch_ttl))
        .arg(channel);
    cmd
}

/// The keys of a fair lock's queue: the list of waiting owners, Redisson's sorted set of
/// their places, and this crate's sorted set of its own waiters.
pub(crate) type Queue<'a> = (&'a [u8], &'a [u8], &'a [u8]);

/// The fair lock's acquire: like [`acquire`], for the head of `queue`, queuing `field` at
/// its end when busy, where it keeps its place for `place_ttl` after each attempt however
/// much Redisson waiters ahead, each taken to wait at least `java_wait`, take off its place.
/// Replies as [`acquire`], busy being the PTTL or -2. A waiter it finds at the head of the
/// free lock once dead waiters before it are dropped is woken on its own channel under
/// `channel`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn fair_acquire(
    key: &[u8],
    channel: &[u8],
    (queue, places, ours): Queue<'_>,
    lease: Duration,
    field: &str,
    held: u32,
    place_ttl: Duration,
    java_wait: Duration,
) -> Cmd {
    let mut cmd = evalsha(&FAIR_ACQUIRE, &[key, queue, places, ours]);
    cmd.arg(millis(lease))
        .arg(field)
        .arg(held)
        .arg(millis(place_ttl))
        .arg(millis(java_wait))
        .arg(channel);
    cmd
}

/// The fair lock's release: like [`release`], the last hold waking the head of `queue`
/// only, on its own channel under `channel`, or, with a `grant` lease cap, handing the lock
/// to it when it takes grants. Replies [`Released`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn fair_release(
    key: &[u8],
    channel: &[u8],
    latch: &[u8],
    (queue, places, ours): Queue<'_>,
    lease: Duration,
    field: &str,
    held: u32,
    latch_ttl: Duration,
    wake: bool,
    grant: Option<Duration>,
) -> Cmd {
    let mut cmd = evalsha(&FAIR_RELEASE, &[key, latch, queue, places, ours]);
    cmd.arg(unlock_message(wake))
        .arg(millis(lease))
        .arg(field)
        .arg(held)
        .arg(millis(latch_ttl))
        .arg(grant.map_or(0, millis))
        .arg(channel);
    cmd
}

/// `field`, who believes it has `held` holds, leaves the fair lock's queue, giving back a
/// hold granted to it meanwhile; if that leaves the lock free, the new head is woken, or
/// granted the lock (with a `grant` lease cap) when it takes grants. Replies 1 or 0.
pub(crate) fn fair_give_up(
    key: &[u8],
    channel: &[u8],
    (queue, places, ours): Queue<'_>,
    field: &str,
    held: u32,
    grant: Option<Duration>,
) -> Cmd {
    let mut cmd = evalsha(&FAIR_GIVE_UP, &[key, queue, places, ours]);
    cmd.arg(field)
        .arg(UNLOCK_MESSAGE)
        .arg(held)
        .arg(grant.map_or(0, millis))
        .arg(channel);
    cmd
}

/// Delete the fair lock whoever holds it (or only `forced.holder`), waking the head of
/// `queue` on its own channel under `channel`, and leaving `forced.latch`. Replies as
/// [`force_unlock`].
pub(crate) fn fair_force_unlock(
    key: &[u8],
    channel: &[u8],
    (queue, places, ours): Queue<'_>,
    forced: &Forced<'_>,
) -> Cmd {
    let mut cmd = evalsha(
        &FAIR_FORCE_UNLOCK,
        &[key, forced.latch, queue, places, ours],
    );
    cmd.arg(UNLOCK_MESSAGE)
        .arg(millis(forced.latch_ttl))
        .arg(channel)
        .arg(forced.holder)
        .arg(JUDGED_FIELDS);
    cmd
}

/// The message a read-write lock's write release publishes: every waiter may try again.
const WAKE_ALL_MESSAGE: &str = "1";

/// One read hold of a read-write lock for `field` (writer field `writer`), who believes it
/// has `held` read holds, its lease kept under `timeouts`. Replies as [`acquire`].
pub(crate) fn read_acquire(
    key: &[u8],
    timeouts: &[u8],
    lease: Duration,
    (field, writer): (&str, &str),
    held: u32,
) -> Cmd {
    let lease_key = read_lease_key(timeouts, held + 1);
    let mut cmd = evalsha(&READ_ACQUIRE, &[key, &lease_key]);
    cmd.arg(millis(lease)).arg(field).arg(writer).arg(held);
    cmd
}

/// Give back one of `field`'s `held` read holds (leases under `timeouts`, every reader's
/// under `timeouts_prefix`); the lock's last hold publishes on `channel` if it is to `wake`
/// a waiter, and leaves `latch`. Replies [`Released`]: where the owner's other read holds
/// remain, how long the longest of them lasts ([`Released::KeptFor`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_release(
    key: &[u8],
    channel: &[u8],
    latch: &[u8],
    (timeouts, timeouts_prefix): (&[u8], &[u8]),
    field: &str,
    held: u32,
    latch_ttl: Duration,
    wake: bool,
) -> Cmd {
    let mut cmd = evalsha(&READ_RELEASE, &[key, latch]);
    cmd.arg(unlock_message(wake))
        .arg(field)
        .arg(held)
        .arg(millis(latch_ttl))
        .arg(channel)
        .arg(timeouts)
        .arg(timeouts_prefix);
    cmd
}

/// Extend `field`'s `held` read holds, kept under `timeouts`, to `lease`. Replies
/// [`Renewed`]: kept, kept where the hash is ([`Renewed::Partly`]), or gone.
pub(crate) fn read_renew(
    key: &[u8],
    timeouts: &[u8],
    lease: Duration,
    field: &str,
    held: u32,
) -> Cmd {
    let mut cmd = evalsha(&READ_RENEW, &[key]);
    cmd.arg(millis(lease)).arg(field).arg(held).arg(timeouts);
    cmd
}

/// The lease key of read hold `n` (from 1) of the owner whose leases are under `timeouts`.
pub(crate) fn read_lease_key(timeouts: &[u8], n: u32) -> Vec<u8> {
    [timeouts, b":", n.to_string().as_bytes()].concat()
}

/// Extend the lease key `lease_key` of one read hold to `lease`, if it exists: for the
/// keys a renewal could not reach where the hash is. Replies 1 or 0.
pub(crate) fn extend(lease_key: &[u8], lease: Duration) -> Cmd {
    let mut cmd = redis::cmd("PEXPIRE");
    cmd.arg(lease_key).arg(millis(lease));
    cmd
}

/// One write hold of a read-write lock for `writer`, who believes it has `held` write
/// holds. Replies as [`acquire`].
pub(crate) fn write_acquire(key: &[u8], lease: Duration, writer: &str, held: u32) -> Cmd {
    let mut cmd = evalsha(&WRITE_ACQUIRE, &[key]);
    cmd.arg(millis(lease)).arg(writer).arg(held);
    cmd
}

/// Give back one of `writer`'s `held` write holds, leaving `lease` on those that remain;
/// the last one wakes every waiter on `channel` if it is to `wake` them, and leaves
/// `latch`. Replies [`Released`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_release(
    key: &[u8],
    channel: &[u8],
    latch: &[u8],
    lease: Duration,
    writer: &str,
    held: u32,
    latch_ttl: Duration,
    wake: bool,
) -> Cmd {
    let mut cmd = evalsha(&WRITE_RELEASE, &[key, latch]);
    cmd.arg(if wake { WAKE_ALL_MESSAGE } else { "" })
        .arg(millis(lease))
        .arg(writer)
        .arg(held)
        .arg(millis(latch_ttl))
        .arg(channel);
    cmd
}

/// Extend `writer`'s write holds to at least `lease`, never cutting the hash's expiry.
/// Replies [`Renewed`]: kept or gone.
pub(crate) fn write_renew(key: &[u8], lease: Duration, writer: &str) -> Cmd {
    let mut cmd = evalsha(&WRITE_RENEW, &[key]);
    cmd.arg(millis(lease)).arg(writer);
    cmd
}

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

/// What holds the lock `key`. Replies `{type, pttl, holder or false}`.
pub(crate) fn busy(key: &[u8]) -> Cmd {
    evalsha(&BUSY, &[key])
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
/// taken away.
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

/// Extend `field`'s hold to `lease`; with `restore` > 0, put that many holds back where the
/// key is gone. Replies [`Renewed`].
pub(crate) fn renew(key: &[u8], lease: Duration, field: &str, restore: u32) -> Cmd {
    let mut cmd = evalsha(&RENEW, &[key]);
    cmd.arg(millis(lease)).arg(field).arg(restore);
    cmd
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

/// Why a token lock's key is taken, and whether it holds `token` (then its `lease` is set
/// again). Replies `{type, pttl, mine}`.
pub(crate) fn token_probe(key: &[u8], token: &str, lease: Duration) -> Cmd {
    let mut cmd = evalsha(&TOKEN_PROBE, &[key]);
    cmd.arg(token).arg(millis(lease));
    cmd
}

/// Release a token lock if the key holds `token`, publishing on `channel` if it is to
/// `wake` a waiter, and leaving `latch`. Replies [`Released`]: deleted or not ours.
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
pub(crate) fn token_renew(key: &[u8], token: &str, lease: Duration, restore: bool) -> Cmd {
    let mut cmd = evalsha(&TOKEN_RENEW, &[key]);
    cmd.arg(token).arg(millis(lease)).arg(u8::from(restore));
    cmd
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

/// The names of an election: its key, its epoch counter, its record of leaders, its waiting
/// candidates, the places of its queued candidates (keys) and its observers' channel.
pub(crate) type Election<'a> = (&'a [u8], &'a [u8], &'a [u8], &'a [u8], &'a [u8], &'a [u8]);

/// Who campaigns in an election: its name and candidate id, whether it takes over a
/// leadership of its own id, the value it publishes if it leads, and how long after the
/// leader's lease it stays listed while it waits.
pub(crate) struct Campaigner<'a> {
    pub name: &'a str,
    pub id: &'a str,
    pub resume: bool,
    pub value: Option<&'a str>,
    pub listed: Duration,
}

/// Take the lead of the election `keys` for the attempt `token` and the candidate `who`,
/// for `lease`, keeping the last `record` leaders. Replies `{1, epoch}` (leads), `{0, pttl}`
/// (someone else leads), or `WRONGKIND <type>`.
pub(crate) fn election_acquire(
    (key, counter, record_key, candidates, places, observers): Election<'_>,
    token: &str,
    lease: Duration,
    who: &Campaigner<'_>,
    record: usize,
) -> Cmd {
    let mut cmd = evalsha(
        &ELECTION_ACQUIRE,
        &[key, counter, record_key, candidates, places],
    );
    cmd.arg(token)
        .arg(millis(lease))
        .arg(who.name)
        .arg(record)
        .arg(observers)
        .arg(who.id)
        .arg(u8::from(who.resume))
        .arg(who.value.unwrap_or_default())
        .arg(u8::from(who.value.is_some()))
        .arg(millis(who.listed));
    cmd
}

/// Set the value of the leadership `token` of the election at `key`, telling `observers`.
/// Replies 1 (set) or 0 (the leadership is gone).
pub(crate) fn election_proclaim(key: &[u8], token: &str, value: &str, observers: &[u8]) -> Cmd {
    let mut cmd = evalsha(&ELECTION_PROCLAIM, &[key]);
    cmd.arg(token).arg(value).arg(observers);
    cmd
}

/// Extend the leadership `token` to `lease`. Replies [`Renewed`]: kept or gone.
pub(crate) fn election_renew(key: &[u8], token: &str, lease: Duration) -> Cmd {
    let mut cmd = evalsha(&ELECTION_RENEW, &[key]);
    cmd.arg(token).arg(millis(lease));
    cmd
}

/// End the leadership `token` of the election at `key`, waking a candidate on `channel` if
/// it is to `wake` one and every observer on `observers`, and leaving `latch`. Replies
/// [`Released`]: deleted or not ours.
pub(crate) fn election_resign(
    (key, channel, observers, latch): (&[u8], &[u8], &[u8], &[u8]),
    token: &str,
    latch_ttl: Duration,
    wake: bool,
) -> Cmd {
    let mut cmd = evalsha(&ELECTION_RESIGN, &[key, latch]);
    cmd.arg(token)
        .arg(unlock_message(wake))
        .arg(millis(latch_ttl))
        .arg(channel)
        .arg(observers);
    cmd
}

/// The names an election is read from: its key, counter, record of leaders and waiting
/// candidates, and the queue and places of its first-come-first-served candidates.
pub(crate) type ElectionRead<'a> = [&'a [u8]; 6];

/// Who leads the election `keys[0]` (its counter, record of leaders and candidates beside),
/// the recorded leaders after epoch `after`, and the waiting candidates if `waiting`.
/// Replies as `scripts/election_read.lua` says.
pub(crate) fn election_read(keys: &ElectionRead<'_>, after: u64, waiting: bool) -> Cmd {
    let mut cmd = evalsha(&ELECTION_READ, keys);
    cmd.arg(after).arg(u8::from(waiting));
    cmd
}

/// List the queued candidate `owner` (candidate id `id`, client `name`) of an election in
/// its `candidates`, for `keep` at most. Replies 1.
pub(crate) fn election_enlist(
    candidates: &[u8],
    owner: &str,
    (id, name): (&str, &str),
    keep: Duration,
) -> Cmd {
    let mut cmd = evalsha(&ELECTION_ENLIST, &[candidates]);
    cmd.arg(owner).arg(id).arg(name).arg(millis(keep));
    cmd
}

/// `EVALSHA <sha> <number of keys> <keys...>`, with room for up to 7 arguments, a channel
/// (about as long as the first key) among them, so that building the command does not grow
/// it piecemeal.
fn evalsha(script: &Script, keys: &[&[u8]]) -> Cmd {
    let key_bytes: usize = keys.iter().map(|key| key.len()).sum();
    let channel_bytes = keys.first().map_or(0, |key| key.len() + 32);
    let mut cmd = Cmd::with_capacity(3 + keys.len() + 7, 64 + key_bytes + channel_bytes + 160);
    cmd.arg("EVALSHA").arg(script.get_hash()).arg(keys.len());
    for key in keys {
        cmd.arg(*key);
    }
    cmd
}

/// A duration in whole milliseconds, as Redis takes it.
pub(crate) fn millis(duration: Duration) -> u64 {
    duration.as_millis() as u64
}

/// Loads every script on `conn`, in both flavours, after Redis answered NOSCRIPT (a
/// restart, a failover, `SCRIPT FLUSH`): one round trip.
pub(crate) fn load_all(conn: &mut Connection) -> RedisResult<()> {
    let mut load = redis::pipe();
    let sharded = SHARDED.values().map(|(source, _)| source.as_str());
    for source in SOURCES.iter().copied().chain(sharded) {
        load.cmd("SCRIPT").arg("LOAD").arg(source).ignore();
    }
    load.query::<()>(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_that_publish_have_a_sharded_flavour_that_only_spublishes() {
        assert!(SHARDED.len() >= 8, "{} scripts publish", SHARDED.len());
        for (source, _) in SHARDED.values() {
            assert!(!source.contains("'publish'") && !source.contains("'numsub'"));
            assert!(source.contains("'spublish'") || source.contains("'shardnumsub'"));
        }
        let second = Duration::from_secs(1);
        let classic = release(
            b"lock", b"channel", b"latch", second, "field", 1, second, true,
        );
        let flavoured = sharded(&classic).expect("a release publishes");
        let (a, b): (Vec<_>, Vec<_>) = (
            classic.args_iter().map(|a| format!("{a:?}")).collect(),
            flavoured.args_iter().map(|a| format!("{a:?}")).collect(),
        );
        assert_eq!(a.len(), b.len());
        assert_ne!(a[1], b[1], "another script");
        assert_eq!(a[2..], b[2..], "the same keys and arguments");
        let acquire = acquire(b"lock", second, "field", 0);
        assert!(sharded(&acquire).is_none(), "an acquire publishes nothing");
    }

    #[test]
    fn a_release_without_its_latch_drops_its_last_key_only() {
        let args = |cmd: &Cmd| -> Vec<String> {
            (cmd.args_iter())
                .map(|arg| match arg {
                    Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                    _ => String::new(),
                })
                .collect()
        };
        let second = Duration::from_secs(1);
        let classic = release(
            b"lock", b"channel", b"latch", second, "field", 1, second, true,
        );
        for latched in [classic.clone(), sharded(&classic).unwrap()] {
            let (with, without) = (args(&latched), args(&unlatched(&latched).unwrap()));
            assert_eq!(without[..2], with[..2], "the same script");
            assert_eq!((&with[2], &without[2]), (&"2".to_owned(), &"1".to_owned()));
            assert_eq!(without[3], "lock");
            assert_eq!(without[4..], with[5..], "the same arguments");
        }
        let permit = semaphore_release((b"k", b"t", b"c"), b"latch", b"id", second);
        assert_eq!(args(&unlatched(&permit).unwrap())[2..5], ["2", "k", "t"]);
        let prefixes: (&[u8], &[u8]) = (b"t", b"p");
        let read = read_release(
            b"lock", b"channel", b"latch", prefixes, "field", 1, second, true,
        );
        assert!(
            unlatched(&read).is_none(),
            "a read release needs a settled slot"
        );
        assert!(unlatched(&acquire(b"lock", second, "field", 0)).is_none());
    }
}
