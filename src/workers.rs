//! The watchdog's threads: one OS thread per running renewal, kept parked between holdings
//! and reused, so that taking a lock does not pay a thread spawn each time. A thread parked
//! for [`IDLE_EXIT`] ends, and all parked threads end when their client goes away.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, unbounded};
use parking_lot::Mutex;

/// How long a parked thread waits for new work before it ends.
const IDLE_EXIT: Duration = Duration::from_secs(60);

/// Work for one thread: runs until it is stopped, or decides to end by itself.
pub(crate) type Work = Box<dyn FnOnce(&Stop) + Send>;

enum Command {
    Start(Work),
    /// Ends the current work. A worker is listed as parked right after its Stop is sent, so
    /// work it is handed next always comes after that Stop on its channel.
    Stop,
}

/// The parked threads, each behind the sender of its command channel.
type Parked = Mutex<Vec<(u64, Sender<Command>)>>;

/// The watchdog threads of one client.
pub(crate) struct Workers {
    parked: Arc<Parked>,
    stack_size: usize,
}

/// Running work. Dropping it stops the work and lists the worker as parked at once, so that
/// the next holding reuses it without waiting for it to notice.
pub(crate) struct Ticket {
    worker: u64,
    tx: Sender<Command>,
    parked: Weak<Parked>,
}

/// What running work sees of its ticket.
pub(crate) struct Stop<'a> {
    rx: &'a Receiver<Command>,
}

impl Stop<'_> {
    /// Waits until `deadline`; false if stopped before.
    pub fn sleep_until(&self, deadline: Instant) -> bool {
        // Work never gets a Start first: a worker is handed one only after its Stop.
        matches!(
            self.rx.recv_deadline(deadline),
            Err(RecvTimeoutError::Timeout)
        )
    }

    /// Whether the ticket was dropped. The Stop stays queued for the thread's park loop.
    pub fn is_stopped(&self) -> bool {
        !self.rx.is_empty()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.tx.send(Command::Stop).is_ok()
            && let Some(parked) = self.parked.upgrade()
        {
            parked.lock().push((self.worker, self.tx.clone()));
        }
    }
}

impl Workers {
    pub fn new(stack_size: usize) -> Self {
        Workers {
            parked: Arc::default(),
            stack_size,
        }
    }

    /// Starts `work` on a parked thread, or on a new one when none is parked.
    pub fn start(&self, mut work: Work) -> std::io::Result<Ticket> {
        let ticket = |worker, tx| Ticket {
            worker,
            tx,
            parked: Arc::downgrade(&self.parked),
        };
        while let Some((worker, tx)) = self.parked.lock().pop() {
            match tx.send(Command::Start(work)) {
                Ok(()) => return Ok(ticket(worker, tx)),
                Err(err) => match err.into_inner() {
                    Command::Start(returned) => work = returned,
                    Command::Stop => unreachable!("only a Start was sent"),
                },
            }
        }
        static NEXT_WORKER: AtomicU64 = AtomicU64::new(1);
        let worker = NEXT_WORKER.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = unbounded();
        let _ = tx.send(Command::Start(work)); // the receiver is right here
        let parked = Arc::downgrade(&self.parked);
        thread::Builder::new()
            .name("redmutex-watchdog".into())
            .stack_size(self.stack_size)
            .spawn(move || park_loop(worker, &rx, &parked))?;
        Ok(ticket(worker, tx))
    }
}

fn park_loop(worker: u64, rx: &Receiver<Command>, parked: &Weak<Parked>) {
    loop {
        match rx.recv_timeout(IDLE_EXIT) {
            Ok(Command::Start(work)) => work(&Stop { rx }),
            // Already listed as parked by the ticket that sent it.
            Ok(Command::Stop) => {}
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {
                let Some(parked) = parked.upgrade() else {
                    return;
                };
                let mut threads = parked.lock();
                // Still listed as parked: nobody can hand us work any more, so end. Not
                // listed: a Start is on its way, so wait for it.
                if let Some(at) = threads.iter().position(|(id, _)| *id == worker) {
                    threads.swap_remove(at);
                    return;
                }
            }
        }
    }
}
