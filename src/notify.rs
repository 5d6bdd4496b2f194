//! Unlock notifications: one subscriber connection and thread per client, opened on the
//! first wait and shared by every waiter of every lock.
//!
//! A waiter registers a [`Signal`] on a lock's channel (the channel is unsubscribed when its
//! last waiter leaves); a waiter of a lock on several nodes registers the same signal on each.
//! An unlock message raises the signal of one waiter of that lock, not all of them, taking
//! turns: the woken one takes the lock, and its own release wakes the next. A waiter never
//! relies on a message alone; every wait is bounded, so a lost message costs one bounded wait.

use std::collections::{HashMap, VecDeque};
use std::io::BufReader;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use redis::ConnectionInfo;

use crate::pubsub::{Event, Stream, read_event};
use crate::retry::Backoff;

/// Starts, owns and stops the subscriber of one client.
pub(crate) struct Notifier {
    info: ConnectionInfo,
    timeout: Duration,
    hub: Mutex<Option<Arc<Hub>>>,
}

struct Hub {
    state: Mutex<State>,
    /// Signalled on every subscribe confirmation and on stop.
    confirmed: Condvar,
}

#[derive(Default)]
struct State {
    channels: HashMap<Vec<u8>, Channel>,
    /// SUBSCRIBE commands sent and not yet confirmed, in sending order, with the generation
    /// of the channel entry each was sent for. Redis confirms them in the same order.
    pending: VecDeque<(Vec<u8>, u64)>,
    /// The write half of the socket; `None` while reconnecting.
    writer: Option<Stream>,
    /// Set when the client is dropped, or when the connection broke with nobody waiting.
    stopped: bool,
    next_generation: u64,
}

struct Channel {
    generation: u64,
    /// The signals of the waiters registered here, in wake-up order.
    waiters: VecDeque<Arc<Signal>>,
    confirmed: bool,
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
}

/// One waiter's registration on a lock's channel; dropping it deregisters.
pub(crate) struct Subscription {
    hub: Arc<Hub>,
    channel: Vec<u8>,
    signal: Arc<Signal>,
}

impl Notifier {
    pub fn new(info: ConnectionInfo, timeout: Duration) -> Self {
        Notifier {
            info,
            timeout,
            hub: Mutex::new(None),
        }
    }

    /// Registers `signal` on `channel` and waits (at most the response timeout) until Redis
    /// confirms the subscription, so that an unlock after this returns is not missed.
    pub fn subscribe(&self, channel: &[u8], signal: &Arc<Signal>) -> std::io::Result<Subscription> {
        let hub = self.hub()?;
        let mut guard = hub.state.lock();
        let state = &mut *guard;
        let generation = state.next_generation;
        let entry = state
            .channels
            .entry(channel.to_vec())
            .or_insert_with(|| Channel {
                generation,
                waiters: VecDeque::new(),
                confirmed: false,
                wake_all_on_confirm: false,
            });
        entry.waiters.push_back(signal.clone());
        if entry.waiters.len() == 1 {
            state.next_generation += 1;
            state.send(b"SUBSCRIBE", channel, generation);
        }
        let deadline = Instant::now() + self.timeout;
        let mut state = guard;
        while !state.stopped && !state.channels.get(channel).is_some_and(|c| c.confirmed) {
            if hub.confirmed.wait_until(&mut state, deadline).timed_out() {
                log::debug!(
                    "no subscribe confirmation in {:?}; waiting bounded",
                    self.timeout
                );
                break;
            }
        }
        drop(state);
        Ok(Subscription {
            hub,
            channel: channel.to_vec(),
            signal: signal.clone(),
        })
    }

    /// The running hub, or a new one: connect, then start its reader thread.
    fn hub(&self) -> std::io::Result<Arc<Hub>> {
        let mut slot = self.hub.lock();
        if let Some(hub) = slot.as_ref().filter(|hub| !hub.state.lock().stopped) {
            return Ok(hub.clone());
        }
        let (reader, writer) = Stream::connect(&self.info, self.timeout)?;
        let hub = Arc::new(Hub {
            state: Mutex::new(State {
                writer: Some(writer),
                ..State::default()
            }),
            confirmed: Condvar::new(),
        });
        let thread_hub = hub.clone();
        let (info, timeout) = (self.info.clone(), self.timeout);
        thread::Builder::new()
            .name("redmutex-notify".into())
            .stack_size(128 * 1024)
            .spawn(move || thread_hub.run(reader, &info, timeout))?;
        *slot = Some(hub.clone());
        Ok(hub)
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
            return; // reconnecting: the reconnect subscribes every registered channel
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
}

impl Hub {
    /// The reader thread: dispatches messages and confirmations, reconnects when the
    /// connection breaks, and ends when stopped.
    fn run(&self, mut reader: BufReader<Stream>, info: &ConnectionInfo, timeout: Duration) {
        loop {
            match read_event(&mut reader) {
                Ok(Event::Message(channel)) => self.on_message(&channel),
                Ok(Event::Subscribed(channel)) => self.on_subscribed(&channel),
                Ok(Event::Other) => {}
                Err(err) => match self.reconnect(info, timeout, &err) {
                    Some(new_reader) => reader = new_reader,
                    None => return,
                },
            }
        }
    }

    /// Raises the first waiter not raised already, and sends it to the back of the line.
    fn on_message(&self, channel: &[u8]) {
        let mut state = self.state.lock();
        let Some(entry) = state.channels.get_mut(channel) else {
            return;
        };
        for _ in 0..entry.waiters.len() {
            let Some(waiter) = entry.waiters.pop_front() else {
                return;
            };
            let raised = waiter.raise();
            entry.waiters.push_back(waiter);
            if raised {
                return;
            }
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

    /// Reconnects with backoff and subscribes every registered channel again; `None` when
    /// the hub should end (stopped, or nobody is waiting any more).
    fn reconnect(
        &self,
        info: &ConnectionInfo,
        timeout: Duration,
        cause: &std::io::Error,
    ) -> Option<BufReader<Stream>> {
        let mut backoff = Backoff::new(Duration::from_millis(10), Duration::from_secs(1));
        let mut state = self.state.lock();
        if !state.stopped {
            log::warn!("unlock notifications disconnected: {cause}");
        }
        loop {
            state.writer = None;
            state.pending.clear();
            for entry in state.channels.values_mut() {
                entry.confirmed = false;
                entry.wake_all_on_confirm = true;
            }
            if state.stopped || state.channels.is_empty() {
                state.stopped = true;
                self.confirmed.notify_all();
                return None;
            }
            drop(state);
            let connected = Stream::connect(info, timeout);
            state = self.state.lock();
            match connected {
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
                    log::debug!("reconnecting unlock notifications failed: {err}");
                    let pause = backoff.next_delay(None);
                    self.confirmed.wait_for(&mut state, pause);
                }
            }
        }
    }
}

impl Subscription {
    /// Whether the hub still runs; a waiter whose hub ended subscribes again.
    pub fn is_live(&self) -> bool {
        !self.hub.state.lock().stopped
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
