//! What the waiters of a client and its subscriber thread share: the channels waited on,
//! each waiter's signal, where each subscription stands, and how the thread connects.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::layout::names::Granted;
use crate::topology::server::Topology;

/// Publishes a wake-up (the payload) on a channel over a pooled connection, waiting at most
/// the given time for a connection.
pub(crate) type Waker = Arc<dyn Fn(&[u8], &[u8], Duration) -> redis::RedisResult<()> + Send + Sync>;

/// Told that the subscriber lost its connection, or failed to open one, at the instant given:
/// its server may have been replaced (a cluster reads its slot map again, and retires the
/// shard of a server that no longer serves any slot, which wakes its waiters).
pub(crate) type Lost = Arc<dyn Fn(Instant) + Send + Sync>;

/// How a subscriber connects and how it checks its connection.
#[derive(Clone)]
pub(crate) struct Settings {
    /// Where the server is now: the subscriber connects there over RESP3, with the node's
    /// TLS settings and credentials.
    pub topology: Arc<Topology>,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
    pub ping_interval: Duration,
    /// Wake channels are this followed by a random id, one per subscriber thread.
    pub wake_prefix: Vec<u8>,
    pub waker: Waker,
    /// Whether lock channels are subscribed with `SSUBSCRIBE` (a cluster's sharded pub/sub,
    /// where scripts `SPUBLISH`) rather than `SUBSCRIBE`.
    pub sharded: bool,
    /// The subscriber connection's name in `CLIENT LIST`.
    pub name: String,
    /// Told when the subscriber loses its server; none where nothing can replace it.
    pub lost: Option<Lost>,
}

/// What waiters and the subscriber thread share.
pub(crate) struct Hub {
    pub state: Mutex<State>,
    /// Signalled on every subscribe confirmation or refusal, on stop, and on a request
    /// while the subscriber thread waits with nothing to read.
    pub changed: Condvar,
    /// The private channel that wakes the subscriber thread, and carries its own probes.
    pub wake_channel: Vec<u8>,
}

#[derive(Default)]
pub(crate) struct State {
    pub channels: HashMap<Vec<u8>, Channel>,
    /// Set when the client is dropped, or when the connection broke with nobody waiting.
    pub stopped: bool,
    /// The subscriber thread is blocked reading its connection: only a message wakes it.
    pub reading: bool,
    /// A wake-up message was sent since the thread last woke.
    pub wake_asked: bool,
    /// Whether a refused SUBSCRIBE was already logged as a warning.
    pub warned_refusal: bool,
    /// The server moved (a Sentinel failover): the thread is to connect to where it is now.
    pub moved: bool,
    /// The server the thread's connection is to, so that a move can wake it there.
    pub server: Option<redis::Client>,
    /// Signals registered on a channel that was subscribed (or being subscribed) already,
    /// each with the number of the arming message published after it (see [`Signal`]).
    pub unarmed: Vec<(u64, Arc<Signal>)>,
    /// The number of the next arming message.
    pub next_arming: u64,
}

/// Where a channel's subscription stands on the current connection.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Sub {
    /// Waiters want it; the SUBSCRIBE is not sent yet.
    Wanted,
    /// SUBSCRIBE sent, followed by the probe numbered `fence`: a confirmation comes before
    /// that probe comes back, or Redis refused it.
    Sent { fence: u64 },
    /// Confirmed; messages are delivered.
    Live,
    /// Redis refused the subscription (ACL): its waiters poll instead.
    Refused,
    /// The server no longer serves the channel's cluster slot: its waiters subscribe again
    /// where the slot is now.
    Gone,
}

/// How long a confirmed subscription is kept after its last waiter left, so that the next
/// wait on a busy lock finds it subscribed: no SUBSCRIBE to wait for, and no second attempt
/// (see [`Channel::live_since`]). Unsubscribed when the subscriber thread next wakes after.
pub(crate) const LINGER: Duration = Duration::from_secs(1);

/// How many channels may linger at once. The subscriber thread looks at every channel each
/// time it wakes, so a client that briefly waits on many locks (one per order, say) keeps
/// only this many subscribed for the next wait; the others are unsubscribed as before.
pub(crate) const MOST_LINGERING: usize = 256;

pub(crate) struct Channel {
    /// The signals of the waiters registered here, in wake-up order.
    pub waiters: VecDeque<Arc<Signal>>,
    pub sub: Sub,
    /// Set by a reconnect: when the new subscription is confirmed, every waiter retries.
    pub wake_all_on_confirm: bool,
    /// The waiters registered when the SUBSCRIBE now under way was sent: armed by its
    /// confirmation.
    pub arming: Vec<Arc<Signal>>,
    /// When the subscriber thread read the confirmation of the subscription now live. A
    /// message published after an attempt sent later than this reaches the channel's
    /// waiters, or is kept as [`unclaimed`](Self::unclaimed) for the next one.
    pub live_since: Option<Instant>,
    /// When the last waiter left the live subscription: it lingers until [`LINGER`] after.
    pub idle_since: Option<Instant>,
    /// When a message last arrived that raised fewer waiters than it was meant for (there
    /// were fewer, or none left to pass a wake-up on to).
    pub unclaimed: Option<Instant>,
    /// The waiters the last message raised, or that were handed its wake-up since: one
    /// that cannot use it (a semaphore's waiter that needs more permits) hands it to one
    /// that has not had it, so that it goes round once, never back and forth.
    pub tried: Vec<Weak<Signal>>,
}

impl Channel {
    /// A channel its first waiter wants subscribed.
    pub fn wanted() -> Self {
        Channel {
            waiters: VecDeque::new(),
            sub: Sub::Wanted,
            wake_all_on_confirm: false,
            arming: Vec::new(),
            live_since: None,
            idle_since: None,
            unclaimed: None,
            tried: Vec::new(),
        }
    }
}

/// What one waiting thread blocks on, raised by an unlock message on any of its channels.
/// A raise while the thread is not waiting is kept for its next wait.
///
/// A signal may also carry a grant: a fair lock's release made its waiter the holder and
/// said so on the waiter's channel. A grant counts only once the signal is *armed*: once a
/// message is known to have been published after the signal was registered (the
/// confirmation of a SUBSCRIBE sent after it, or an arming message its waiter published
/// after it on the hub's wake channel), since Redis delivers one connection's messages in
/// the order it published them. A grant delivered before that may be a late one from an
/// earlier wait of the same owner, which took the lock by its own attempt and may have
/// released it since: it only wakes the waiter, whose next attempt finds what it holds.
///
/// A signal nobody waits on may carry a hook instead, run on every raise (see
/// [`with_hook`](Self::with_hook)).
#[derive(Default)]
pub(crate) struct Signal {
    state: Mutex<Flags>,
    cond: Condvar,
    hook: Option<Box<dyn Fn() + Send + Sync>>,
}

#[derive(Default)]
struct Flags {
    raised: bool,
    armed: bool,
    /// A grant received while armed, as its message said.
    grant: Option<Granted>,
}

impl Signal {
    /// A signal that runs `hook` each time it is raised, and is never left raised: for a
    /// registration that acts on a message rather than waiting for it. Raises come from
    /// the subscriber thread with the hub's lock held: the hook must be quick, and take no
    /// lock that anyone holds while taking the hub's.
    pub fn with_hook(hook: impl Fn() + Send + Sync + 'static) -> Self {
        Signal {
            hook: Some(Box::new(hook)),
            ..Signal::default()
        }
    }

    /// Raises the signal (a signal with a hook runs it instead); false if it was raised
    /// already.
    pub fn raise(&self) -> bool {
        if let Some(hook) = &self.hook {
            hook();
            return true;
        }
        let mut state = self.state.lock();
        let newly = !state.raised;
        state.raised = true;
        self.cond.notify_one();
        newly
    }

    /// Raises the signal for `grant`, recorded if the signal is armed; false if it was
    /// raised already.
    pub fn raise_granted(&self, grant: Granted) -> bool {
        let mut state = self.state.lock();
        if state.armed {
            state.grant = Some(grant);
        }
        drop(state);
        self.raise()
    }

    /// From now on a grant counts: every message delivered from here on was published
    /// after this signal was registered.
    pub fn arm(&self) {
        self.state.lock().armed = true;
    }

    /// The grant received, if any, taken off the signal.
    pub fn take_grant(&self) -> Option<Granted> {
        self.state.lock().grant.take()
    }

    /// Waits until raised, at most `timeout`, and lowers it again. Returns whether it was raised.
    pub fn wait(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.state.lock();
        while !state.raised {
            if self.cond.wait_until(&mut state, deadline).timed_out() {
                break;
            }
        }
        std::mem::take(&mut state.raised)
    }

    /// Lowers the signal; returns whether it was raised.
    pub fn take(&self) -> bool {
        std::mem::take(&mut self.state.lock().raised)
    }
}

/// What the subscriber thread is to send for the lock channels, as [`State::sweep`] found.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Sweep {
    /// Channels to subscribe, now marked as sent.
    pub subscribe: Vec<Vec<u8>>,
    /// Subscribed channels nobody waits on any more, now forgotten.
    pub unsubscribe: Vec<Vec<u8>>,
    /// When the first channel kept lingering is due to go.
    pub lingering: Option<Instant>,
}

impl State {
    /// Marks the wanted channels as sent, followed by the probe numbered `fence`, and
    /// forgets those nobody waits on: a confirmed one lingers until [`LINGER`] after its
    /// last waiter left, [`MOST_LINGERING`] of them at most, and is unsubscribed then.
    pub fn sweep(&mut self, now: Instant, fence: u64) -> Sweep {
        let mut sweep = Sweep::default();
        let mut gone = Vec::new();
        let mut kept = 0;
        for (name, entry) in self.channels.iter_mut() {
            match entry.sub {
                Sub::Sent { .. } => {}
                _ if entry.waiters.is_empty() => {
                    if entry.sub == Sub::Live {
                        let until = *entry.idle_since.get_or_insert(now) + LINGER;
                        if until > now && kept < MOST_LINGERING {
                            kept += 1;
                            sweep.lingering = Some(sweep.lingering.map_or(until, |u| u.min(until)));
                            continue;
                        }
                        sweep.unsubscribe.push(name.clone());
                    }
                    gone.push(name.clone());
                }
                Sub::Wanted => {
                    entry.arming = entry.waiters.iter().cloned().collect();
                    entry.sub = Sub::Sent { fence };
                    sweep.subscribe.push(name.clone());
                }
                Sub::Live | Sub::Refused | Sub::Gone => {}
            }
        }
        for name in gone {
            self.channels.remove(&name);
        }
        sweep
    }

    /// Whether a lock channel is subscribed, or being subscribed.
    pub fn active(&self) -> bool {
        (self.channels.values()).any(|entry| matches!(entry.sub, Sub::Sent { .. } | Sub::Live))
    }

    /// Registers `signal` on `channel`, which its subscriber thread then subscribes if it
    /// is not yet. Returns whether the registration is caught up with an attempt sent at
    /// `since`: the channel was confirmed before then, so that a message published after
    /// that attempt ran raises the signal, whether it comes from now on or came already
    /// with no waiter to take it (it is raised here).
    pub fn register(
        &mut self,
        channel: &[u8],
        signal: &Arc<Signal>,
        since: Option<Instant>,
    ) -> bool {
        let entry = (self.channels)
            .entry(channel.to_vec())
            .or_insert_with(Channel::wanted);
        entry.waiters.push_back(signal.clone());
        entry.idle_since = None;
        if entry.sub == Sub::Gone {
            // The map has been read again since: try here once more.
            entry.sub = Sub::Wanted;
        }
        let Some(since) = since else {
            return false;
        };
        let caught_up =
            entry.sub == Sub::Live && entry.live_since.is_some_and(|live| live <= since);
        if caught_up && entry.unclaimed.is_some_and(|at| at >= since) {
            signal.raise();
        }
        caught_up
    }

    /// Raises `n` waiters of `channel` (`None`: all), each as [`raise_one`](Self::raise_one)
    /// does; a wake-up meant for more waiters than are registered is kept as unclaimed.
    pub fn raise(&mut self, channel: &[u8], n: Option<usize>) {
        let Some(entry) = self.channels.get_mut(channel) else {
            return;
        };
        let waiters = entry.waiters.len();
        entry.tried.clear();
        // Meant for more waiters than there are: one that registers next may be one of
        // them.
        if n.is_none_or(|n| n > waiters) {
            entry.unclaimed = Some(Instant::now());
        }
        for _ in 0..n.map_or(waiters, |n| n.min(waiters)) {
            self.raise_one(channel, None);
        }
    }

    /// Raises the first waiter of `channel` with `grant` (recorded if it is armed), and
    /// sends it to the back of the line. A channel that carries grants is one owner's, so
    /// it has one waiter at most per client.
    pub fn raise_granted(&mut self, channel: &[u8], grant: Granted) {
        let Some(entry) = self.channels.get_mut(channel) else {
            return;
        };
        match entry.waiters.pop_front() {
            Some(waiter) => {
                waiter.raise_granted(grant);
                entry.waiters.push_back(waiter);
            }
            // Its waiter finds the hold by its next attempt.
            None => entry.unclaimed = Some(Instant::now()),
        }
    }

    /// Arms the signals registered before arming message `number` was published.
    pub fn armed_by(&mut self, number: u64) {
        self.unarmed.retain(|(at, signal)| {
            if *at <= number {
                signal.arm();
            }
            *at > number
        });
    }

    /// Raises the first waiter of `channel` that is not `skip`, not raised already and
    /// not [tried](Channel::tried) by the last message, and sends it to the back of the
    /// line; with none, the wake-up is kept as unclaimed.
    pub fn raise_one(&mut self, channel: &[u8], skip: Option<&Arc<Signal>>) {
        let Some(entry) = self.channels.get_mut(channel) else {
            return;
        };
        for _ in 0..entry.waiters.len() {
            let Some(waiter) = entry.waiters.pop_front() else {
                break;
            };
            let had = |tried: &Weak<Signal>| std::ptr::eq(tried.as_ptr(), Arc::as_ptr(&waiter));
            let raised = !skip.is_some_and(|s| Arc::ptr_eq(s, &waiter))
                && !entry.tried.iter().any(had)
                && waiter.raise();
            if raised {
                entry.tried.push(Arc::downgrade(&waiter));
            }
            entry.waiters.push_back(waiter);
            if raised {
                return;
            }
        }
        entry.unclaimed = Some(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state with `live` confirmed channels nobody waits on, the last waiter of each
    /// gone at `left`, and one wanted channel with a waiter.
    fn state(live: usize, left: Instant) -> State {
        let mut state = State::default();
        for i in 0..live {
            let channel = Channel {
                sub: Sub::Live,
                idle_since: Some(left),
                ..Channel::wanted()
            };
            state
                .channels
                .insert(format!("idle{i}").into_bytes(), channel);
        }
        state.register(b"new", &Arc::default(), None);
        state
    }

    #[test]
    fn a_sweep_subscribes_what_is_wanted_and_keeps_the_idle_until_their_linger_ends() {
        let left = Instant::now();
        let mut state = state(2, left);
        let sweep = state.sweep(left, 7);
        assert_eq!(sweep.subscribe, [b"new".to_vec()]);
        assert_eq!(state.channels[&b"new"[..]].sub, Sub::Sent { fence: 7 });
        assert!(sweep.unsubscribe.is_empty());
        assert_eq!(sweep.lingering, Some(left + LINGER));
        assert_eq!(state.channels.len(), 3);

        let sweep = state.sweep(left + LINGER, 8);
        assert!(sweep.subscribe.is_empty(), "sent already");
        let mut gone = sweep.unsubscribe;
        gone.sort();
        assert_eq!(gone, [b"idle0".to_vec(), b"idle1".to_vec()]);
        assert_eq!(sweep.lingering, None);
        assert_eq!(state.channels.len(), 1);
        assert!(state.active());
    }

    #[test]
    fn no_more_than_the_most_lingering_are_kept() {
        let left = Instant::now();
        let mut state = state(MOST_LINGERING + 3, left);
        let sweep = state.sweep(left, 0);
        assert_eq!(sweep.unsubscribe.len(), 3);
        assert_eq!(state.channels.len(), MOST_LINGERING + 1);
    }

    #[test]
    fn a_channel_confirmed_after_its_waiters_left_lingers_from_the_sweep_that_finds_it() {
        let now = Instant::now();
        let mut state = State::default();
        let channel = Channel {
            sub: Sub::Live,
            ..Channel::wanted()
        };
        state.channels.insert(b"c".to_vec(), channel);
        let sweep = state.sweep(now, 0);
        assert_eq!(sweep.lingering, Some(now + LINGER));
        assert!(sweep.unsubscribe.is_empty());
        state.channels.clear();
        assert!(!state.active());
    }
}
