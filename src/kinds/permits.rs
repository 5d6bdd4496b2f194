//! The leased semaphore's permits as a kind, Redisson's `RPermitExpirableSemaphore`: a
//! string counting the permits available, and a sorted set of the held ones by when their
//! leases end. Each acquisition takes one permit under an id of its own, so a permit is
//! owned by its id, not by a thread.

pub(crate) mod scripts;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Cmd;

use crate::base::config::check_lease;
use crate::base::error::{Error, Result};
use crate::base::held_by::HeldBy;
use crate::kinds::call::Call;
use crate::kinds::holding::Holding;
use crate::kinds::kind::Kind;
use crate::kinds::kind::{Attempt, Busy, Freed, Given, Giving, Grant, sealed::Machinery};
use crate::kinds::renewal::Renewal;
use crate::kinds::undo::Undo;
use crate::layout::names;
use crate::topology::quorum::validity_end;
use crate::transport::common::Renewed;

/// The permits of a [`LeasedSemaphore`](crate::LeasedSemaphore): the kind behind its
/// [`LeasedPermit`](crate::LeasedPermit)s. A busy attempt waits at most until the first held lease
/// ends, when that permit comes back without a message.
#[derive(Debug, Clone, Copy, Default)]
pub struct Permits;

/// What a permit carries.
pub struct PermitHeld {
    id: u128,
}

impl PermitHeld {
    /// The permit's id as 32 lowercase hex digits, as Redisson shows them.
    pub(crate) fn id(&self) -> String {
        names::hex_id(self.id)
    }
}

/// The semaphore's keys and channel: permits, held permits, channel.
fn keys(target: &dyn Call) -> Result<Keys> {
    Ok(keys_of(target.key()?))
}

type Keys = (Vec<u8>, Vec<u8>, Vec<u8>);

fn keys_of(key: &[u8]) -> Keys {
    (
        key.to_vec(),
        names::semaphore_timeouts(key),
        names::semaphore_channel(key),
    )
}

impl Kind for Permits {}

impl Machinery for Permits {
    const LABEL: &'static str = "semaphore";

    type Held = PermitHeld;
    type Affinity = ();
    type Request = ();

    type Claim = Claimed;

    fn claim(target: &dyn Call, _: &(), lease: Option<Duration>) -> Claimed {
        Claimed {
            id: rand::random(),
            lease: lease.unwrap_or(target.config().lease),
        }
    }

    fn undo(target: &dyn Call, claim: &Claimed) -> Undo {
        let key = target.shared_key();
        Undo {
            cmd: release_cmd(target, &keys_of(&key), claim.id),
            lasts: claim.lease,
            slot: None,
            leaves_until: None,
        }
    }

    fn attempt(
        target: &dyn Call,
        claim: &Claimed,
        lease: Option<Duration>,
        limit: Option<Instant>,
    ) -> Result<Attempt<Grant<PermitHeld>>> {
        let [node] = target.nodes().list() else {
            return Err(Error::Unsupported {
                lock: target.subject().clone(),
                reason: "a semaphore needs one count, and Redlock's masters each keep their own",
            });
        };
        let (key, timeouts, channel) = keys(target)?;
        let (id, script_lease) = (claim.id, claim.lease);
        let cmd = scripts::semaphore_acquire(
            (&key, &timeouts, &channel),
            &id.to_be_bytes(),
            script_lease,
            true,
        );
        let sent = Instant::now();
        let deadline = limit.unwrap_or_else(|| Instant::now() + target.config().response_timeout);
        let (taken, ends): (i64, i64) =
            (node.run(&cmd, deadline)).map_err(|err| target.wrong_kind(err))?;
        if taken != 1 {
            let ends = u64::try_from(ends).ok().map(Duration::from_millis);
            return Ok(Attempt::Busy(Busy::held(ends)));
        }
        let Some(valid_until) =
            validity_end(sent, script_lease).filter(|end| *end > Instant::now())
        else {
            target.give_back(Self::undo(target, claim));
            return Ok(Attempt::Retry(Error::ValidityExhausted {
                lock: target.subject().clone(),
                elapsed: sent.elapsed(),
                lease: script_lease,
            }));
        };
        Ok(Attempt::Acquired(grant(
            target,
            lease,
            claim,
            sent,
            valid_until,
        )))
    }

    fn release(target: &dyn Call, hold: &Giving<'_, PermitHeld>) -> Given {
        let cmd = match keys(target) {
            Ok(keys) => release_cmd(target, &keys, hold.held.id),
            Err(err) => return Given::once(Err(err)),
        };
        let nodes = target.nodes();
        let holding = hold.holding;
        let released = holding
            .exclusively(|| nodes.agreed(nodes.run_all_until::<i64>(&cmd, holding.valid_until())));
        let transient = released.as_ref().err().is_some_and(Error::is_transient);
        Given {
            freed: match released.map_err(|err| err.with_lock(target.subject())) {
                Ok(1) => Ok(Freed::Done(Ok(()))),
                Ok(_) => Ok(Freed::Gone),
                Err(err) => Err(err),
            },
            again: transient.then_some(cmd),
            kept_gone: false,
        }
    }

    fn wait_channel(target: &dyn Call) -> Cow<'_, [u8]> {
        Cow::Owned(names::semaphore_channel(&target.shared_key()))
    }

    fn describe(target: &dyn Call, _: &(), limit: Option<Instant>) -> Option<HeldBy> {
        let (key, timeouts, _) = keys(target).ok()?;
        let [node] = target.nodes().list() else {
            return None;
        };
        let end = limit.unwrap_or_else(|| Instant::now() + target.config().response_timeout);
        let cmd = scripts::semaphore_busy(&key, &timeouts);
        let (kind, available, held, ends): (String, i64, u64, i64) = node
            .run(&cmd, end)
            .map_err(|err| log::debug!("asking about {}: {err:#}", target.subject()))
            .ok()?;
        let found = match (kind.as_str(), available, held) {
            (_, -1, _) => format!("a {kind} that is no number of permits"),
            ("none", _, 0) => {
                "no permits: they were never set (try_set_permits or set_permits sets them)"
                    .to_owned()
            }
            (_, _, 0) => format!("{available} permits available and none held"),
            _ => format!("{available} permits available and {held} held"),
        };
        Some(HeldBy {
            key: String::from_utf8_lossy(&key).into_owned(),
            found,
            holder: None,
            ttl: u64::try_from(ends).ok().map(Duration::from_millis),
        })
    }
}

/// What one attempt takes: a permit, under an id of its own, for `lease`.
pub struct Claimed {
    id: u128,
    lease: Duration,
}

/// The release of the permit `id`, with a latch of its own.
fn release_cmd(target: &dyn Call, (key, timeouts, channel): &Keys, id: u128) -> Cmd {
    let latch = names::unlock_latch(key, &names::random_id());
    let latch_ttl = target.config().latch_ttl();
    scripts::semaphore_release(
        (key, timeouts, channel),
        &latch,
        &id.to_be_bytes(),
        latch_ttl,
    )
}

/// Gives the permit `id` back, whoever holds it: [`Error::NotHeld`] when it was not held.
pub(crate) fn release_id(target: &dyn Call, id: u128) -> Result<()> {
    let cmd = release_cmd(target, &keys(target)?, id);
    let nodes = target.nodes();
    let released = nodes.agreed(nodes.run_all_unhurried::<i64>(&cmd));
    match released.map_err(|err| err.with_lock(target.subject()))? {
        1 => Ok(()),
        _ => Err(target.not_held()),
    }
}

/// Sets the remaining lease of the held permit `held`, as `holding`, to `lease`:
/// [`Error::Lost`] when the permit is gone or its lease had run out.
pub(crate) fn extend(
    target: &dyn Call,
    holding: &Holding,
    held: &PermitHeld,
    lease: Duration,
) -> Result<()> {
    check_lease(lease).map_err(|reason| target.invalid_argument("lease", reason))?;
    target.begin()?;
    if holding.is_lost() {
        return Err(target.found_lost(holding));
    }
    let [node] = target.nodes().list() else {
        return Err(target.lost());
    };
    let timeouts = names::semaphore_timeouts(&target.shared_key());
    let cmd = scripts::semaphore_renew(&timeouts, &held.id.to_be_bytes(), lease);
    let end = Instant::now() + target.config().response_timeout;
    let renewed = holding.lease_round(lease, || {
        let renewed = node.run_settling::<Renewed>(&cmd, end, holding.valid_until());
        let kept = matches!(renewed, Ok(Renewed::Kept));
        (renewed, kept)
    });
    match renewed.map_err(|err| err.with_lock(target.subject()))? {
        Renewed::Kept => Ok(()),
        _ => Err(target.found_lost(holding)),
    }
}

/// What an attempt under `claim`, sent at `sent`, grants: the permit, renewed by the
/// watchdog unless taken with an explicit `lease`.
fn grant(
    target: &dyn Call,
    lease: Option<Duration>,
    claim: &Claimed,
    sent: Instant,
    valid_until: Instant,
) -> Grant<PermitHeld> {
    let id = claim.id;
    let renew = lease.is_none().then(|| {
        let timeouts = names::semaphore_timeouts(&target.shared_key());
        (sent, Arc::new(Renew { timeouts, id }) as Arc<dyn Renewal>)
    });
    Grant {
        held: PermitHeld { id },
        valid_until,
        lease,
        renew,
        slot: None,
    }
}

/// What the watchdog renews for a permit: its lease in the sorted set.
struct Renew {
    timeouts: Vec<u8>,
    id: u128,
}

impl Renewal for Renew {
    fn command(&self, lease: Duration, _: bool, _: &dyn Fn() -> u32) -> Cmd {
        scripts::semaphore_renew(&self.timeouts, &self.id.to_be_bytes(), lease)
    }

    fn undo(&self, target: &dyn Call, _: u32) -> Undo {
        let claim = Claimed {
            id: self.id,
            lease: target.config().lease,
        };
        Permits::undo(target, &claim)
    }
}
