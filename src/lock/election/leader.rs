//! Who leads an election, as anyone may read it.

/// Who leads an election, as [`Election::leader`](crate::Election::leader) and an
/// [`Observer`](crate::Observer) tell it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    name: String,
    epoch: u64,
    value: Option<String>,
    candidate: Option<String>,
}

impl Leader {
    pub(crate) fn new(name: String, epoch: u64) -> Self {
        Leader {
            name,
            epoch,
            value: None,
            candidate: None,
        }
    }

    /// This leader, with the value it published and its candidate id (empty: none).
    pub(crate) fn with(mut self, value: Option<String>, candidate: String) -> Self {
        self.value = value;
        self.candidate = (!candidate.is_empty()).then_some(candidate);
        self
    }

    /// The leader's [`client_name`](crate::LockClientBuilder::client_name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The leadership's epoch: greater than every earlier leader's of the election.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The value the leader published, with
    /// [`campaign_with`](crate::Election::campaign_with) or
    /// [`proclaim`](crate::Leadership::proclaim) (its address, say); `None` when it
    /// published none, or for a leader an [`Observer`](crate::Observer) learned of only
    /// from the record of past leaders, which keeps names and epochs.
    pub fn value(&self) -> Option<&str> {
        self.value.as_deref()
    }

    /// The leader's candidate id (see [`Election::as_candidate`](crate::Election::as_candidate));
    /// `None` where it is not known.
    pub fn candidate(&self) -> Option<&str> {
        self.candidate.as_deref()
    }
}
