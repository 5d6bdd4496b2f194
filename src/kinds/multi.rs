//! A multi-lock's attempt on several [`Reentrant`] locks of one client and one cluster slot:
//! one script takes a hold of each, or of none, in one round trip. Each hold it grants is
//! the reentrant lock's, which the lock machine then makes a hold as it makes any other.

pub(crate) mod scripts;

use std::time::{Duration, Instant};

use crate::base::error::{Error, Result};
use crate::kinds::call::Call;
use crate::kinds::kind::Grant;
use crate::kinds::reentrant::{self, Claim, Reentrant};
use crate::layout::names;
use crate::topology::quorum::validity_end;
use crate::topology::slots;
use scripts::MultiTaken;

/// What one attempt on a batch came to.
pub(crate) enum Batch {
    /// A hold of every lock, in the batch's order.
    Taken(Vec<Grant<()>>),
    /// The lock at this index of the batch is held by someone else; nothing was taken.
    Busy(usize),
    /// Taken too slowly to be valid, and given back: another try may do better.
    Slow,
}

/// Which batch a lock of this client may join: locks with the same answer can be taken by
/// one script. `None` for a client over several nodes (Redlock), where each lock counts
/// its holds per node in an attempt of its own, and for a name that cannot be a key.
pub(crate) fn batch_of(target: &dyn Call) -> Option<(usize, u16)> {
    let nodes = target.nodes();
    let key = target.key().ok()?;
    if nodes.list().len() != 1 {
        return None;
    }
    // A client's nodes are its own, where the client keeps them.
    let client = std::ptr::from_ref(nodes) as usize;
    let slot = if nodes.routes_by_slot() {
        slots::slot(key)
    } else {
        0
    };
    Some((client, slot))
}

/// One attempt on `targets`, all of one batch (see [`batch_of`]): a hold of each for this
/// thread, or none. Where the reply is lost, what the script may have taken is given back.
pub(crate) fn take(
    targets: &[&dyn Call],
    lease: Option<Duration>,
    limit: Option<Instant>,
) -> Result<Batch> {
    let [first, ..] = targets else {
        return Ok(Batch::Taken(Vec::new()));
    };
    let nodes = first.nodes();
    let keys = (targets.iter())
        .map(|target| target.open())
        .collect::<Result<Vec<_>>>()?;
    let claims: Vec<Claim> = (targets.iter())
        .map(|target| reentrant::claim::<Reentrant>(*target, lease))
        .collect();
    // The attempt sets each owner's count: a give-back still pending for it has no work.
    for claim in &claims {
        first.supersede(&claim.id);
    }
    let counts: Vec<_> = claims.iter().map(|c| (c.held, c.lease)).collect();
    let cmd = scripts::multi_acquire(&keys, &reentrant::owner(*first), &counts);
    // What the script may have taken goes back for every lock, in one round: `whole`
    // (by index) a fresh hold taken while the owner believed it had holds.
    let give_back_from = |from: usize, whole: &dyn Fn(usize) -> bool| {
        let undos =
            (targets.iter().zip(&claims).enumerate().skip(from)).map(|(at, (target, claim))| {
                let claim = if whole(at) { &claim.as_first() } else { claim };
                (
                    target.subject(),
                    reentrant::undo::<Reentrant>(*target, claim),
                )
            });
        first.give_back_all(undos.collect());
    };
    let give_back = || give_back_from(0, &|_| false);
    let sent = Instant::now();
    let granted = |reply: &MultiTaken| matches!(reply, MultiTaken::Taken(_));
    let (mut answers, failed) = nodes.split(nodes.acquire(&cmd, limit, granted));
    let fresh = match answers.pop() {
        Some(MultiTaken::Taken(fresh)) if fresh.len() == targets.len() => fresh,
        Some(MultiTaken::Busy(at)) if at < targets.len() => return Ok(Batch::Busy(at)),
        Some(MultiTaken::WrongKind(at, found)) if at < targets.len() => {
            return Err(Error::WrongKind {
                lock: targets[at].subject().clone(),
                found: names::kind_of(&found),
            });
        }
        Some(_) => {
            give_back();
            let short = redis::ParsingError::from("a reply without one entry per key".to_owned());
            return Err(Error::redis_at(&nodes.list()[0].name, short.into()));
        }
        None => {
            let err = nodes.no_quorum(failed);
            let err = targets[0].wrong_kind(err);
            if err.outcome_unknown() {
                give_back();
            }
            return Err(err);
        }
    };
    let now = Instant::now();
    let valid: Option<Vec<Instant>> = (claims.iter())
        .map(|claim| validity_end(sent, claim.lease).filter(|end| *end > now))
        .collect();
    let Some(valid) = valid else {
        give_back();
        return Ok(Batch::Slow);
    };
    // A lock whose earlier holds were gone: as a re-entry of that lock alone would, the
    // attempt is undone, its fresh hold taken away whole, and the loss reported (see
    // `reentrant::take`).
    let gone: Vec<usize> = (0..targets.len())
        .filter(|&at| fresh[at] && claims[at].held > 0)
        .collect();
    if let Some(&first) = gone.first() {
        give_back_from(0, &|at| fresh[at]);
        for &at in &gone {
            targets[at].lose(&claims[at].id);
        }
        return Err(targets[first].lost());
    }
    let grants = (claims.iter().zip(valid))
        .map(|(claim, valid_until)| {
            reentrant::grant::<Reentrant>(lease, claim, sent, valid_until, None)
        })
        .collect();
    Ok(Batch::Taken(grants))
}
