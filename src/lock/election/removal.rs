//! How a leader learns at once that it no longer leads: removed by a forced resignation, or
//! replaced after its key was deleted. Every resignation and every election is announced on
//! the election's observers' channel; a leader listens there while it leads, and on any
//! message has its watchdog renew at once. The renewal checks the leader's token, so a
//! leader that was removed finds its leadership lost within a round trip, and reports it as
//! any loss is reported.
//!
//! The listening outlives the server it began on: when its subscription ends (the slot
//! moved or failed over to another primary, whose old subscriber was retired), it is made
//! again where the channel is served now, on a short-lived thread of its own, and the
//! watchdog checks at once for a message missed meanwhile.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;

use crate::base::retry::Backoff;
use crate::kinds::election::{self, LeadingHeld};
use crate::layout::names;
use crate::lease::hold::Hold;
use crate::lease::target::Target;
use crate::lease::workers::Nudge;
use crate::notify::hub::Signal;
use crate::notify::notifier::Subscription;

/// A leader's listening, while it lives: dropping it ends the listening (a thread making
/// the subscription again holds it only weakly).
pub(crate) struct Removal {
    _kept: Arc<Kept>,
}

struct Kept {
    target: Target,
    channel: Vec<u8>,
    signal: Arc<Signal>,
    /// Has the watchdog renew now.
    nudge: Nudge,
    subscription: Mutex<Option<Subscription>>,
}

/// Listens on the observers' channel of the election `target` for the leadership `held`
/// while the value returned lives. Once subscribed, has the watchdog check at once whether
/// it still leads: a message published between the election and the subscription's
/// confirmation was missed. None when there is nothing to listen for (no watchdog, or
/// resigned already) or no subscription to be had (refused by Redis): then the next
/// renewal finds a removal; the same on a client without pub/sub.
pub(crate) fn listen(target: &Target, held: &Hold<LeadingHeld>) -> Option<Removal> {
    if !target.shared.config().pubsub {
        return None;
    }
    let nudge = held.renew_now()?;
    let key = target.key().ok()?;
    let kept = Arc::new_cyclic(|kept: &Weak<Kept>| {
        let (kept, hooked) = (kept.clone(), nudge.clone());
        // Whether a thread is making the subscription again.
        let renewing = Arc::new(AtomicBool::new(false));
        Kept {
            target: target.clone(),
            channel: names::election_channel(key),
            // Run where the subscription is raised, with the subscriber's state locked: the
            // subscription is looked at, and made again, on another thread, and nothing
            // here may drop the listening (its subscription takes that lock).
            signal: Arc::new(Signal::with_hook(move || {
                hooked.now();
                renew_soon(&kept, &renewing);
            })),
            nudge,
            subscription: Mutex::new(None),
        }
    });
    match kept.subscribe() {
        Ok(()) => {
            kept.nudge.now();
            Some(Removal { _kept: kept })
        }
        Err(err) => {
            log::debug!(
                "{} learns of its removal at its next renewal only: {err}",
                target.subject()
            );
            None
        }
    }
}

impl Kept {
    /// Subscribes where the channel is served now, replacing the subscription held.
    fn subscribe(&self) -> Result<(), String> {
        let subscribed = election::node(&self.target)
            .and_then(|node| node.notifier(&self.channel))
            .map_err(|err| format!("{err:#}"))
            .and_then(|notifier| {
                (notifier.subscribe(&self.channel, &self.signal, None, false, None))
                    .map_err(|err| err.to_string())
            });
        *self.subscription.lock() = Some(subscribed?);
        Ok(())
    }

    fn is_live(&self) -> bool {
        (self.subscription.lock().as_ref()).is_some_and(Subscription::is_live)
    }
}

/// Has a thread make the subscription of `kept` again if it has ended, unless one is at it.
fn renew_soon(kept: &Weak<Kept>, renewing: &Arc<AtomicBool>) {
    if renewing.swap(true, Ordering::AcqRel) {
        return;
    }
    let (kept, flag) = (kept.clone(), renewing.clone());
    let spawned = std::thread::Builder::new()
        .name("redmutex-removal".into())
        // It may connect (a cluster's map read again on the way).
        .stack_size(256 * 1024)
        .spawn(move || renew(&kept, &flag));
    if let Err(err) = spawned {
        renewing.store(false, Ordering::Release);
        log::warn!("the removal of a leader may be found at its next renewal only: {err}");
    }
}

/// Makes the subscription of `kept` again while it has ended and the leadership lasts,
/// with backoff while the new one is not confirmed (a slot still moving), and has the
/// watchdog check for a message missed meanwhile.
fn renew(kept: &Weak<Kept>, renewing: &AtomicBool) {
    let mut backoff = Backoff::new(Duration::from_millis(10), Duration::from_secs(1));
    loop {
        let Some(this) = kept.upgrade() else {
            renewing.store(false, Ordering::Release);
            return;
        };
        if this.is_live() {
            renewing.store(false, Ordering::Release);
            // Ended between the look and the store, and no other thread took it on: look
            // again.
            if this.is_live() || renewing.swap(true, Ordering::AcqRel) {
                return;
            }
            continue;
        }
        match this.subscribe() {
            // A message may have come while it was not live.
            Ok(()) if this.is_live() => this.nudge.now(),
            Ok(()) => {}
            Err(err) => log::debug!("{}: listening again failed: {err}", this.target.subject()),
        }
        drop(this);
        std::thread::sleep(backoff.next_delay(None));
    }
}
