//! What a kind may ask of the lock machine during one call on one lock: the lock's names,
//! the nodes it lives on, the client's settings and owner id, the machine's count of a
//! thread's holds, and the give-backs the machine runs. The machine's `Target` provides
//! it; a kind never sees the client's state behind it.

use std::sync::Arc;

use crate::base::config::Config;
use crate::base::error::{Error, Result, Subject};
use crate::kinds::holding::Holding;
use crate::kinds::slot::HoldId;
use crate::kinds::undo::Undo;
use crate::layout::names;
use crate::transport::node::Nodes;

/// One call on one lock, as a kind sees it. Public only as the parameter of the sealed
/// seam's functions, whose types the crate keeps to itself.
#[allow(private_interfaces)]
pub trait Call {
    /// The lock or semaphore, for errors and logs.
    fn subject(&self) -> &Subject;

    /// The key, or the error for a name that cannot be one.
    fn key(&self) -> Result<&[u8]>;

    /// The key, shared, for what outlives the call; only valid names reach where it is used.
    fn shared_key(&self) -> Arc<[u8]>;

    /// The lock's unlock channel, named by Redisson's rule (see `layout`).
    fn channel(&self) -> &[u8];

    /// The key, checked, in a client allowed to act in this process: the start of every
    /// call that goes to Redis.
    fn begin(&self) -> Result<&[u8]>;

    /// [`begin`](Self::begin) for a call that starts something new: refused on a closed
    /// client.
    fn open(&self) -> Result<&[u8]>;

    /// The nodes the lock lives on.
    fn nodes(&self) -> &Nodes;

    /// The client's settings.
    fn config(&self) -> &Config;

    /// The client's id, the first half of a thread's owner field.
    fn client_id(&self) -> &str;

    /// Whether the client is being closed.
    fn closing(&self) -> bool;

    /// How many holds the client counts for the owner slot `slot`, and whether the
    /// watchdog renews them.
    fn holds(&self, slot: &HoldId) -> (u32, bool);

    /// Before an attempt of the owner of `slot`, which sets the owner's count itself: a
    /// give-back still pending for it has no work left, and must not run after it.
    fn supersede(&self, slot: &HoldId);

    /// Forgets the holding of `slot` and reports it lost: an attempt found the owner's
    /// earlier holds gone.
    fn lose(&self, slot: &HoldId);

    /// Reports `holding` lost, found so by this call, and returns the error for it.
    fn found_lost(&self, holding: &Holding) -> Error;

    /// Gives back what `undo` undoes, at once within a round of its own and, where Redis
    /// cannot be reached, again in the background.
    fn give_back(&self, undo: Undo);

    /// Gives back what each undo undoes (of locks of this call's client), all in one round.
    fn give_back_all(&self, undos: Vec<(&Subject, Undo)>);

    /// Gives back what `undo` undoes in the background only.
    fn give_back_later(&self, undo: Undo);

    /// Whether a give-back is to wake a waiter. On one node it does: that node's waiters
    /// wait for a message, and may have found the lock busy because of what is given back.
    /// On several it wakes nobody: a failed Redlock attempt would otherwise wake every
    /// waiter on each node it was granted on, while whoever made it fail still holds the
    /// lock. Redlock's waiters poll instead (see `acquire`).
    fn give_back_wakes(&self) -> bool {
        self.nodes().list().len() == 1
    }

    /// [`Error::Lost`] for this lock.
    fn lost(&self) -> Error {
        Error::Lost {
            lock: self.subject().clone(),
        }
    }

    /// [`Error::NotHeld`] for this lock.
    fn not_held(&self) -> Error {
        Error::NotHeld {
            lock: self.subject().clone(),
        }
    }

    /// `err` about this lock: [`Error::WrongKind`] for a script's `WRONGKIND <type>`,
    /// [`Error::NotALock`] for its `NOTALOCK <why>`.
    fn wrong_kind(&self, err: Error) -> Error {
        match err {
            err if err.server_code() == Some("WRONGKIND") => Error::WrongKind {
                lock: self.subject().clone(),
                found: names::kind_of(err.server_detail().unwrap_or_default().trim()),
            },
            err if err.server_code() == Some("NOTALOCK") => Error::NotALock {
                lock: self.subject().clone(),
                found: err.server_detail().unwrap_or_default().trim().to_owned(),
            },
            err => err.with_lock(self.subject()),
        }
    }

    /// The error for a bad `argument` of a call on this lock.
    fn invalid_argument(&self, argument: &'static str, reason: String) -> Error {
        Error::InvalidArgument {
            lock: self.subject().clone(),
            argument,
            reason,
        }
    }
}
