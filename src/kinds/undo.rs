//! A give-back, as a kind describes it: what the lock machine runs to undo what may be held
//! on the server with no guard to hold it (see `lease::give_back` for how it runs).

use std::time::{Duration, Instant};

use redis::Cmd;

use crate::kinds::slot::HoldId;

/// One give-back: the command that undoes, how long what it undoes may live on the server
/// from now, and the owner slot it concerns, for thread-owned holds.
pub struct Undo {
    pub(crate) cmd: Cmd,
    pub(crate) lasts: Duration,
    pub(crate) slot: Option<HoldId>,
    /// Until when the holds it leaves to the slot's owner surely last: the undo sets their
    /// lease again, so they count on no more than that. `None` where it leaves none.
    pub(crate) leaves_until: Option<Instant>,
}
