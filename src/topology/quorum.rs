//! The arithmetic of agreeing nodes: how many must agree, what the answers of one round
//! mean, and how long a granted lease surely lasts. Pure functions, the same for one node
//! (a quorum of one) as for Redlock's N independent masters.

use std::time::{Duration, Instant};

/// How many of `of` nodes make a majority: N/2 + 1 of the configured N, reachable or not.
pub(crate) fn quorum(of: usize) -> usize {
    of / 2 + 1
}

/// The value a quorum agrees on at least: the quorum-th largest answer, when at least a
/// quorum answered.
pub(crate) fn agreed<T: Ord + Copy>(mut answers: Vec<T>, of: usize) -> Option<T> {
    let needed = quorum(of);
    if answers.len() < needed {
        return None;
    }
    answers.sort_unstable_by(|a, b| b.cmp(a));
    Some(answers[needed - 1])
}

/// Until when a lease granted by a command sent at `sent` surely lasts: the lease less the
/// allowance for clock drift between this process and the nodes (1% of the lease + 2 ms, as
/// the Redlock description in the Redis documentation suggests). `None` if nothing is left.
pub(crate) fn validity_end(sent: Instant, lease: Duration) -> Option<Instant> {
    let drift = lease / 100 + Duration::from_millis(2);
    lease.checked_sub(drift).map(|validity| sent + validity)
}

/// The answers of one round to a yes-or-no question about a hold — is it still ours (a
/// renewal, an extension), did this release remove it — on `of` nodes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tally {
    pub yes: usize,
    /// Nodes that gave no answer.
    pub failed: usize,
    pub of: usize,
}

/// What a [`Tally`] shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A quorum said yes.
    Yes,
    /// Too few said yes for a quorum even if every silent node would have: the hold is gone.
    No,
    /// The silent nodes decide; ask again.
    Unknown,
}

impl Tally {
    pub fn verdict(&self) -> Verdict {
        let needed = quorum(self.of);
        if self.yes >= needed {
            Verdict::Yes
        } else if self.yes + self.failed < needed {
            Verdict::No
        } else {
            Verdict::Unknown
        }
    }
}

/// The answers of one acquisition round on `of` nodes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Grants {
    /// Nodes that granted the hold with the owner's earlier holds intact (for a first hold:
    /// every node that granted it).
    pub kept: usize,
    /// Nodes that granted it but had lost the owner's earlier holds.
    pub fresh: usize,
    /// Nodes that gave no answer.
    pub failed: usize,
    pub of: usize,
    /// Whether the owner held the lock before this round (a re-entry).
    pub reentry: bool,
    /// Whether the granted lease has validity left after the round's time and clock drift.
    pub valid: bool,
}

/// What an acquisition round comes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Taken,
    /// Held by someone else.
    Busy,
    /// Too few nodes answered to decide.
    NoQuorum,
    /// A quorum granted it, but too slowly for any validity to be left; worth retrying.
    Slow,
    /// A re-entry whose earlier holds too few answering nodes confirmed, while the silent
    /// ones may have them; worth retrying.
    Unconfirmed,
    /// A re-entry whose earlier holds are gone from too many nodes for a quorum to have
    /// them: the hold was lost.
    Lost,
}

impl Grants {
    pub fn granted(&self) -> usize {
        self.kept + self.fresh
    }

    pub fn outcome(&self) -> Outcome {
        let needed = quorum(self.of);
        if self.kept >= needed && self.valid {
            Outcome::Taken
        } else if self.reentry && self.kept + self.failed < needed {
            Outcome::Lost
        } else if self.of - self.failed < needed {
            Outcome::NoQuorum
        } else if self.granted() >= needed && !self.valid {
            Outcome::Slow
        } else if self.reentry && self.kept < needed {
            Outcome::Unconfirmed
        } else {
            Outcome::Busy
        }
    }

    /// Whether what this round may have granted must be given back: anything not taken
    /// that some node granted, or that a failed node may have run.
    pub fn needs_undo(&self, failed_may_have_run: bool) -> bool {
        self.outcome() != Outcome::Taken && (self.granted() > 0 || failed_may_have_run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants(kept: usize, fresh: usize, failed: usize, of: usize) -> Grants {
        Grants {
            kept,
            fresh,
            failed,
            of,
            reentry: false,
            valid: true,
        }
    }

    #[test]
    fn a_quorum_is_a_majority_of_all_configured_nodes() {
        assert_eq!([1, 2, 3, 4, 5, 6].map(quorum), [1, 2, 2, 3, 3, 4]);
    }

    #[test]
    fn agreed_is_what_a_quorum_has_at_least() {
        assert_eq!(agreed(vec![3], 1), Some(3));
        assert_eq!(agreed(vec![1, 5, 3], 5), Some(1));
        assert_eq!(agreed(vec![1, 5, 3, 4], 5), Some(3));
        assert_eq!(agreed(vec![5, 5], 5), None);
    }

    #[test]
    fn validity_keeps_a_drift_allowance_and_can_run_out() {
        let sent = Instant::now();
        let end = validity_end(sent, Duration::from_secs(10)).unwrap();
        assert_eq!(end - sent, Duration::from_millis(9_898));
        assert_eq!(validity_end(sent, Duration::from_millis(2)), None);
    }

    #[test]
    fn a_tally_is_yes_no_or_undecided() {
        let verdict = |yes, failed, of| Tally { yes, failed, of }.verdict();
        assert_eq!(verdict(1, 0, 1), Verdict::Yes);
        assert_eq!(verdict(0, 0, 1), Verdict::No);
        assert_eq!(verdict(0, 1, 1), Verdict::Unknown);
        assert_eq!(verdict(3, 2, 5), Verdict::Yes);
        assert_eq!(verdict(2, 1, 5), Verdict::Unknown);
        assert_eq!(verdict(1, 1, 5), Verdict::No);
    }

    #[test]
    fn an_acquisition_is_taken_only_by_a_quorum_with_validity_left() {
        assert_eq!(grants(1, 0, 0, 1).outcome(), Outcome::Taken);
        assert_eq!(grants(3, 0, 2, 5).outcome(), Outcome::Taken);
        assert_eq!(grants(2, 0, 0, 5).outcome(), Outcome::Busy);
        assert_eq!(grants(2, 0, 3, 5).outcome(), Outcome::NoQuorum);
        assert_eq!(grants(0, 0, 1, 1).outcome(), Outcome::NoQuorum);
        let slow = Grants {
            valid: false,
            ..grants(3, 0, 0, 5)
        };
        assert_eq!(slow.outcome(), Outcome::Slow);
        // Fresh grants alone are no quorum for a re-entry, but they are for its undo.
        let reentry = Grants {
            reentry: true,
            ..grants(1, 2, 0, 3)
        };
        assert_eq!(reentry.outcome(), Outcome::Lost);
        let unconfirmed = Grants {
            reentry: true,
            ..grants(1, 1, 1, 3)
        };
        assert_eq!(unconfirmed.outcome(), Outcome::Unconfirmed);
    }

    #[test]
    fn whatever_was_granted_and_not_taken_is_undone() {
        assert!(!grants(1, 0, 0, 1).needs_undo(true));
        assert!(grants(2, 0, 0, 5).needs_undo(false));
        assert!(grants(0, 0, 3, 5).needs_undo(true));
        assert!(!grants(0, 0, 3, 5).needs_undo(false));
    }
}
