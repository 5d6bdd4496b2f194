//! The fair lock's scripts: the reentrant hold taken in the order of a queue of waiters,
//! given back to the head of the queue (granted to it when it takes grants), and a waiter
//! that leaves the queue.

use std::time::Duration;

use redis::Cmd;

use crate::transport::common::{Forced, JUDGED_FIELDS, SHAPE, UNLOCK_MESSAGE, unlock_message};
use crate::transport::scripts::{Lua, evalsha, millis};

static FAIR_ACQUIRE: Lua = Lua::new(&[include_str!("fair_acquire.lua")]);
static FAIR_RELEASE: Lua = Lua::new(&[include_str!("fair_release.lua")]);
static FAIR_GIVE_UP: Lua = Lua::new(&[include_str!("fair_give_up.lua")]);
static FAIR_FORCE_UNLOCK: Lua = Lua::new(&[SHAPE, include_str!("fair_force_unlock.lua")]);

/// Every script above, declared to the registry before a client sends any.
pub(crate) static SCRIPTS: &[&Lua] = &[
    &FAIR_ACQUIRE,
    &FAIR_RELEASE,
    &FAIR_GIVE_UP,
    &FAIR_FORCE_UNLOCK,
];

/// The keys of a fair lock's queue: the list of waiting owners, Redisson's sorted set of
/// their places, and this crate's sorted set of its own waiters.
pub(crate) type Queue<'a> = (&'a [u8], &'a [u8], &'a [u8]);

/// The fair lock's acquire: like [`acquire`], for the head of `queue`, queuing `field` at
/// its end when busy, where it keeps its place for `place_ttl` after each attempt however
/// much Redisson waiters ahead, each taken to wait at least `java_wait`, take off its place.
/// Replies as [`acquire`], busy being the PTTL or -2. A waiter it finds at the head of the
/// free lock once dead waiters before it are dropped is woken on its own channel under
/// `channel`.
///
/// [`acquire`]: crate::kinds::reentrant::scripts::acquire
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
///
/// [`release`]: crate::kinds::reentrant::scripts::release
/// [`Released`]: crate::transport::common::Released
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
///
/// [`force_unlock`]: crate::transport::common::force_unlock
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
