//! A fault-injecting TCP proxy in front of one local server, std threads only.
//!
//! Each accepted connection gets a connection to the target and two pump threads, one per
//! direction, which read a chunk, decide under one mutex what to do with it, then write it.
//! Faults: pause (chunks held, not dropped), silence server→client on the connections open
//! now or on those that send a given command, delay every reply, drop the reply to one
//! command and close its connection, delay the reply to one command, hold the reply to one
//! command until the test lets it go, drop one command and refuse new connections, answer
//! one command itself (an error reply of the test's choosing, say) instead of the server,
//! close everything.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub struct Proxy {
    port: u16,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

struct Shared {
    target: u16,
    state: Mutex<State>,
    /// Signalled on resume, whenever a connection closes, and when a chunk a pause held
    /// has gone on.
    changed: Condvar,
}

#[derive(Default)]
struct State {
    stopped: bool,
    paused: bool,
    /// Chunks a pause held that have not gone on (written, or dropped with their
    /// connection) yet.
    held: usize,
    delay: Duration,
    trap: Option<(Vec<u8>, Trap)>,
    trap_sprung: bool,
    /// When the armed trap fired: for a delayed reply, once its command was written to the
    /// server; for a cut reply, once the reply came.
    sprung_at: Option<Instant>,
    /// New connections are closed as soon as they are accepted.
    refusing: bool,
    /// A reply held by [`Trap::HoldReply`] waits while this is set.
    holding_reply: bool,
    /// A connection that sends a chunk containing this is silenced from then on.
    silence_after: Option<Vec<u8>>,
    next_id: u64,
    /// The connections open now; a connection is closed once it is no longer here.
    conns: HashMap<u64, Conn>,
    pumps: Vec<JoinHandle<()>>,
}

struct Conn {
    client: TcpStream,
    server: TcpStream,
    /// Server→client bytes are read and discarded.
    silenced: bool,
    /// The trap's command went out on this connection: its reply closes it.
    doomed: bool,
    /// The reply to the trap's command is held this long before it goes on.
    delay_next: Option<Duration>,
    /// The reply to the trap's command is held until `let_reply_go`.
    hold_next: bool,
}

#[derive(Clone, PartialEq)]
enum Trap {
    /// The command runs; its reply is dropped and its connection closed.
    CutReply,
    /// The command runs; its reply (and what follows on its connection) comes this late.
    /// With `true`, every other connection is closed as the command goes out.
    DelayReply(Duration, bool),
    /// The command runs; its reply (and what follows on its connection) is held until
    /// `let_reply_go`.
    HoldReply,
    /// The command is dropped, its connection closed, and new connections refused.
    DropRequestThenRefuse,
    /// The command never reaches the server; the client gets these bytes as its reply.
    Answer(Vec<u8>),
    /// The command reaches the server this late (other connections flow meanwhile).
    DelayRequest(Duration),
}

#[derive(Clone, Copy, PartialEq)]
enum Direction {
    ToServer,
    ToClient,
}

impl Proxy {
    /// Listens on a free port of 127.0.0.1 and forwards to 127.0.0.1:`target_port`.
    pub fn start(target_port: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared {
            target: target_port,
            state: Mutex::default(),
            changed: Condvar::new(),
        });
        let accepting = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name(format!("proxy-{port}"))
            .spawn(move || accept_loop(&listener, &accepting))
            .unwrap();
        Proxy {
            port,
            shared,
            acceptor: Some(acceptor),
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Holds every chunk, both ways, on all connections (new ones too) until `resume`.
    pub fn pause(&self) {
        self.shared.state().paused = true;
    }

    /// Ends a pause, and the refusal of new connections.
    pub fn resume(&self) {
        let mut state = self.shared.state();
        state.paused = false;
        state.refusing = false;
        self.shared.changed.notify_all();
    }

    /// Waits, after `resume`, until every chunk the pause held has gone on: written to its
    /// peer, or dropped with its connection. False if that takes longer than `limit`.
    pub fn flushed(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut state = self.shared.state();
        while state.held > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self.shared.changed.wait_timeout(state, left).unwrap().0;
        }
        true
    }

    /// The connections open now stop hearing from the server (its bytes are discarded),
    /// while what they send still reaches it: a half-open connection. Later ones work.
    pub fn silence_existing(&self) {
        for conn in self.shared.state().conns.values_mut() {
            conn.silenced = true;
        }
    }

    /// From now on, every connection, new ones too, that sends a chunk containing `needle`
    /// stops hearing from the server from that chunk on, while what it sends still reaches
    /// it: with `SUBSCRIBE`, subscriptions are made and never confirmed.
    pub fn silence_after(&self, needle: &[u8]) {
        self.shared.state().silence_after = Some(needle.to_vec());
    }

    /// Delays every server→client chunk by `delay`; `Duration::ZERO` turns it off.
    pub fn delay_replies(&self, delay: Duration) {
        self.shared.state().delay = delay;
    }

    /// One-shot: the next client→server chunk containing `needle` reaches the server, but the
    /// reply is discarded and that connection closed on both sides.
    pub fn cut_on_reply_to(&self, needle: &[u8]) {
        self.arm(needle, Trap::CutReply);
    }

    /// One-shot: the next client→server chunk containing `needle` never reaches the server;
    /// its connection is closed, and every new connection is closed on accept until `resume`.
    /// The client sees its command fail and cannot retry it on another connection.
    pub fn drop_request_then_refuse(&self, needle: &[u8]) {
        self.arm(needle, Trap::DropRequestThenRefuse);
    }

    /// One-shot: the next client→server chunk containing `needle` never reaches the server;
    /// the client gets `reply` (raw RESP, such as `-NOSCRIPT some words\r\n`) instead.
    pub fn answer_instead(&self, needle: &[u8], reply: &[u8]) {
        self.arm(needle, Trap::Answer(reply.to_vec()));
    }

    /// One-shot: the next client→server chunk containing `needle` reaches the server
    /// `delay` late; every other connection flows meanwhile.
    pub fn delay_request_to(&self, needle: &[u8], delay: Duration) {
        self.arm(needle, Trap::DelayRequest(delay));
    }

    /// One-shot: the next client→server chunk containing `needle` reaches the server at
    /// once, and its reply (with anything after it on that connection) reaches the client
    /// `delay` late, if the connection is still open then.
    pub fn delay_reply_to(&self, needle: &[u8], delay: Duration) {
        self.arm(needle, Trap::DelayReply(delay, false));
    }

    /// One-shot: the next client→server chunk containing `needle` reaches the server at
    /// once, and its reply (with anything after it on that connection) is held until
    /// [`let_reply_go`](Self::let_reply_go); the trap counts as sprung once the command
    /// was written to the server.
    pub fn hold_reply_to(&self, needle: &[u8]) {
        self.shared.state().holding_reply = true;
        self.arm(needle, Trap::HoldReply);
    }

    /// Lets the reply held by [`hold_reply_to`](Self::hold_reply_to) go on.
    pub fn let_reply_go(&self) {
        self.shared.state().holding_reply = false;
        self.shared.changed.notify_all();
    }

    /// As [`delay_reply_to`](Self::delay_reply_to), and every other connection open then
    /// is closed as the command goes out, as in a network failure: connections a client
    /// keeps idle are dead when it next uses them.
    pub fn delay_reply_and_cut_others(&self, needle: &[u8], delay: Duration) {
        self.arm(needle, Trap::DelayReply(delay, true));
    }

    fn arm(&self, needle: &[u8], trap: Trap) {
        let mut state = self.shared.state();
        state.trap = Some((needle.to_vec(), trap));
        state.trap_sprung = false;
        state.sprung_at = None;
    }

    /// Takes back the armed trap, if it has not fired.
    pub fn disarm(&self) {
        self.shared.state().trap = None;
    }

    /// Whether the armed trap has fired since it was armed.
    pub fn trap_sprung(&self) -> bool {
        self.shared.state().trap_sprung
    }

    /// When the armed trap fired: for [`delay_reply_to`](Self::delay_reply_to), the moment
    /// its command had been written to the server; for
    /// [`cut_on_reply_to`](Self::cut_on_reply_to), the moment its reply came. `None` before.
    pub fn sprung_at(&self) -> Option<Instant> {
        self.shared.state().sprung_at
    }

    /// Closes every open connection, both sides.
    pub fn cut_all(&self) {
        let mut state = self.shared.state();
        let ids: Vec<u64> = state.conns.keys().copied().collect();
        for id in ids {
            self.shared.close(&mut state, id);
        }
    }

    /// Closes every open connection and refuses new ones until `resume`.
    pub fn cut_all_and_refuse(&self) {
        self.shared.state().refusing = true;
        self.cut_all();
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        self.shared.state().conns.len()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.state().stopped = true;
        // Wakes the acceptor, which sees `stopped` and ends, closing the listener.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        self.cut_all();
        let pumps = std::mem::take(&mut self.shared.state().pumps);
        for pump in pumps {
            let _ = pump.join();
        }
    }
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn close(&self, state: &mut State, id: u64) {
        if let Some(conn) = state.conns.remove(&id) {
            let _ = conn.client.shutdown(Shutdown::Both);
            let _ = conn.server.shutdown(Shutdown::Both);
            self.changed.notify_all();
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    let name = format!("proxy-{}", listener.local_addr().unwrap().port());
    for client in listener.incoming() {
        let mut state = shared.state();
        if state.stopped {
            return;
        }
        let Ok(client) = client else { continue };
        if state.refusing {
            continue; // dropping `client` closes it
        }
        // On failure, dropping `client` closes it: the target is down.
        let Ok(server) = TcpStream::connect(("127.0.0.1", shared.target)) else {
            continue;
        };
        let _ = (client.set_nodelay(true), server.set_nodelay(true));
        let Ok(ends) = both_ways(&client, &server) else {
            continue;
        };
        let id = state.next_id;
        state.next_id += 1;
        let conn = Conn {
            client,
            server,
            silenced: false,
            doomed: false,
            delay_next: None,
            hold_next: false,
        };
        state.conns.insert(id, conn);
        state.pumps.retain(|pump| !pump.is_finished());
        for (direction, from, to) in ends {
            let shared = shared.clone();
            let pump = std::thread::Builder::new()
                .name(name.clone())
                .spawn(move || pump(&shared, id, direction, from, to))
                .unwrap();
            state.pumps.push(pump);
        }
    }
}

/// Copies one direction of connection `id` until either side closes, applying the faults.
fn pump(shared: &Shared, id: u64, direction: Direction, mut from: TcpStream, mut to: TcpStream) {
    let mut buf = vec![0; 64 * 1024];
    while let Ok(n @ 1..) = from.read(&mut buf) {
        let chunk = &buf[..n];
        // Set when this chunk is the delayed trap's command: it is marked sprung once
        // written.
        let mut mark_written = false;
        let mut cut_others = false;
        // Set when this chunk is the reply a trap holds until the test lets it go.
        let mut hold = false;
        if direction == Direction::ToClient {
            let delay = shared.state().delay;
            if !delay.is_zero() {
                std::thread::sleep(delay);
            }
        }
        // Declared before the lock's guard: dropped after it, whichever way the chunk goes.
        let mut _held = None;
        let mut guard = shared.state();
        if guard.paused && guard.conns.contains_key(&id) {
            guard.held += 1;
            _held = Some(Held(shared));
        }
        while guard.paused && guard.conns.contains_key(&id) {
            guard = shared.changed.wait(guard).unwrap();
        }
        let state = &mut *guard;
        let Some(conn) = state.conns.get_mut(&id) else {
            break;
        };
        match direction {
            Direction::ToServer => {
                if let Some(needle) = &state.silence_after {
                    conn.silenced |= contains(chunk, needle);
                }
                match state.trap.take_if(|(needle, _)| contains(chunk, needle)) {
                    Some((_, Trap::CutReply)) => conn.doomed = true,
                    Some((_, Trap::DelayReply(delay, cut))) => {
                        conn.delay_next = Some(delay);
                        mark_written = true;
                        cut_others = cut;
                    }
                    Some((_, Trap::HoldReply)) => {
                        conn.hold_next = true;
                        mark_written = true;
                    }
                    Some((_, Trap::DropRequestThenRefuse)) => {
                        state.refusing = true;
                        state.trap_sprung = true;
                        break;
                    }
                    Some((_, Trap::DelayRequest(delay))) => {
                        state.trap_sprung = true;
                        state.sprung_at = Some(Instant::now());
                        drop(guard);
                        std::thread::sleep(delay);
                        if to.write_all(chunk).is_err() {
                            break;
                        }
                        continue;
                    }
                    Some((_, Trap::Answer(reply))) => {
                        state.trap_sprung = true;
                        let Ok(mut client) = conn.client.try_clone() else {
                            break;
                        };
                        drop(guard);
                        if client.write_all(&reply).is_err() {
                            break;
                        }
                        continue;
                    }
                    None => {}
                }
            }
            Direction::ToClient if conn.doomed => {
                state.trap_sprung = true;
                state.sprung_at = Some(Instant::now());
                break;
            }
            Direction::ToClient if conn.silenced => continue,
            Direction::ToClient if conn.hold_next => {
                conn.hold_next = false;
                hold = true;
            }
            Direction::ToClient => {
                if let Some(delay) = conn.delay_next.take() {
                    drop(guard);
                    std::thread::sleep(delay);
                    if to.write_all(chunk).is_err() {
                        break;
                    }
                    continue;
                }
            }
        }
        if cut_others {
            let others: Vec<u64> = (state.conns.keys())
                .filter(|&&o| o != id)
                .copied()
                .collect();
            for other in others {
                shared.close(state, other);
            }
        }
        while hold && guard.holding_reply && guard.conns.contains_key(&id) {
            guard = shared.changed.wait(guard).unwrap();
        }
        if !guard.conns.contains_key(&id) {
            break;
        }
        // Not under the lock: a write may block while the peer does not read.
        drop(guard);
        if to.write_all(chunk).is_err() {
            break;
        }
        if mark_written {
            let mut state = shared.state();
            state.trap_sprung = true;
            state.sprung_at = Some(Instant::now());
        }
    }
    let mut state = shared.state();
    shared.close(&mut state, id);
}

/// A chunk a pause held, until it has gone on.
struct Held<'a>(&'a Shared);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.state().held -= 1;
        self.0.changed.notify_all();
    }
}

/// The (from, to) ends of the two pumps of a connection.
fn both_ways(
    client: &TcpStream,
    server: &TcpStream,
) -> std::io::Result<[(Direction, TcpStream, TcpStream); 2]> {
    let (c, s) = (client.try_clone()?, server.try_clone()?);
    let to_server = (Direction::ToServer, c.try_clone()?, s.try_clone()?);
    Ok([to_server, (Direction::ToClient, s, c)])
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty()
        || haystack
            .windows(needle.len())
            .any(|window| window == needle)
}
