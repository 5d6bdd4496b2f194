//! Giving back what may be held on the server with no guard to hold it: what an attempt
//! whose reply was lost may have taken, what an attempt took but does not keep, and a hold
//! declared lost while a renewal of it may have run.
//!
//! A give-back runs at once, within a round of its own (a connect and a response timeout
//! from when it starts, never the spent deadline of the call that needs it). Where it cannot
//! reach Redis, it is logged once and tried again in the background while what it gives back
//! could still be alive. Each give-back is one command built once, so a second try is the
//! same call as the first: the kinds' undo scripts are safe to repeat.
//!
//! A thread-owned hold is named by its owner's field, which a later acquisition of the same
//! thread takes again; a give-back of it still pending would then take away the new hold.
//! So such a give-back names its owner's slot, and the owner's next attempt or release,
//! which sets the owner's count itself, makes it moot first.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::{Cmd, Value};

use crate::base::error::{Result, Subject};
use crate::kinds::slot::HoldId;
use crate::kinds::undo::Undo;
use crate::transport::node::Nodes;

/// The give-backs of one client that could not reach Redis yet.
#[derive(Default)]
pub(crate) struct GiveBacks {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    pending: Vec<Arc<Pending>>,
    /// Whether the thread that retries them runs.
    retrying: bool,
}

struct Pending {
    lock: Subject,
    cmd: Cmd,
    slot: Option<HoldId>,
    /// Until when what it gives back could still be alive; past it, nothing is left to do.
    alive_until: Instant,
    /// Whether it ran (or was made moot); held while it runs, so that its owner's own
    /// attempt waits for a retry already on its way.
    done: Mutex<bool>,
}

impl Pending {
    /// `undo` for `lock`, alive as long as what it undoes may be (and a little longer, for
    /// the server's clock).
    fn new(lock: &Subject, undo: Undo) -> Arc<Pending> {
        let alive_until = Instant::now() + undo.lasts + undo.lasts / 100 + Duration::from_millis(2);
        Arc::new(Pending {
            lock: lock.clone(),
            cmd: undo.cmd,
            slot: undo.slot,
            alive_until,
            done: Mutex::new(false),
        })
    }
}

/// How long the background waits between two tries of what is pending.
pub(crate) const RETRY_EVERY: Duration = Duration::from_millis(200);

impl GiveBacks {
    /// Gives back `undo` on every node of `nodes` for `lock`, by `end` (a response timeout
    /// from when the caller's give-backs began); see the module docs. Listed as pending
    /// before it runs, so that its owner's next attempt waits for it. True when it failed
    /// and no thread retries yet: the caller is to start one running
    /// [`retry`](Self::retry).
    pub fn give_back(&self, nodes: &Nodes, end: Instant, lock: &Subject, undo: Undo) -> bool {
        let lasts = undo.lasts;
        let pending = Pending::new(lock, undo);
        // Held while it runs, before it is listed: the thread that retries skips it.
        let mut done = pending.done.lock();
        self.list(pending.clone());
        let Err(err) = run(nodes, &pending.cmd, end) else {
            *done = true;
            drop(done);
            self.remove(&pending);
            return false;
        };
        drop(done);
        log::warn!(
            "could not give back what {lock} may hold on the server ({err:#}); trying again \
             in the background for {lasts:?}, until it has surely expired",
        );
        let mut state = self.state.lock();
        !std::mem::replace(&mut state.retrying, true)
    }

    /// Lists `undo` for [`retry`](Self::retry) only, nothing at once: for a call that
    /// failed just now and returns its own error. True when no thread retries yet: the
    /// caller is to start one.
    pub fn later(&self, lock: &Subject, undo: Undo) -> bool {
        self.list(Pending::new(lock, undo));
        let mut state = self.state.lock();
        !std::mem::replace(&mut state.retrying, true)
    }

    /// Lists `pending`, in place of one pending for the same owner slot.
    fn list(&self, pending: Arc<Pending>) {
        let mut state = self.state.lock();
        // A newer give-back for the same owner slot stands for the older one.
        if let Some(slot) = &pending.slot {
            state
                .pending
                .retain(|other| other.slot.as_ref() != Some(slot));
        }
        state.pending.push(pending);
    }

    /// One try of everything pending, each within `within`; false once nothing is left,
    /// when the thread that retries is to end.
    pub fn retry(&self, nodes: &Nodes, within: Duration) -> bool {
        let pending = self.state.lock().pending.clone();
        for one in &pending {
            // Its owner is settling it: it will not be left behind.
            let Some(mut done) = one.done.try_lock() else {
                continue;
            };
            let alive = Instant::now() < one.alive_until;
            if !*done && alive && run(nodes, &one.cmd, Instant::now() + within).is_ok() {
                log::info!("gave back what {} held on the server", one.lock);
                *done = true;
            }
        }
        let mut state = self.state.lock();
        let now = Instant::now();
        // Not waiting for one that runs (its lock is taken before the list's elsewhere).
        let open = |one: &Arc<Pending>| one.done.try_lock().is_none_or(|done| !*done);
        state
            .pending
            .retain(|one| open(one) && now < one.alive_until);
        state.retrying = !state.pending.is_empty();
        state.retrying
    }

    /// No thread retries after all (none could start).
    pub fn retrying_stopped(&self) {
        self.state.lock().retrying = false;
    }

    /// Before an attempt or a release of the owner of `slot`: either sets the owner's
    /// count itself, so a give-back still pending for it has nothing left to do and must
    /// not run after it. Waits for a try of it already on its way.
    pub fn supersede(&self, slot: &HoldId) {
        let pending = {
            let state = self.state.lock();
            if state.pending.is_empty() {
                return;
            }
            (state.pending.iter())
                .find(|one| one.slot.as_ref() == Some(slot))
                .cloned()
        };
        if let Some(pending) = pending {
            *pending.done.lock() = true;
            self.remove(&pending);
        }
    }

    fn remove(&self, pending: &Arc<Pending>) {
        self.state
            .lock()
            .pending
            .retain(|one| !Arc::ptr_eq(one, pending));
    }
}

/// Runs `cmd` on every node by `end`; the first node's error, if any.
fn run(nodes: &Nodes, cmd: &Cmd, end: Instant) -> Result<()> {
    let results = nodes.run_all::<Value>(cmd, Some(end));
    results.into_iter().collect::<Result<Vec<_>>>()?;
    Ok(())
}
