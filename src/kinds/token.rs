//! The token lock: `SET key token NX PX lease`, the layout of redis-py's `Lock`, redsync and
//! node-redlock. Owned by a random token, not by a thread, so its guard may move.

pub(crate) mod scripts;

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{Cmd, Value};

use crate::base::config::check_lease;
use crate::base::error::{Error, NodeError, Result};
use crate::kinds::call::Call;
use crate::kinds::holding::Holding;
use crate::kinds::kind::Kind;
use crate::kinds::kind::{
    Attempt, Busy, Freed, Given, Giving, Grant, TokenClaim, sealed::Machinery,
};
use crate::kinds::renewal::Renewal;
use crate::kinds::undo::Undo;
use crate::layout::names;
use crate::topology::quorum::{Grants, Outcome, Verdict, validity_end};
use crate::transport::common::{Released, Renewed};
use crate::transport::scripts::millis;

/// The token kind: the lock is a Redis string holding its owner's token, set with `SET key
/// token NX PX lease`, the layout redis-py's `Lock`, redsync and node-redlock use, so a
/// service using any of them on the same key excludes and is excluded.
///
/// Not reentrant: a second `lock()` on a held token lock waits like anyone else. The hold
/// belongs to its token, drawn from a CSPRNG, not to a thread, so its guard is `Send`: a job
/// may take the lock on one thread and release it on another. Releasing and
/// [extending](crate::LockGuard::extend) compare the token in Lua, so nobody releases
/// another's hold.
///
/// Our releases wake our waiters through pub/sub; a foreign library's release publishes
/// nothing, so a waiter also retries on its jittered loop, at least every retry cap.
#[derive(Debug, Clone, Copy, Default)]
pub struct Token;

/// What a token guard carries.
pub struct TokenHeld {
    token: String,
}

impl Kind for Token {}

impl Machinery for Token {
    const LABEL: &'static str = "token";
    const STORED_AS: &'static str = "string";

    type Held = TokenHeld;
    type Affinity = ();
    type Request = ();
    const POLLS: bool = true;

    type Claim = TokenClaim;

    fn claim(target: &dyn Call, _: &(), lease: Option<Duration>) -> TokenClaim {
        TokenClaim::new(target, lease)
    }

    fn undo(target: &dyn Call, claim: &TokenClaim) -> Undo {
        Undo {
            cmd: release_cmd(target, &claim.token, target.give_back_wakes()),
            lasts: claim.lease,
            slot: None,
            leaves_until: None,
        }
    }

    fn attempt(
        target: &dyn Call,
        claim: &TokenClaim,
        lease: Option<Duration>,
        limit: Option<Instant>,
    ) -> Result<Attempt<Grant<TokenHeld>>> {
        let nodes = target.nodes();
        let key = target.key()?;
        let (token, script_lease) = (&claim.token, claim.lease);
        let mut cmd = Cmd::with_capacity(6, key.len() + 64);
        cmd.arg("SET")
            .arg(key)
            .arg(token)
            .arg("NX")
            .arg("PX")
            .arg(millis(script_lease));
        let sent = Instant::now();
        let granted = |reply: &Value| *reply == Value::Okay;
        let replies = nodes.acquire::<Value>(&cmd, limit, granted);
        let kept = replies
            .iter()
            .filter(|r| matches!(r, Ok(Value::Okay)))
            .count();
        let failed = replies.iter().filter(|r| r.is_err()).count();
        let first = grants(replies.len(), kept, failed, sent, script_lease);
        let round = match first.outcome() {
            Outcome::Taken => Round {
                grants: first,
                failed: Vec::new(),
                probe: Vec::new(),
                wrong_kind: None,
                unanswered: None,
            },
            _ => probe(target, token, replies, sent, script_lease, limit)?,
        };
        let outcome = round.grants.outcome();
        let valid_until = validity_end(sent, script_lease).filter(|end| *end > Instant::now());
        if let (Outcome::Taken, Some(valid_until)) = (outcome, valid_until) {
            return Ok(Attempt::Acquired(grant(
                target,
                lease,
                claim,
                sent,
                valid_until,
            )));
        }
        let may_have_run = !round.failed.is_empty();
        let elapsed = sent.elapsed();
        let unmet = Attempt::unmet(target, outcome, round.failed, elapsed, script_lease);
        // What the error returned leaves to the lock machine to give back, it gives back.
        let machine_undoes =
            round.wrong_kind.is_none() && matches!(&unmet, Some(Err(err)) if err.outcome_unknown());
        if round.grants.needs_undo(may_have_run) && !machine_undoes {
            target.give_back(Self::undo(target, claim));
        }
        if let Some(found) = round.wrong_kind {
            return Err(Error::WrongKind {
                lock: target.subject().clone(),
                found,
            });
        }
        unmet.unwrap_or_else(|| match round.unanswered {
            // Not busy: a try after a pause may find it free.
            Some(err) => Ok(Attempt::Retry(err.with_lock(target.subject()))),
            None => Ok(busy(&round.probe)),
        })
    }

    fn release(target: &dyn Call, hold: &Giving<'_, TokenHeld>) -> Given {
        let nodes = target.nodes();
        let cmd = release_cmd(target, &hold.held.token, true);
        let settle = hold.holding.valid_until();
        let (answers, failed) = hold
            .holding
            .exclusively(|| nodes.split(nodes.run_all_until::<Released>(&cmd, settle)));
        let tally = nodes.tally(
            answers.iter().filter(|&&r| r == Released::Deleted).count(),
            &failed,
        );
        let transient = failed.iter().any(|f| f.error.is_transient());
        let again = (tally.verdict() != Verdict::No && transient).then_some(cmd);
        let freed = match tally.verdict() {
            Verdict::Yes => Ok(Freed::Done(nodes.partial_release(
                tally.yes,
                failed,
                target.subject(),
            ))),
            Verdict::Unknown => Err(nodes.no_quorum(failed).with_lock(target.subject())),
            Verdict::No => Ok(Freed::Gone),
        };
        Given {
            freed,
            again,
            kept_gone: false,
        }
    }
}

impl TokenHeld {
    pub(crate) fn token(&self) -> &str {
        &self.token
    }
}

/// Sets the remaining lease of the hold `held`, as `holding`, to `lease` if the key still
/// holds its token on a quorum of nodes; [`Error::Lost`] when it no longer does.
pub(crate) fn extend(
    target: &dyn Call,
    holding: &Holding,
    held: &TokenHeld,
    lease: Duration,
) -> Result<()> {
    check_lease(lease).map_err(|reason| target.invalid_argument("lease", reason))?;
    let key = target.begin()?;
    if holding.is_lost() {
        return Err(target.found_lost(holding));
    }
    let nodes = target.nodes();
    let cmd = scripts::token_renew(key, &held.token, lease, false);
    let (tally, failed) = holding.lease_round(lease, || {
        let (answers, failed) =
            nodes.split(nodes.run_all_until::<Renewed>(&cmd, holding.valid_until()));
        let tally = nodes.tally(
            answers.iter().filter(|&&r| r == Renewed::Kept).count(),
            &failed,
        );
        ((tally, failed), tally.verdict() == Verdict::Yes)
    });
    match tally.verdict() {
        Verdict::Yes => Ok(()),
        Verdict::Unknown => Err(nodes.no_quorum(failed).with_lock(target.subject())),
        Verdict::No => Err(target.found_lost(holding)),
    }
}

/// What an attempt under `claim`, sent at `sent`, grants: the token's hold, renewed by
/// the watchdog unless taken with an explicit `lease`.
fn grant(
    target: &dyn Call,
    lease: Option<Duration>,
    claim: &TokenClaim,
    sent: Instant,
    valid_until: Instant,
) -> Grant<TokenHeld> {
    let token = claim.token.clone();
    let renew = lease.is_none().then(|| {
        let renewal = Renew {
            key: target.shared_key(),
            token: token.clone(),
        };
        (sent, Arc::new(renewal) as Arc<dyn Renewal>)
    });
    Grant {
        held: TokenHeld { token },
        valid_until,
        lease,
        renew,
        slot: None,
    }
}

/// One attempt's answers: its grants, the nodes that gave no answer, and the probe's
/// answers when it ran.
struct Round {
    grants: Grants,
    failed: Vec<NodeError>,
    /// `(type, pttl, mine)` of each node that answered the probe.
    probe: Vec<Probe>,
    /// What the key holds on a node where it is another kind of lock.
    wrong_kind: Option<&'static str>,
    /// Why a node's SET went unanswered where the probe then found the key free: the SET
    /// may have run and its short lease ended since. Neither taken nor busy there.
    unanswered: Option<Error>,
}

fn grants(of: usize, kept: usize, failed: usize, sent: Instant, lease: Duration) -> Grants {
    Grants {
        kept,
        fresh: 0,
        failed,
        of,
        reentry: false,
        valid: validity_end(sent, lease).is_some_and(|end| end > Instant::now()),
    }
}

/// Asks every node why the key is taken, and whether it holds `token`: a SET sent again
/// after its connection dropped (the reply lost, the command run) finds the key its first
/// try set and replies nil. A node whose SET `replies` granted the attempt, or whose key
/// holds the token (acknowledged by the replicas, when they must acknowledge), granted it;
/// one whose replicas did not acknowledge it, or that answers neither command, failed.
fn probe(
    target: &dyn Call,
    token: &str,
    replies: Vec<Result<Value>>,
    sent: Instant,
    lease: Duration,
    limit: Option<Instant>,
) -> Result<Round> {
    let nodes = target.nodes();
    let cmd = scripts::token_probe(target.key()?, token, lease);
    let probed = nodes.acquire::<Probe>(&cmd, limit, |(.., mine)| *mine == 1);
    let mut kept = 0;
    let mut unanswered = None;
    let results = replies
        .into_iter()
        .zip(probed)
        .map(|(reply, probed)| match (reply, probed) {
            (Ok(Value::Okay), probed) => {
                kept += 1;
                Ok(probed.ok())
            }
            (Err(err), _) if err.is_not_replicated() => Err(err),
            (reply, Ok(answer)) => {
                kept += usize::from(answer.2 == 1);
                if let Err(err) = reply
                    && answer.0 == "none"
                {
                    unanswered = Some(err);
                }
                Ok(Some(answer))
            }
            (_, Err(err)) => Err(err),
        });
    let (answers, failed) = nodes.split(results.collect());
    let probe: Vec<Probe> = answers.into_iter().flatten().collect();
    let wrong_kind = probe
        .iter()
        .find(|(kind, ..)| kind != "string" && kind != "none")
        .map(|(found, ..)| names::kind_of(found));
    Ok(Round {
        grants: grants(nodes.list().len(), kept, failed.len(), sent, lease),
        failed,
        probe,
        wrong_kind,
        unanswered,
    })
}

/// A node's answer to the probe: the key's type, its PTTL, and 1 if it holds the token.
type Probe = (String, i64, i64);

/// Why the key is taken: busy with the shortest PTTL among the nodes that hold a string.
fn busy(probe: &[Probe]) -> Attempt<Grant<TokenHeld>> {
    let ttl = probe
        .iter()
        .filter_map(|&(_, ttl, _)| u64::try_from(ttl).ok())
        .map(Duration::from_millis)
        .min();
    Attempt::Busy(Busy::held(ttl))
}

/// The release script for `token`, with a latch of its own (see the reentrant kind's),
/// publishing the unlock message if it is to `wake` a waiter.
fn release_cmd(target: &dyn Call, token: &str, wake: bool) -> Cmd {
    let key = target.shared_key();
    let latch = names::unlock_latch(&key, &names::random_id());
    let latch_ttl = target.config().latch_ttl();
    scripts::token_release(&key, target.channel(), &latch, token, latch_ttl, wake)
}

/// What the watchdog renews for a token hold.
struct Renew {
    key: Arc<[u8]>,
    token: String,
}

impl Renewal for Renew {
    fn command(&self, lease: Duration, restore: bool, _: &dyn Fn() -> u32) -> Cmd {
        scripts::token_renew(&self.key, &self.token, lease, restore)
    }

    fn undo(&self, target: &dyn Call, _: u32) -> Undo {
        let claim = TokenClaim {
            token: self.token.clone(),
            lease: target.config().lease,
        };
        Token::undo(target, &claim)
    }
}
