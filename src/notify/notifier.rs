//! Unlock notifications: one subscriber connection and thread per client, started on the
//! first wait and shared by every waiter of every lock.
//!
//! A waiter registers a [`Signal`] on a lock's channel; a waiter of a lock on several nodes
//! registers the same signal on each. An unlock message raises the signal of one waiter of
//! that lock, not all of them, taking turns: the woken one takes the lock, and its own
//! release wakes the next. A waiter that leaves without using its wake-up passes it on
//! ([`Subscription::pass_on`]). A waiter never relies on a message alone; every wait is
//! bounded, so a lost message costs one bounded wait.
//!
//! The connection belongs to the subscriber thread ([`crate::notify::subscriber`]), which alone
//! reads and writes it. A waiter records what it wants here and, when the thread is blocked
//! reading, wakes it with a message on the hub's private wake channel, sent over a pooled
//! connection; the thread then sends the SUBSCRIBE and raises the waiter's confirmation. A
//! channel whose last waiter left stays subscribed for a while
//! ([`LINGER`](crate::notify::hub::LINGER)), so that the next waiter of a busy lock finds
//! it subscribed already: it neither waits for a SUBSCRIBE nor attempts again after one,
//! since a message that came while nobody waited is kept for it
//! ([`Subscription::caught_up`]).

use std::io;
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use crate::layout::names;
use crate::notify::hub::{Hub, Settings, Signal, Sub};
use crate::topology::endpoint;

/// Starts, owns and stops the subscriber of one client.
pub(crate) struct Notifier {
    settings: Settings,
    hub: Mutex<Option<Arc<Hub>>>,
}

/// One waiter's registration on a lock's channel; dropping it deregisters.
pub(crate) struct Subscription {
    hub: Arc<Hub>,
    channel: Vec<u8>,
    signal: Arc<Signal>,
    caught_up: bool,
}

impl Notifier {
    pub fn new(settings: Settings) -> Self {
        Notifier {
            settings,
            hub: Mutex::new(None),
        }
    }

    /// Registers `signal` on `channel` and waits until Redis confirms the subscription, so
    /// that an unlock after this returns is not missed; at most a response timeout, and never
    /// past `end`. Fails when Redis refused the subscription (the waiter should poll) or the
    /// subscriber thread cannot start. A waiter that takes `grants` has its signal armed
    /// (see [`Signal`]): by the confirmation of the SUBSCRIBE sent for it, or, when the
    /// channel was subscribed already, by an arming message it publishes itself.
    ///
    /// With `since` (when the waiter's last attempt was sent), the subscription is
    /// [caught up](Subscription::caught_up) when the channel was confirmed before then: a
    /// message published after that attempt ran raises the signal, whether it comes after
    /// this registration or came before it with no waiter to take it.
    pub fn subscribe(
        &self,
        channel: &[u8],
        signal: &Arc<Signal>,
        end: Option<Instant>,
        grants: bool,
        since: Option<Instant>,
    ) -> io::Result<Subscription> {
        let hub = self.hub()?;
        let mut subscription = Subscription {
            hub: hub.clone(),
            channel: channel.to_vec(),
            signal: signal.clone(),
            caught_up: false,
        };
        let full = Instant::now() + self.settings.response_timeout;
        let until = end.map_or(full, |end| full.min(end));
        let mut state = hub.state.lock();
        subscription.caught_up = state.register(channel, signal, since);
        let entry = &state.channels[channel];
        // Messages already on their way may reach this signal before the confirmation of
        // a SUBSCRIBE sent before it was registered: such a signal is armed by a message
        // of its own, published after it.
        let (sub, alone) = (entry.sub, entry.waiters.len() == 1);
        let arming = (grants && matches!(sub, Sub::Sent { .. } | Sub::Live)).then(|| {
            let number = state.next_arming;
            state.next_arming += 1;
            state.unarmed.push((number, signal.clone()));
            number
        });
        if let Some(number) = arming {
            drop(state);
            let wait = until.saturating_duration_since(Instant::now());
            let payload = format!("a{number}");
            if let Err(err) = (self.settings.waker)(&hub.wake_channel, payload.as_bytes(), wait) {
                // Unarmed, a grant only wakes this waiter, whose attempt then finds it.
                log::debug!("arming a waiter for grants failed: {err}");
            }
            state = hub.state.lock();
        } else if sub == Sub::Wanted && alone {
            if !state.reading {
                hub.changed.notify_all();
            } else if !std::mem::replace(&mut state.wake_asked, true) {
                drop(state);
                let wait = until.saturating_duration_since(Instant::now());
                let woken = (self.settings.waker)(&hub.wake_channel, b"w", wait);
                state = hub.state.lock();
                if let Err(err) = woken {
                    // The thread subscribes when it next wakes by itself (a probe is due
                    // every ping interval); messages until then are missed, so the waiters
                    // retry once it is confirmed.
                    log::debug!("waking the subscriber thread failed: {err}");
                    state.wake_asked = false;
                    if let Some(entry) = state.channels.get_mut(channel) {
                        entry.wake_all_on_confirm = true;
                    }
                }
            }
        }
        loop {
            match state.channels.get(channel).map(|entry| entry.sub) {
                _ if state.stopped => break,
                // Gone: not live, so the waiter subscribes again after its next attempt.
                Some(Sub::Live | Sub::Gone) | None => break,
                Some(Sub::Refused) => {
                    drop(state);
                    drop(subscription);
                    return Err(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        "SUBSCRIBE refused by Redis",
                    ));
                }
                Some(Sub::Wanted | Sub::Sent { .. }) => {}
            }
            // Unanswered for a whole response timeout: the subscriber thread finds out why
            // (its probe after the SUBSCRIBE is overdue too) and reconnects.
            if hub.changed.wait_until(&mut state, until).timed_out() {
                break;
            }
        }
        drop(state);
        Ok(subscription)
    }

    /// The running hub, or a new one whose thread connects in the background.
    fn hub(&self) -> io::Result<Arc<Hub>> {
        let mut slot = self.hub.lock();
        if let Some(hub) = slot.as_ref().filter(|hub| !hub.state.lock().stopped) {
            return Ok(hub.clone());
        }
        let id = names::random_id();
        let hub = Arc::new(Hub {
            state: Mutex::default(),
            changed: Condvar::new(),
            wake_channel: [&self.settings.wake_prefix[..], id.as_bytes()].concat(),
        });
        let thread_hub = hub.clone();
        let settings = self.settings.clone();
        thread::Builder::new()
            .name("redmutex-notify".into())
            .stack_size(128 * 1024)
            .spawn(move || crate::notify::subscriber::run(&thread_hub, &settings))?;
        *slot = Some(hub.clone());
        Ok(hub)
    }
}

impl Notifier {
    /// The server moved: the subscriber thread drops its connection, connects to where the
    /// server is now, subscribes every channel again and wakes every waiter. It does so at
    /// once: a thread waiting with nothing to read is signalled, and one blocked reading
    /// its connection is sent a wake-up there, on the old server (a demoted primary still
    /// delivers messages), from a thread of its own, so that the caller never waits for the
    /// old server. When that server cannot be reached either, the connection breaks, or
    /// the thread's next probe finds it deaf within a ping interval.
    pub fn reconnect(&self) {
        let Some(hub) = self.hub.lock().clone() else {
            return;
        };
        let mut state = hub.state.lock();
        state.moved = true;
        hub.changed.notify_all();
        let old = state.server.clone().filter(|_| state.reading);
        drop(state);
        let Some(old) = old else {
            return;
        };
        let (connect, response) = (
            self.settings.connect_timeout,
            self.settings.response_timeout,
        );
        let woken = thread::Builder::new()
            .name("redmutex-notify-move".into())
            // It connects, which overflowed 64 KiB in a debug build; the subscriber thread,
            // which connects the same way, has 128 KiB.
            .stack_size(256 * 1024)
            .spawn(move || {
                let sent = endpoint::connect(&old, connect, response).and_then(|mut conn| {
                    redis::cmd("PUBLISH")
                        .arg(&hub.wake_channel)
                        .arg("w")
                        .exec(&mut conn)
                });
                if let Err(err) = sent {
                    log::debug!("waking the subscriber on the old server failed: {err}");
                }
            });
        if let Err(err) = woken {
            log::debug!("the subscriber moves at its next probe: {err}");
        }
    }
}

impl Notifier {
    /// Stops the subscriber thread (at once when it waits with nothing subscribed, else when
    /// it next wakes, within a ping interval) and wakes every waiter, which then subscribes
    /// again where its lock is now: its server no longer serves the lock (a cluster slot
    /// moved away), or the client is dropped.
    pub fn retire(&self) {
        if let Some(hub) = self.hub.lock().take() {
            let mut state = hub.state.lock();
            state.stopped = true;
            let channels: Vec<Vec<u8>> = state.channels.keys().cloned().collect();
            for channel in channels {
                state.raise(&channel, None);
            }
            drop(state);
            hub.changed.notify_all();
        }
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        self.retire();
    }
}

impl Subscription {
    /// Whether the hub still runs and its server still has the channel; a waiter whose
    /// subscription is not live subscribes again.
    pub fn is_live(&self) -> bool {
        let state = self.hub.state.lock();
        !state.stopped
            && (state.channels.get(&self.channel)).is_none_or(|entry| entry.sub != Sub::Gone)
    }

    /// Whether Redis has confirmed the subscription, so that an unlock from now on wakes
    /// this waiter. Until then (a subscriber that cannot connect, or whose SUBSCRIBE goes
    /// unanswered) messages may be missed.
    pub fn is_confirmed(&self) -> bool {
        let state = self.hub.state.lock();
        !state.stopped
            && (state.channels.get(&self.channel)).is_some_and(|entry| entry.sub == Sub::Live)
    }

    /// Whether the channel was confirmed before the attempt this subscription was made
    /// after, so that nothing published since that attempt ran can be missed: the waiter
    /// may wait without attempting again first.
    pub fn caught_up(&self) -> bool {
        self.caught_up
    }

    /// Hands a wake-up this waiter will not use to the next waiter of the channel.
    pub fn pass_on(&self) {
        self.hub
            .state
            .lock()
            .raise_one(&self.channel, Some(&self.signal));
    }
}

impl Drop for Subscription {
    /// Deregisters. A subscribed channel left without waiters lingers (see
    /// [`LINGER`](crate::notify::hub::LINGER)); one never sent is simply forgotten.
    fn drop(&mut self) {
        let mut state = self.hub.state.lock();
        let signal = &self.signal;
        state.unarmed.retain(|(_, w)| !Arc::ptr_eq(w, signal));
        let Some(entry) = state.channels.get_mut(&self.channel) else {
            return;
        };
        if let Some(at) = entry.waiters.iter().position(|w| Arc::ptr_eq(w, signal)) {
            entry.waiters.remove(at);
        }
        entry.arming.retain(|w| !Arc::ptr_eq(w, signal));
        if entry.waiters.is_empty() {
            match entry.sub {
                Sub::Wanted | Sub::Refused | Sub::Gone => {
                    state.channels.remove(&self.channel);
                }
                Sub::Live => entry.idle_since = Some(Instant::now()),
                Sub::Sent { .. } => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notify::hub::Channel;

    fn hub_with(channel: &[u8], waiters: usize) -> (Arc<Hub>, Vec<Subscription>) {
        let hub = Arc::new(Hub {
            state: Mutex::default(),
            changed: Condvar::new(),
            wake_channel: b"wake".to_vec(),
        });
        let subscriptions = (0..waiters)
            .map(|_| {
                let signal = Arc::new(Signal::default());
                let mut state = hub.state.lock();
                let entry = state
                    .channels
                    .entry(channel.to_vec())
                    .or_insert_with(|| Channel {
                        sub: Sub::Live,
                        ..Channel::wanted()
                    });
                entry.waiters.push_back(signal.clone());
                Subscription {
                    hub: hub.clone(),
                    channel: channel.to_vec(),
                    signal,
                    caught_up: false,
                }
            })
            .collect();
        (hub, subscriptions)
    }

    #[test]
    fn one_message_raises_one_waiter_in_turn() {
        let (hub, subs) = hub_with(b"c", 3);
        for expected in [0, 1, 2, 0] {
            hub.state.lock().raise(b"c", Some(1));
            let raised: Vec<bool> = subs.iter().map(|s| s.signal.take()).collect();
            let mut want = vec![false; 3];
            want[expected] = true;
            assert_eq!(raised, want);
        }
    }

    #[test]
    fn a_wake_up_handed_on_goes_round_once() {
        let (hub, subs) = hub_with(b"c", 3);
        hub.state.lock().raise(b"c", Some(1));
        let raised =
            |subs: &[Subscription]| -> Vec<bool> { subs.iter().map(|s| s.signal.take()).collect() };
        assert_eq!(raised(&subs), [true, false, false]);
        // None can use it: each hands it to one that has not had it, then it stops.
        subs[0].pass_on();
        assert_eq!(raised(&subs), [false, true, false]);
        subs[1].pass_on();
        assert_eq!(raised(&subs), [false, false, true]);
        subs[2].pass_on();
        assert_eq!(
            raised(&subs),
            [false, false, false],
            "not back to the first"
        );
        // The next message starts afresh.
        hub.state.lock().raise(b"c", Some(1));
        assert_eq!(raised(&subs).iter().filter(|r| **r).count(), 1);
    }

    #[test]
    fn lost_wake_up_a_wake_up_passed_on_reaches_another_waiter() {
        let (hub, mut subs) = hub_with(b"c", 2);
        hub.state.lock().raise_one(b"c", None);
        assert!(subs[0].signal.take(), "the first waiter is woken");
        // It leaves without using the wake-up and hands it on.
        subs[0].pass_on();
        drop(subs.remove(0));
        assert!(
            subs[0].signal.take(),
            "the wake-up reached the other waiter"
        );
    }

    #[test]
    fn a_grant_counts_only_once_a_message_after_the_registration_armed_the_signal() {
        let (hub, subs) = hub_with(b"c", 1);
        let cap = crate::layout::names::Granted {
            cap: std::time::Duration::from_secs(1),
            place: 7,
        };
        let signal = &subs[0].signal;
        hub.state.lock().unarmed.push((5, signal.clone()));
        // Possibly from an earlier wait: a wake-up only.
        hub.state.lock().raise_granted(b"c", cap);
        assert!(signal.take());
        assert_eq!(signal.take_grant(), None);
        // An arming message published before the registration's arms nothing.
        hub.state.lock().armed_by(4);
        hub.state.lock().raise_granted(b"c", cap);
        assert_eq!(signal.take_grant(), None);
        hub.state.lock().armed_by(5);
        assert!(hub.state.lock().unarmed.is_empty());
        hub.state.lock().raise_granted(b"c", cap);
        assert!(signal.take());
        assert_eq!(signal.take_grant(), Some(cap));
        // A plain unlock message carries no grant.
        hub.state.lock().raise_one(b"c", None);
        assert!(signal.take());
        assert_eq!(signal.take_grant(), None);
    }

    #[test]
    fn passing_on_never_raises_the_waiter_itself() {
        let (_hub, subs) = hub_with(b"c", 1);
        subs[0].pass_on();
        assert!(!subs[0].signal.take());
    }

    #[test]
    fn a_subscribed_channel_outlives_its_last_waiter_and_lingers_from_then() {
        let (hub, subs) = hub_with(b"c", 1);
        let left = Instant::now();
        drop(subs);
        // The subscriber thread unsubscribes it when it next plans after the linger.
        let state = hub.state.lock();
        let entry = &state.channels[&b"c"[..]];
        assert_eq!(entry.sub, Sub::Live);
        assert!(entry.idle_since.is_some_and(|idle| idle >= left));
    }

    /// `ms` milliseconds ago (`ms` < 0: from now).
    fn ago(ms: i64) -> Instant {
        let now = Instant::now();
        let by = std::time::Duration::from_millis(ms.unsigned_abs());
        if ms < 0 {
            now + by
        } else {
            now.checked_sub(by).unwrap_or(now)
        }
    }

    /// Marks the channel of [`hub_with`] confirmed at `live`.
    fn confirmed_at(hub: &Hub, live: Instant) {
        let mut state = hub.state.lock();
        state.channels.get_mut(&b"c"[..]).unwrap().live_since = Some(live);
    }

    /// The hub of [`hub_with`] with the channel confirmed at `live` and no waiter.
    fn lingering(live: Instant) -> Arc<Hub> {
        let (hub, subs) = hub_with(b"c", 1);
        drop(subs);
        confirmed_at(&hub, live);
        hub
    }

    #[test]
    fn a_wake_up_that_came_while_nobody_waited_raises_the_next_caught_up_waiter() {
        let hub = lingering(ago(20));
        let attempt = ago(10);
        hub.state.lock().raise(b"c", Some(1));
        let signal = Arc::new(Signal::default());
        assert!(hub.state.lock().register(b"c", &signal, Some(attempt)));
        assert!(
            signal.take(),
            "the wake-up that came after the attempt is kept"
        );
        let idle = hub.state.lock().channels[&b"c"[..]].idle_since;
        assert_eq!(idle, None, "a waiter ends the linger");

        // One that came before the attempt was sent is not this waiter's.
        let later = Arc::new(Signal::default());
        assert!(hub.state.lock().register(b"c", &later, Some(ago(-10))));
        assert!(!later.take());
    }

    #[test]
    fn a_grant_or_a_passed_on_wake_up_with_nobody_to_take_it_is_kept_too() {
        let hub = lingering(ago(20));
        let grant = crate::layout::names::Granted {
            cap: std::time::Duration::from_secs(1),
            place: 7,
        };
        hub.state.lock().raise_granted(b"c", grant);
        let signal = Arc::new(Signal::default());
        assert!(hub.state.lock().register(b"c", &signal, Some(ago(10))));
        assert!(signal.take(), "woken, to find the hold by its next attempt");
        assert_eq!(signal.take_grant(), None);

        let (hub, subs) = hub_with(b"c", 1);
        confirmed_at(&hub, ago(20));
        subs[0].pass_on();
        let next = Arc::new(Signal::default());
        assert!(hub.state.lock().register(b"c", &next, Some(ago(10))));
        assert!(next.take());
    }

    #[test]
    fn a_wake_up_meant_for_more_waiters_than_there_were_reaches_the_next_one_too() {
        let late = |n: Option<usize>| {
            let (hub, subs) = hub_with(b"c", 1);
            confirmed_at(&hub, ago(20));
            hub.state.lock().raise(b"c", n);
            assert!(subs[0].signal.take(), "the waiter there is raised");
            let next = Arc::new(Signal::default());
            assert!(hub.state.lock().register(b"c", &next, Some(ago(10))));
            next.take()
        };
        assert!(late(None), "a message for every waiter");
        assert!(late(Some(2)), "two permits for one waiter");
        assert!(!late(Some(1)), "one wake-up, taken");
    }

    #[test]
    fn a_channel_confirmed_after_the_attempt_or_not_yet_is_not_caught_up() {
        let hub = lingering(ago(0));
        let signal = Arc::new(Signal::default());
        assert!(!hub.state.lock().register(b"c", &signal, Some(ago(10))));
        let mut state = hub.state.lock();
        assert!(!state.register(b"new", &signal, Some(ago(-10))));
        assert_eq!(state.channels[&b"new"[..]].sub, Sub::Wanted);
        assert!(!state.register(b"c", &signal, None));
    }
}
