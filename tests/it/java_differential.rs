//! The Lua that plays a Java owner in the model tests (`support::redisson`) against real
//! Redisson (3.52.0 and 4.7.0): given the same steps, both leave the same keys, fields,
//! values, expiry classes and messages, and answer alike, after every step.
//!
//! Two servers: one driven by the Lua, one by Redisson through the Java driver, each with
//! three owners (three Java threads; three owner ids for the Lua), compared with owner ids
//! and permit ids renamed. Steps take with a wait of 0 and an explicit lease (no watchdog),
//! release, re-enter and release by a non-holder; a fair lock's owner may also wait in its
//! queue, to be woken by a release. Leases and waits are long enough that nothing expires
//! during a case, and expiries and queue places are compared as classes (none, or up to
//! which multiple of 10 s), never as milliseconds. Messages are read from a `PSUBSCRIBE *`
//! connection up to a marker published after each step. Redisson's unlock latch is left out
//! of the comparison (the Lua leaves it out on purpose). `DIFFERENTIAL_CASES=n` runs n
//! generated cases per kind and version instead of 8, beside the fixed ones.

use crate::support;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use serde_json::{Value, json};
use support::Server;
use support::java::{Client, Jvm, Pending, Redisson};
use support::redisson::{self as lua, JAVA, arg, epoch_ms, eval};
use support::toolchain::{Toolchain, skip_without};

/// The Lua's other owners: other threads of `JAVA`'s client.
const JAVA_B: &str = "0b6f2c1e-7a44-4d2b-9c3e-5f1a2b3c4d5e:78";
const JAVA_C: &str = "0b6f2c1e-7a44-4d2b-9c3e-5f1a2b3c4d5e:79";

/// Owners per side: three, so that the fair lock has a queue behind its holder.
const OWNERS: usize = 3;
/// The Java threads, one per owner.
const THREADS: [&str; OWNERS] = ["a", "b", "c"];
/// Owner ids as compared, one per owner.
const NAMES: [&str; OWNERS] = ["<A>", "<B>", "<C>"];

const NAME: &str = "differential";
const LEASES: [u64; 2] = [10_000, 20_000];
/// What Redisson's unlock gives a lock still held: the driver unlocks through a fresh lock
/// object, whose lease is the watchdog timeout (30 s) rather than its last lock call's.
const UNLOCK_LEASE: u64 = 30_000;
/// The fair lock's queue wait when tryLock's wait is 0: `fairLockWaitTimeout`, 5 min.
const FAIR_WAIT: u64 = 300_000;
/// A permit without a lease, as Redisson scores it.
const NO_LEASE: u64 = 922_337_203_685_477;
/// How long a fair lock's waiter waits: past any case. Not a multiple of 10 s, so that
/// places sit inside their classes rather than at their edges.
const WAIT: u64 = 65_000;
const PERMITS: u64 = 2;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Lock,
    Fenced,
    Fair,
    ReadWrite,
    Permits,
}

#[derive(Clone, Copy, Debug)]
enum Step {
    /// tryLock(0, lease) by owner `who` (the write side if `write`); for permits,
    /// tryAcquire(0, lease).
    Take { who: usize, write: bool, lease: u64 },
    /// unlock by owner `who`, holder or not.
    Release { who: usize, write: bool },
    /// Releases the `which`th permit ever taken (modulo), released already or not.
    Give { which: usize },
    /// tryLock(WAIT, lease) of the fair lock by owner `who`: it takes the lock, or stays in
    /// the queue until a release wakes it (the step ends once it is queued).
    Wait { who: usize, lease: u64 },
}

impl Step {
    /// The owner the step runs as, if any.
    fn who(self) -> Option<usize> {
        match self {
            Step::Take { who, .. } | Step::Release { who, .. } | Step::Wait { who, .. } => {
                Some(who)
            }
            Step::Give { .. } => None,
        }
    }
}

/// One server and what is needed to read it: its keys renamed, its messages.
struct Store {
    server: Server,
    conn: redis::Connection,
    listener: redis::Connection,
    /// The owner ids as this side writes them, owner `0` then `1`.
    owners: [String; OWNERS],
    /// The permits taken, as their ids are stored.
    permits: Vec<Vec<u8>>,
    marks: u64,
}

impl Store {
    fn new(server: Server) -> Store {
        let conn = server.conn();
        let mut listener = server.conn();
        listener
            .send_packed_command(&redis::cmd("PSUBSCRIBE").arg("*").get_packed_command())
            .unwrap();
        listener.recv_response().unwrap();
        listener
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Store {
            server,
            conn,
            listener,
            owners: Default::default(),
            permits: Vec::new(),
            marks: 0,
        }
    }

    /// Whether `messages` (renamed) include one to `owner`'s fair waiter channel.
    fn woken(messages: &[String], owner: usize) -> bool {
        let channel = format!("{}:{} <- ", lock_channel(), NAMES[owner]);
        messages.iter().any(|m| m.starts_with(&channel))
    }

    /// A fresh start for a case: no keys, no messages pending.
    fn reset(&mut self) {
        let () = redis::cmd("FLUSHALL").query(&mut self.conn).unwrap();
        self.permits.clear();
        self.messages();
    }

    /// `bytes` with owner ids and permit ids renamed, as text.
    fn rename(&self, bytes: &[u8]) -> String {
        for (i, id) in self.permits.iter().enumerate() {
            if bytes == id.as_slice() {
                return format!("<permit {i}>");
            }
            if bytes == hex(id).as_bytes() {
                return format!("<permit {i} as hex text>");
            }
        }
        let mut text = match std::str::from_utf8(bytes) {
            Ok(text) => text.to_owned(),
            Err(_) => format!("0x{}", hex(bytes)),
        };
        let mut owners: Vec<(usize, &String)> = self.owners.iter().enumerate().collect();
        owners.sort_by_key(|(_, owner)| std::cmp::Reverse(owner.len()));
        for (i, owner) in owners {
            text = text.replace(owner.as_str(), NAMES[i]);
        }
        text
    }

    /// Every key: its type, expiry class and content, renamed.
    fn state(&mut self) -> BTreeMap<String, String> {
        let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut self.conn).unwrap();
        let now = epoch_ms() as f64;
        let mut state = BTreeMap::new();
        for key in keys {
            // Redisson 3.24+ sets an unlock latch beside each unlock and deletes it after
            // the reply without waiting; the Lua leaves it out on purpose (its calls are
            // never retried; see support::redisson).
            if key.starts_with(b"redisson_unlock_latch:") {
                continue;
            }
            let kind: String = redis::cmd("TYPE").arg(&key).query(&mut self.conn).unwrap();
            let content = match kind.as_str() {
                "string" => {
                    let value: Vec<u8> = redis::cmd("GET").arg(&key).query(&mut self.conn).unwrap();
                    self.rename(&value)
                }
                "hash" => {
                    let fields: Vec<(Vec<u8>, Vec<u8>)> = redis::cmd("HGETALL")
                        .arg(&key)
                        .query(&mut self.conn)
                        .unwrap();
                    let mut fields: Vec<String> = fields
                        .iter()
                        .map(|(f, v)| format!("{}={}", self.rename(f), self.rename(v)))
                        .collect();
                    fields.sort();
                    fields.join(", ")
                }
                "list" => {
                    let items: Vec<Vec<u8>> = redis::cmd("LRANGE")
                        .arg(&key)
                        .arg(0)
                        .arg(-1)
                        .query(&mut self.conn)
                        .unwrap();
                    let items: Vec<String> = items.iter().map(|i| self.rename(i)).collect();
                    items.join(", ")
                }
                "zset" => {
                    let items: Vec<(Vec<u8>, f64)> = redis::cmd("ZRANGE")
                        .arg(&key)
                        .arg(0)
                        .arg(-1)
                        .arg("WITHSCORES")
                        .query(&mut self.conn)
                        .unwrap();
                    let items: Vec<String> = items
                        .iter()
                        .map(|(m, score)| {
                            format!("{}@{}", self.rename(m), score_class(*score, now))
                        })
                        .collect();
                    items.join(", ")
                }
                other => format!("<{other}>"),
            };
            let pttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut self.conn).unwrap();
            let expiry = if pttl < 0 {
                "no expiry".to_owned()
            } else {
                format!("expires {}", within(pttl))
            };
            state.insert(self.rename(&key), format!("{kind}, {expiry}: {content}"));
        }
        state
    }

    /// The messages published since the last call, renamed, up to a marker of ours.
    fn messages(&mut self) -> Vec<String> {
        self.marks += 1;
        let mark = format!("differential-mark-{}", self.marks);
        let _: i64 = redis::cmd("PUBLISH")
            .arg(&mark)
            .arg("")
            .query(&mut self.conn)
            .unwrap();
        let mut messages = Vec::new();
        loop {
            let message = self.listener.recv_response().unwrap();
            let redis::Value::Array(parts) = message else {
                panic!("not a message: {message:?}");
            };
            let [
                _,
                _,
                redis::Value::BulkString(channel),
                redis::Value::BulkString(payload),
            ] = parts.as_slice()
            else {
                panic!("not a pattern message: {parts:?}");
            };
            if channel == mark.as_bytes() {
                return messages;
            }
            messages.push(format!(
                "{} <- {}",
                self.rename(channel),
                self.rename(payload)
            ));
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The class of a duration: up to which multiple of 10 s.
fn within(ms: i64) -> String {
    if ms <= 0 {
        return "now".to_owned();
    }
    format!("within {} s", (ms + 9_999) / 10_000 * 10)
}

/// A score that is an epoch-ms time as its class relative to `now`; others as they are.
fn score_class(score: f64, now: f64) -> String {
    if (1e12..1e14).contains(&score) {
        format!("time {}", within((score - now) as i64))
    } else {
        format!("{score}")
    }
}

fn queue() -> String {
    format!("redisson_lock_queue:{{{NAME}}}")
}

fn timeouts() -> String {
    format!("redisson_lock_timeout:{{{NAME}}}")
}

fn lock_channel() -> String {
    format!("redisson_lock__channel:{{{NAME}}}")
}

fn timeout_prefix(owner: &str) -> String {
    format!("{{{NAME}}}:{owner}:rwlock_timeout")
}

fn permit_keys() -> (String, String) {
    (
        format!("{{{NAME}}}:timeout"),
        format!("redisson_sc:{{{NAME}}}"),
    )
}

/// One side of the comparison.
trait Side {
    fn store(&mut self) -> &mut Store;
    /// Empties the server, ending any waits.
    fn reset(&mut self);
    /// Sets the semaphore's permits; its reply.
    fn set_permits(&mut self) -> String;
    /// Runs `step` (its owner not waiting); its reply, normalised.
    fn step(&mut self, kind: Kind, step: Step) -> String;
    /// Whether owner `who` waits for the fair lock.
    fn waits(&self, who: usize) -> bool;
    /// Lets the fair waiters woken by `messages` try again; what came of each.
    fn wake(&mut self, messages: &[String]) -> Vec<String>;
}

/// What one side answered and left after a step.
struct After {
    reply: String,
    woken: Vec<String>,
    state: BTreeMap<String, String>,
    messages: Vec<String>,
}

/// Runs `step` on `side` (or its permits' setting if `None`) and reads what it left.
fn settle(side: &mut impl Side, kind: Kind, step: Option<Step>) -> After {
    let reply = match step {
        None => side.set_permits(),
        Some(step) if step.who().is_some_and(|who| side.waits(who)) => "waiting".to_owned(),
        Some(step) => side.step(kind, step),
    };
    let messages = side.store().messages();
    let woken = side.wake(&messages);
    After {
        reply,
        woken,
        state: side.store().state(),
        messages,
    }
}

/// The Lua side: the steps of `support::redisson`, as the model tests run them.
struct Scripts {
    store: Store,
    /// The fair lock's waiters, with their leases.
    waiting: Vec<(usize, u64)>,
}

impl Scripts {
    fn new() -> Scripts {
        let mut store = Store::new(Server::start());
        store.owners = [JAVA, JAVA_B, JAVA_C].map(str::to_owned);
        Scripts {
            store,
            waiting: Vec::new(),
        }
    }

    /// One attempt of a fair lock's tryLock that may wait: busy if `Some`.
    fn fair_take(&mut self, who: usize, lease: u64, wait: u64) -> Option<i64> {
        eval(
            &mut self.store.conn,
            &lua::fair_acquire(),
            &[NAME, &queue(), &timeouts()],
            &[
                arg(lease),
                arg(&self.store.owners[who]),
                arg(wait),
                arg(epoch_ms()),
            ],
        )
    }
}

impl Side for Scripts {
    fn store(&mut self) -> &mut Store {
        &mut self.store
    }

    fn reset(&mut self) {
        self.waiting.clear();
        self.store.reset();
    }

    /// The semaphore as the model sets it: through this crate.
    fn set_permits(&mut self) -> String {
        let client = self.store.server.client();
        let set = client
            .leased_semaphore(NAME)
            .try_set_permits(PERMITS)
            .unwrap();
        format!("set: {set}")
    }

    fn waits(&self, who: usize) -> bool {
        self.waiting.iter().any(|&(w, _)| w == who)
    }

    fn wake(&mut self, messages: &[String]) -> Vec<String> {
        let mut woken = Vec::new();
        for (who, lease) in std::mem::take(&mut self.waiting) {
            if !Store::woken(messages, who) {
                self.waiting.push((who, lease));
            } else if self.fair_take(who, lease, WAIT).is_none() {
                woken.push(format!("{} woken: taken", NAMES[who]));
            } else {
                woken.push(format!("{} woken: still waiting", NAMES[who]));
                self.waiting.push((who, lease));
            }
        }
        woken
    }

    fn step(&mut self, kind: Kind, step: Step) -> String {
        let now = epoch_ms();
        if let Step::Wait { who, lease } = step {
            if self.fair_take(who, lease, WAIT).is_none() {
                return "taken".to_owned();
            }
            self.waiting.push((who, lease));
            return "queued".to_owned();
        }
        let conn = &mut self.store.conn;
        match step {
            Step::Take { who, write, lease } => {
                let owner = self.store.owners[who].as_str();
                let write_owner = format!("{owner}:write");
                let busy: Option<i64> = match kind {
                    Kind::Lock => eval(conn, lua::LOCK_ACQUIRE, &[NAME], &[arg(lease), arg(owner)]),
                    Kind::Fenced => {
                        let counter = format!("redisson_lock_token:{{{NAME}}}");
                        let (ttl, token): (i64, i64) = eval(
                            conn,
                            lua::FENCED_ACQUIRE,
                            &[NAME, &counter],
                            &[arg(lease), arg(owner)],
                        );
                        return if ttl == -1 {
                            format!("taken, token {token}")
                        } else {
                            "busy".to_owned()
                        };
                    }
                    Kind::Fair => {
                        // tryLock with a wait of 0 queues with the default wait, then
                        // gives its place up.
                        let busy: Option<i64> = eval(
                            conn,
                            &lua::fair_acquire(),
                            &[NAME, &queue(), &timeouts()],
                            &[arg(lease), arg(owner), arg(FAIR_WAIT), arg(now)],
                        );
                        if busy.is_some() {
                            let _: i64 = eval(
                                conn,
                                lua::FAIR_GIVE_UP,
                                &[&queue(), &timeouts()],
                                &[arg(owner), arg(FAIR_WAIT)],
                            );
                        }
                        busy
                    }
                    Kind::ReadWrite if write => eval(
                        conn,
                        lua::WRITE_ACQUIRE,
                        &[NAME],
                        &[arg(lease), arg(&write_owner)],
                    ),
                    Kind::ReadWrite => eval(
                        conn,
                        lua::READ_ACQUIRE,
                        &[NAME, &timeout_prefix(owner)],
                        &[arg(lease), arg(owner), arg(&write_owner)],
                    ),
                    Kind::Permits => {
                        let id: [u8; 16] = rand::random();
                        let (zset, channel) = permit_keys();
                        let got: Option<String> = eval(
                            conn,
                            lua::PERMIT_ACQUIRE,
                            &[NAME, &zset, &channel],
                            &[
                                arg(1),
                                arg(now + lease),
                                arg(now),
                                arg(NO_LEASE),
                                arg("publish"),
                                id.to_vec(),
                            ],
                        );
                        if got.as_deref() != Some("OK") {
                            return "busy".to_owned();
                        }
                        self.store.permits.push(id.to_vec());
                        None
                    }
                };
                if busy.is_none() { "taken" } else { "busy" }.to_owned()
            }
            Step::Release { who, write } => {
                let owner = self.store.owners[who].as_str();
                let channel = format!("redisson_rwlock:{{{NAME}}}");
                let released: Option<i64> = match kind {
                    Kind::Lock | Kind::Fenced => eval(
                        conn,
                        lua::LOCK_UNLOCK,
                        &[NAME, &lock_channel()],
                        &[arg(0), arg(UNLOCK_LEASE), arg(owner)],
                    ),
                    Kind::Fair => eval(
                        conn,
                        &lua::fair_unlock(),
                        &[NAME, &queue(), &timeouts(), &lock_channel()],
                        &[arg(0), arg(UNLOCK_LEASE), arg(owner), arg(now)],
                    ),
                    Kind::ReadWrite if write => eval(
                        conn,
                        lua::WRITE_UNLOCK,
                        &[NAME, &channel],
                        &[arg(1), arg(UNLOCK_LEASE), arg(format!("{owner}:write"))],
                    ),
                    Kind::ReadWrite => eval(
                        conn,
                        lua::READ_UNLOCK,
                        &[
                            NAME,
                            &channel,
                            &timeout_prefix(owner),
                            &format!("{{{NAME}}}"),
                        ],
                        &[arg(0), arg(owner)],
                    ),
                    Kind::Permits => unreachable!("permits are given back"),
                };
                // Redisson's unlock answers nothing but whether it was the holder's.
                if released.is_some() {
                    "released"
                } else {
                    "not held"
                }
                .to_owned()
            }
            Step::Give { which } => {
                if self.store.permits.is_empty() {
                    return "no permit".to_owned();
                }
                let id = self.store.permits[which % self.store.permits.len()].clone();
                let (zset, channel) = permit_keys();
                let released: i64 = eval(
                    conn,
                    lua::PERMIT_RELEASE,
                    &[NAME, &channel, &zset],
                    &[id, arg(1), arg(now), arg("publish")],
                );
                if released == 1 {
                    "released"
                } else {
                    "not released"
                }
                .to_owned()
            }
            Step::Wait { .. } => unreachable!("handled above"),
        }
    }
}

/// The Java side: real Redisson, three threads of one client.
struct Java {
    store: Store,
    client: Client<'static>,
    /// The fair lock's waiters, with their tryLock calls.
    waiting: Vec<(usize, Pending<'static>)>,
}

/// How long Redisson gets to show a step's effect: only turns a hang into a failure.
const SHOWN_WITHIN: Duration = Duration::from_secs(10);

impl Java {
    fn new(version: Redisson) -> Java {
        let mut store = Store::new(Server::start());
        let client = Jvm::shared(version).connect(&store.server.url(), None);
        store.owners = THREADS.map(|thread| client.thread(thread).owner());
        Java {
            store,
            client,
            waiting: Vec::new(),
        }
    }

    fn call(&self, who: usize, op: &str, kind: &str, extra: Value) -> Result<Value, String> {
        self.client.thread(THREADS[who]).call(op, kind, NAME, extra)
    }

    /// tryLock(WAIT, lease) on the fair lock: its reply if it comes before the owner is
    /// queued and subscribed to its channel, else "queued" and the call waits on.
    fn wait(&mut self, who: usize, lease: u64) -> String {
        let pending = self.client.thread(THREADS[who]).send(
            "tryLock",
            "fair",
            NAME,
            json!({"wait": WAIT, "lease": lease}),
        );
        let owner = self.store.owners[who].clone();
        let channel = format!("{}:{owner}", lock_channel());
        let start = std::time::Instant::now();
        while start.elapsed() < SHOWN_WITHIN {
            if let Some(reply) = pending.wait_for(Duration::from_millis(5)) {
                return taken(reply);
            }
            let place: Option<f64> = redis::cmd("ZSCORE")
                .arg(timeouts())
                .arg(&owner)
                .query(&mut self.store.conn)
                .unwrap();
            if place.is_some() && self.store.server.subscribers(&channel) > 0 {
                self.waiting.push((who, pending));
                return "queued".to_owned();
            }
        }
        self.waiting.push((who, pending));
        "neither taken nor queued and subscribed".to_owned()
    }
}

/// A tryLock's reply, normalised.
fn taken(reply: Result<Value, String>) -> String {
    match reply {
        Ok(Value::Bool(true)) => "taken".to_owned(),
        Ok(Value::Bool(false)) => "busy".to_owned(),
        other => format!("unexpected: {other:?}"),
    }
}

impl Side for Java {
    fn store(&mut self) -> &mut Store {
        &mut self.store
    }

    /// Ends the waits first: with the keys gone, a message to every waiter lets the first
    /// of them to try again take the lock, and so on until none waits. (Not one waiter at a
    /// time: a waiter that has just subscribed tries again on its own, and may be first.)
    fn reset(&mut self) {
        while !self.waiting.is_empty() {
            let () = redis::cmd("FLUSHALL").query(&mut self.store.conn).unwrap();
            for (who, _) in &self.waiting {
                let channel = format!("{}:{}", lock_channel(), self.store.owners[*who]);
                let _: i64 = redis::cmd("PUBLISH")
                    .arg(&channel)
                    .arg(0)
                    .query(&mut self.store.conn)
                    .unwrap();
            }
            let start = std::time::Instant::now();
            let waiting = self.waiting.len();
            while self.waiting.len() == waiting {
                assert!(
                    start.elapsed() < SHOWN_WITHIN,
                    "no waiter of the last case took the lock"
                );
                self.waiting
                    .retain(|(_, pending)| pending.wait_for(Duration::from_millis(5)).is_none());
            }
        }
        self.store.reset();
    }

    fn waits(&self, who: usize) -> bool {
        self.waiting.iter().any(|(w, _)| *w == who)
    }

    fn wake(&mut self, messages: &[String]) -> Vec<String> {
        let mut woken = Vec::new();
        for (who, pending) in std::mem::take(&mut self.waiting) {
            if !Store::woken(messages, who) {
                self.waiting.push((who, pending));
                continue;
            }
            match pending.wait_for(SHOWN_WITHIN) {
                Some(reply) => woken.push(format!("{} woken: {}", NAMES[who], taken(reply))),
                None => {
                    woken.push(format!("{} woken: still waiting", NAMES[who]));
                    self.waiting.push((who, pending));
                }
            }
        }
        woken
    }

    fn set_permits(&mut self) -> String {
        match self.call(0, "trySetPermits", "permits", json!({"n": PERMITS})) {
            Ok(set) => format!("set: {set}"),
            Err(err) => format!("error: {err}"),
        }
    }

    fn step(&mut self, kind: Kind, step: Step) -> String {
        let driver_kind = match kind {
            Kind::Lock => "lock",
            Kind::Fenced => "fenced",
            Kind::Fair => "fair",
            Kind::ReadWrite => "read",
            Kind::Permits => "permits",
        };
        match step {
            Step::Take { who, write, lease } => {
                let driver_kind = if write { "write" } else { driver_kind };
                let extra = json!({"wait": 0, "lease": lease});
                match kind {
                    Kind::Fenced => match self.call(who, "tryLockToken", driver_kind, extra) {
                        Ok(Value::Null) => "busy".to_owned(),
                        Ok(token) => format!("taken, token {token}"),
                        Err(err) => format!("error: {err}"),
                    },
                    Kind::Permits => match self.call(who, "tryAcquire", driver_kind, extra) {
                        Ok(Value::Null) => "busy".to_owned(),
                        Ok(Value::String(id)) => {
                            let raw = (0..id.len())
                                .step_by(2)
                                .map(|i| u8::from_str_radix(&id[i..i + 2], 16).unwrap())
                                .collect();
                            self.store.permits.push(raw);
                            "taken".to_owned()
                        }
                        other => format!("unexpected: {other:?}"),
                    },
                    _ => taken(self.call(who, "tryLock", driver_kind, extra)),
                }
            }
            Step::Release { who, write } => {
                let driver_kind = if write { "write" } else { driver_kind };
                match self.call(who, "unlock", driver_kind, Value::Null) {
                    Ok(_) => "released".to_owned(),
                    Err(err) if err.starts_with("IllegalMonitorStateException") => {
                        "not held".to_owned()
                    }
                    Err(err) => format!("error: {err}"),
                }
            }
            Step::Wait { who, lease } => self.wait(who, lease),
            Step::Give { which } => {
                if self.store.permits.is_empty() {
                    return "no permit".to_owned();
                }
                let id = hex(&self.store.permits[which % self.store.permits.len()]);
                match self.call(0, "release", driver_kind, json!({"permit": id})) {
                    Ok(_) => "released".to_owned(),
                    // Redisson raises IllegalArgumentException ("has already been released
                    // or doesn't exist"), which reaches the driver wrapped in a RedisException
                    // with a message of its own.
                    Err(err)
                        if err.starts_with("IllegalArgumentException")
                            || err.starts_with("RedisException: Unexpected exception") =>
                    {
                        "not released".to_owned()
                    }
                    Err(err) => format!("error: {err}"),
                }
            }
        }
    }
}

/// The differences between the Lua's `ours` and Redisson's `theirs`, one a line.
fn differences(ours: &After, theirs: &After) -> String {
    let mut out = String::new();
    if ours.reply != theirs.reply {
        out += &format!(
            "  reply: Lua {:?}, Redisson {:?}\n",
            ours.reply, theirs.reply
        );
    }
    if ours.woken != theirs.woken {
        out += &format!(
            "  waiters woken: Lua {:?}, Redisson {:?}\n",
            ours.woken, theirs.woken
        );
    }
    let keys: std::collections::BTreeSet<&String> =
        ours.state.keys().chain(theirs.state.keys()).collect();
    for key in keys {
        let (a, b) = (ours.state.get(key), theirs.state.get(key));
        if a != b {
            out += &format!("  key {key}:\n    Lua:      {a:?}\n    Redisson: {b:?}\n");
        }
    }
    if ours.messages != theirs.messages {
        out += &format!(
            "  messages:\n    Lua:      {:?}\n    Redisson: {:?}\n",
            ours.messages, theirs.messages
        );
    }
    out
}

/// Plays `steps` on both sides from empty servers, comparing after each.
fn play(kind: Kind, scripts: &mut Scripts, java: &mut Java, steps: &[Step]) -> Result<(), String> {
    scripts.reset();
    java.reset();
    let mut log = Vec::new();
    let mut compare = |what: String, ours: After, theirs: After| {
        let differences = differences(&ours, &theirs);
        log.push(format!("{what}: {}", theirs.reply));
        if differences.is_empty() {
            return Ok(());
        }
        Err(format!(
            "{kind:?} differs after {what}:\n{differences}steps:\n  {}\nRedisson's keys then: {:#?}",
            log.join("\n  "),
            theirs.state
        ))
    };
    if kind == Kind::Permits {
        compare(
            format!("setting {PERMITS} permits"),
            settle(scripts, kind, None),
            settle(java, kind, None),
        )?;
    }
    for &step in steps {
        compare(
            format!("{step:?}"),
            settle(scripts, kind, Some(step)),
            settle(java, kind, Some(step)),
        )?;
    }
    Ok(())
}

fn steps(kind: Kind) -> impl Strategy<Value = Vec<Step>> {
    let take = (0..OWNERS, any::<bool>(), 0..LEASES.len(), any::<bool>()).prop_map(
        move |(who, write, lease, wait)| {
            let lease = LEASES[lease];
            if wait && kind == Kind::Fair {
                Step::Wait { who, lease }
            } else {
                Step::Take {
                    who,
                    write: write && kind == Kind::ReadWrite,
                    lease,
                }
            }
        },
    );
    let release = (0..OWNERS, any::<bool>(), 0..4usize).prop_map(move |(who, write, which)| {
        if kind == Kind::Permits {
            Step::Give { which }
        } else {
            Step::Release {
                who,
                write: write && kind == Kind::ReadWrite,
            }
        }
    });
    proptest::collection::vec(prop_oneof![3 => take, 2 => release], 1..16)
}

fn cases() -> u32 {
    std::env::var("DIFFERENTIAL_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(8)
}

fn take(who: usize, lease: u64) -> Step {
    Step::Take {
        who,
        write: false,
        lease,
    }
}

fn write(who: usize, lease: u64) -> Step {
    Step::Take {
        who,
        write: true,
        lease,
    }
}

fn release(who: usize) -> Step {
    Step::Release { who, write: false }
}

fn release_write(who: usize) -> Step {
    Step::Release { who, write: true }
}

/// The fixed sequences of `kind`: re-entry, a busy take, a non-holder's release, a release
/// of a free lock; for the fair lock also waiters woken in turn; for the read-write lock
/// also a writer reading and shared reads.
fn fixed(kind: Kind) -> Vec<Vec<Step>> {
    let (short, long) = (LEASES[0], LEASES[1]);
    let exclusive = vec![
        take(0, short),
        take(0, long),
        take(1, short),
        release(1),
        release(0),
        take(1, short),
        release(0),
        release(0),
        take(1, long),
        release(1),
        release(1),
    ];
    match kind {
        Kind::ReadWrite => vec![
            vec![
                take(0, short),
                take(1, long),
                write(0, short),
                release(0),
                write(1, short),
                release(1),
                release(1),
                write(0, long),
                write(0, short),
                take(0, short),
                take(1, short),
                release_write(0),
                release_write(0),
                release_write(1),
                release(0),
                release(0),
            ],
            vec![write(1, short), release(1), take(1, long), release_write(1)],
        ],
        Kind::Permits => vec![vec![
            take(0, short),
            take(1, long),
            take(0, short),
            Step::Give { which: 0 },
            Step::Give { which: 0 },
            take(1, short),
            Step::Give { which: 1 },
            Step::Give { which: 2 },
        ]],
        Kind::Fair => vec![
            exclusive,
            vec![
                take(0, short),
                Step::Wait {
                    who: 1,
                    lease: long,
                },
                take(2, short),
                Step::Wait {
                    who: 2,
                    lease: short,
                },
                take(0, long),
                release(2),
                release(0),
                release(0),
                release(1),
                release(2),
                take(0, short),
                release(2),
            ],
        ],
        _ => vec![exclusive],
    }
}

/// The fixed sequences, then generated ones, on both Redisson versions.
fn differential(kind: Kind) {
    for version in Redisson::ALL {
        let scripts = RefCell::new(Scripts::new());
        let java = RefCell::new(Java::new(version));
        let run = |steps: &[Step]| {
            play(
                kind,
                &mut scripts.borrow_mut(),
                &mut java.borrow_mut(),
                steps,
            )
        };
        for steps in fixed(kind) {
            if let Err(err) = run(&steps) {
                panic!("Redisson {}: {err}", version.version());
            }
        }
        let mut runner = TestRunner::new(ProptestConfig {
            cases: cases(),
            failure_persistence: None,
            ..ProptestConfig::default()
        });
        let result = runner.run(&steps(kind), |steps| {
            run(&steps).map_err(TestCaseError::fail)
        });
        if let Err(err) = result {
            panic!("Redisson {}: {err}", version.version());
        }
    }
}

#[test]
fn the_lua_lock_matches_redisson() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    differential(Kind::Lock);
}

#[test]
fn the_lua_fenced_lock_matches_redisson() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    differential(Kind::Fenced);
}

#[test]
fn the_lua_fair_lock_matches_redisson() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    differential(Kind::Fair);
}

#[test]
fn the_lua_read_write_lock_matches_redisson() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    differential(Kind::ReadWrite);
}

#[test]
fn the_lua_permit_semaphore_matches_redisson() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    differential(Kind::Permits);
}
