//! The waiting state of one wait on pub/sub, written once for the lock machine's waiting
//! loop and the count-down latch's: the signal a wait sleeps on, its subscriptions on every
//! node, and the wake-up it hands on when it leaves without using it.

use std::sync::Arc;
use std::time::Instant;

use crate::lease::target::Target;
use crate::notify::hub::Signal;
use crate::notify::notifier::Subscription;

/// The waiting state of one wait (an acquisition, a latch's wait): its signal, its subscriptions and whether it holds
/// a wake-up it has not used. Dropped without using one, it hands the wake-up on to the next
/// waiter, so that a waiter that leaves (deadline, error) never swallows an unlock.
pub(crate) struct Waiting {
    pub(crate) signal: Arc<Signal>,
    subscriptions: Vec<Subscription>,
    /// Whether notifications are to be had; false once subscribing failed everywhere.
    pub(crate) notifications: bool,
    /// Woken by a message whose attempt has not found the lock busy or taken it yet.
    pub(crate) woken: bool,
}

impl Waiting {
    pub(crate) fn new() -> Self {
        Waiting {
            signal: Arc::default(),
            subscriptions: Vec::new(),
            notifications: true,
            woken: false,
        }
    }

    /// Whether a subscription is confirmed, so that an unlock wakes this waiter.
    pub(crate) fn confirmed(&self) -> bool {
        self.subscriptions.iter().any(Subscription::is_confirmed)
    }

    pub(crate) fn needs_subscription(&self) -> bool {
        self.notifications && !self.subscriptions.iter().any(Subscription::is_live)
    }

    /// Subscribes to `channel` on every node that will have it, taking `grants` (see
    /// [`Notifier::subscribe`](crate::notify::notifier::Notifier::subscribe)), waiting for confirmations until `deadline` at most. Returns whether every node's
    /// subscription is caught up with the attempt sent at `since` (see
    /// [`Subscription::caught_up`]).
    pub(crate) fn subscribe(
        &mut self,
        target: &Target,
        channel: &[u8],
        grants: bool,
        deadline: Option<Instant>,
        since: Instant,
    ) -> bool {
        self.subscriptions.clear();
        let mut caught_up = true;
        for node in target.shared.nodes().list() {
            let subscribed = match node.notifier(channel) {
                Ok(notifier) => {
                    (notifier.subscribe(channel, &self.signal, deadline, grants, Some(since)))
                        .map_err(|err| err.to_string())
                }
                Err(err) => Err(format!("{err:#}")),
            };
            match subscribed {
                Ok(subscription) => {
                    caught_up &= subscription.caught_up();
                    self.subscriptions.push(subscription);
                }
                Err(err) => {
                    caught_up = false;
                    log::debug!(
                        "no unlock notifications from {} for {}: {err}",
                        node.name,
                        target.subject()
                    );
                }
            }
        }
        self.notifications = !self.subscriptions.is_empty();
        caught_up && self.notifications
    }

    /// Hands the wake-up that woke this waiter's last attempt, which it could not use (it
    /// needs more permits than there are), to a waiter that has not had it, on every node.
    /// One raised since is kept: it comes from a later message.
    pub(crate) fn pass_on(&mut self) {
        if std::mem::take(&mut self.woken) {
            self.hand_on();
        }
    }

    fn hand_on(&self) {
        for subscription in &self.subscriptions {
            subscription.pass_on();
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.woken | self.signal.take() {
            self.hand_on();
        }
    }
}
