//! What every lock of one client shares: its settings, its nodes, its owner id, the table of
//! its reentrant holds, its watchdog threads and its counters.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::base::config::Config;
use crate::base::error::{Error, Result, Subject};
use crate::base::health::{Health, HealthChange};
use crate::base::lost::LockLost;
use crate::base::stats::Counters;
use crate::kinds::holding::Holding;
use crate::kinds::undo::Undo;
use crate::lease::give_back::{GiveBacks, RETRY_EVERY};
use crate::lease::hold_table::HoldTable;
use crate::lease::workers::Workers;
use crate::notify::cancel::Cancel;
use crate::transport::node::Nodes;

/// The state behind a client and its locks.
pub(crate) struct Shared {
    config: Config,
    nodes: Nodes,
    /// The client's UUID, the first half of every reentrant owner field.
    id: String,
    holds: HoldTable,
    give_backs: GiveBacks,
    workers: Workers,
    counters: Counters,
    /// The process the client was built in; a forked child must not act as its owner.
    pid: u32,
    /// Cancelled when the client is closed: ends every wait of the client.
    closing: Cancel,
}

impl Shared {
    pub fn new(config: Config, nodes: Nodes) -> Self {
        Shared {
            id: config.client_id.clone(),
            workers: Workers::new(config.watchdog_stack_size, config.renew_interval()),
            nodes,
            config,
            holds: HoldTable::default(),
            give_backs: GiveBacks::default(),
            counters: Counters::default(),
            pid: std::process::id(),
            closing: Cancel::new(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn nodes(&self) -> &Nodes {
        &self.nodes
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn holds(&self) -> &HoldTable {
        &self.holds
    }

    /// What could not be given back yet.
    pub fn give_backs(&self) -> &GiveBacks {
        &self.give_backs
    }

    /// Gives back what `undo` undoes, at once within a response timeout of its own and,
    /// where Redis cannot be reached, again in the background (see `give_back`).
    pub fn give_back(self: &Arc<Self>, lock: &Subject, undo: Undo) {
        self.give_back_all([(lock, undo)]);
    }

    /// Gives back what each undo undoes, as [`give_back`](Self::give_back) does, all within
    /// one response timeout: a multi-lock's members in one round, not one round each.
    pub fn give_back_all<'a>(
        self: &Arc<Self>,
        undos: impl IntoIterator<Item = (&'a Subject, Undo)>,
    ) {
        let end = Instant::now() + self.config.response_timeout;
        let mut retry = false;
        for (lock, undo) in undos {
            // The holds it leaves their owner last no longer than it says.
            if let (Some(slot), Some(until)) = (&undo.slot, undo.leaves_until)
                && let Some(holding) = self.holds.holding(slot)
            {
                holding.shorten_to(until);
            }
            retry |= self.give_backs.give_back(&self.nodes, end, lock, undo);
        }
        if retry {
            self.retry_give_backs();
        }
    }

    /// Gives back what `undo` undoes in the background only (see `give_back`).
    pub fn give_back_later(self: &Arc<Self>, lock: &Subject, undo: Undo) {
        if self.give_backs.later(lock, undo) {
            self.retry_give_backs();
        }
    }

    /// Starts the thread that retries what is pending.
    fn retry_give_backs(self: &Arc<Self>) {
        let client = Arc::downgrade(self);
        let started = std::thread::Builder::new()
            .name("redmutex-give-back".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(RETRY_EVERY);
                    let Some(shared) = client.upgrade() else {
                        return;
                    };
                    let within = shared.config.response_timeout;
                    if !shared.give_backs.retry(&shared.nodes, within) {
                        return;
                    }
                }
            });
        if let Err(err) = started {
            log::warn!("no thread to retry give-backs ({err}); their leases end them");
            self.give_backs.retrying_stopped();
        }
    }

    pub fn workers(&self) -> &Workers {
        &self.workers
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Whether this process is a fork of the one the client was built in.
    fn forked(&self) -> bool {
        std::process::id() != self.pid
    }

    /// Refuses to act for a client built in another process (this one is a fork of it).
    pub fn check_process(&self) -> Result<()> {
        match self.forked() {
            false => Ok(()),
            true => Err(Error::Forked { parent: self.pid }),
        }
    }

    /// The token that closing the client cancels.
    pub fn closing(&self) -> &Cancel {
        &self.closing
    }

    /// Refuses to start anything new on a closed client.
    pub fn check_open(&self, lock: &Subject) -> Result<()> {
        match self.closing.is_cancelled() {
            false => Ok(()),
            true => Err(Error::Cancelled {
                lock: lock.clone(),
                closed: true,
            }),
        }
    }

    /// Marks a holding lost and, the first time, counts it, logs it and tells the callback:
    /// the one way every finder of a loss (watchdog, release, re-entry) reports it.
    pub fn report_lost(&self, lock: &Subject, holding: &Holding, error: Option<Error>) {
        let before = holding.told_health();
        // Counted first: whoever sees the hold lost (its guard, a watch, the callbacks)
        // finds the loss in the stats and the metrics.
        if !holding.mark_lost(|| self.counters.lost()) {
            return;
        }
        self.health_changed(lock, before, Health::Lost);
        match &error {
            None => log::warn!("{lock} was lost: its key or field is gone"),
            Some(err) => {
                log::warn!("{lock} was lost: renewals failed until its validity ran out: {err:#}")
            }
        }
        if let Some(callback) = &self.config.on_lock_lost {
            let lost = LockLost {
                name: lock.name().to_owned(),
                error,
            };
            if std::panic::catch_unwind(AssertUnwindSafe(|| callback(&lost))).is_err() {
                log::error!("the on_lock_lost callback panicked for {lock}");
            }
        }
        if let Some(hook) = holding.take_lost_hook() {
            hook();
        }
    }
}

impl Shared {
    /// Tells the health callback, if any, that the hold on `lock` went from `from` to `to`.
    pub fn health_changed(&self, lock: &Subject, from: Health, to: Health) {
        log::debug!("{lock}: {from:?} -> {to:?}");
        if let Some(callback) = &self.config.on_health_change {
            let change = HealthChange {
                name: lock.name().to_owned(),
                from,
                to,
            };
            if std::panic::catch_unwind(AssertUnwindSafe(|| callback(&change))).is_err() {
                log::error!("the on_health_change callback panicked for {lock}");
            }
        }
    }
}

impl Drop for Shared {
    /// In a forked child, leaks the nodes, the holds and the watchdog threads' state instead
    /// of dropping them: their mutexes may have been held by a thread of the parent at the
    /// fork, and no thread of the child will ever release them, so dropping them (which
    /// locks them) could hang the child on its way out. The sockets are the parent's too.
    fn drop(&mut self) {
        if self.forked() {
            let nodes = std::mem::replace(&mut self.nodes, Nodes::new(Vec::new(), &self.config));
            let workers = std::mem::replace(&mut self.workers, Workers::new(0, Duration::ZERO));
            std::mem::forget((nodes, workers, std::mem::take(&mut self.holds)));
        }
    }
}
