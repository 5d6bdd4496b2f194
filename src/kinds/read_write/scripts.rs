//! The read-write lock's scripts: read holds, each with a lease key of its own, and write
//! holds, in one hash.

use std::time::Duration;

use redis::Cmd;

use crate::layout::names;
use crate::transport::common::unlock_message;
use crate::transport::scripts::{Lua, evalsha, millis};

static READ_ACQUIRE: Lua = Lua::new(&[include_str!("read_acquire.lua")]);
static READ_RELEASE: Lua = Lua::new(&[include_str!("read_release.lua")]);
static READ_RENEW: Lua = Lua::new(&[include_str!("read_renew.lua")]);
static WRITE_ACQUIRE: Lua = Lua::new(&[include_str!("write_acquire.lua")]);
static WRITE_RELEASE: Lua = Lua::latched(&[include_str!("write_release.lua")]);
static WRITE_RENEW: Lua = Lua::new(&[include_str!("write_renew.lua")]);

/// Every script above, declared to the registry before a client sends any.
pub(crate) static SCRIPTS: &[&Lua] = &[
    &READ_ACQUIRE,
    &READ_RELEASE,
    &READ_RENEW,
    &WRITE_ACQUIRE,
    &WRITE_RELEASE,
    &WRITE_RENEW,
];

/// The message a read-write lock's write release publishes: every waiter may try again.
const WAKE_ALL_MESSAGE: &str = "1";

/// One read hold of a read-write lock for `field` (writer field `writer`), who believes it
/// has `held` read holds, its lease kept under `timeouts`. Replies as [`acquire`].
///
/// [`acquire`]: crate::kinds::reentrant::scripts::acquire
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
///
/// [`Released`]: crate::transport::common::Released
/// [`Released::KeptFor`]: crate::transport::common::Released::KeptFor
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
///
/// [`Renewed`]: crate::transport::common::Renewed
/// [`Renewed::Partly`]: crate::transport::common::Renewed::Partly
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
///
/// [`acquire`]: crate::kinds::reentrant::scripts::acquire
pub(crate) fn write_acquire(key: &[u8], lease: Duration, writer: &str, held: u32) -> Cmd {
    let mut cmd = evalsha(&WRITE_ACQUIRE, &[key]);
    cmd.arg(millis(lease)).arg(writer).arg(held);
    cmd
}

/// Give back one of `writer`'s `held` write holds, leaving `lease` on those that remain;
/// the last one wakes every waiter on `channel` if it is to `wake` them, and leaves
/// `latch`. Replies [`Released`].
///
/// [`Released`]: crate::transport::common::Released
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
        .arg(channel)
        .arg(names::read_timeouts_prefix(key));
    cmd
}

/// Extend `writer`'s write holds to at least `lease`, never cutting the hash's expiry.
/// Replies [`Renewed`]: kept or gone.
///
/// [`Renewed`]: crate::transport::common::Renewed
pub(crate) fn write_renew(key: &[u8], lease: Duration, writer: &str) -> Cmd {
    let mut cmd = evalsha(&WRITE_RENEW, &[key]);
    cmd.arg(millis(lease)).arg(writer);
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::scripts::unlatched;

    #[test]
    fn a_write_release_may_leave_its_latch_out_and_a_read_release_may_not() {
        let second = Duration::from_secs(1);
        let write = write_release(b"lock", b"chan", b"latch", second, "w", 1, second, true);
        assert!(unlatched(&write).is_some());
        let prefixes: (&[u8], &[u8]) = (b"t", b"p");
        let read = read_release(b"lock", b"chan", b"latch", prefixes, "r", 1, second, true);
        assert!(
            unlatched(&read).is_none(),
            "a read release needs a settled slot"
        );
    }
}
