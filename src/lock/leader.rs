//! Who leads an election, as anyone may read it.

/// Who leads an election, as [`Election::leader`](crate::Election::leader) and an
/// [`Observer`](crate::Observer) tell it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    name: String,
    epoch: u64,
}

impl Leader {
    pub(crate) fn new(name: String, epoch: u64) -> Self {
        Leader { name, epoch }
    }

    /// The leader's [`client_name`](crate::LockClientBuilder::client_name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The leadership's epoch: greater than every earlier leader's of the election.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
}
