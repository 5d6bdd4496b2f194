//! How a leader learns at once that it no longer leads: removed by a forced resignation, or
//! replaced after its key was deleted. Every resignation and every election is announced on
//! the election's observers' channel; a leader listens there while it leads, and on any
//! message has its watchdog renew at once. The renewal checks the leader's token, so a
//! leader that was removed finds its leadership lost within a round trip, and reports it as
//! any loss is reported.

use std::sync::Arc;

use crate::kinds::election::{self, LeadingHeld};
use crate::layout::names;
use crate::lease::target::Target;
use crate::notify::hub::Signal;
use crate::notify::notifier::Subscription;

/// Listens on the observers' channel of the election `target` for the leadership `held`
/// while the subscription returned lives. Once subscribed, has the watchdog check at once
/// whether it still leads: a message published between the election and the
/// subscription's confirmation was missed. None when there is nothing to listen for (no
/// watchdog, or resigned already) or no subscription to be had (refused by Redis): then
/// the next renewal finds a removal; the same on a client without pub/sub.
pub(crate) fn listen(target: &Target, held: &LeadingHeld) -> Option<Subscription> {
    if !target.shared.config().pubsub {
        return None;
    }
    let nudge = held.renew_now()?;
    let key = target.key().ok()?;
    let channel = names::election_channel(key);
    let signal = Arc::new(Signal::with_hook(move || nudge.now()));
    let subscribed = election::node(target)
        .and_then(|node| node.notifier(&channel))
        .map_err(|err| format!("{err:#}"))
        .and_then(|notifier| {
            (notifier.subscribe(&channel, &signal, None, false, None))
                .map_err(|err| err.to_string())
        });
    match subscribed {
        Ok(subscription) => {
            signal.raise();
            Some(subscription)
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
