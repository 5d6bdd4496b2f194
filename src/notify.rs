//! Unlock notifications: one subscriber connection and thread per client, started on the
//! first wait and shared by every waiter of every lock.
//!
//! A waiter registers a [`Signal`] on a lock's channel (the channel is unsubscribed when its
//! last waiter leaves); a waiter of a lock on several nodes registers the same signal on each.
//! An unlock message raises the signal of one waiter of that lock, not all of them, taking
//! turns: the woken one takes the lock, and its own release wakes the next. A waiter that
//! leaves without using its wake-up passes it on ([`Subscription::pass_on`]). A waiter never
//! relies on a message alone; every wait is bounded, so a lost message costs one bounded wait.
//!
//! The subscriber thread checks its connection with a PING every ping interval. A connection
//! that breaks, or stays silent for a response timeout after a PING or a SUBSCRIBE, is
//! replaced: the thread reconnects, subscribes every channel again and, once each is
//! confirmed, wakes all of its waiters, since messages may have been missed meanwhile.

use std::collections::{HashMap, VecDeque};
use std::io::{self, BufRead, BufReader};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::pubsub::{Event, Stream, read_event};
use crate::retry::Backoff;
use crate::topology::Topology;

/// How a subscriber connects and how it checks its connection.
#[derive(Clone)]
pub(crate) struct Settings {
    /// Where the server is now.
    pub topology: Arc<Topology>,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
    pub ping_interval: Duration,
}

/// Starts, owns and stops the subscriber of one client.
pub(crate) struct Notifier {
    settings: Settings,
    hub: Mutex<Option<Arc<Hub>>>,
}

struct Hub {
    state: Mutex<State>,
    /// Signalled on every subscribe confirmation or refusal, and on stop.
    confirmed: Condvar,
}

#[derive(Default)]
struct State {
    channels: HashMap<Vec<u8>, Channel>,
    /// SUBSCRIBE commands sent and not yet answered, in sending order, with the generation
    /// of the channel entry each was sent for. Redis answers them in the same order.
    pending: VecDeque<(Vec<u8>, u64)>,
    /// The write half of the socket; `None` while (re)connecting.
    writer: Option<Stream>,
    /// Set when the client is dropped, or when the connection broke with nobody waiting.
    stopped: bool,
    next_generation: u64,
    /// Whether a refused SUBSCRIBE was already logged as a warning.
    warned_refusal: bool,
    /// Bumped when the server moves: a connect begun before is to its old address.
    moves: u64,
}

struct Channel {
    generation: u64,
    /// The signals of the waiters registered here, in wake-up order.
    waiters: VecDeque<Arc<Signal>>,
    confirmed: bool,
    /// Redis refused the subscription (ACL): its waiters poll instead.
    refused: bool,
    /// Set by a reconnect: when the new subscription is confirmed, every waiter retries.
    wake_all_on_confirm: bool,
}

/// What one waiting thread blocks on, raised by an unlock message on any of its channels.
/// A raise while the thread is not waiting is kept for its next wait.
#[derive(Default)]
pub(crate) struct Signal {
    raised: Mutex<bool>,
    cond: Condvar,
}

impl Signal {
    /// Raises the signal; false if it was raised already.
    fn raise(&self) -> bool {
        let mut raised = self.raised.lock();
        let newly = !*raised;
        *raised = true;
        self.cond.notify_one();
        newly
    }

    /// Waits until raised, at most `timeout`, and lowers it again. Returns whether it was raised.
    pub fn wait(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut raised = self.raised.lock();
        while !*raised {
            if self.cond.wait_until(&mut raised, deadline).timed_out() {
                break;
            }
        }
        std::mem::take(&mut *raised)
    }

    /// Lowers the signal; returns whether it was raised.
    pub fn take(&self) -> bool {
        std::mem::take(&mut *self.raised.lock())
    }
}

/// One waiter's registration on a lock's channel; dropping it deregisters.
pub(crate) struct Subscription {
    hub: Arc<Hub>,
    channel: Vec<u8>,
    signal: Arc<Signal>,
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
    /// subscriber thread cannot start.
    pub fn subscribe(
        &self,
        channel: &[u8],
        signal: &Arc<Signal>,
        end: Option<Instant>,
    ) -> io::Result<Subscription> {
        let hub = self.hub()?;
        let mut state = hub.state.lock();
        let generation = state.next_generation;
        let entry = state
            .channels
            .entry(channel.to_vec())
            .or_insert_with(|| Channel {
                generation,
                waiters: VecDeque::new(),
                confirmed: false,
                refused: false,
                wake_all_on_confirm: false,
            });
        entry.waiters.push_back(signal.clone());
        if entry.waiters.len() == 1 {
            state.next_generation += 1;
            state.send(b"SUBSCRIBE", channel, generation);
        }
        let subscription = Subscription {
            hub: hub.clone(),
            channel: channel.to_vec(),
            signal: signal.clone(),
        };
        let full = Instant::now() + self.settings.response_timeout;
        let until = end.map_or(full, |end| full.min(end));
        loop {
            let answered = state
                .channels
                .get(channel)
                .map(|c| (c.confirmed, c.refused));
            match answered {
                _ if state.stopped => break,
                Some((true, _)) => break,
                Some((_, true)) => {
                    drop(state);
                    drop(subscription);
                    return Err(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        "SUBSCRIBE refused by Redis",
                    ));
                }
                _ => {}
            }
            if hub.confirmed.wait_until(&mut state, until).timed_out() {
                if until == full
                    && let Some(writer) = &state.writer
                {
                    // Sent, and no answer in a whole response timeout: the connection is
                    // deaf. Closing it makes the subscriber thread reconnect.
                    log::warn!(
                        "no subscribe confirmation in {:?}; reconnecting unlock notifications",
                        self.settings.response_timeout
                    );
                    writer.shutdown();
                }
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
        let hub = Arc::new(Hub {
            state: Mutex::default(),
            confirmed: Condvar::new(),
        });
        let thread_hub = hub.clone();
        let settings = self.settings.clone();
        thread::Builder::new()
            .name("redmutex-notify".into())
            .stack_size(128 * 1024)
            .spawn(move || thread_hub.run(&settings))?;
        *slot = Some(hub.clone());
        Ok(hub)
    }
}

impl Notifier {
    /// The server moved: drops the subscriber connection, so that the thread connects to
    /// where the server is now, subscribes every channel again and wakes every waiter.
    pub fn reconnect(&self) {
        if let Some(hub) = self.hub.lock().as_ref() {
            let mut state = hub.state.lock();
            state.moves += 1;
            if let Some(writer) = &state.writer {
                writer.shutdown();
            }
        }
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        if let Some(hub) = self.hub.lock().take() {
            let mut state = hub.state.lock();
            state.stopped = true;
            if let Some(writer) = state.writer.take() {
                writer.shutdown(); // ends the reader's blocking read
            }
            hub.confirmed.notify_all();
        }
    }
}

impl State {
    fn send(&mut self, command: &[u8], channel: &[u8], generation: u64) {
        let Some(writer) = self.writer.as_mut() else {
            return; // connecting: the connect subscribes every registered channel
        };
        if let Err(err) = writer.command(&[command, channel]) {
            // The reader sees the broken socket too and reconnects.
            log::debug!("sending {} failed: {err}", String::from_utf8_lossy(command));
            return;
        }
        if command == b"SUBSCRIBE" {
            self.pending.push_back((channel.to_vec(), generation));
        }
    }

    /// Raises the first waiter of `channel` that is not `skip` and not raised already, and
    /// sends it to the back of the line.
    fn raise_one(&mut self, channel: &[u8], skip: Option<&Arc<Signal>>) {
        let Some(entry) = self.channels.get_mut(channel) else {
            return;
        };
        for _ in 0..entry.waiters.len() {
            let Some(waiter) = entry.waiters.pop_front() else {
                return;
            };
            let raised = !skip.is_some_and(|s| Arc::ptr_eq(s, &waiter)) && waiter.raise();
            entry.waiters.push_back(waiter);
            if raised {
                return;
            }
        }
    }
}

impl Hub {
    /// The subscriber thread: connects, serves the connection until it fails, and connects
    /// again, until stopped or until a connection failed with nobody waiting.
    fn run(&self, settings: &Settings) {
        let mut first = true;
        while let Some(reader) = self.connect(settings, first) {
            first = false;
            let err = self.serve(reader, settings);
            let mut state = self.state.lock();
            if !state.stopped {
                log::warn!("unlock notifications disconnected: {err}; reconnecting");
            }
            if let Some(writer) = state.writer.take() {
                writer.shutdown();
            }
            state.pending.clear();
            for entry in state.channels.values_mut() {
                entry.confirmed = false;
                entry.wake_all_on_confirm = true;
            }
        }
    }

    /// Connects with backoff and subscribes every registered channel; `None` when the hub
    /// should end: stopped, or nobody is waiting any more (checked from the second try on,
    /// since the first waiter registers while the first connect is under way).
    fn connect(&self, settings: &Settings, first: bool) -> Option<BufReader<Stream>> {
        let mut backoff = Backoff::new(Duration::from_millis(10), Duration::from_secs(1));
        let mut first = first;
        loop {
            let mut state = self.state.lock();
            if state.stopped || (!first && state.channels.is_empty()) {
                state.stopped = true;
                self.confirmed.notify_all();
                return None;
            }
            let moves = state.moves;
            drop(state);
            let connected = settings.topology.info().and_then(|info| {
                Stream::connect(&info, settings.connect_timeout, settings.response_timeout)
            });
            let mut state = self.state.lock();
            match connected {
                // Connected to where the server was before it moved: connect again.
                Ok(_) if state.moves != moves => {}
                Ok((reader, writer)) if !state.stopped => {
                    state.writer = Some(writer);
                    let channels: Vec<_> = state
                        .channels
                        .iter()
                        .map(|(name, entry)| (name.clone(), entry.generation))
                        .collect();
                    for (channel, generation) in channels {
                        state.send(b"SUBSCRIBE", &channel, generation);
                    }
                    return Some(reader);
                }
                Ok(_) => {}
                Err(err) => {
                    first = false;
                    log::debug!("connecting unlock notifications failed: {err}");
                    let pause = backoff.next_delay(None);
                    self.confirmed.wait_for(&mut state, pause);
                }
            }
        }
    }

    /// Dispatches what arrives, sending a PING every ping interval; returns why the
    /// connection is no longer usable: an error, the end of the stream, or no answer to a
    /// PING within the response timeout.
    fn serve(&self, mut reader: BufReader<Stream>, settings: &Settings) -> io::Error {
        let mut next_ping = Instant::now() + settings.ping_interval;
        let mut pong_due: Option<Instant> = None;
        loop {
            if reader.buffer().is_empty() {
                // Between replies: wait for data at most until the next check is due. A
                // timeout here loses nothing, since no reply has begun.
                let now = Instant::now();
                let check_at = pong_due.unwrap_or(next_ping);
                if now >= check_at {
                    if pong_due.is_some() {
                        return io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!("no answer to PING in {:?}", settings.response_timeout),
                        );
                    }
                    if let Err(err) = self.ping() {
                        return err;
                    }
                    pong_due = Some(now + settings.response_timeout);
                    continue;
                }
                let wait = (check_at - now).max(Duration::from_millis(1));
                if let Err(err) = reader.get_ref().set_read_timeout(Some(wait)) {
                    return err;
                }
                match reader.fill_buf() {
                    Ok([]) => return io::ErrorKind::UnexpectedEof.into(),
                    Ok(_) => {}
                    Err(err) if is_timeout(&err) => continue,
                    Err(err) => return err,
                }
                // A reply has begun: the rest of it may take up to a response timeout.
                let rest = Some(settings.response_timeout);
                if let Err(err) = reader.get_ref().set_read_timeout(rest) {
                    return err;
                }
            }
            match read_event(&mut reader) {
                Ok(Event::Message(channel)) => self.state.lock().raise_one(&channel, None),
                Ok(Event::Subscribed(channel)) => self.on_subscribed(&channel),
                Ok(Event::Refused(message)) => self.on_refused(&message),
                Ok(Event::Pong) => {
                    pong_due = None;
                    next_ping = Instant::now() + settings.ping_interval;
                }
                Ok(Event::Other) => {}
                Err(err) => return err,
            }
        }
    }

    fn ping(&self) -> io::Result<()> {
        match self.state.lock().writer.as_mut() {
            Some(writer) => writer.command(&[b"PING"]),
            None => Err(io::ErrorKind::NotConnected.into()),
        }
    }

    fn on_subscribed(&self, channel: &[u8]) {
        let mut state = self.state.lock();
        let Some((sent_for, generation)) = state.pending.pop_front() else {
            return;
        };
        if sent_for != channel {
            log::warn!("subscribe confirmations out of order; waits stay bounded");
        }
        if let Some(entry) = state
            .channels
            .get_mut(channel)
            .filter(|entry| entry.generation == generation)
        {
            entry.confirmed = true;
            if std::mem::take(&mut entry.wake_all_on_confirm) {
                for waiter in &entry.waiters {
                    waiter.raise();
                }
            }
        }
        self.confirmed.notify_all();
    }

    /// An error reply answers the oldest SUBSCRIBE not yet answered.
    fn on_refused(&self, message: &[u8]) {
        let mut state = self.state.lock();
        let message = String::from_utf8_lossy(message);
        let Some((channel, generation)) = state.pending.pop_front() else {
            log::warn!("unexpected error on the subscriber connection: {message}");
            return;
        };
        let name = String::from_utf8_lossy(&channel);
        if std::mem::replace(&mut state.warned_refusal, true) {
            log::debug!("SUBSCRIBE {name} refused: {message}");
        } else {
            log::warn!(
                "SUBSCRIBE {name} refused: {message}; waiters poll (every retry cap at most) instead of being woken"
            );
        }
        if let Some(entry) = state
            .channels
            .get_mut(&channel)
            .filter(|entry| entry.generation == generation)
        {
            entry.refused = true;
        }
        self.confirmed.notify_all();
    }
}

fn is_timeout(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

impl Subscription {
    /// Whether the hub still runs; a waiter whose hub ended subscribes again.
    pub fn is_live(&self) -> bool {
        !self.hub.state.lock().stopped
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
    fn drop(&mut self) {
        let mut state = self.hub.state.lock();
        let Some(entry) = state.channels.get_mut(&self.channel) else {
            return;
        };
        if let Some(at) = entry
            .waiters
            .iter()
            .position(|w| Arc::ptr_eq(w, &self.signal))
        {
            entry.waiters.remove(at);
        }
        if entry.waiters.is_empty() {
            let generation = entry.generation;
            state.channels.remove(&self.channel);
            state.send(b"UNSUBSCRIBE", &self.channel, generation);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hub_with(channel: &[u8], waiters: usize) -> (Arc<Hub>, Vec<Subscription>) {
        let hub = Arc::new(Hub {
            state: Mutex::default(),
            confirmed: Condvar::new(),
        });
        let subscriptions = (0..waiters)
            .map(|_| {
                let signal = Arc::new(Signal::default());
                let mut state = hub.state.lock();
                let entry = state
                    .channels
                    .entry(channel.to_vec())
                    .or_insert_with(|| Channel {
                        generation: 0,
                        waiters: VecDeque::new(),
                        confirmed: true,
                        refused: false,
                        wake_all_on_confirm: false,
                    });
                entry.waiters.push_back(signal.clone());
                Subscription {
                    hub: hub.clone(),
                    channel: channel.to_vec(),
                    signal,
                }
            })
            .collect();
        (hub, subscriptions)
    }

    #[test]
    fn one_message_raises_one_waiter_in_turn() {
        let (hub, subs) = hub_with(b"c", 3);
        for expected in [0, 1, 2, 0] {
            hub.state.lock().raise_one(b"c", None);
            let raised: Vec<bool> = subs.iter().map(|s| s.signal.take()).collect();
            let mut want = vec![false; 3];
            want[expected] = true;
            assert_eq!(raised, want);
        }
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
    fn passing_on_never_raises_the_waiter_itself() {
        let (_hub, subs) = hub_with(b"c", 1);
        subs[0].pass_on();
        assert!(!subs[0].signal.take());
    }
}
