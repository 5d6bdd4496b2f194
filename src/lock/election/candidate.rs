//! A candidate of an election, as anyone may list them.

use std::time::SystemTime;

/// A candidate of an election: its leader, or a client that waits to lead, as
/// [`Election::candidates`](crate::Election::candidates) lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    id: String,
    name: String,
    since: Option<SystemTime>,
    leading: bool,
}

impl Candidate {
    pub(crate) fn new(id: String, name: String, since: Option<SystemTime>, leading: bool) -> Self {
        Candidate {
            id,
            name,
            since,
            leading,
        }
    }

    /// Its candidate id: the one chosen with
    /// [`Election::as_candidate`](crate::Election::as_candidate), or else its client's id
    /// and thread (`<client-uuid>:<thread>`). Empty for a leader that did not say.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its client's [`client_name`](crate::LockClientBuilder::client_name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Since when, by the Redis server's clock: when the leader was elected, or when a
    /// waiting candidate began to wait; `None` where it is not known.
    pub fn since(&self) -> Option<SystemTime> {
        self.since
    }

    /// Whether it leads.
    pub fn is_leader(&self) -> bool {
        self.leading
    }
}
