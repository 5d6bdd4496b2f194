//! The watchdog: one OS thread per held lock, renewing its lease every renew interval.
//!
//! Threads are kept parked between holdings and reused, so taking a lock does not pay a
//! thread spawn each time; a thread parked for [`IDLE_EXIT`] ends, and all parked threads end
//! when the client goes away.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError, unbounded};
use parking_lot::Mutex;

use crate::client::Inner;
use crate::holds::{HoldId, Holding};
use crate::retry::Backoff;

/// How long a parked watchdog thread waits for a new holding before it ends.
const IDLE_EXIT: Duration = Duration::from_secs(60);

/// What one watchdog thread renews.
pub(crate) struct Job {
    pub client: Weak<Inner>,
    pub id: HoldId,
    pub field: String,
    pub name: String,
    pub holding: Arc<Holding>,
    /// When the acquire that began the holding was sent: the lease counts from there.
    pub since: Instant,
}

enum Command {
    Start(Box<Job>),
    Stop,
}

/// The parked threads of one client, each behind the sender of its command channel.
#[derive(Default)]
pub(crate) struct Parked {
    threads: Mutex<Vec<(u64, Sender<Command>)>>,
}

/// A running renewal. Dropping it stops the renewals and parks the thread again.
pub(crate) struct Ticket {
    tx: Sender<Command>,
    worker: u64,
    parked: Weak<Parked>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // A stale Stop is ignored by a parked thread, and the channel keeps it ahead of
        // any later Start, so this cannot stop the next holding by mistake.
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
    while let Some((worker, tx)) = parked.threads.lock().pop() {
        match tx.send(Command::Start(job)) {
            Ok(()) => {
                return Ok(Ticket {
                    tx,
                    worker,
                    parked: Arc::downgrade(parked),
                });
            }
            Err(err) => match err.into_inner() {
                Command::Start(returned) => job = returned,
                Command::Stop => unreachable!("only a Start was sent"),
            },
        }
    }
    static NEXT_WORKER: AtomicU64 = AtomicU64::new(1);
    let worker = NEXT_WORKER.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = unbounded();
    tx.send(Command::Start(job))
        .expect("the receiver is still in this scope");
    let weak = Arc::downgrade(parked);
    thread::Builder::new()
        .name("redmutex-watchdog".into())
        .stack_size(stack_size)
        .spawn(move || park_loop(worker, &rx, &weak))?;
    Ok(Ticket {
        tx,
        worker,
        parked: Arc::downgrade(parked),
    })
}

fn park_loop(worker: u64, rx: &Receiver<Command>, parked: &Weak<Parked>) {
    loop {
        match rx.recv_timeout(IDLE_EXIT) {
            Ok(Command::Start(job)) => {
                if !renew_loop(&job, rx) {
                    return;
                }
            }
            Ok(Command::Stop) => {}
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

/// Renews until stopped or lost. Returns false when the thread should end.
fn renew_loop(job: &Job, rx: &Receiver<Command>) -> bool {
    let Some(client) = job.client.upgrade() else {
        return false;
    };
    let lease = client.config.lease;
    let interval = client.config.renew_interval();
    drop(client);

    let mut renewed_at = job.since;
    let mut next = job.since + interval;
    let mut backoff = Backoff::new((interval / 8).max(Duration::from_millis(1)), interval);
    loop {
        match rx.recv_deadline(next) {
            Ok(Command::Stop) => return true,
            Ok(Command::Start(_)) => unreachable!("a Start only reaches a parked thread"),
            Err(RecvTimeoutError::Disconnected) => return false,
            Err(RecvTimeoutError::Timeout) => {}
        }
        let Some(client) = job.client.upgrade() else {
            return false;
        };
        let sent = Instant::now();
        match client.renew(&job.id.0, &job.field, lease) {
            Ok(true) => {
                renewed_at = sent;
                next = sent + interval;
                backoff = Backoff::new((interval / 8).max(Duration::from_millis(1)), interval);
            }
            Ok(false) => {
                // Gone from Redis. If our own release did that, a Stop is already queued.
                match rx.try_recv() {
                    Ok(Command::Stop) => return true,
                    Err(TryRecvError::Disconnected) => return false,
                    _ => {}
                }
                client.declare_lost(job, None);
                return true;
            }
            Err(err) => {
                let expiry = renewed_at + lease;
                if Instant::now() >= expiry {
                    client.declare_lost(job, Some(err));
                    return true;
                }
                log::warn!(
                    "renewing lock {:?} failed, retrying until its lease runs out: {err}",
                    job.name
                );
                next = (Instant::now() + backoff.next_delay(None)).min(expiry);
            }
        }
    }
}
