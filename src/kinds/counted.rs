//! The permits of a semaphore without leases as a kind, Redisson's `RSemaphore`: one string
//! counting the permits available, taken by `DECRBY` and given back by `INCRBY`. Nothing
//! records who holds what, so a holder that crashes keeps its permits for ever.
//!
//! A lost reply must neither leave permits taken with no guard to hold them nor give them
//! back twice. Each attempt is named before it is sent (its claim) and, when it takes
//! permits, records their number in a marker key of that name in the same script; its
//! undo gives back what the marker records and deletes it, once, or marks an attempt that
//! has not come yet undone, so that it takes nothing when it comes. A release leaves a latch
//! that makes its retry a no-op, and deletes the marker of the attempt whose permits it
//! gives back.

pub(crate) mod scripts;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::base::error::{Error, Result};
use crate::base::held_by::HeldBy;
use crate::kinds::call::Call;
use crate::kinds::kind::Kind;
use crate::kinds::kind::{Attempt, Busy, Freed, Given, Giving, Grant, sealed::Machinery};
use crate::kinds::undo::Undo;
use crate::layout::names;
use crate::transport::node::Node;

/// Most permits one call may take, give back or add.
pub(crate) const MAX_PERMITS: u64 = 1 << 40;

/// Most permits, above or below zero, the count may come to: well within what a script's
/// numbers hold exactly.
pub(crate) const MAX_TOTAL: u64 = 1 << 50;

/// The permits of a [`CountingSemaphore`](crate::CountingSemaphore): the kind behind its
/// [`CountedPermits`](crate::CountedPermits). Its waiters are woken by the number of
/// permits a release publishes, and poll at the client's retry cap besides.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counted;

/// What a guard of counted permits carries: how many it took, under which claim, and when
/// (its marker lasts [`marker_ttl`] from then).
pub struct CountedHeld {
    pub(crate) count: u64,
    claim: String,
    taken: Instant,
}

/// What one attempt takes: `count` permits, recorded under the marker named after `id`.
pub struct CountedClaim {
    id: String,
    count: u64,
}

/// The one node of the client, or [`Error::Unsupported`] on Redlock.
pub(crate) fn node(target: &dyn Call) -> Result<&Arc<Node>> {
    match target.nodes().list() {
        [node] => Ok(node),
        _ => Err(Error::Unsupported {
            lock: target.subject().clone(),
            reason: "a semaphore needs one count, and Redlock's masters each keep their own",
        }),
    }
}

/// How long an attempt's undo is tried, in the background too, and its marker lasts, at
/// least. Permits taken never expire, so an attempt held up on its way (a partition, a
/// stalled proxy) that arrives after its undo gave up, or after an "undone" marker lapsed,
/// would keep its permits for ever. An hour outlasts the longest a request sent on a
/// connection can still arrive through TCP: Linux gives up retransmitting after about
/// 15 minutes (`tcp_retries2`, 924.6 s by default, per tcp(7)).
const UNDO_HORIZON: Duration = Duration::from_secs(3600);

/// How long an attempt's marker lasts: as long as its undo may be tried (see
/// [`UNDO_HORIZON`]), and never less than the client's lease or a release's latch.
fn marker_ttl(target: &dyn Call) -> Duration {
    let config = target.config();
    config.lease.max(config.latch_ttl()).max(UNDO_HORIZON)
}

/// How long a guard's marker is surely still there, by this client's clock: its life less
/// a minute for the server's. Within it, a release finding no marker knows that the
/// attempt's undo gave the permits back first; past it, the marker may have lapsed.
fn marker_surely_there(target: &dyn Call) -> Duration {
    marker_ttl(target).saturating_sub(Duration::from_secs(60))
}

/// Adds `delta` permits at `key` (taking them away below zero), waking as many waiters,
/// under a latch of its own so that a retry after a lost reply counts once; with `marker`,
/// the release of the permits an attempt took. Returns the number available after.
pub(crate) fn add(target: &dyn Call, delta: i64, marker: Option<(&[u8], bool)>) -> Result<i64> {
    let key = target.begin()?;
    node(target)?;
    let latch = names::unlock_latch(key, &names::random_id());
    let channel = names::semaphore_channel(key);
    let latch_ttl = target.config().latch_ttl();
    let cmd = scripts::csem_add((key, &latch, marker), &channel, delta, latch_ttl, MAX_TOTAL);
    let nodes = target.nodes();
    let reply = nodes.agreed(nodes.run_all_unhurried::<i64>(&cmd));
    reply.map_err(|err| match err.server_code() {
        Some("OVERFLOW") => {
            let total = err.server_detail().unwrap_or_default().trim().to_owned();
            let reason = format!("would take the count past ±{MAX_TOTAL}, to {total}");
            target.invalid_argument("permits", reason)
        }
        _ => target.wrong_kind(err),
    })
}

impl Kind for Counted {}

impl Machinery for Counted {
    const LABEL: &'static str = "counting_semaphore";
    const HANDS_ON: bool = true;

    type Held = CountedHeld;
    type Affinity = ();
    /// How many permits each attempt takes, as the handle asks (1 to 2^40).
    type Request = u64;
    type Claim = CountedClaim;

    fn claim(_: &dyn Call, count: &u64, _: Option<Duration>) -> CountedClaim {
        CountedClaim {
            id: names::random_id(),
            count: *count,
        }
    }

    fn undo(target: &dyn Call, claim: &CountedClaim) -> Undo {
        let key = target.shared_key();
        let marker = names::counting_taken(&key, &claim.id);
        Undo {
            cmd: scripts::csem_undo(
                &key,
                &marker,
                &names::semaphore_channel(&key),
                marker_ttl(target),
            ),
            lasts: marker_ttl(target),
            slot: None,
            leaves_until: None,
        }
    }

    fn attempt(
        target: &dyn Call,
        claim: &CountedClaim,
        _: Option<Duration>,
        limit: Option<Instant>,
    ) -> Result<Attempt<Grant<CountedHeld>>> {
        let node = node(target)?;
        let key = target.key()?;
        let marker = names::counting_taken(key, &claim.id);
        let cmd = scripts::csem_acquire(key, &marker, claim.count, marker_ttl(target));
        let end = limit.unwrap_or_else(|| Instant::now() + target.config().response_timeout);
        let taken: i64 = node.run(&cmd, end).map_err(|err| target.wrong_kind(err))?;
        if taken != 1 {
            // Too few permits, for no known time: waited for as a queued waiter, woken by a
            // release or polling at the retry cap, with no warning of a holder for ever.
            return Ok(Attempt::Busy(Busy::queued()));
        }
        // Nothing expires: the permits are held until released.
        let far = Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600);
        Ok(Attempt::Acquired(Grant {
            held: CountedHeld {
                count: claim.count,
                claim: claim.id.clone(),
                taken: Instant::now(),
            },
            valid_until: far,
            lease: None,
            renew: None,
            slot: None,
        }))
    }

    fn release(target: &dyn Call, hold: &Giving<'_, CountedHeld>) -> Given {
        let key = match target.begin() {
            Ok(key) => key,
            Err(err) => return Given::once(Err(err)),
        };
        let marker = names::counting_taken(key, &hold.held.claim);
        let count = i64::try_from(hold.held.count).unwrap_or(i64::MAX);
        let alive = hold.held.taken.elapsed() < marker_surely_there(target);
        let released = add(target, count, Some((&marker, alive))).map(drop);
        // Permits never expire: a release that Redis may not have run (unreachable, no
        // reply, its slot moving) is made sure of by the attempt's own undo, which gives
        // back what the marker still records, once, and nothing if the release ran (it
        // deleted the marker), in the background while the marker is surely there. The
        // release, if it comes later (held up on its way), then finds no marker, or one a
        // retry of the undo left "undone", and adds nothing.
        if let Err(err) = &released
            && err.is_transient()
        {
            let held = &hold.held;
            let claim = CountedClaim {
                id: held.claim.clone(),
                count: held.count,
            };
            let mut undo = Self::undo(target, &claim);
            undo.lasts = marker_surely_there(target).saturating_sub(held.taken.elapsed());
            if !undo.lasts.is_zero() {
                log::info!(
                    "{}: a release failed ({err:#}); its permits are given back by the \
                     attempt's undo instead",
                    target.subject()
                );
                target.give_back_later(undo);
            }
        }
        Given::once(released.map(|()| Freed::Done(Ok(()))))
    }

    fn wait_channel(target: &dyn Call) -> Cow<'_, [u8]> {
        Cow::Owned(names::semaphore_channel(&target.shared_key()))
    }

    fn describe(target: &dyn Call, count: &u64, limit: Option<Instant>) -> Option<HeldBy> {
        let key = target.key().ok()?;
        let node = node(target).ok()?;
        let end = limit.unwrap_or_else(|| Instant::now() + target.config().response_timeout);
        let cmd = scripts::csem_read(key, scripts::CsemRead::Get);
        let available: i64 = node
            .run(&cmd, end)
            .map_err(|err| log::debug!("asking about {}: {err:#}", target.subject()))
            .ok()?;
        Some(HeldBy {
            key: String::from_utf8_lossy(key).into_owned(),
            found: format!("{available} permits available, {count} asked for"),
            holder: None,
            ttl: None,
        })
    }
}
