//! The reentrant lock's scripts, on Redisson's hash layout that the fenced, spin,
//! non-reentrant and multi-locks share: one hold taken, given back or renewed.

use std::time::Duration;

use redis::Cmd;

use crate::transport::common::unlock_message;
use crate::transport::scripts::{Lua, evalsha, millis};

static ACQUIRE: Lua = Lua::new(&[include_str!("acquire.lua")]);
static RELEASE: Lua = Lua::latched(&[include_str!("release.lua")]);
static RENEW: Lua = Lua::new(&[include_str!("renew.lua")]);

/// Every script above, declared to the registry before a client sends any.
pub(crate) static SCRIPTS: &[&Lua] = &[&ACQUIRE, &RELEASE, &RENEW];

/// The acquire reply for a hold taken while the owner's earlier holds were gone.
pub(crate) const FRESH: i64 = -3;

/// Take one hold of a reentrant lock for `field`, who believes it has `held` holds already.
/// Replies nil (taken), [`FRESH`] (taken, earlier holds gone), the key's PTTL (busy), or the
/// error `WRONGKIND <type>`.
pub(crate) fn acquire(key: &[u8], lease: Duration, field: &str, held: u32) -> Cmd {
    let mut cmd = evalsha(&ACQUIRE, &[key]);
    cmd.arg(millis(lease)).arg(field).arg(held);
    cmd
}

/// Give back one of `field`'s `held` holds, leaving `lease` on the ones that remain; the
/// last one publishes on `channel` if it is to `wake` a waiter, and leaves `latch` for
/// `latch_ttl`. Replies [`Released`].
///
/// [`Released`]: crate::transport::common::Released
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

/// Extend `field`'s hold to `lease`; with `restore` > 0, put that many holds back where the
/// key is gone. Replies [`Renewed`].
///
/// [`Renewed`]: crate::transport::common::Renewed
pub(crate) fn renew(key: &[u8], lease: Duration, field: &str, restore: u32) -> Cmd {
    let mut cmd = evalsha(&RENEW, &[key]);
    cmd.arg(millis(lease)).arg(field).arg(restore);
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::scripts::{sharded, unlatched};

    #[test]
    fn a_release_publishes_in_both_flavours_and_its_latch_may_be_left_out() {
        let second = Duration::from_secs(1);
        let release = release(b"lock", b"chan", b"latch", second, "field", 1, second, true);
        let flavoured = sharded(&release).expect("a release publishes");
        for cmd in [&release, &flavoured] {
            let bare = unlatched(cmd).expect("a latch of its own");
            assert_eq!(bare.args_iter().count() + 1, cmd.args_iter().count());
        }
        let acquire = acquire(b"lock", second, "field", 0);
        assert!(sharded(&acquire).is_none(), "an acquire publishes nothing");
        assert!(unlatched(&acquire).is_none(), "an acquire leaves no latch");
    }
}
