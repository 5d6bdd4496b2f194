//! The watchdog's threads: one OS thread per held lock that needs renewing, kept parked
//! between holdings and reused, so that taking a lock does not pay a thread spawn.
//!
//! A holding's first renewal is due a renew interval after it began, and most holdings end
//! long before that. So work is not handed to a thread when it starts: it waits in a
//! schedule, and a timer thread hands it to a thread of its own half a renew interval
//! before it is due. A holding released before then costs no thread wake-up at all, only a
//! table entry. A thread parked for [`IDLE_EXIT`] ends, and every thread, the timer
//! included, ends when its client goes away.

use std::cell::Cell;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError, unbounded};
use parking_lot::{Condvar, Mutex};

/// How long a parked thread waits for new work before it ends.
const IDLE_EXIT: Duration = Duration::from_secs(60);

/// How long the timer ticks with nothing scheduled before it sleeps until work arrives.
const TIMER_DOZE: Duration = Duration::from_secs(1);

/// How long work waits before another try when no thread could be started for it.
const RESPAWN_AFTER: Duration = Duration::from_millis(100);

/// Work for one thread: runs until it is stopped, or decides to end by itself.
pub(crate) type Work = Box<dyn FnOnce(&Stop) + Send>;

enum Command {
    Start(Work),
    /// Ends the current work. A worker is listed as parked right after its Stop is sent, so
    /// work it is handed next always comes after that Stop on its channel.
    Stop,
    /// Makes the current work take its next step now; ignored between works.
    Now,
}

/// The parked threads, each behind the sender of its command channel.
type Parked = Mutex<Vec<(u64, Sender<Command>)>>;

/// The watchdog threads of one client.
pub(crate) struct Workers {
    threads: Arc<Threads>,
    schedule: Arc<Schedule>,
    /// The process they run in.
    pid: u32,
}

struct Threads {
    parked: Arc<Parked>,
    stack_size: usize,
}

/// Work waiting for its hand-over, by when it is to be handed over.
struct Schedule {
    entries: Mutex<Entries>,
    /// Wakes the timer when work arrives while it sleeps, and when the client goes away.
    wake: Condvar,
    /// How long before it is due work is handed over.
    lead: Duration,
}

#[derive(Default)]
struct Entries {
    /// Every ticket's work, waiting or running.
    slots: HashMap<u64, Arc<Slot>>,
    /// The waiting ones, by when they are to be handed over.
    waiting: BTreeSet<(Instant, u64)>,
    next_id: u64,
    timer_running: bool,
    /// Whether the timer sleeps until notified (nothing scheduled for a while).
    timer_dozing: bool,
    /// When the sleeping timer wakes by itself next.
    timer_wakes: Option<Instant>,
    closed: bool,
}

/// One piece of work from its start to its stop.
type Slot = Mutex<State>;

enum State {
    Waiting(Work),
    Running { worker: u64, tx: Sender<Command> },
    Stopped,
}

/// Scheduled or running work. Dropping it stops the work: work still waiting is dropped,
/// and a running worker is stopped and listed as parked at once, so that the next holding
/// reuses it without waiting for it to notice.
pub(crate) struct Ticket {
    slot: Arc<Slot>,
    key: (Instant, u64),
    schedule: Weak<Schedule>,
    threads: Weak<Threads>,
    /// The process it was made in. In a fork of it, a watchdog thread of the parent may
    /// have held the slot's or the schedule's lock at the fork: the ticket is then leaked.
    pid: u32,
}

/// Makes one ticket's work take its next step now, as [`Workers::all_now`] does for all;
/// once the ticket is dropped, nothing. It takes the locks `all_now` takes, in the same
/// order (the schedule's alone, then the slot's, and under it the parked threads' and the
/// schedule's), and no other: the subscriber thread may use it with the hub's lock held.
#[derive(Clone)]
pub(crate) struct Nudge {
    slot: Weak<Slot>,
    key: (Instant, u64),
    schedule: Weak<Schedule>,
    threads: Weak<Threads>,
}

/// What running work sees of its ticket.
pub(crate) struct Stop<'a> {
    rx: &'a Receiver<Command>,
    stopped: Cell<bool>,
}

impl Stop<'_> {
    /// Waits until `deadline`, or until told to take the next step now; false if stopped.
    pub fn sleep_until(&self, deadline: Instant) -> bool {
        if self.stopped.get() {
            return false;
        }
        match self.rx.recv_deadline(deadline) {
            Err(RecvTimeoutError::Timeout) | Ok(Command::Now) => true,
            // Work never gets a Start first: a worker is handed one only after its Stop.
            Ok(Command::Stop | Command::Start(_)) | Err(RecvTimeoutError::Disconnected) => {
                self.stopped.set(true);
                false
            }
        }
    }

    /// Whether the ticket was dropped. Reads up to its Stop, never past it: work handed to
    /// this thread next stays queued for the park loop.
    pub fn is_stopped(&self) -> bool {
        while !self.stopped.get() {
            match self.rx.try_recv() {
                Ok(Command::Now) => {}
                Err(TryRecvError::Empty) => break,
                Ok(Command::Stop | Command::Start(_)) | Err(TryRecvError::Disconnected) => {
                    self.stopped.set(true);
                }
            }
        }
        self.stopped.get()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if std::process::id() != self.pid {
            std::mem::forget(self.slot.clone());
            return;
        }
        let state = std::mem::replace(&mut *self.slot.lock(), State::Stopped);
        match state {
            State::Waiting(work) => drop(work),
            State::Running { worker, tx } => {
                if tx.send(Command::Stop).is_ok()
                    && let Some(threads) = self.threads.upgrade()
                {
                    threads.parked.lock().push((worker, tx));
                }
            }
            State::Stopped => {}
        }
        if let Some(schedule) = self.schedule.upgrade() {
            let mut entries = schedule.entries.lock();
            entries.waiting.remove(&self.key);
            entries.slots.remove(&self.key.1);
        }
    }
}

impl Workers {
    /// Threads with `stack_size` bytes of stack, for work whose first step is due a
    /// `interval` or more after it is scheduled, as a rule: work due sooner wakes the timer.
    pub fn new(stack_size: usize, interval: Duration) -> Self {
        Workers {
            threads: Arc::new(Threads {
                parked: Arc::default(),
                stack_size,
            }),
            schedule: Arc::new(Schedule {
                entries: Mutex::default(),
                wake: Condvar::new(),
                lead: interval / 2,
            }),
            pid: std::process::id(),
        }
    }

    /// Schedules `work`, whose first step is due at `due`, to run on a thread of its own.
    /// Fails only when the timer thread cannot be started.
    pub fn start(&self, due: Instant, work: Work) -> std::io::Result<Ticket> {
        self.start_timer()?;
        let slot = Arc::new(Mutex::new(State::Waiting(work)));
        let schedule = &self.schedule;
        let mut entries = schedule.entries.lock();
        // Handed over `lead` before it is due, or, for work due sooner than twice the
        // lead (a granted hold's confirming renewal), half way there.
        let now = Instant::now();
        let at = (due - schedule.lead).max(now + due.saturating_duration_since(now) / 2);
        let key = (at, entries.next_id);
        entries.next_id += 1;
        entries.waiting.insert(key);
        entries.slots.insert(key.1, slot.clone());
        // Ordinary work comes after the sleeping timer's next tick; sooner work wakes it.
        if entries.timer_dozing || entries.timer_wakes.is_some_and(|wakes| at < wakes) {
            entries.timer_dozing = false;
            schedule.wake.notify_one();
        }
        Ok(Ticket {
            slot,
            key,
            schedule: Arc::downgrade(schedule),
            threads: Arc::downgrade(&self.threads),
            pid: self.pid,
        })
    }

    /// Starts the timer thread unless it runs, outside the schedule's lock, which every
    /// release of a watched hold takes. Work scheduled by others meanwhile waits for it; if
    /// it cannot start, their work waits for the next start to try again.
    fn start_timer(&self) -> std::io::Result<()> {
        let schedule = &self.schedule;
        if std::mem::replace(&mut schedule.entries.lock().timer_running, true) {
            return Ok(());
        }
        let timer = Arc::downgrade(schedule);
        let threads = self.threads.clone();
        let spawned = thread::Builder::new()
            .name("redmutex-timer".into())
            .stack_size(self.threads.stack_size)
            .spawn(move || timer_loop(&timer, &threads));
        if let Err(err) = spawned {
            schedule.entries.lock().timer_running = false;
            return Err(err);
        }
        Ok(())
    }
}

impl Workers {
    /// Has every work take its next step now, handing over the waiting ones at once: after
    /// a failover, every watched hold is renewed on the new primary.
    pub fn all_now(&self) {
        let slots: Vec<_> = {
            let mut entries = self.schedule.entries.lock();
            entries.waiting.clear();
            let slots = entries.slots.iter();
            slots.map(|(&id, slot)| (id, slot.clone())).collect()
        };
        for (id, slot) in slots {
            step_now(&self.schedule, &self.threads, id, &slot);
        }
    }
}

impl Ticket {
    /// What makes this ticket's work take its next step now, from any thread.
    pub fn nudge(&self) -> Nudge {
        Nudge {
            slot: Arc::downgrade(&self.slot),
            key: self.key,
            schedule: self.schedule.clone(),
            threads: self.threads.clone(),
        }
    }
}

impl Nudge {
    /// Has the work take its next step now, handing it over at once if it still waits.
    pub fn now(&self) {
        let (Some(slot), Some(schedule), Some(threads)) = (
            self.slot.upgrade(),
            self.schedule.upgrade(),
            self.threads.upgrade(),
        ) else {
            return;
        };
        schedule.entries.lock().waiting.remove(&self.key);
        step_now(&schedule, &threads, self.key.1, &slot);
    }
}

/// Hands the work of `slot` over if it waits, and has it take its next step now.
fn step_now(schedule: &Schedule, threads: &Threads, id: u64, slot: &Slot) {
    let mut state = slot.lock();
    hand_over(schedule, threads, id, &mut state);
    if let State::Running { tx, .. } = &*state {
        let _ = tx.send(Command::Now);
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.schedule.entries.lock().closed = true;
        self.schedule.wake.notify_one();
    }
}

/// Hands work over as it comes due. Between hand-overs it sleeps until the next one, and
/// at most half a renew interval: work scheduled meanwhile is due a renew interval after
/// it was, so the timer is always up in time without being told.
fn timer_loop(schedule: &Weak<Schedule>, threads: &Threads) {
    let mut idle_since = Instant::now();
    loop {
        let Some(schedule) = schedule.upgrade() else {
            return;
        };
        let mut entries = schedule.entries.lock();
        if entries.closed {
            return;
        }
        let now = Instant::now();
        let mut due = Vec::new();
        while let Some(&(at, id)) = entries.waiting.first()
            && at <= now
        {
            entries.waiting.pop_first();
            due.extend(entries.slots.get(&id).map(|slot| (id, slot.clone())));
        }
        let next = entries.waiting.first().map(|&(at, _)| at);
        if !due.is_empty() || next.is_some() {
            idle_since = now;
        }
        if due.is_empty() {
            if next.is_none() && now >= idle_since + TIMER_DOZE {
                entries.timer_dozing = true;
                schedule.wake.wait(&mut entries);
            } else {
                let tick = now + schedule.lead.max(Duration::from_millis(1));
                let wakes = next.map_or(tick, |next| next.min(tick));
                entries.timer_wakes = Some(wakes);
                schedule.wake.wait_until(&mut entries, wakes);
                entries.timer_wakes = None;
            }
            continue;
        }
        drop(entries);
        for (id, slot) in due {
            hand_over(&schedule, threads, id, &mut slot.lock());
        }
    }
}

/// Hands waiting work to a thread of its own. When no thread can be started, the work waits
/// again and is tried once more a moment later: the hold's validity, not a failed start,
/// decides when it is lost.
fn hand_over(schedule: &Schedule, threads: &Threads, id: u64, state: &mut State) {
    let work = match std::mem::replace(state, State::Stopped) {
        State::Waiting(work) => work,
        // Running work keeps its thread (and the channel that thread listens on).
        other => {
            *state = other;
            return;
        }
    };
    match threads.run(work) {
        Ok((worker, tx)) => *state = State::Running { worker, tx },
        Err((work, err)) => {
            log::error!("no watchdog thread for a held lock, trying again: {err}");
            *state = State::Waiting(work);
            let again = Instant::now() + RESPAWN_AFTER;
            schedule.entries.lock().waiting.insert((again, id));
        }
    }
}

impl Threads {
    /// Runs `work` on a parked thread, or on a new one when none is parked; gives the work
    /// back when no thread can be started.
    fn run(&self, mut work: Work) -> Result<(u64, Sender<Command>), (Work, std::io::Error)> {
        while let Some((worker, tx)) = self.parked.lock().pop() {
            match tx.send(Command::Start(work)) {
                Ok(()) => return Ok((worker, tx)),
                Err(err) => match err.into_inner() {
                    Command::Start(returned) => work = returned,
                    Command::Stop | Command::Now => unreachable!("only a Start was sent"),
                },
            }
        }
        static NEXT_WORKER: AtomicU64 = AtomicU64::new(1);
        let worker = NEXT_WORKER.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = unbounded();
        let parked = Arc::downgrade(&self.parked);
        let spawned = thread::Builder::new()
            .name("redmutex-watchdog".into())
            .stack_size(self.stack_size)
            .spawn(move || park_loop(worker, &rx, &parked));
        match spawned {
            Ok(_) => {
                let _ = tx.send(Command::Start(work)); // the thread waits for it
                Ok((worker, tx))
            }
            Err(err) => Err((work, err)),
        }
    }
}

fn park_loop(worker: u64, rx: &Receiver<Command>, parked: &Weak<Parked>) {
    loop {
        match rx.recv_timeout(IDLE_EXIT) {
            Ok(Command::Start(work)) => work(&Stop {
                rx,
                stopped: Cell::new(false),
            }),
            // Already listed as parked by the ticket that sent it; or a late nudge.
            Ok(Command::Stop | Command::Now) => {}
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_now_makes_running_work_step_and_leaves_it_running() {
        let workers = Workers::new(128 * 1024, Duration::from_millis(10));
        let (tx, rx) = unbounded();
        let far = Duration::from_secs(3600);
        let work: Work = Box::new(move |stop| {
            tx.send("started").unwrap();
            while stop.sleep_until(Instant::now() + far) {
                tx.send("step").unwrap();
            }
            tx.send("stopped").unwrap();
        });
        let ticket = workers.start(Instant::now(), work).unwrap();
        let next = || rx.recv_timeout(Duration::from_secs(60)).unwrap();
        assert_eq!(next(), "started");
        for _ in 0..3 {
            workers.all_now();
            assert_eq!(
                next(),
                "step",
                "running work takes its next step and goes on"
            );
        }
        drop(ticket);
        assert_eq!(next(), "stopped");
    }

    #[test]
    fn a_nudge_hands_waiting_work_over_at_once_and_makes_it_step() {
        let far = Duration::from_secs(3600);
        // Handed over half an hour before it is due, so only the nudge starts it in time.
        let workers = Workers::new(128 * 1024, far);
        let (tx, rx) = unbounded();
        let work: Work = Box::new(move |stop| {
            tx.send("started").unwrap();
            while stop.sleep_until(Instant::now() + far) {
                tx.send("step").unwrap();
            }
            tx.send("stopped").unwrap();
        });
        let ticket = workers.start(Instant::now() + far * 2, work).unwrap();
        let nudge = ticket.nudge();
        let next = || rx.recv_timeout(Duration::from_secs(60)).unwrap();
        nudge.now();
        assert_eq!(next(), "started");
        assert_eq!(next(), "step");
        nudge.now();
        assert_eq!(next(), "step");
        drop(ticket);
        assert_eq!(next(), "stopped");
    }
}
