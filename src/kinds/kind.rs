//! The seam between the lock machine and the kinds of lock.
//!
//! A kind says how one attempt takes a hold on every node and what it grants, how a hold
//! is renewed and given back, what a guard carries, whether a guard may move to another
//! thread, and how its waiters wait: on which channel (or none), with which back-off, for
//! how long at most, and what they undo when they give up. It sees its lock through a
//! [`Call`]. Everything else — the acquisition quartet, deadlines and retries, pub/sub
//! waiting and hand-on, making a grant a hold, its watchdog, guards, loss reporting — is
//! written once, in the lock machine (`lock` and `lease`).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Cmd;

use crate::base::error::{Error, NodeError, Result};
use crate::base::held_by::HeldBy;
use crate::base::retry::Backoff;
use crate::kinds::call::Call;
use crate::kinds::holding::Holding;
use crate::kinds::renewal::Renewal;
use crate::kinds::slot::HoldId;
use crate::kinds::undo::Undo;
use crate::layout::names::Granted;
use crate::topology::quorum::Outcome;
use crate::transport::common;

/// A kind of lock: how a [`Lock`](crate::Lock) of it takes a hold, waits and renews, and
/// what its guard carries. Each kind is a type of its own, listed below as the trait's
/// implementors, and [`ThreadOwned`](crate::ThreadOwned) says which of them a thread owns.
/// The trait is sealed: its machinery is internal.
pub trait Kind: sealed::Machinery {}

/// What an attempt that took a hold grants: what the kind keeps for it and how long it
/// lasts. The lock machine makes it a hold: its holding, its place in the client's table of
/// thread-owned holds, its watchdog.
pub struct Grant<H> {
    /// What the kind keeps per hold, such as its token.
    pub(crate) held: H,
    /// Until when the hold is surely held.
    pub(crate) valid_until: Instant,
    /// The explicit lease it was taken with; `None`: the watchdog renews it, as `renew`
    /// says.
    pub(crate) lease: Option<Duration>,
    /// When the acquire was sent (the lease counts from then, and the first renewal is due
    /// a renew interval after it) and how the hold is renewed; `None` for a hold that
    /// nothing renews.
    pub(crate) renew: Option<(Instant, Arc<dyn Renewal>)>,
    /// For a hold its thread owns: its owner slot, and the holds the owner had before.
    pub(crate) slot: Option<(HoldId, u32)>,
}

impl<H> Grant<H> {
    /// Whether the watchdog renews the hold.
    pub(crate) fn watched(&self) -> bool {
        self.lease.is_none() && self.renew.is_some()
    }
}

/// A hold being given back, as the lock machine hands it to its kind.
pub struct Giving<'a, H> {
    pub(crate) holding: &'a Arc<Holding>,
    pub(crate) held: &'a H,
    /// For a hold its thread owns: the owner's count before this release, and the lease to
    /// leave on the holds that remain.
    pub(crate) count: Option<(u32, Duration)>,
}

/// What giving a hold back came to, for the lock machine to settle.
pub struct Given {
    /// Given back, or found gone; an error where too few nodes answered to tell.
    pub(crate) freed: Result<Freed>,
    /// The release, to send again in the background while the hold may live: it failed on
    /// some nodes in a way a later try may not (Redis unreachable or silent, a cluster slot
    /// moving).
    pub(crate) again: Option<Cmd>,
    /// The holds the owner keeps after this release were found gone.
    pub(crate) kept_gone: bool,
}

/// Whether a release found its hold.
pub enum Freed {
    /// Given back; the error of a release that reached too few of the nodes it was sent to.
    Done(Result<()>),
    /// Not held any more: found gone.
    Gone,
}

impl Given {
    /// What a release that ran once came to, with nothing to send again.
    pub(crate) fn once(freed: Result<Freed>) -> Self {
        Given {
            freed,
            again: None,
            kept_gone: false,
        }
    }
}

/// Why an attempt did not take the lock, and what its waiter waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy {
    /// How long the holder's lease has left; `None`: no expiry, or no holder.
    pub ttl: Option<Duration>,
    /// No holder: others are ahead of this waiter (a fair lock's queue), or what it asks
    /// for is not there (a counting semaphore's permits). Waited for without a known
    /// expiry and with no holder to explain.
    pub queued: bool,
    /// Where the attempt put its waiter in a queue: what a release's grant to this waiter
    /// names, so that a grant made before the attempt is known for one (a fair lock's).
    pub place: Option<u64>,
}

impl Busy {
    /// Held by someone else, whose lease has `ttl` left (`None`: no expiry).
    pub(crate) fn held(ttl: Option<Duration>) -> Busy {
        Busy {
            ttl,
            queued: false,
            place: None,
        }
    }

    /// Not held, but not this waiter's yet.
    pub(crate) fn queued() -> Busy {
        Busy {
            ttl: None,
            queued: true,
            place: None,
        }
    }
}

/// What one attempt on every node came to: for a kind, taken with a [`Grant`]; for the
/// lock machine, taken with the hold it makes of the grant.
pub enum Attempt<A> {
    Acquired(A),
    /// Held by someone else, or others are ahead of this waiter.
    Busy(Busy),
    /// Not taken for a reason another try may cure (granted too slowly, or earlier holds
    /// not confirmed on a quorum); retried after a pause within the deadline, and returned
    /// as the error when the deadline has passed.
    Retry(Error),
}

impl<A> Attempt<A> {
    /// This attempt, with what it took made into what `make` makes of it; its error when
    /// that fails.
    pub(crate) fn acquired<B>(self, make: impl FnOnce(A) -> Result<B>) -> Result<Attempt<B>> {
        Ok(match self {
            Attempt::Acquired(taken) => Attempt::Acquired(make(taken)?),
            Attempt::Busy(busy) => Attempt::Busy(busy),
            Attempt::Retry(err) => Attempt::Retry(err),
        })
    }

    /// What an attempt comes to that was neither taken nor found busy: too few nodes
    /// answered (an error), or a grant too slow or not confirmed (retried). `None` for the
    /// other outcomes, which the kind decides.
    pub(crate) fn unmet(
        target: &dyn Call,
        outcome: Outcome,
        failed: Vec<NodeError>,
        elapsed: Duration,
        lease: Duration,
    ) -> Option<Result<Self>> {
        let nodes = target.nodes();
        Some(match outcome {
            Outcome::NoQuorum => Err(nodes.no_quorum(failed).with_lock(target.subject())),
            Outcome::Slow => Ok(Attempt::Retry(Error::ValidityExhausted {
                lock: target.subject().clone(),
                elapsed,
                lease,
            })),
            // Earlier holds confirmed on too few nodes, but the failed ones may have them.
            Outcome::Unconfirmed => Ok(Attempt::Retry(
                nodes.no_quorum(failed).with_lock(target.subject()),
            )),
            _ => return None,
        })
    }
}

/// What one attempt of a kind owned by a random token (the token lock, an election) takes:
/// the lock, under a token of its own, for `lease`.
pub struct TokenClaim {
    pub(crate) token: String,
    pub(crate) lease: Duration,
}

impl TokenClaim {
    /// A fresh token, for a hold of `lease` (the client's lease by default).
    pub(crate) fn new(target: &dyn Call, lease: Option<Duration>) -> Self {
        TokenClaim {
            token: crate::layout::names::random_id(),
            lease: lease.unwrap_or(target.config().lease),
        }
    }
}

pub(crate) mod sealed {
    use super::*;

    /// What a kind implements; see the module docs.
    pub trait Machinery: Sized + Send + Sync + 'static {
        /// What a guard carries besides its holding: nothing, or its token.
        type Held: Send + Sync;
        /// `*const ()` for guards bound to the thread that took them, `()` for guards that
        /// may move between threads.
        type Affinity;
        /// Whether waiters poll at least every retry cap even with notifications: for
        /// layouts shared with libraries whose releases publish nothing.
        const POLLS: bool = false;
        /// Whether waiters subscribe to be woken by releases; a kind whose releases publish
        /// nothing only backs off.
        const SUBSCRIBES: bool = true;
        /// Whether a waiter woken for what it cannot use (it asks for more than a release
        /// gave) hands the wake-up to another waiter of its client, which may ask for less.
        const HANDS_ON: bool = false;
        /// The kind's name in metrics.
        const LABEL: &'static str;
        /// The Redis type of the kind's key, as `force_unlock.lua` names it: `"hash"`, or
        /// `"string"` for a `SET NX` lock.
        const STORED_AS: &'static str = "hash";

        /// What every acquisition of a handle asks for besides its lease, as the handle
        /// was set up: nothing for most kinds, a number of permits, a candidacy.
        type Request: Clone + Default + Send + Sync;

        /// What one attempt takes if it succeeds, named before it is sent: the owner's
        /// field and count, a token, a permit's id. Whatever becomes of the attempt's
        /// reply, what it may have taken can be given back by this name.
        type Claim;

        /// The claim of this thread's next attempt, for `request` and a hold of `lease`.
        fn claim(
            target: &dyn Call,
            request: &Self::Request,
            lease: Option<Duration>,
        ) -> Self::Claim;

        /// One round on every node: take a hold under `claim`, or learn why not. Rounds
        /// end by `limit`. Where it ends with an error after its command may have run
        /// ([`Error::outcome_unknown`]), the lock machine gives back what it may have
        /// taken through [`undo`](Self::undo); what an attempt knows it took and does
        /// not keep (granted too slowly, or on too few nodes) it gives back itself.
        fn attempt(
            target: &dyn Call,
            claim: &Self::Claim,
            lease: Option<Duration>,
            limit: Option<Instant>,
        ) -> Result<Attempt<Grant<Self::Held>>>;

        /// The give-back of what an attempt under `claim` may have taken: safe to run
        /// more than once, and a no-op where the attempt took nothing.
        fn undo(target: &dyn Call, claim: &Self::Claim) -> Undo;

        /// Gives `hold` back, as far as its kind's protocol goes: the lock machine has
        /// checked the client, taken it off the client's table (a thread-owned hold) or
        /// stopped its watchdog, and settles what the release found.
        fn release(target: &dyn Call, hold: &Giving<'_, Self::Held>) -> Given;

        /// How a waiter sleeps between attempts: by default the client's jittered retries.
        fn backoff(target: &dyn Call) -> Backoff {
            let config = target.config();
            Backoff::new(config.retry_base, config.retry_cap)
        }

        /// The channel this thread waits on for its turn: the lock's, or one of its own.
        fn wait_channel(target: &dyn Call) -> Cow<'_, [u8]> {
            Cow::Borrowed(target.channel())
        }

        /// The script that deletes the lock whoever holds it (or only the holder `forced`
        /// names), wakes its waiters and leaves a latch (see [`common::force_unlock`]): by default the lock's key if it holds
        /// [`STORED_AS`](Self::STORED_AS), woken on its channel with Redisson's unlock
        /// message (wakes one). A kind whose waiters listen elsewhere, or that may delete
        /// only in one mode, says so here.
        fn force_unlock_cmd(target: &dyn Call, key: &[u8], forced: &common::Forced<'_>) -> Cmd {
            common::force_unlock(key, target.channel(), "0", Self::STORED_AS, forced)
        }

        /// The longest a waiter may wait between two attempts, however long the holder's
        /// lease: a fair-lock waiter comes back before its place in the queue runs out.
        fn longest_wait(_: &dyn Call) -> Option<Duration> {
            None
        }

        /// What holds the lock, by one look at Redis within `limit`, for a waiter that
        /// explains its wait: by default the lock key's type, expiry and (for a hash) its
        /// first owner field. `None` when nothing answered or the key is gone.
        fn describe(
            target: &dyn Call,
            _: &Self::Request,
            limit: Option<Instant>,
        ) -> Option<HeldBy> {
            let key = target.key().ok()?;
            let nodes = target.nodes();
            let results = nodes.run_all::<(String, i64, Option<String>)>(&common::busy(key), limit);
            let (kind, ttl, holder) = results.into_iter().find_map(|result| {
                result
                    .map_err(|err| log::debug!("asking what holds {}: {err:#}", target.subject()))
                    .ok()
            })?;
            (kind != "none").then(|| HeldBy {
                key: String::from_utf8_lossy(key).into_owned(),
                found: crate::layout::names::kind_of(&kind).to_owned(),
                holder,
                ttl: u64::try_from(ttl).ok().map(Duration::from_millis),
            })
        }

        /// Whether this thread's waits for a hold of `lease` take grants on the release's
        /// word: a release that hands the lock straight to its waiter (the fair lock's
        /// direct hand-off). A waiter that would confirm a grant by an attempt anyway does
        /// not need its signal armed for them.
        fn takes_grants(_: &dyn Call, _lease: Option<Duration>) -> bool {
            false
        }

        /// A grant was received (see [`takes_grants`](Self::takes_grants)) by a waiter whose
        /// last attempt that found the lock busy was sent at `since` and put it at `place`
        /// ([`Busy::place`]). The hold, taken on the grant's word, if the grant shows it
        /// came after that attempt; `None` when the waiter is to confirm it by an attempt
        /// instead.
        fn granted(
            _: &dyn Call,
            _lease: Option<Duration>,
            _since: Instant,
            _place: Option<u64>,
            _grant: Granted,
        ) -> Option<Result<Attempt<Grant<Self::Held>>>> {
            None
        }

        /// Run when an acquisition ends without the lock (deadline, busy on a `try_lock`,
        /// error, a re-entry that found its hold lost) after an attempt that may have
        /// queued it: one that found the lock busy, or failed after it may have reached
        /// Redis. A fair-lock waiter leaves the queue.
        fn give_up(_: &dyn Call, _: &Self::Request) {}
    }
}
