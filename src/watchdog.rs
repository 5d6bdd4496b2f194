//! The watchdog: one OS thread per held lock, renewing its lease every renew interval.
//!
//! Threads are kept parked between holdings and reused, so taking a lock does not pay a
//! thread spawn each time; a thread parked for [`IDLE_EXIT`] ends, and all parked threads end
//! when the client goes away.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError, unbounded};
use parking_lot::Mutex;

use crate::client::Inner;
use crate::holds::{Holding, validity_end};
use crate::retry::Backoff;

/// How long a parked watchdog thread waits for a new holding before it ends.
const IDLE_EXIT: Duration = Duration::from_secs(60);

/// What one watchdog thread renews.
pub(crate) struct Job {
    pub client: Weak<Inner>,
    pub name: String,
    pub holding: Arc<Holding>,
    /// When the acquire that began the holding was sent: the lease counts from there.
    pub since: Instant,
    /// How the holding's kind renews it.
    pub renewal: Box<dyn Renewal>,
}

/// What a lock kind tells the watchdog.
pub(crate) trait Renewal: Send + Sync {
    /// The renewal script for every node, replying 1 (renewed), 2 (put back) or 0 (gone).
    /// With `restore`, a node that lost the key gets the hold back.
    fn command(&self, inner: &Inner, lease: Duration, restore: bool) -> redis::Cmd;

    /// Forgets the holding once its loss is found; false when it had already ended.
    fn forget(&self, inner: &Inner, holding: &Arc<Holding>) -> bool;
}

enum Command {
    Start(Box<Job>),
    /// Ends the current job. A worker is listed as parked right after its Stop is sent, so
    /// a Start it is handed next always comes after that Stop on its channel.
    Stop,
    /// Renews the current job at once (the server moved); ignored between jobs.
    Renew,
}

/// The parked threads of one client, each behind the sender of its command channel.
#[derive(Default)]
pub(crate) struct Parked {
    threads: Mutex<Vec<(u64, Sender<Command>)>>,
}

/// A running renewal. Dropping it stops the renewals and lists the worker as parked at
/// once, so that the next holding reuses it without waiting for it to notice.
pub(crate) struct Ticket {
    worker: u64,
    tx: Sender<Command>,
    parked: Weak<Parked>,
}

impl Ticket {
    /// Has the lease renewed now instead of at the next interval: after a failover, this
    /// renews it on the new primary, or finds it gone there and reports it lost.
    pub fn renew_now(&self) {
        let _ = self.tx.send(Command::Renew);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.tx.send(Command::Stop).is_ok()
            && let Some(parked) = self.parked.upgrade()
        {
            parked.threads.lock().push((self.worker, self.tx.clone()));
        }
    }
}

/// Starts renewing `job` on a parked thread, or on a new one when none is parked.
pub(crate) fn start(parked: &Arc<Parked>, stack_size: usize, job: Job) -> std::io::Result<Ticket> {
    let mut job = Box::new(job);
    let weak = Arc::downgrade(parked);
    while let Some((worker, tx)) = parked.threads.lock().pop() {
        match tx.send(Command::Start(job)) {
            Ok(()) => {
                return Ok(Ticket {
                    worker,
                    tx,
                    parked: weak,
                });
            }
            Err(err) => match err.into_inner() {
                Command::Start(returned) => job = returned,
                Command::Stop | Command::Renew => unreachable!("only a Start was sent"),
            },
        }
    }
    static NEXT_WORKER: AtomicU64 = AtomicU64::new(1);
    let worker = NEXT_WORKER.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = unbounded();
    let _ = tx.send(Command::Start(job)); // the receiver is right here
    let parked = weak.clone();
    thread::Builder::new()
        .name("redmutex-watchdog".into())
        .stack_size(stack_size)
        .spawn(move || park_loop(worker, &rx, &parked))?;
    Ok(Ticket {
        worker,
        tx,
        parked: weak,
    })
}

fn park_loop(worker: u64, rx: &Receiver<Command>, parked: &Weak<Parked>) {
    loop {
        match rx.recv_timeout(IDLE_EXIT) {
            Ok(Command::Start(job)) => {
                renew_loop(&job, rx);
            }
            // Already listed as parked by the ticket that sent it; or a late nudge.
            Ok(Command::Stop | Command::Renew) => {}
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {
                let Some(parked) = parked.upgrade() else {
                    return;
                };
                let mut threads = parked.threads.lock();
                // Still listed as parked: nobody can hand us a job any more, so end. Not
                // listed: a Start is on its way, so wait for it.
                if let Some(at) = threads.iter().position(|(id, _)| *id == worker) {
                    threads.swap_remove(at);
                    return;
                }
            }
        }
    }
}

/// Renews until stopped or lost (`None` either way), at each interval and whenever told to;
/// a Start queued after the Stop is left for `park_loop`.
///
/// A round that finds the hold on a quorum of nodes extends its validity. A round that
/// cannot (errors, timeouts) is retried with backoff until the validity runs out. A round in
/// which too few nodes still have it, whatever the failed ones would say, loses it at once.
fn renew_loop(job: &Job, rx: &Receiver<Command>) -> Option<()> {
    let client = job.client.upgrade()?;
    let lease = client.config.lease;
    let interval = client.config.renew_interval();
    let quorum = client.nodes.quorum();
    drop(client);
    let fresh_backoff = || Backoff::new((interval / 8).max(Duration::from_millis(1)), interval);

    let mut next = job.since + interval;
    let mut backoff = fresh_backoff();
    // Whether our own release stopped us; checked before any verdict of loss, since a
    // release removes the field before this thread hears of it. Reads up to the Stop,
    // skipping nudges to renew.
    let stop_seen = Cell::new(false);
    let stopped = || {
        while !stop_seen.get() {
            match rx.try_recv() {
                Ok(Command::Renew) => {}
                Ok(Command::Stop | Command::Start(_)) | Err(TryRecvError::Disconnected) => {
                    stop_seen.set(true);
                }
                Err(TryRecvError::Empty) => break,
            }
        }
        stop_seen.get()
    };
    loop {
        match rx.recv_deadline(next) {
            Err(RecvTimeoutError::Timeout) | Ok(Command::Renew) => {}
            // A Start never comes first: a worker is handed one only after its Stop.
            Ok(Command::Stop | Command::Start(_)) | Err(RecvTimeoutError::Disconnected) => {
                return None;
            }
        }
        let client = job.client.upgrade()?;
        // A release runs under the same lock; once it has begun, a Stop is queued.
        let round = job.holding.round.lock();
        if stopped() {
            return None;
        }
        let sent = Instant::now();
        let renewal = client.renew(&*job.renewal, lease);
        drop(round);
        if renewal.kept >= quorum {
            if let Some(until) = validity_end(sent, lease) {
                job.holding.set_valid_until(until);
            }
            next = sent + interval;
            backoff = fresh_backoff();
            continue;
        }
        let valid_until = job.holding.valid_until();
        if renewal.kept + renewal.failed.len() < quorum || Instant::now() >= valid_until {
            if !stopped() {
                let error =
                    (!renewal.failed.is_empty()).then(|| client.nodes.no_quorum(renewal.failed));
                client.declare_lost(job, error);
            }
            return None;
        }
        log::warn!(
            "renewing lock {:?} reached {} of {} nodes needed, retrying until its validity runs out",
            job.name,
            renewal.kept,
            quorum
        );
        next = (Instant::now() + backoff.next_delay(None)).min(valid_until);
    }
}
