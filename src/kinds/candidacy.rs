//! What an election's campaigns say of their candidate: the request a campaign makes
//! besides its token.

/// What an election's campaigns say of their candidate, as its handle was set up.
#[derive(Clone, Default, Debug)]
pub struct Candidacy {
    /// The candidate id its user chose: campaigns under it take over a leadership of the
    /// same id. `None`: an id per client and thread, and no take-over.
    pub id: Option<String>,
    /// The value its leaderships publish from the start.
    pub value: Option<String>,
}
