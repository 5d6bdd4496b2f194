//! A hold, as the lock machine keeps it for a guard: made of what a kind's attempt granted
//! (its holding, its place in the client's table of thread-owned holds, its watchdog), and
//! given back through the kind, for every kind alike.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::base::error::{Error, Result};
use crate::kinds::call::Call;
use crate::kinds::holding::Holding;
use crate::kinds::kind::{Freed, Giving, Grant, sealed::Machinery};
use crate::kinds::slot::HoldId;
use crate::lease::hold_table::Release;
use crate::lease::target::Target;
use crate::lease::watchdog;
use crate::lease::workers::{Nudge, Ticket};

/// One hold, as a guard keeps it.
pub struct Hold<H> {
    pub(crate) holding: Arc<Holding>,
    /// Whether the watchdog renews it (taken without an explicit lease).
    pub(crate) watched: bool,
    /// What the kind keeps per hold, such as its token.
    pub(crate) held: H,
    /// The owner slot of a hold its thread owns, whose watchdog the client's table keeps.
    slot: Option<HoldId>,
    /// The watchdog's ticket of a watched hold no thread owns; dropped at release.
    watchdog: Mutex<Option<Ticket>>,
}

impl<H> Hold<H> {
    /// The hold `grant` makes on the lock `target`: recorded in the client's table when
    /// its thread owns it, renewed by the watchdog when watched. When no watchdog can
    /// start, what the grant took is given back and the error says why.
    pub(crate) fn new(target: &Target, grant: Grant<H>) -> Result<Self> {
        let watched = grant.watched();
        let Grant {
            held,
            valid_until,
            lease,
            renew,
            slot,
        } = grant;
        let start = |holding: &Arc<Holding>, slot: Option<&HoldId>| match &renew {
            Some(renew) => watchdog::start(target, holding, renew, slot),
            None => Err(std::io::Error::other("its kind renews nothing")),
        };
        // No watchdog could start: what the grant took goes back, leaving `left` holds.
        let refused = |left, source| {
            if let Some((_, renewal)) = &renew {
                target.give_back(renewal.undo(target, left));
            }
            Error::Watchdog {
                lock: target.subject().clone(),
                source,
            }
        };
        let Some((id, held_before)) = slot else {
            let holding = Arc::new(Holding::new(valid_until));
            let ticket = (watched.then(|| start(&holding, None)).transpose())
                .map_err(|source| refused(0, source))?;
            return Ok(Hold {
                holding,
                watched,
                held,
                slot: None,
                watchdog: Mutex::new(ticket),
            });
        };
        let (holds, config) = (target.shared.holds(), target.shared.config());
        let watch = |holding: &Arc<Holding>| start(holding, Some(&id));
        match holds.add(&id, held_before, lease, config.lease, valid_until, watch) {
            Ok(holding) => Ok(Hold {
                holding,
                watched,
                held,
                slot: Some(id),
                watchdog: Mutex::new(None),
            }),
            Err((_, source)) => Err(refused(holds.count(&id), source)),
        }
    }

    /// Gives the hold back through its kind `K`: off the client's table first (a
    /// thread-owned hold) or its watchdog stopped, then the kind's release, then what it
    /// found settled: a hold found gone, or past its validity, is reported lost.
    pub(crate) fn release<K: Machinery<Held = H>>(&self, target: &Target) -> Result<()> {
        target.begin()?;
        let shared = &target.shared;
        let count = match &self.slot {
            Some(id) => {
                let released = (shared.holds()).release(
                    id,
                    &self.holding,
                    self.watched,
                    shared.config().lease,
                );
                let Some(Release { held, lease }) = released else {
                    // Lost, or already ended: the key may be someone else's now. Leave it.
                    return Err(match self.holding.is_lost() {
                        true => target.lost(),
                        false => target.not_held(),
                    });
                };
                // The release sets the owner's count: a give-back still pending for it has
                // no work.
                shared.give_backs().supersede(id);
                Some((held, lease))
            }
            None => {
                // Stops the renewals; a renewal already on its way finishes first.
                drop(self.watchdog.lock().take());
                None
            }
        };
        // Past its validity the hold is lost, whatever the release finds: it still gives
        // back what may be left (a renewal's late reply, the last moments of a lease).
        let expired = self.holding.is_lost();
        let giving = Giving {
            holding: &self.holding,
            held: &self.held,
            count,
        };
        let given = K::release(target, &giving);
        if given.kept_gone
            && let Some(id) = &self.slot
            && shared.holds().forget(id, &self.holding, false)
        {
            shared.report_lost(target.subject(), &self.holding, None);
        }
        if let Some(cmd) = given.again {
            target.release_later(cmd, &self.holding, self.slot.clone());
        }
        match given.freed? {
            Freed::Done(_) if expired => Err(target.found_lost(&self.holding)),
            Freed::Done(result) => result,
            // Too many nodes no longer have it: it expired or was deleted, and every guard
            // of this holding is stale.
            Freed::Gone => {
                if let Some(id) = &self.slot {
                    shared.holds().forget(id, &self.holding, false);
                }
                Err(target.found_lost(&self.holding))
            }
        }
    }

    /// What makes the watchdog renew this hold now; none without a watchdog of its own (an
    /// explicit lease, a thread-owned hold) or once released.
    pub(crate) fn renew_now(&self) -> Option<Nudge> {
        self.watchdog.lock().as_ref().map(Ticket::nudge)
    }
}
