//! What a waiter found holding the lock it waited for.

use std::fmt;
use std::time::Duration;

/// What held a lock when a wait for it gave up, as far as one look at Redis could tell:
/// carried by [`Error::Timeout`](crate::Error::Timeout), and logged when a wait finds a
/// holder that never expires.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeldBy {
    /// The key looked at, lossily decoded.
    pub key: String,
    /// What the key holds, such as `"a reentrant, fenced or fair lock (a hash)"`, or what a
    /// semaphore's permits stand at.
    pub found: String,
    /// The holder, when the layout names one: a hash lock's owner field
    /// (`"<client-uuid>:<thread>"`, or `...:write` for a writer).
    pub holder: Option<String>,
    /// How long the holder's lease had left; `None` when it has no expiry (it is held until
    /// someone deletes it).
    pub ttl: Option<Duration>,
}

impl fmt::Display for HeldBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "key {:?} holds {}", self.key, self.found)?;
        if let Some(holder) = &self.holder {
            write!(f, ", held by {holder:?}")?;
        }
        match self.ttl {
            Some(ttl) => write!(f, ", expiring in {ttl:?}"),
            None => write!(f, ", with no expiry"),
        }
    }
}
