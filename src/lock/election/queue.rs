//! First come, first served among an election's candidates: a candidate queues on a fair
//! lock beside the election, and only that lock's holder campaigns; once it leads, or its
//! call ends without leading, it gives the lock up and the next in the queue campaigns.

use std::time::Instant;

use crate::base::error::{Error, Result};
use crate::kinds::election::{self, Leading};
use crate::kinds::fair::Fair;
use crate::kinds::kind::sealed::Machinery;
use crate::layout::{names, owner};
use crate::lease::target::Target;
use crate::lock::guard::LockGuard;
use crate::lock::handle::Lock;

/// The fair lock an election's first-come-first-served candidates queue on.
#[derive(Clone)]
pub(crate) struct Queue {
    target: Target,
}

impl Queue {
    /// The queue of the election `election`.
    pub(crate) fn beside(election: &Target) -> Self {
        let key = names::election_queue(&election.shared_key());
        Queue {
            target: election.beside(key),
        }
    }

    /// Campaigns in `election` once this candidate's turn comes, as
    /// [`Lock::lock`](crate::Lock::lock) waits: for the client's `max_wait` at most, past
    /// which it is [`Error::Timeout`] naming who leads.
    pub(crate) fn campaign(&self, election: &Lock<Leading>) -> Result<LockGuard<Leading>> {
        let started = Instant::now();
        let config = election.target.shared.config();
        let deadline = config.max_wait.map(|wait| started + wait);
        if let Some(led) = self.campaign_until(election, deadline)? {
            return Ok(led);
        }
        let limit = Instant::now() + config.response_timeout;
        Err(Error::Timeout {
            lock: election.target.subject().clone(),
            waited: started.elapsed(),
            held_by: Leading::describe(&election.target, &election.request, Some(limit))
                .map(Box::new),
        })
    }

    /// Campaigns in `election` once this candidate's turn comes, until `deadline` at most
    /// for both steps (`None`: without one). The turn is given up whatever comes of it.
    pub(crate) fn campaign_until(
        &self,
        election: &Lock<Leading>,
        deadline: Option<Instant>,
    ) -> Result<Option<LockGuard<Leading>>> {
        // What the election refuses (a bad name, a closed client, Redlock) it refuses
        // before anyone queues, in its own name.
        election.target.open()?;
        election::node(&election.target)?;
        if leads_already(election)?
            && let Some(led) = election.acquire(None, Some(Instant::now()))?
        {
            return Ok(Some(led));
        }
        let mut queue = Lock::<Fair>::new(self.target.clone());
        queue.cancel.clone_from(&election.cancel);
        // Listed while it queues, under its place in the queue.
        let owner = owner::field(self.target.shared.id(), owner::current_thread());
        let candidacy = election.request.as_deref();
        election::enlist(&election.target, candidacy, &owner);
        let turn = queue.acquire(None, deadline);
        election::delist(&election.target, &owner);
        let Some(turn) = turn? else {
            return Ok(None);
        };
        let led = election.acquire(None, deadline);
        if let Err(err) = turn.unlock() {
            log::warn!(
                "giving up the turn to campaign in {} failed, so the next candidate waits \
                 until it runs out: {err:#}",
                election.target.subject()
            );
        }
        led
    }
}

/// Whether `election` is led under the candidate id its handle was given
/// ([`Election::as_candidate`](crate::Election::as_candidate)): such a candidate takes its
/// own leadership back at once, as a plain one does, without queuing.
fn leads_already(election: &Lock<Leading>) -> Result<bool> {
    let target = &election.target;
    let Some(id) = election.request.as_ref().and_then(|c| c.id.as_deref()) else {
        return Ok(false);
    };
    let end = Instant::now() + target.shared.config().response_timeout;
    let snapshot = election::read(target, u64::MAX, end)?;
    Ok(snapshot.leader.is_some() && snapshot.candidate == id)
}
