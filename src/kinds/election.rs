//! Leadership of an election as a kind: a hold owned by a random token, like the token
//! lock's, that also draws an epoch from a counter that never expires, like the fenced
//! lock's, and says who leads to anyone who reads the key.
//!
//! The election's key is a hash `{token, epoch, name}` that expires with the leader's
//! lease; beside it, in the same cluster slot, the epoch counter (the fencing counter's
//! name), a short record of the recent leaders and a channel on which every change of
//! leader is announced to observers. Candidates wait on the lock channel as every waiter
//! does.

pub(crate) mod scripts;

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Cmd;

use crate::base::error::{Error, Result};
use crate::base::held_by::HeldBy;
use crate::base::retry::Backoff;
use crate::kinds::call::Call;
use crate::kinds::candidacy::Candidacy;
use crate::kinds::kind::Kind;
use crate::kinds::kind::{
    Attempt, Busy, Freed, Given, Giving, Grant, TokenClaim, sealed::Machinery,
};
use crate::kinds::renewal::Renewal;
use crate::kinds::undo::Undo;
use crate::layout::{names, owner};
use crate::topology::quorum::validity_end;
use crate::transport::common::Released;
use crate::transport::node::Node;

/// How many leaders an election's record keeps: an observer that falls further behind
/// than this misses the oldest of them.
pub(crate) const RECORD: usize = 100;

/// Why an election refuses a client over several independent masters.
const ONE_COUNTER: &str =
    "an election's epochs need one counter, and Redlock's masters each keep their own";

/// The kind behind a [`Leadership`](crate::Leadership).
#[derive(Debug, Clone, Copy, Default)]
pub struct Leading;

/// What a leadership carries.
pub struct LeadingHeld {
    token: String,
    epoch: u64,
}

impl LeadingHeld {
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    pub(crate) fn token(&self) -> &str {
        &self.token
    }
}

/// Who leads an election and who led it lately, as one read found it.
pub(crate) struct Snapshot {
    /// The leader's epoch and name, and its lease left (`None`: no expiry).
    pub leader: Option<(u64, String, Option<Duration>)>,
    /// The leader's value, candidate id (empty when it has none) and when it was elected
    /// (server time in milliseconds, 0 when not known).
    pub value: Option<String>,
    pub candidate: String,
    pub since: u64,
    /// The last epoch handed out.
    pub counter: u64,
    /// The recorded leaders after the epoch asked about, oldest first.
    pub record: Vec<(u64, String)>,
    /// The candidates waiting, when asked for: id, since when (server milliseconds), name;
    /// and those queued in a first-come-first-served election, in their order.
    pub waiting: Vec<(String, u64, String)>,
    pub queued: Vec<(String, u64, String)>,
}

/// The longest candidate id an election takes, in bytes.
pub(crate) const MAX_CANDIDATE_ID: usize = 256;

/// The longest value a leader may publish, in bytes.
pub(crate) const MAX_VALUE: usize = 64 * 1024;

/// The election's one node, or [`Error::Unsupported`] on a client over several.
pub(crate) fn node(target: &dyn Call) -> Result<&Arc<Node>> {
    match target.nodes().list() {
        [node] => Ok(node),
        _ => Err(Error::Unsupported {
            lock: target.subject().clone(),
            reason: ONE_COUNTER,
        }),
    }
}

/// Reads who leads and the leaders recorded after epoch `after`, by `end` at the latest.
pub(crate) fn read(target: &dyn Call, after: u64, end: Instant) -> Result<Snapshot> {
    read_some(target, after, false, end)
}

/// Reads who leads and the candidates waiting, by `end` at the latest.
pub(crate) fn read_candidates(target: &dyn Call, end: Instant) -> Result<Snapshot> {
    read_some(target, u64::MAX, true, end)
}

/// Reads who leads and the leaders recorded after epoch `after` (and the candidates waiting
/// if `waiting`), by `end` at the latest.
fn read_some(target: &dyn Call, after: u64, waiting: bool, end: Instant) -> Result<Snapshot> {
    let node = node(target)?;
    let key = target.open()?;
    let (counter, record, candidates) = names_of(key);
    let queue = names::election_queue(key);
    let (queued, places) = (names::fair_queue(&queue), names::fair_alive(&queue));
    let keys = [key, &counter, &record, &candidates, &queued, &places];
    let cmd = scripts::election_read(&keys, after, waiting);
    type Reply = (
        (i64, String, i64, i64, Vec<(i64, String)>),
        (
            Option<String>,
            String,
            i64,
            Vec<(String, i64, String)>,
            Vec<(String, i64, String)>,
        ),
    );
    let ((epoch, name, pttl, counter, record), (value, candidate, since, waiting, queued)): Reply =
        node.run(&cmd, end).map_err(|err| target.wrong_kind(err))?;
    let lease_left = u64::try_from(pttl).ok().map(Duration::from_millis);
    let millis = |n: i64| u64::try_from(n).unwrap_or_default();
    Ok(Snapshot {
        leader: u64::try_from(epoch)
            .ok()
            .filter(|&epoch| epoch > 0)
            .map(|epoch| (epoch, name, lease_left)),
        value,
        candidate,
        since: millis(since),
        counter: millis(counter),
        record: (record.into_iter())
            .filter_map(|(epoch, name)| Some((u64::try_from(epoch).ok()?, name)))
            .collect(),
        waiting: (waiting.into_iter())
            .map(|(id, since, name)| (id, millis(since), name))
            .collect(),
        queued: (queued.into_iter())
            .map(|(id, since, name)| (id, millis(since), name))
            .collect(),
    })
}

/// How long a queued candidate's listing is kept at most: its place in the queue says how
/// long it is shown.
const QUEUED_LISTING: Duration = Duration::from_secs(24 * 3600);

/// Lists this thread's candidate of `target`, as `candidacy` presents it, while it queues
/// for its turn to campaign, under its owner field `owner` in the queue. A failure is
/// logged: the candidate then queues unlisted.
pub(crate) fn enlist(target: &dyn Call, candidacy: Option<&Candidacy>, owner: &str) {
    let (Ok(key), Ok(node)) = (target.begin(), node(target)) else {
        return;
    };
    let id = candidate_id(target, candidacy);
    let name = &target.config().client_name;
    let candidates = names::election_candidates(key);
    let cmd = scripts::election_enlist(&candidates, owner, (&id, name), QUEUED_LISTING);
    let end = Instant::now() + target.config().response_timeout;
    if let Err(err) = node.run::<i64>(&cmd, end) {
        log::debug!(
            "listing a queued candidate of {}: {err:#}",
            target.subject()
        );
    }
}

/// Removes the listing of `owner`, queued in `target`, once its campaign ends.
pub(crate) fn delist(target: &dyn Call, owner: &str) {
    let (Ok(key), Ok(node)) = (target.begin(), node(target)) else {
        return;
    };
    let mut cmd = redis::cmd("HDEL");
    cmd.arg(names::election_candidates(key))
        .arg(format!("queued:{owner}"));
    let end = Instant::now() + target.config().response_timeout;
    if let Err(err) = node.run::<i64>(&cmd, end) {
        log::debug!(
            "removing a queued candidate of {}: {err:#}",
            target.subject()
        );
    }
}

/// The names beside an election's key: its counter, record of leaders and candidates.
fn names_of(key: &[u8]) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    (
        names::fence_counter(key),
        names::election_record(key),
        names::election_candidates(key),
    )
}

/// The candidate id of this thread's campaigns on `target` as `candidacy` presents them:
/// the one its user chose, or the client's id and this thread's number, as a lock's owner
/// field.
fn candidate_id(target: &dyn Call, candidacy: Option<&Candidacy>) -> String {
    match candidacy.and_then(|c| c.id.clone()) {
        Some(id) => id,
        None => owner::field(target.client_id(), owner::current_thread()),
    }
}

/// Refuses a candidate id or value an election cannot take.
fn check_candidacy(target: &dyn Call, candidacy: Option<&Candidacy>) -> Result<()> {
    let Some(candidacy) = candidacy else {
        return Ok(());
    };
    if let Some(id) = &candidacy.id {
        check_id(target, id)?;
    }
    match &candidacy.value {
        Some(value) => check_value(target, value),
        None => Ok(()),
    }
}

/// Refuses an empty or oversized candidate id, or one with control characters.
pub(crate) fn check_id(target: &dyn Call, id: &str) -> Result<()> {
    let reason = if id.is_empty() {
        "empty"
    } else if id.len() > MAX_CANDIDATE_ID {
        "longer than 256 bytes"
    } else if id.chars().any(char::is_control) {
        "holds control characters"
    } else {
        return Ok(());
    };
    Err(target.invalid_argument("candidate id", reason.to_owned()))
}

/// Refuses a value larger than [`MAX_VALUE`].
pub(crate) fn check_value(target: &dyn Call, value: &str) -> Result<()> {
    if value.len() > MAX_VALUE {
        return Err(
            target.invalid_argument("value", format!("{} bytes, more than 64 KiB", value.len()))
        );
    }
    Ok(())
}

/// Sets the value of the leadership `token`, telling the observers: false when it no longer
/// leads (nothing changed).
pub(crate) fn proclaim(target: &dyn Call, token: &str, value: &str) -> Result<bool> {
    check_value(target, value)?;
    let node = node(target)?;
    let key = target.begin()?;
    let cmd = scripts::election_proclaim(key, token, value, &names::election_channel(key));
    let end = Instant::now() + target.config().response_timeout;
    let set: i64 = node
        .run(&cmd, end)
        .map_err(|err| err.with_lock(target.subject()))?;
    Ok(set == 1)
}

impl Kind for Leading {}

impl Machinery for Leading {
    const LABEL: &'static str = "election";

    type Held = LeadingHeld;
    type Affinity = ();
    /// How the handle's campaigns present their candidate; `None` for the defaults.
    type Request = Option<Arc<Candidacy>>;

    type Claim = Campaign;

    fn claim(target: &dyn Call, request: &Self::Request, lease: Option<Duration>) -> Campaign {
        Campaign {
            token: TokenClaim::new(target, lease),
            candidacy: request.clone(),
        }
    }

    fn undo(target: &dyn Call, claim: &Campaign) -> Undo {
        resignation(target, &claim.token)
    }

    fn attempt(
        target: &dyn Call,
        claim: &Campaign,
        lease: Option<Duration>,
        limit: Option<Instant>,
    ) -> Result<Attempt<Grant<LeadingHeld>>> {
        node(target)?;
        let candidacy = claim.candidacy.as_deref();
        check_candidacy(target, candidacy)?;
        let key = target.key()?;
        let (token, script_lease) = (&claim.token.token, claim.token.lease);
        let (counter, record, candidates) = names_of(key);
        let observers = names::election_channel(key);
        let id = candidate_id(target, candidacy);
        let who = scripts::Campaigner {
            name: &target.config().client_name,
            id: &id,
            resume: candidacy.is_some_and(|c| c.id.is_some()),
            value: candidacy.and_then(|c| c.value.as_deref()),
            listed: target.config().lease,
        };
        let places = names::fair_alive(&names::election_queue(key));
        let cmd = scripts::election_acquire(
            (key, &counter, &record, &candidates, &places, &observers),
            token,
            script_lease,
            &who,
            RECORD,
        );
        let sent = Instant::now();
        let nodes = target.nodes();
        let reply = nodes
            .acquire::<(i64, i64)>(&cmd, limit, |&(status, _)| status == 1)
            .pop()
            .unwrap_or_else(|| Err(target.lost()));
        // An error after the command may have run: the lock machine gives it back.
        let (status, number) = reply.map_err(|err| target.wrong_kind(err))?;
        if status != 1 {
            let ttl = u64::try_from(number).ok().map(Duration::from_millis);
            return Ok(Attempt::Busy(Busy::held(ttl)));
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
        let epoch = u64::try_from(number).unwrap_or_default();
        Ok(Attempt::Acquired(grant(
            target,
            lease,
            &claim.token,
            epoch,
            sent,
            valid_until,
        )))
    }

    fn release(target: &dyn Call, hold: &Giving<'_, LeadingHeld>) -> Given {
        let node = match node(target) {
            Ok(node) => node,
            Err(err) => return Given::once(Err(err)),
        };
        let holding = hold.holding;
        let released = holding.exclusively(|| {
            // Sent again until it answers or the validity ends; its latch outlasts that.
            let until = holding.valid_until();
            let left = until.saturating_duration_since(Instant::now());
            let latch_ttl = target.config().latch_ttl() + left;
            let cmd = resign_lasting(target, &hold.held.token, true, latch_ttl);
            resend(target, node, &cmd, until, RESIGNED_UNKNOWN)
        });
        Given::once(released.map(|released| match released {
            Released::NotOurs => Freed::Gone,
            _ => Freed::Done(Ok(())),
        }))
    }

    fn give_up(target: &dyn Call, candidacy: &Self::Request) {
        // A campaign that ends without leading is no longer a candidate; a listing left
        // behind would go by itself once its time ran out.
        let (Ok(key), Ok(node)) = (target.begin(), node(target)) else {
            return;
        };
        let mut cmd = redis::cmd("HDEL");
        cmd.arg(names::election_candidates(key))
            .arg(candidate_id(target, candidacy.as_deref()));
        let end = Instant::now() + target.config().response_timeout;
        if let Err(err) = node.run::<i64>(&cmd, end) {
            log::debug!("withdrawing a candidate of {}: {err:#}", target.subject());
        }
    }

    fn describe(target: &dyn Call, _: &Self::Request, limit: Option<Instant>) -> Option<HeldBy> {
        let end = limit.unwrap_or_else(|| Instant::now() + target.config().response_timeout);
        let snapshot = read(target, u64::MAX, end)
            .map_err(|err| log::debug!("asking who leads {}: {err:#}", target.subject()))
            .ok()?;
        let (epoch, name, ttl) = snapshot.leader?;
        Some(HeldBy {
            key: String::from_utf8_lossy(&target.shared_key()).into_owned(),
            found: format!("a leader of epoch {epoch}"),
            holder: Some(name),
            ttl,
        })
    }
}

/// Ends whoever's leadership holds the election now (or only `leader`'s, by its token), as
/// its own resignation would: a candidate and every observer are woken. False when nobody
/// led, or the leader changed between reading its token and resigning it (the new leader
/// is left alone). A key of another kind is refused, as by every call of the election.
pub(crate) fn force_resign(target: &dyn Call, leader: Option<&str>) -> Result<bool> {
    target.begin()?;
    let node = node(target)?;
    let key = target.open()?;
    let end = Instant::now() + target.config().response_timeout;
    if read(target, u64::MAX, end)?.leader.is_none() {
        return Ok(false);
    }
    let token = match leader {
        Some(token) => token.to_owned(),
        None => {
            let end = Instant::now() + target.config().response_timeout;
            let mut read = redis::cmd("HGET");
            read.arg(key).arg("token");
            let token: Option<String> =
                node.run(&read, end).map_err(|err| target.wrong_kind(err))?;
            let Some(token) = token else {
                return Ok(false);
            };
            token
        }
    };
    // Sent again for as long as one call may take; its latch lasts twice that.
    let config = target.config();
    let until = Instant::now() + config.connect_timeout + config.response_timeout;
    let cmd = resign_cmd(target, &token, true);
    match resend(target, node, &cmd, until, FORCED_UNKNOWN)? {
        Released::NotOurs => Ok(false),
        _ => Ok(true),
    }
}

/// What a resignation that was never answered leaves unknown.
const RESIGNED_UNKNOWN: &str = "the resignation may or may not have taken effect; \
     if it did not, the leadership ends when its lease runs out, by its valid_until";

/// What a forced resignation that was never answered leaves unknown.
const FORCED_UNKNOWN: &str = "the forced resignation may or may not have taken effect";

/// Runs `resign`, a resignation with a latch of its own, and sends it again, with backoff,
/// after each error after which it may have run, until it answers or `until` has passed:
/// a resend after an earlier send resigned finds the latch and answers 1 as that send
/// did. An error after which it surely did not run, before any that it may have, is
/// returned at once. When no send was answered, the error says `unknown`.
fn resend(
    target: &dyn Call,
    node: &Node,
    resign: &Cmd,
    until: Instant,
    unknown: &'static str,
) -> Result<Released> {
    let config = target.config();
    let mut backoff = Backoff::new(config.retry_base, config.retry_cap);
    let mut unanswered = None;
    loop {
        let end = Instant::now() + config.response_timeout;
        let sent = match unanswered {
            None => node.run_settling::<Released>(resign, end, until),
            Some(_) => node.resend_settling::<Released>(resign, end, until),
        };
        let err = match sent {
            Ok(released) => return Ok(released),
            Err(err) => err.with_lock(target.subject()),
        };
        // The last error after which it may have run stands for them all.
        let unsure = match unanswered.take() {
            _ if err.is_outcome_unknown() => err,
            Some(unsure) => unsure,
            None => return Err(err),
        };
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || target.closing() {
            return Err(unsure.unsettled(unknown));
        }
        log::debug!(
            "resending a resignation of {}: {unsure:#}",
            target.subject()
        );
        unanswered = Some(unsure);
        std::thread::sleep(backoff.next_delay(Some(left)));
    }
}

/// The resignation of the leadership `token`, with a latch of its own, waking a candidate
/// if it is to `wake` one; observers are always told.
fn resign_cmd(target: &dyn Call, token: &str, wake: bool) -> Cmd {
    let latch_ttl = target.config().latch_ttl();
    resign_lasting(target, token, wake, latch_ttl)
}

/// [`resign_cmd`], with a latch that lasts `latch_ttl`.
fn resign_lasting(target: &dyn Call, token: &str, wake: bool, latch_ttl: Duration) -> Cmd {
    let key = target.shared_key();
    let latch = names::unlock_latch(&key, &names::random_id());
    let observers = names::election_channel(&key);
    scripts::election_resign(
        (&key, target.channel(), &observers, &latch),
        token,
        latch_ttl,
        wake,
    )
}

/// What one campaign takes: the election, under a token of its own, for a candidate as
/// its candidacy presents it.
pub struct Campaign {
    token: TokenClaim,
    candidacy: Option<Arc<Candidacy>>,
}

/// The give-back of the leadership `claim` may have taken: its resignation.
fn resignation(target: &dyn Call, claim: &TokenClaim) -> Undo {
    Undo {
        cmd: resign_cmd(target, &claim.token, target.give_back_wakes()),
        lasts: claim.lease,
        slot: None,
        leaves_until: None,
    }
}

/// What a campaign under `claim`, sent at `sent`, grants: the leadership of `epoch`,
/// renewed by the watchdog unless taken with an explicit `lease`.
fn grant(
    target: &dyn Call,
    lease: Option<Duration>,
    claim: &TokenClaim,
    epoch: u64,
    sent: Instant,
    valid_until: Instant,
) -> Grant<LeadingHeld> {
    let token = claim.token.clone();
    let renew = lease.is_none().then(|| {
        let renewal = Renew {
            key: target.shared_key(),
            token: token.clone(),
        };
        (sent, Arc::new(renewal) as Arc<dyn Renewal>)
    });
    Grant {
        held: LeadingHeld { token, epoch },
        valid_until,
        lease,
        renew,
        slot: None,
    }
}

/// What the watchdog renews for a leadership.
struct Renew {
    key: Arc<[u8]>,
    token: String,
}

impl Renewal for Renew {
    fn command(&self, lease: Duration, _: bool, _: &dyn Fn() -> u32) -> Cmd {
        scripts::election_renew(&self.key, &self.token, lease)
    }

    fn undo(&self, target: &dyn Call, _: u32) -> Undo {
        let claim = TokenClaim {
            token: self.token.clone(),
            lease: target.config().lease,
        };
        resignation(target, &claim)
    }
}
