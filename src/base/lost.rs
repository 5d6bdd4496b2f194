//! What the loss callback is told.

use crate::base::error::Error;

/// A holding found gone, as handed to the
/// [`on_lock_lost`](crate::LockClientBuilder::on_lock_lost) callback.
#[derive(Debug)]
#[non_exhaustive]
pub struct LockLost {
    /// The lock's name (lossily decoded).
    pub name: String,
    /// `None` when Redis said the hold is gone (deleted or expired); the last renewal error
    /// when Redis could not be reached until the hold's validity ran out.
    pub error: Option<Error>,
}
