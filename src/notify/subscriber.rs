//! The subscriber thread of a client: it owns one RESP3 connection at a time and is the only
//! one to read or write it.
//!
//! It blocks reading. Everything it acts on arrives as a push: subscribe confirmations,
//! unlock messages, wake-ups that waiters publish on the hub's wake channel, and its own
//! probes, `PUBLISH <wake channel> f<n>` sent on this very connection and delivered back to
//! it. A probe follows every batch of SUBSCRIBEs: Redis answers in order, so a channel not
//! confirmed by the time its probe is back was refused (ACL). A probe also goes out every
//! ping interval; one that is not back within the response timeout means the connection is
//! deaf (a half-open connection, a NAT that dropped its state), and it is replaced.
//!
//! Its read timeouts are its clock for probes and lingering channels. The `redis` crate
//! discards one ordinary (not push) reply after every read that timed out, taking it for
//! the late answer to the read. Most ordinary replies carry nothing the thread needs (the
//! probes' PUBLISH), but an error reply to a SUBSCRIBE does: `MOVED` says that a sharded
//! channel's slot is served elsewhere, not that the subscription was refused. So every
//! timed-out read is paid for with a command whose ordinary reply may be discarded in place
//! of one that matters (a probe's PUBLISH, or a PING sent ahead of a SUBSCRIBE), and while
//! a probe is out the thread reads without timing out before the probe is overdue, which
//! ends the connection.
//!
//! With nothing subscribed nothing can arrive, so the thread waits on the hub's condition
//! variable instead of the socket (a first waiter needs no wake-up message), and its probe
//! subscribes the wake channel just for the probe.

use std::collections::VecDeque;
use std::io;
use std::time::{Duration, Instant};

use redis::io::tcp::{TcpSettings, socket2};
use redis::{
    Connection, ErrorKind, PushKind, RedisError, RedisResult, ServerError, ServerErrorKind, Value,
};

use crate::base::retry::Backoff;
use crate::layout::names;
use crate::notify::hub::{Hub, Settings, State, Sub};
use crate::topology::endpoint;

/// The thread: connects, serves the connection until it fails, and connects again, until
/// stopped or until a connection failed with nobody waiting.
pub(crate) fn run(hub: &Hub, settings: &Settings) {
    let mut first = true;
    while let Some(conn) = connect(hub, settings, first) {
        first = false;
        let err = Link::new(hub, settings, conn).serve();
        let lost = Instant::now();
        let mut state = hub.state.lock();
        state.reading = false;
        state.wake_asked = false;
        let (stopped, moved) = (state.stopped, state.moved);
        if !stopped {
            log::warn!("unlock notifications disconnected: {err}; reconnecting");
        }
        // Messages may have been missed: every waiter retries once subscribed again, and
        // lingering channels are forgotten.
        state.channels.retain(|_, entry| !entry.waiters.is_empty());
        for entry in state.channels.values_mut() {
            if entry.sub != Sub::Refused {
                entry.sub = Sub::Wanted;
                entry.wake_all_on_confirm = true;
            }
        }
        drop(state);
        // The server may be gone for good (a killed cluster primary): whoever placed it
        // finds out, rather than this thread reconnecting to a dead address for ever.
        if !stopped && !moved {
            tell_lost(settings, lost);
        }
    }
}

fn tell_lost(settings: &Settings, at: Instant) {
    if let Some(lost) = &settings.lost {
        lost(at);
    }
}

/// Connects with backoff; `None` when the thread should end: stopped, or nobody is waiting
/// any more (checked from the second try on, since the first waiter registers while the
/// first connect is under way).
fn connect(hub: &Hub, settings: &Settings, mut first: bool) -> Option<Connection> {
    let mut backoff = Backoff::new(Duration::from_millis(10), Duration::from_secs(1));
    loop {
        let mut state = hub.state.lock();
        if state.stopped || (!first && state.channels.is_empty()) {
            state.stopped = true;
            hub.changed.notify_all();
            return None;
        }
        // A move from here on is to a server this connect may have missed.
        state.moved = false;
        drop(state);
        let opened = open(settings, &hub.wake_channel);
        let mut state = hub.state.lock();
        match opened {
            Ok((conn, server)) if !state.stopped => {
                state.server = Some(server);
                return Some(conn);
            }
            Ok(_) => {}
            Err(err) => {
                first = false;
                if is_refusal(&err) {
                    // Waiting for a connection that will be refused again helps nobody.
                    for entry in state.channels.values_mut() {
                        entry.sub = Sub::Refused;
                    }
                    refused(&mut state, &err.to_string());
                    hub.changed.notify_all();
                } else {
                    log::debug!("connecting unlock notifications failed: {err}");
                    drop(state);
                    tell_lost(settings, Instant::now());
                    state = hub.state.lock();
                }
                let pause = backoff.next_delay(None);
                hub.changed.wait_for(&mut state, pause);
            }
        }
    }
}

/// Opens a connection, names it, and checks that it may subscribe the wake channel, each
/// reply awaited at most a response timeout. Returns it with the client that opened it.
fn open(settings: &Settings, wake: &[u8]) -> RedisResult<(Connection, redis::Client)> {
    let endpoint =
        (settings.topology.endpoint()).map_err(|err| io::Error::other(format!("{err:#}")))?;
    let client = subscriber_client(&endpoint.client)?;
    let mut conn = endpoint::connect(&client, settings.connect_timeout, settings.response_timeout)?;
    let mut setup = redis::pipe();
    setup.cmd("CLIENT").arg("SETNAME").arg(&settings.name);
    setup.cmd("SUBSCRIBE").arg(wake);
    setup.cmd("UNSUBSCRIBE").arg(wake);
    conn.send_packed_command(&setup.get_packed_pipeline())?;
    // The name is only a label; a user without CLIENT rights still gets messages.
    if let Value::ServerError(err) = conn.recv_response()? {
        log::debug!("naming the subscriber connection refused: {err}");
    }
    for _ in 0..2 {
        if let Value::ServerError(err) = conn.recv_response()? {
            return Err(err.into());
        }
    }
    Ok((conn, client))
}

/// The client of the subscriber connections: the pool's address, TLS settings and
/// credentials, over RESP3 (so that it can send commands while subscribed), with TCP
/// keepalive under its own probes as a backstop and without Nagle's delay.
fn subscriber_client(pooled: &redis::Client) -> RedisResult<redis::Client> {
    let info = pooled.get_connection_info().clone();
    let redis_settings = info
        .redis_settings()
        .clone()
        .set_protocol(redis::ProtocolVersion::RESP3);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(10))
        .with_interval(Duration::from_secs(5));
    let tcp = TcpSettings::default()
        .set_nodelay(true)
        .set_keepalive(keepalive);
    let info = info
        .set_redis_settings(redis_settings)
        .set_tcp_settings(tcp);
    redis::Client::open(info)
}

/// Redis answered, and said no (ACL, credentials, no RESP3): not worth waiting for.
fn is_refusal(err: &RedisError) -> bool {
    err.code().is_some() || err.kind() == ErrorKind::AuthenticationFailed
}

/// Logs a refusal: the first as a warning, later ones at debug level.
fn refused(state: &mut State, what: &str) {
    if std::mem::replace(&mut state.warned_refusal, true) {
        log::debug!("unlock notifications refused: {what}");
    } else {
        log::warn!(
            "unlock notifications refused: {what}; waiters poll (every retry cap at most) instead of being woken"
        );
    }
}

/// One connection being served.
struct Link<'a> {
    hub: &'a Hub,
    settings: &'a Settings,
    conn: Connection,
    /// The connection's read timeout now.
    read_timeout: Duration,
    /// Reads that timed out since the last command with an ordinary reply was sent: the
    /// `redis` crate may still discard that many ordinary replies.
    owed: usize,
    /// Whether the last command sent about the wake channel subscribed it.
    wake_subscribed: bool,
    next_fence: u64,
    /// Probes sent and not back yet, with when each is overdue.
    fences: VecDeque<(u64, Instant)>,
    next_probe: Instant,
    /// The last error reply seen, to say why a subscription was refused.
    last_error: Option<ServerError>,
    /// When the first lingering channel is due to be unsubscribed.
    lingering: Option<Instant>,
}

impl<'a> Link<'a> {
    fn new(hub: &'a Hub, settings: &'a Settings, conn: Connection) -> Self {
        Link {
            hub,
            settings,
            conn,
            read_timeout: settings.response_timeout,
            owed: 0,
            wake_subscribed: false,
            next_fence: 0,
            fences: VecDeque::new(),
            next_probe: Instant::now() + settings.ping_interval,
            last_error: None,
            lingering: None,
        }
    }

    /// Acts on requests and on what arrives until the connection fails, goes deaf, or the
    /// hub stops; returns why.
    fn serve(mut self) -> RedisError {
        loop {
            let mut out = Vec::new();
            {
                let mut state = self.hub.state.lock();
                state.reading = false;
                state.wake_asked = false;
                if state.stopped {
                    return io::Error::new(io::ErrorKind::Interrupted, "stopped").into();
                }
                if state.moved {
                    return io::Error::new(io::ErrorKind::ConnectionAborted, "the server moved")
                        .into();
                }
                self.plan(&mut state, &mut out);
                let now = Instant::now();
                match self.fences.front() {
                    Some(&(_, due)) if now >= due => {
                        return io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!("no answer in {:?}", self.settings.response_timeout),
                        )
                        .into();
                    }
                    Some(_) => {}
                    None if now >= self.next_probe => self.probe(&mut out),
                    None => {}
                }
                if out.is_empty() {
                    if !self.wake_subscribed && self.fences.is_empty() {
                        // Nothing subscribed, nothing to read: wait for a request.
                        self.hub.changed.wait_until(&mut state, self.next_probe);
                        continue;
                    }
                    state.reading = true;
                }
            }
            if !out.is_empty() {
                if let Err(err) = self.conn.send_packed_command(&out) {
                    return err;
                }
                continue;
            }
            // While a probe is out, only its being overdue ends a read: a read that timed
            // out earlier could cost the reply to a SUBSCRIBE sent before the probe.
            let due = match self.fences.front() {
                Some(&(_, due)) => due,
                None => {
                    (self.lingering).map_or(self.next_probe, |until| until.min(self.next_probe))
                }
            };
            let wait = due
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1));
            // The timeout is set again (a system call) only when it is not between what is
            // due and a tenth later: a read never times out before it is due.
            if wait > self.read_timeout || self.read_timeout > wait + wait / 10 {
                if let Err(err) = self.conn.set_read_timeout(Some(wait)) {
                    return err;
                }
                self.read_timeout = wait;
            }
            match self.conn.recv_response() {
                Ok(value) => self.on_value(value),
                Err(err) if err.is_timeout() => self.owed += 1,
                Err(err) => return err,
            }
        }
    }

    /// Appends the (un)subscriptions the registered waiters call for (see
    /// [`State::sweep`]): SUBSCRIBE for new channels (and the wake channel first, then a
    /// probe after them), UNSUBSCRIBE for channels nobody waits on any more, and for the
    /// wake channel once nothing else is left.
    fn plan(&mut self, state: &mut State, out: &mut Vec<u8>) {
        let sweep = state.sweep(Instant::now(), self.next_fence);
        self.lingering = sweep.lingering;
        for name in &sweep.unsubscribe {
            command(out, self.verb("UNSUBSCRIBE"), name, None);
        }
        if !sweep.subscribe.is_empty() {
            // Replies the `redis` crate may still discard go to these, not to an error
            // reply to the SUBSCRIBEs after them.
            for _ in 0..std::mem::take(&mut self.owed) {
                redis::cmd("PING").write_packed_command(out);
            }
            if !self.wake_subscribed {
                command(out, "SUBSCRIBE", &self.hub.wake_channel, None);
                self.wake_subscribed = true;
            }
            for name in &sweep.subscribe {
                command(out, self.verb("SUBSCRIBE"), name, None);
            }
            self.fence(out);
        }
        if !state.active() && self.wake_subscribed {
            command(out, "UNSUBSCRIBE", &self.hub.wake_channel, None);
            self.wake_subscribed = false;
        }
    }

    /// The (un)subscribe command for lock channels: `verb`, or its sharded form.
    fn verb(&self, verb: &'static str) -> &'static str {
        match (self.settings.sharded, verb) {
            (true, "SUBSCRIBE") => "SSUBSCRIBE",
            (true, "UNSUBSCRIBE") => "SUNSUBSCRIBE",
            _ => verb,
        }
    }

    /// Appends a probe: a message to ourselves on the wake channel.
    fn fence(&mut self, out: &mut Vec<u8>) {
        // Its ordinary reply pays for a read that timed out before.
        self.owed = self.owed.saturating_sub(1);
        let number = self.next_fence;
        self.next_fence += 1;
        let payload = format!("f{number}");
        command(
            out,
            "PUBLISH",
            &self.hub.wake_channel,
            Some(payload.as_bytes()),
        );
        let due = Instant::now() + self.settings.response_timeout;
        self.fences.push_back((number, due));
    }

    /// The periodic check. With nothing subscribed, the wake channel is subscribed for the
    /// probe alone.
    fn probe(&mut self, out: &mut Vec<u8>) {
        if self.wake_subscribed {
            self.fence(out);
        } else {
            command(out, "SUBSCRIBE", &self.hub.wake_channel, None);
            self.fence(out);
            command(out, "UNSUBSCRIBE", &self.hub.wake_channel, None);
        }
    }

    fn on_value(&mut self, value: Value) {
        match value {
            Value::Push { kind, data } => self.on_push(kind, data),
            Value::ServerError(err) => {
                log::debug!("error reply on the subscriber connection: {err}");
                self.last_error = Some(err);
            }
            _ => {}
        }
    }

    fn on_push(&mut self, kind: PushKind, data: Vec<Value>) {
        let mut data = data.into_iter();
        let Some(Value::BulkString(channel)) = data.next() else {
            return;
        };
        match kind {
            PushKind::Message if channel == self.hub.wake_channel => {
                if let Some(Value::BulkString(payload)) = data.next() {
                    if let Some(number) = fence_number(&payload) {
                        self.on_fence(number);
                    } else if let Some(number) = arming_number(&payload) {
                        self.hub.state.lock().armed_by(number);
                    }
                }
            }
            PushKind::Message | PushKind::SMessage => {
                let payload = match data.next() {
                    Some(Value::BulkString(payload)) => payload,
                    _ => Vec::new(),
                };
                let mut state = self.hub.state.lock();
                match names::granted_by(&payload) {
                    Some(grant) => state.raise_granted(&channel, grant),
                    None => state.raise(&channel, names::woken_by(&channel, &payload)),
                }
            }
            PushKind::Subscribe | PushKind::SSubscribe => self.on_subscribed(&channel),
            PushKind::SUnsubscribe => self.on_moved_away(&channel),
            _ => {}
        }
    }

    /// Redis unsubscribed a sharded channel: if it was confirmed and waiters still wait on
    /// it, its slot moved to another server, where they subscribe again after their next
    /// attempt.
    fn on_moved_away(&self, channel: &[u8]) {
        let mut state = self.hub.state.lock();
        let Some(entry) = state.channels.get_mut(channel) else {
            return;
        };
        // Not a confirmed subscription: the confirmation of one we left ourselves.
        if entry.sub != Sub::Live {
            return;
        }
        if entry.waiters.is_empty() {
            // A lingering one: the next waiter subscribes where the slot is now.
            state.channels.remove(channel);
            return;
        }
        entry.sub = Sub::Gone;
        for waiter in &entry.waiters {
            waiter.raise();
        }
        self.hub.changed.notify_all();
    }

    fn on_subscribed(&self, channel: &[u8]) {
        let mut state = self.hub.state.lock();
        let Some(entry) = state.channels.get_mut(channel) else {
            return;
        };
        if !matches!(entry.sub, Sub::Sent { .. }) {
            return;
        }
        entry.sub = Sub::Live;
        entry.live_since = Some(Instant::now());
        // Registered before the SUBSCRIBE was sent: what arrives from here on was published
        // after them.
        for waiter in std::mem::take(&mut entry.arming) {
            waiter.arm();
        }
        if std::mem::take(&mut entry.wake_all_on_confirm) {
            for waiter in &entry.waiters {
                waiter.raise();
            }
        }
        self.hub.changed.notify_all();
    }

    /// Probe `number` is back: the connection works both ways, and every SUBSCRIBE sent
    /// before it that is still unconfirmed was refused.
    fn on_fence(&mut self, number: u64) {
        while self.fences.front().is_some_and(|&(n, _)| n <= number) {
            self.fences.pop_front();
        }
        self.next_probe = Instant::now() + self.settings.ping_interval;
        let mut state = self.hub.state.lock();
        // A sharded subscription answered MOVED: the slot is served elsewhere.
        let moved = (self.last_error.as_ref())
            .is_some_and(|err| err.kind() == Some(ServerErrorKind::Moved));
        let mut names = Vec::new();
        for (name, entry) in state.channels.iter_mut() {
            if matches!(entry.sub, Sub::Sent { fence } if fence <= number) {
                if moved {
                    entry.sub = Sub::Gone;
                    for waiter in &entry.waiters {
                        waiter.raise();
                    }
                    continue;
                }
                entry.sub = Sub::Refused;
                names.push(String::from_utf8_lossy(name).into_owned());
            }
        }
        // Errors before this probe answered the commands sent before it: none is left for
        // the next one.
        let last_error = self.last_error.take();
        if moved {
            self.hub.changed.notify_all();
        }
        if !names.is_empty() {
            let reason = last_error.map_or_else(|| "no confirmation".into(), |err| err.to_string());
            refused(
                &mut state,
                &format!("SUBSCRIBE {}: {reason}", names.join(", ")),
            );
            self.hub.changed.notify_all();
        }
    }
}

/// `f<n>`, a probe's payload; wake-ups carry anything else.
fn fence_number(payload: &[u8]) -> Option<u64> {
    std::str::from_utf8(payload.strip_prefix(b"f")?)
        .ok()?
        .parse()
        .ok()
}

/// `a<n>`, an arming message's payload (see [`crate::notify::hub::Signal`]).
fn arming_number(payload: &[u8]) -> Option<u64> {
    std::str::from_utf8(payload.strip_prefix(b"a")?)
        .ok()?
        .parse()
        .ok()
}

/// Appends `NAME channel [payload]` in RESP.
fn command(out: &mut Vec<u8>, name: &str, channel: &[u8], payload: Option<&[u8]>) {
    let mut cmd = redis::cmd(name);
    cmd.arg(channel);
    if let Some(payload) = payload {
        cmd.arg(payload);
    }
    cmd.write_packed_command(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_are_told_from_wake_ups() {
        assert_eq!(fence_number(b"f0"), Some(0));
        assert_eq!(fence_number(b"f42"), Some(42));
        for other in [&b"w"[..], b"f", b"fx", b"42", b"", b"a3"] {
            assert_eq!(fence_number(other), None, "{other:?}");
        }
        assert_eq!(arming_number(b"a3"), Some(3));
        for other in [&b"w"[..], b"a", b"f3"] {
            assert_eq!(arming_number(other), None, "{other:?}");
        }
    }
}
