//! What a kind tells the watchdog about one of its holds: how it is renewed, and how it is
//! given back whole once found lost while a renewal of it may have run. The watchdog
//! itself (its threads, its rounds, the verdicts) is the lock machine's (`lease::watchdog`).

use std::time::Duration;

use redis::Cmd;

use crate::kinds::call::Call;
use crate::kinds::undo::Undo;

/// How a hold of a kind is renewed.
pub(crate) trait Renewal: Send + Sync {
    /// The renewal script for every node. With `restore`, a node that lost the key gets
    /// the hold back, with as many holds as `held` counts (a look at the client's hold
    /// table, made only when needed).
    fn command(&self, lease: Duration, restore: bool, held: &dyn Fn() -> u32) -> Cmd;

    /// The commands that extend, one key each, what a renewal replying
    /// [`Renewed::Partly`] could not reach where its first key is, for `held` holds: in a
    /// slot being migrated they are sent where each key is. None for a kind whose renewal
    /// touches one key.
    ///
    /// [`Renewed::Partly`]: crate::transport::common::Renewed::Partly
    fn strays(&self, _lease: Duration, _held: u32) -> Vec<Cmd> {
        Vec::new()
    }

    /// The give-back of the hold of the lock `target`, leaving its owner `held` holds (0:
    /// the whole holding), for when it is lost while a renewal of it may have run, or when
    /// no watchdog could start for it.
    fn undo(&self, target: &dyn Call, held: u32) -> Undo;
}
