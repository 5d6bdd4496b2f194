//! The watchdog: while a hold taken without an explicit lease lasts, a thread of its own
//! renews its lease every renew interval (see `workers` for the threads).

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::base::error::{NodeError, Result, Subject};
use crate::base::health::Health;
use crate::base::retry::Backoff;
use crate::kinds::holding::Holding;
use crate::kinds::renewal::Renewal;
use crate::kinds::slot::HoldId;
use crate::lease::shared::Shared;
use crate::lease::target::{Target, WeakTarget};
use crate::lease::workers::{Stop, Ticket};
use crate::topology::quorum::{Tally, Verdict};
use crate::transport::common::Renewed;

/// What one watchdog renews.
struct Job {
    lock: Subject,
    holding: Arc<Holding>,
    /// When the acquire that began the holding was sent: the lease counts from there.
    since: Instant,
    /// How the holding's kind renews it.
    renewal: Arc<dyn Renewal>,
    /// The owner slot of a thread-owned holding, whose holds the client's table counts.
    slot: Option<HoldId>,
    /// The lock, for giving the holding back.
    target: WeakTarget,
}

impl Job {
    /// How many holds the client counts for the holding (0 for one its thread does not own).
    fn held(&self, shared: &Shared) -> u32 {
        self.slot.as_ref().map_or(0, |id| shared.holds().count(id))
    }

    /// Forgets the holding once its loss is found; false when it had already ended. Only
    /// the guard's release stops the renewals of a hold its thread does not own, and the
    /// watchdog checks for that before it calls a hold lost.
    fn forget(&self, shared: &Shared) -> bool {
        (self.slot.as_ref()).is_none_or(|id| shared.holds().forget(id, &self.holding, true))
    }
}

/// Starts renewing `holding` of the lock `target`, acquired by a command sent at `since`,
/// the way `renewal` says, on a thread of the client's; `slot` names a thread-owned
/// holding.
pub(crate) fn start(
    target: &Target,
    holding: &Arc<Holding>,
    (since, renewal): &(Instant, Arc<dyn Renewal>),
    slot: Option<&HoldId>,
) -> std::io::Result<Ticket> {
    let shared = &target.shared;
    let client = Arc::downgrade(shared);
    let due = *since + shared.config().renew_interval();
    let job = Job {
        lock: target.subject().clone(),
        holding: holding.clone(),
        since: *since,
        renewal: renewal.clone(),
        slot: slot.cloned(),
        target: target.downgrade(),
    };
    shared
        .workers()
        .start(due, Box::new(move |stop| renew_loop(&client, &job, stop)))
}

/// Renews until stopped or lost.
///
/// A round that finds the hold on a quorum of nodes in time extends its validity. A round
/// that cannot (errors, timeouts) is retried with backoff until the validity runs out. No
/// round outlives the validity it could extend: the hold is lost for the API when its
/// validity ends (see [`Holding::is_lost`]), and a reply after that extends nothing. A round
/// in which too few nodes still have it, whatever the failed ones would say, loses it at
/// once. Where a renewal may have run as the hold was lost (its reply came late, or not at
/// all), the hold is given back, so that it does not outlast its guard on the server.
fn renew_loop(client: &Weak<Shared>, job: &Job, stop: &Stop) {
    let Some(shared) = client.upgrade() else {
        return;
    };
    let lease = shared.config().lease;
    let interval = shared.config().renew_interval();
    drop(shared);
    let fresh_backoff = || Backoff::new((interval / 8).max(Duration::from_millis(1)), interval);

    let mut next = job.since + interval;
    let mut backoff = fresh_backoff();
    // Whether a renewal since the last one that got through may have run unanswered.
    let mut unsure = false;
    loop {
        if !stop.sleep_until(next) {
            return;
        }
        let Some(shared) = client.upgrade() else {
            return;
        };
        // A release runs exclusively too; once it has begun, a stop is queued. That is
        // checked before any verdict of loss, since a release removes the hold before this
        // thread hears of it.
        let sent = Instant::now();
        let valid_until = job.holding.valid_until();
        let Some((tally, failed)) = job.holding.lease_round(lease, || {
            if stop.is_stopped() {
                return (None, false);
            }
            if Instant::now() >= valid_until {
                let none = shared.nodes().tally(0, &[]);
                return (Some((none, Vec::new())), false);
            }
            let (tally, failed) = round(&shared, job, lease, valid_until);
            let taken = tally.verdict() == Verdict::Yes;
            (Some((tally, failed)), taken)
        }) else {
            return;
        };
        let in_time = !job.holding.is_lost();
        match tally.verdict() {
            Verdict::Yes if in_time => {
                if let Some(from) = job.holding.set_uncertain(false) {
                    shared.health_changed(&job.lock, from, Health::Held);
                }
                next = sent + interval;
                backoff = fresh_backoff();
                unsure = false;
                continue;
            }
            Verdict::Unknown if in_time => {
                unsure |= failed.iter().any(|f| f.error.may_have_run());
                if let Some(from) = job.holding.set_uncertain(true) {
                    shared.health_changed(&job.lock, from, Health::Uncertain);
                }
                log::warn!(
                    "renewing {} reached {} of {} nodes, retrying until its validity runs out",
                    job.lock,
                    tally.yes,
                    tally.of
                );
                let valid_until = job.holding.valid_until();
                next = (Instant::now() + backoff.next_delay(None)).min(valid_until);
            }
            _ => {
                // Given back wherever a node still has it or a renewal may have run
                // unanswered; before it is forgotten, and with no release running, so that
                // the owner's next attempt waits for it.
                let ran = failed.iter().any(|f| f.error.may_have_run());
                let renewed = tally.yes > 0 || ran || unsure;
                let forgot = job.holding.exclusively(|| {
                    if stop.is_stopped() {
                        return false;
                    }
                    if renewed && let Some(target) = job.target.upgrade() {
                        target.give_back(job.renewal.undo(&target, 0));
                    }
                    job.forget(&shared)
                });
                if forgot {
                    let error = (!failed.is_empty()).then(|| shared.nodes().no_quorum(failed));
                    shared.report_lost(&job.lock, &job.holding, error);
                }
                return;
            }
        }
    }
}

/// One renewal round on every node, ending by `valid_until` at the latest. When the hold is
/// still there on a quorum but gone from some nodes (restarted empty), a second round puts it
/// back where the key is free; a single node never gets it back.
fn round(
    shared: &Shared,
    job: &Job,
    lease: Duration,
    valid_until: Instant,
) -> (Tally, Vec<NodeError>) {
    let nodes = shared.nodes();
    let run = |restore: bool| {
        // Where the key is gone (a node restarted empty), the hold goes back with its count.
        let cmd = job.renewal.command(lease, restore, &|| job.held(shared));
        let results = nodes.run_all::<Renewed>(&cmd, Some(valid_until));
        let results = (nodes.list().iter().zip(results))
            .map(|(node, result)| match result {
                Ok(Renewed::Partly) => {
                    let config = shared.config();
                    let round = config.connect_timeout + config.response_timeout;
                    let end = (Instant::now() + round).min(valid_until);
                    // A lease key found nowhere (evicted, deleted) is a hold gone: not kept.
                    let extended = (job.renewal.strays(lease, job.held(shared)).iter())
                        .map(|cmd| node.run_settling::<i64>(cmd, end, valid_until))
                        .collect::<Result<Vec<i64>>>();
                    extended.map(|replies| match replies.iter().all(|&n| n == 1) {
                        true => Renewed::Kept,
                        false => Renewed::Gone,
                    })
                }
                other => other,
            })
            .collect();
        nodes.split(results)
    };
    let (answers, failed) = run(false);
    let tally = nodes.tally(
        answers.iter().filter(|&&r| r == Renewed::Kept).count(),
        &failed,
    );
    match tally.verdict() {
        Verdict::Yes => {
            shared.counters().renewed();
            if tally.yes < answers.len() && tally.of > 1 {
                let (answers, _) = run(true);
                let restored = answers.iter().filter(|&&r| r == Renewed::Restored).count();
                if restored > 0 {
                    log::info!("put a hold back on {restored} node(s) that had lost it");
                }
            }
        }
        _ if !failed.is_empty() => shared.counters().renewal_failed(),
        _ => {}
    }
    (tally, failed)
}
