//! The reentrant lock, Redisson's `RLock`: a hash whose field `"<client-uuid>:<thread-id>"`
//! counts the holds of its one owner, a thread of one client.

pub(crate) mod scripts;

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{Cmd, Value};

use crate::base::config::MAX_LEASE;
use crate::base::error::{Error, Result};
use crate::kinds::call::Call;
use crate::kinds::kind::Kind;
use crate::kinds::kind::{Attempt, Busy, Freed, Given, Giving, Grant, sealed::Machinery};
use crate::kinds::renewal::Renewal;
use crate::kinds::slot::{HoldId, Mode};
use crate::kinds::undo::Undo;
use crate::layout::names;
use crate::layout::owner::{current_thread, field};
use crate::topology::quorum::{Grants, Outcome, Verdict, validity_end};
use crate::transport::common::Released;
use scripts::FRESH;

/// The reentrant kind, Redisson's `RLock` layout: the lock is a Redis hash whose field
/// `"<client-uuid>:<thread-id>"` counts the holds of its one owner, so Java services using
/// Redisson share it. A hold belongs to the thread that took it (its guard is not `Send`);
/// that thread may take it again without waiting, and each hold is released on its own.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reentrant;

/// Refuses a kind that needs one node on a Redlock client, for `reason`.
pub(crate) fn one_node(target: &dyn Call, reason: &'static str) -> Result<()> {
    if target.nodes().list().len() > 1 {
        return Err(Error::Unsupported {
            lock: target.subject().clone(),
            reason,
        });
    }
    Ok(())
}

/// The lock machine's calls of a kind kept in the reentrant hash, for its `Machinery`
/// impl, which names the rest: the claim is one more hold of the owner's field, the
/// attempt takes it (once [`Hashed::refuse`] lets it), the undo gives back what the attempt
/// may have taken, and the release gives back one hold.
macro_rules! hashed_calls {
    () => {
        type Claim = $crate::kinds::reentrant::Claim;

        fn claim(
            target: &dyn $crate::kinds::call::Call,
            _: &(),
            lease: Option<std::time::Duration>,
        ) -> Self::Claim {
            $crate::kinds::reentrant::claim::<Self>(target, lease)
        }

        fn attempt(
            target: &dyn $crate::kinds::call::Call,
            claim: &Self::Claim,
            lease: Option<std::time::Duration>,
            limit: Option<std::time::Instant>,
        ) -> $crate::base::error::Result<
            $crate::kinds::kind::Attempt<$crate::kinds::kind::Grant<Self::Held>>,
        > {
            <Self as $crate::kinds::reentrant::Hashed>::refuse(target)?;
            $crate::kinds::reentrant::take::<Self>(target, claim, lease, limit)
        }

        fn undo(
            target: &dyn $crate::kinds::call::Call,
            claim: &Self::Claim,
        ) -> $crate::kinds::undo::Undo {
            $crate::kinds::reentrant::undo::<Self>(target, claim)
        }

        fn release(
            target: &dyn $crate::kinds::call::Call,
            hold: &$crate::kinds::kind::Giving<'_, Self::Held>,
        ) -> $crate::kinds::kind::Given {
            $crate::kinds::reentrant::release::<Self>(target, hold)
        }
    };
}
pub(crate) use hashed_calls;

impl Kind for Reentrant {}
impl ThreadOwned for Reentrant {}

impl Machinery for Reentrant {
    const LABEL: &'static str = "reentrant";

    type Held = ();
    type Affinity = *const ();
    type Request = ();

    hashed_calls!();
}

impl Hashed for Reentrant {
    fn acquire_cmd(_: &dyn Call, key: &[u8], lease: Duration, field: &str, held: u32) -> Cmd {
        scripts::acquire(key, lease, field, held)
    }

    fn grant(reply: Value) -> redis::RedisResult<Answer> {
        Ok(match redis::from_redis_value::<Option<i64>>(reply)? {
            None => Answer::Taken {
                fresh: false,
                token: None,
            },
            Some(FRESH) => Answer::Taken {
                fresh: true,
                token: None,
            },
            Some(ttl) => Answer::Busy { ttl, place: None },
        })
    }

    fn held(_: Option<u64>) -> Self::Held {}
}

/// A kind whose holds belong to the thread that took them, counted per thread in
/// Redisson's hash of `<client-uuid>:<thread-id>` → hold count: its [`Lock`](crate::Lock)
/// tells the current thread's [`hold_count`](crate::Lock::hold_count) and
/// [`is_held_by_current_thread`](crate::Lock::is_held_by_current_thread), and its
/// [`LockGuard`](crate::LockGuard) cannot move to another thread, since a release names
/// the thread that releases. The other kinds' holds belong to a token or a permit id. The
/// trait is sealed.
pub trait ThreadOwned: Kind + Hashed {}

/// The kinds kept in Redisson's reentrant hash — the reentrant, fenced and fair locks —
/// which differ only in their acquire and release scripts and what their guards carry.
pub trait Hashed: Machinery {
    /// Which of the owner's fields it counts.
    const MODE: Mode = Mode::Only;

    /// Whether a release that leaves holds of the owner sets their lease to the one it is
    /// given, so that their validity moves to match. Otherwise the release leaves their
    /// leases as they were and replies how long the longest lasts
    /// ([`Released::KeptFor`]); their validity can then only shorten.
    const RELEASE_SETS_LEASE: bool = true;

    /// This thread's field in the hash.
    fn field(target: &dyn Call) -> String {
        owner(target)
    }

    /// Refuses an attempt before anything is sent: where the kind needs one node (a
    /// fencing counter, a queue's order, a read-write lock's mode), or where what this
    /// thread holds already forbids it.
    fn refuse(_: &dyn Call) -> Result<()> {
        Ok(())
    }

    /// The watchdog's renewal of `field`'s holds, counted by `held` (a look at the client's
    /// hold table, made only when needed); with `restore`, a node that lost the key gets
    /// them back.
    fn renew_cmd(
        key: &[u8],
        lease: Duration,
        field: &str,
        held: &dyn Fn() -> u32,
        restore: bool,
    ) -> Cmd {
        scripts::renew(key, lease, field, if restore { held() } else { 0 })
    }

    /// One command per key that a renewal replying [`Renewed::Partly`] left to extend where
    /// that key is; none for a kind whose holds live in the hash alone.
    ///
    /// [`Renewed::Partly`]: crate::transport::common::Renewed::Partly
    fn stray_cmds(_key: &[u8], _lease: Duration, _field: &str, _held: u32) -> Vec<Cmd> {
        Vec::new()
    }

    /// One acquisition attempt for the owner `field`, who believes it has `held` holds.
    fn acquire_cmd(target: &dyn Call, key: &[u8], lease: Duration, field: &str, held: u32) -> Cmd;

    /// The release script for one call, with a latch of its own: a retry of this command
    /// after a lost reply reports the first attempt's release instead of "not ours". The
    /// last hold's release publishes the unlock message if it is to `wake` a waiter.
    fn release_cmd(target: &dyn Call, field: &str, held: u32, lease: Duration, wake: bool) -> Cmd {
        let key = target.shared_key();
        let latch = names::unlock_latch(&key, &names::random_id());
        let latch_ttl = target.config().latch_ttl();
        scripts::release(
            &key,
            target.channel(),
            &latch,
            lease,
            field,
            held,
            latch_ttl,
            wake,
        )
    }

    /// One node's reply to it.
    fn grant(reply: Value) -> redis::RedisResult<Answer>;
    /// What the guard of a hold granted with `token` carries.
    fn held(token: Option<u64>) -> Self::Held;
}

/// One node's answer to an acquisition.
pub enum Answer {
    /// Taken; `fresh` when the owner's earlier holds were gone from this node.
    Taken { fresh: bool, token: Option<u64> },
    /// Someone else's: the key's PTTL in milliseconds (-1 without expiry; -2 free, but
    /// others are ahead in a fair lock's queue), and where a fair lock's queue put the
    /// owner.
    Busy { ttl: i64, place: Option<u64> },
}

/// How many holds the current thread has, as Redis sees it (on a quorum of nodes).
pub(crate) fn hold_count<K: Hashed>(target: &dyn Call) -> Result<u32> {
    let key = target.open()?;
    let mut cmd = redis::cmd("HGET");
    cmd.arg(key).arg(K::field(target));
    let nodes = target.nodes();
    let counts = nodes.run_all_unhurried::<Option<u32>>(&cmd);
    // A key of another type is someone else's lock: no holds of ours.
    let counts = counts.into_iter().map(|count| match count {
        Err(err) if err.is_wrong_type() => Ok(0),
        count => count.map(Option::unwrap_or_default),
    });
    nodes
        .agreed(counts.collect())
        .map_err(|err| err.with_lock(target.subject()))
}

/// What one attempt of a hash-kept kind takes: one more hold of its owner's field.
pub struct Claim {
    pub(crate) id: HoldId,
    field: String,
    /// The holds the owner has before the attempt.
    pub(crate) held: u32,
    /// The lease the attempt sets.
    pub(crate) lease: Duration,
    /// When the claim was made, before the attempt was sent: from then on, the attempt
    /// may set the key's expiry to its lease.
    made: Instant,
}

impl Claim {
    /// This claim as the owner's first hold: its undo takes the hold away whole, for an
    /// attempt that found the owner's earlier holds gone.
    pub(crate) fn as_first(&self) -> Claim {
        Claim {
            id: self.id.clone(),
            field: self.field.clone(),
            held: 0,
            lease: self.lease,
            made: self.made,
        }
    }
}

/// The claim of this thread's next attempt on `target` for a hold of `lease`. A
/// watchdog-backed holding keeps the watchdog lease even when re-entered with an explicit
/// one, so a short explicit lease cannot outrun the renewals.
pub(crate) fn claim<K: Hashed>(target: &dyn Call, lease: Option<Duration>) -> Claim {
    let id: HoldId = (target.shared_key(), current_thread(), K::MODE);
    let (held, watchdog_running) = target.holds(&id);
    let lease = match lease {
        Some(lease) if !watchdog_running => lease,
        _ => target.config().lease,
    };
    let field = K::field(target);
    Claim {
        id,
        field,
        held,
        lease,
        made: Instant::now(),
    }
}

/// Sets the owner's count back to what it was before an attempt under `claim` (deleting
/// the key at 0) wherever the attempt may have counted. The attempt, and the undo where
/// holds remain, set the key's expiry to the claim's lease, so the holding of those can
/// count on no more than that from when the claim was made.
pub(crate) fn undo<K: Hashed>(target: &dyn Call, claim: &Claim) -> Undo {
    let made = claim.made;
    let wake = target.give_back_wakes();
    Undo {
        cmd: K::release_cmd(target, &claim.field, claim.held + 1, claim.lease, wake),
        lasts: claim.lease,
        slot: Some(claim.id.clone()),
        leaves_until: (claim.held > 0).then(|| validity_end(made, claim.lease).unwrap_or(made)),
    }
}

/// One round on every node: take a hold, or learn why not. Taken when a quorum granted it
/// with validity left (lease − elapsed − drift); otherwise whatever was known granted is
/// given back on every node (what failed nodes may have taken, the lock machine gives
/// back).
pub(crate) fn take<K: Hashed>(
    target: &dyn Call,
    claim: &Claim,
    lease: Option<Duration>,
    limit: Option<Instant>,
) -> Result<Attempt<Grant<K::Held>>> {
    let nodes = target.nodes();
    let Claim {
        id,
        field,
        held,
        lease: script_lease,
        ..
    } = claim;
    let (held, script_lease) = (*held, *script_lease);
    // The attempt sets the owner's count: a give-back still pending for it has no work.
    target.supersede(id);
    let cmd = K::acquire_cmd(target, &id.0, script_lease, field, held);
    let sent = Instant::now();
    let granted = |reply: &Value| matches!(K::grant(reply.clone()), Ok(Answer::Taken { .. }));
    let replies = (nodes.list().iter()).zip(nodes.acquire::<Value>(&cmd, limit, granted));
    let results = replies.map(|(node, reply)| match reply {
        Ok(reply) => K::grant(reply).map_err(|source| Error::redis_at(&node.name, source)),
        Err(err) if err.server_code() == Some("WRONGKIND") => Err(Error::WrongKind {
            lock: target.subject().clone(),
            found: names::kind_of(err.server_detail().unwrap_or_default().trim()),
        }),
        Err(err) => Err(err),
    });
    let (answers, failed) = nodes.split(results.collect());
    let elapsed = sent.elapsed();
    let valid_until = validity_end(sent, script_lease).filter(|end| *end > Instant::now());
    let taken = |fresh: bool| {
        answers
            .iter()
            .filter(move |reply| matches!(reply, Answer::Taken { fresh: f, .. } if *f == fresh))
    };
    let grants = Grants {
        kept: taken(false).count(),
        fresh: taken(true).count(),
        failed: failed.len(),
        of: nodes.list().len(),
        reentry: held > 0,
        valid: valid_until.is_some(),
    };
    let outcome = grants.outcome();
    if let (Outcome::Taken, Some(valid_until)) = (outcome, valid_until) {
        let token = taken(false)
            .filter_map(|reply| match reply {
                Answer::Taken { token, .. } => *token,
                Answer::Busy { .. } => None,
            })
            .max();
        let grant = grant::<K>(lease, claim, sent, valid_until, token);
        return Ok(Attempt::Acquired(grant));
    }
    if outcome == Outcome::Lost {
        // This thread held the lock before, and too few nodes still have its holds even
        // counting every node that failed as one that does: they are gone, and the code
        // around this re-entry was not protected all along. Undo this attempt, report the
        // loss and say so, rather than quietly taking a fresh hold.
        target.give_back(undo::<K>(target, &claim.as_first()));
        target.lose(id);
        return Err(target.lost());
    }
    let may_have_run = failed.iter().any(|f| f.error.may_have_run());
    let unmet = Attempt::unmet(target, outcome, failed, elapsed, script_lease);
    // Undo this attempt wherever it may have counted, leaving earlier holds, unless the
    // error returned leaves that to the lock machine.
    let machine_undoes = matches!(&unmet, Some(Err(err)) if err.outcome_unknown());
    if grants.needs_undo(may_have_run) && !machine_undoes {
        target.give_back(undo::<K>(target, claim));
    }
    if let Some(unmet) = unmet {
        return unmet;
    }
    // Busy: the lock may free up when the earliest of the holder's leases runs out.
    let ttl = answers
        .iter()
        .filter_map(|reply| match *reply {
            Answer::Busy { ttl, .. } if ttl >= 0 => {
                Some(Duration::from_millis(ttl as u64).min(MAX_LEASE))
            }
            _ => None,
        })
        .min();
    // A fair lock's "free, but others are ahead" (-2) is no holder at all.
    let queued = |reply: &Answer| matches!(reply, Answer::Busy { ttl: QUEUED, .. });
    let queued = ttl.is_none() && !answers.is_empty() && answers.iter().all(queued);
    let place = answers.iter().find_map(|reply| match *reply {
        Answer::Busy { place, .. } => place,
        Answer::Taken { .. } => None,
    });
    Ok(Attempt::Busy(Busy { ttl, queued, place }))
}

/// The busy reply of a fair lock that is free while others are ahead in its queue.
const QUEUED: i64 = -2;

/// The watched hold that a release granted to this thread (a fair lock's direct
/// hand-off), valid until `valid_until` as the grant lease alone keeps it, with its first
/// renewal due a third of the way there: that renewal confirms the grant, setting the
/// watchdog lease (a hold released before then needs none). `None` when the thread holds
/// the lock already by its own count (a grant is one hold, which its next attempt will
/// find) or the clock cannot say when the renewal is due.
pub(crate) fn take_granted<K: Hashed>(
    target: &dyn Call,
    valid_until: Instant,
) -> Option<Result<Attempt<Grant<K::Held>>>> {
    let id: HoldId = (target.shared_key(), current_thread(), K::MODE);
    if target.holds(&id).0 != 0 {
        return None;
    }
    let now = Instant::now();
    let confirm = now + valid_until.saturating_duration_since(now) / 3;
    // The watchdog renews a renew interval after the acquisition it is given.
    let since = confirm.checked_sub(target.config().renew_interval())?;
    let claim = Claim {
        id,
        field: K::field(target),
        held: 0,
        lease: target.config().lease,
        made: Instant::now(),
    };
    let grant = grant::<K>(None, &claim, since, valid_until, None);
    Some(Ok(Attempt::Acquired(grant)))
}

/// What an attempt under `claim`, sent at `sent`, grants: one more hold of the owner's
/// field, renewed by the watchdog unless taken with an explicit `lease`.
pub(crate) fn grant<K: Hashed>(
    lease: Option<Duration>,
    claim: &Claim,
    sent: Instant,
    valid_until: Instant,
    token: Option<u64>,
) -> Grant<K::Held> {
    let renew = lease.is_none().then(|| {
        let renewal = Renew::<K> {
            id: claim.id.clone(),
            field: claim.field.clone(),
            kind: PhantomData,
        };
        (sent, Arc::new(renewal) as Arc<dyn Renewal>)
    });
    Grant {
        held: K::held(token),
        valid_until,
        lease,
        renew,
        slot: Some((claim.id.clone(), claim.held)),
    }
}

/// Gives back one hold of the owner's field, whose count before it and the lease to leave
/// on the rest the lock machine read off its table.
pub(crate) fn release<K: Hashed>(target: &dyn Call, hold: &Giving<'_, K::Held>) -> Given {
    let nodes = target.nodes();
    let holding = hold.holding;
    let Some((held, lease)) = hold.count else {
        return Given::once(Err(target.not_held()));
    };
    let cmd = K::release_cmd(target, &K::field(target), held, lease, true);
    // Not while a renewal round is on its way: it could put back what this deletes. Where
    // holds remain, they now expire `lease` after this release, or, for a kind whose
    // release leaves their leases alone, when the reply says.
    let (tally, failed, gone) = holding.lease_round(lease, || {
        let sent = Instant::now();
        let (answers, failed) =
            nodes.split(nodes.run_all_until::<Released>(&cmd, holding.valid_until()));
        let tally = nodes.tally(
            answers.iter().filter(|&&r| r != Released::NotOurs).count(),
            &failed,
        );
        let kept = held > 1 && tally.verdict() == Verdict::Yes;
        // A node that did not answer may have run the release, which set the lease of the
        // holds that remain: they can count on no more than that lease from when it was sent.
        // A release that leaves them their own leases (read holds) may have removed the one
        // that lasted longest, and this client keeps no other's end: they can count on
        // nothing. Watched ones too: the release may have removed a watched hold's lease
        // and left a short explicit one, which can run out, and the key with it, before
        // the watchdog (held back while this round is on its way) renews.
        if held > 1 && failed.iter().any(|f| f.error.may_have_run()) {
            if K::RELEASE_SETS_LEASE {
                holding.shorten_to(validity_end(sent, lease).unwrap_or(sent));
            } else {
                holding.shorten_to(sent);
            }
        }
        let mut gone = false;
        if kept && !K::RELEASE_SETS_LEASE {
            holding.shorten_to(kept_until(&answers, sent));
            // The lock was freed while this owner believed it kept holds: their leases had
            // all run out, and they are gone.
            let remaining = answers
                .iter()
                .filter(|&&r| matches!(r, Released::Kept | Released::KeptFor(_)));
            gone = nodes.tally(remaining.count(), &failed).verdict() == Verdict::No;
        }
        ((tally, failed, gone), kept && K::RELEASE_SETS_LEASE)
    });
    let transient = failed.iter().any(|f| f.error.is_transient());
    let freed = match tally.verdict() {
        Verdict::Yes => Ok(Freed::Done(nodes.partial_release(
            tally.yes,
            failed,
            target.subject(),
        ))),
        // Too few answers to tell whether a quorum still has our holds.
        Verdict::Unknown => Err(nodes.no_quorum(failed).with_lock(target.subject())),
        // Too many nodes no longer have our field for a quorum to: the holds expired or
        // were deleted.
        Verdict::No => Ok(Freed::Gone),
    };
    Given {
        again: (tally.verdict() != Verdict::No && transient).then_some(cmd),
        freed,
        kept_gone: gone,
    }
}

/// Until when the holds that a release left last, by the nodes' replies to it, sent at
/// `sent`: the soonest end among the nodes that kept them; now at once where a node kept
/// them without saying for how long, or freed the lock.
fn kept_until(answers: &[Released], sent: Instant) -> Instant {
    let ends = answers.iter().filter_map(|answer| match *answer {
        Released::NotOurs => None,
        Released::KeptFor(left) => Some(validity_end(sent, Duration::from_millis(left))),
        Released::Kept | Released::Deleted => Some(None),
    });
    ends.map(|end| end.unwrap_or(sent)).min().unwrap_or(sent)
}

/// This thread's owner field in the hash.
pub(crate) fn owner(target: &dyn Call) -> String {
    field(target.client_id(), current_thread())
}

/// What the watchdog renews for a holding of a hash-kept kind: this thread's field.
struct Renew<K> {
    id: HoldId,
    field: String,
    kind: PhantomData<fn() -> K>,
}

impl<K: Hashed> Renewal for Renew<K> {
    fn command(&self, lease: Duration, restore: bool, held: &dyn Fn() -> u32) -> Cmd {
        K::renew_cmd(&self.id.0, lease, &self.field, held, restore)
    }

    fn strays(&self, lease: Duration, held: u32) -> Vec<Cmd> {
        K::stray_cmds(&self.id.0, lease, &self.field, held)
    }

    /// The holds of the field past `held`: the undo of a first hold deletes the field.
    fn undo(&self, target: &dyn Call, held: u32) -> Undo {
        let whole = Claim {
            held,
            lease: target.config().lease,
            id: self.id.clone(),
            field: self.field.clone(),
            made: Instant::now(),
        };
        undo::<K>(target, &whole)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holds_a_release_left_last_no_longer_than_the_soonest_reply_says() {
        let sent = Instant::now();
        let second = Duration::from_secs(1);
        let one = kept_until(&[Released::KeptFor(10_000)], sent);
        assert!(
            one > sent + 9 * second && one < sent + 10 * second,
            "less the drift"
        );
        let soonest = [
            Released::KeptFor(10_000),
            Released::KeptFor(1_000),
            Released::NotOurs,
        ];
        assert!(kept_until(&soonest, sent) < sent + second);
        // Kept without saying for how long, freed, or nothing kept: no validity left.
        for unknown in [Released::Kept, Released::Deleted, Released::KeptFor(0)] {
            assert_eq!(
                kept_until(&[Released::KeptFor(10_000), unknown], sent),
                sent
            );
        }
        assert_eq!(kept_until(&[Released::NotOurs], sent), sent);
    }
}
