//! The election's scripts: the lead taken, renewed, given up and proclaimed, candidates
//! listed, and who leads read.

use std::time::Duration;

use redis::Cmd;

use crate::transport::common::{SHAPE, unlock_message};
use crate::transport::scripts::{Lua, evalsha, millis};

static ELECTION_ACQUIRE: Lua = Lua::new(&[SHAPE, include_str!("election_acquire.lua")]);
static ELECTION_RENEW: Lua = Lua::new(&[include_str!("election_renew.lua")]);
static ELECTION_RESIGN: Lua = Lua::latched(&[include_str!("election_resign.lua")]);
static ELECTION_PROCLAIM: Lua = Lua::new(&[include_str!("election_proclaim.lua")]);
static ELECTION_ENLIST: Lua = Lua::new(&[include_str!("election_enlist.lua")]);
static ELECTION_READ: Lua = Lua::new(&[SHAPE, include_str!("election_read.lua")]);

/// Every script above, declared to the registry before a client sends any.
pub(crate) static SCRIPTS: &[&Lua] = &[
    &ELECTION_ACQUIRE,
    &ELECTION_RENEW,
    &ELECTION_RESIGN,
    &ELECTION_PROCLAIM,
    &ELECTION_ENLIST,
    &ELECTION_READ,
];

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
///
/// [`Renewed`]: crate::transport::common::Renewed
pub(crate) fn election_renew(key: &[u8], token: &str, lease: Duration) -> Cmd {
    let mut cmd = evalsha(&ELECTION_RENEW, &[key]);
    cmd.arg(token).arg(millis(lease));
    cmd
}

/// End the leadership `token` of the election at `key`, waking a candidate on `channel` if
/// it is to `wake` one and every observer on `observers`, and leaving `latch`. Replies
/// [`Released`]: deleted or not ours.
///
/// [`Released`]: crate::transport::common::Released
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
/// Replies as `election_read.lua` says.
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
