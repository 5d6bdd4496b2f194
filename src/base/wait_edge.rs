//! One edge of the wait-for graph: a waiter, the lock it waits for, and since when.

use std::fmt;
use std::time::SystemTime;

/// A waiter and the lock it waits for: one edge of the wait-for graph that a deadlock check
/// follows (see [`LockClientBuilder::deadlock_timeout`]), as
/// [`Error::Deadlock`](crate::Error::Deadlock) names a cycle and
/// [`LockClient::waits`](crate::LockClient::waits) lists them.
///
/// [`LockClientBuilder::deadlock_timeout`]: crate::LockClientBuilder::deadlock_timeout
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaitEdge {
    /// The waiting owner, as its holds' owner field shows it: `<client-uuid>:<thread-id>`.
    pub waiter: String,
    /// The waiting client's name (see
    /// [`client_name`](crate::LockClientBuilder::client_name)).
    pub client: String,
    /// The key of the lock it waits for, as stored (with its client's key prefix), lossily
    /// decoded.
    pub lock: String,
    /// The kind of the lock it waits for, as its handle names it: `reentrant`, `fenced`,
    /// `fair`, `non-reentrant`, `spin`, `read`, `write`, ...
    pub kind: String,
    /// Since when it waits, by the waiter's clock.
    pub since: SystemTime,
}

impl fmt::Display for WaitEdge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {:?} waits for {:?} ({})",
            self.waiter, self.client, self.lock, self.kind
        )
    }
}
