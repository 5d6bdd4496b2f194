//! The count-down latch against its model: the counts the latch may have (one, unless a
//! call failed in a way that may or may not have run), the replies of our calls, and the
//! outcomes of waiters running beside the steps. A waiter that says the latch opened must
//! have lived through a moment the model had it open; a waiter without a deadline must be
//! opened by the last count-down at the end of the case. The Java owner is Lua written
//! here from Redisson's layout (a set publishes `1`, a count-down reaching zero `0`).

use std::collections::BTreeSet;
use std::sync::mpsc;
use std::time::Duration;

use proptest::prelude::*;
use redmutex::{CountDownLatch, LockClient};

use super::{Clients, Reply, fresh_name};
use crate::support::{Proxy, Server};

/// A latch call a fault aims at: the script it sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    Set,
    CountDown,
    Delete,
    /// A look at the count: `count()`, and every look of a waiter.
    Count,
}

#[derive(Clone, Debug)]
pub enum Op {
    Set {
        client: usize,
        n: u64,
    },
    CountDown {
        client: usize,
    },
    Delete {
        client: usize,
    },
    Count {
        client: usize,
    },
    JavaSet {
        n: u64,
    },
    JavaCountDown,
    /// A waiter that waits `ms` at most, beside the steps that follow.
    Wait {
        client: usize,
        ms: u64,
    },
    /// A waiter without a deadline (a long one), which the end of the case must open.
    Park {
        client: usize,
    },
    Pass {
        ms: u64,
    },
    Fault {
        client: usize,
        call: Call,
        reply: Reply,
    },
    Stall {
        client: usize,
    },
    Thaw {
        client: usize,
    },
    /// Redis restarts without persistence: the count is gone, the latch open.
    Restart,
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        1 => Just(Call::Set),
        2 => Just(Call::CountDown),
        1 => Just(Call::Delete),
        1 => Just(Call::Count),
    ]
}

pub fn case() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        4 => (0..2usize, 1u64..4).prop_map(|(client, n)| Op::Set { client, n }),
        8 => (0..2usize).prop_map(|client| Op::CountDown { client }),
        1 => (0..2usize).prop_map(|client| Op::Delete { client }),
        2 => (0..2usize).prop_map(|client| Op::Count { client }),
        2 => (1u64..4).prop_map(|n| Op::JavaSet { n }),
        3 => Just(Op::JavaCountDown),
        3 => (0..2usize, 1u64..60).prop_map(|(client, ms)| Op::Wait { client, ms }),
        2 => (0..2usize).prop_map(|client| Op::Park { client }),
        3 => (1u64..40).prop_map(|ms| Op::Pass { ms }),
        2 => (0..2usize, call(), super::reply())
            .prop_map(|(client, call, reply)| Op::Fault { client, call, reply }),
        1 => (0..2usize).prop_map(|client| Op::Stall { client }),
        3 => (0..2usize).prop_map(|client| Op::Thaw { client }),
        1 => Just(Op::Restart),
    ];
    proptest::collection::vec(op, 1..40)
}

/// What the script of `call` is found by: its SHA1.
fn needle(call: Call) -> Vec<u8> {
    let script = match call {
        Call::Set => include_str!("../../../src/kinds/latch/latch_set.lua"),
        Call::CountDown => include_str!("../../../src/kinds/latch/latch_count_down.lua"),
        Call::Delete => include_str!("../../../src/kinds/latch/latch_delete.lua"),
        Call::Count => include_str!("../../../src/kinds/latch/latch_count.lua"),
    };
    redis::Script::new(script).get_hash().as_bytes().to_vec()
}

/// A write of ours or Java's, as the model applies it to a count.
#[derive(Clone, Copy, Debug)]
enum Write {
    Set(u64),
    CountDown,
    Delete,
}

impl Write {
    fn apply(self, count: u64) -> u64 {
        match self {
            Write::Set(n) if count == 0 => n,
            Write::Set(_) => count,
            Write::CountDown => count.saturating_sub(1),
            Write::Delete => 0,
        }
    }
}

/// A waiter running beside the steps.
struct Waiter {
    long: bool,
    /// Whether the model had the latch open at some moment since the waiter started.
    open_seen: bool,
    result: mpsc::Receiver<Result<bool, (bool, String)>>,
    label: String,
}

/// How long the end of a case gives a waiter without a deadline to be opened: far below
/// the sleepy client's poll (60 s), so only a message (or a reconnect) can open it.
const OPENED: Duration = Duration::from_secs(20);

pub struct Harness {
    server: Server,
    clients: Clients,
    conn: redis::Connection,
}

impl Harness {
    pub fn new() -> Harness {
        let server = Server::start();
        let proxies = [Proxy::start(server.port()), Proxy::start(server.port())];
        // A stalled client's call gives up after a response timeout and a connect timeout
        // (it tries a new connection): short ones keep the cases short.
        let builder = |proxy: &Proxy| {
            LockClient::builder(&proxy.url())
                .connect_timeout(Duration::from_millis(300))
                .lease(super::WATCHDOG_LEASE)
                .response_timeout(super::response_timeout())
        };
        let shared = super::build(|| builder(&proxies[0]).retry_cap(Duration::from_millis(50)));
        // Its waiters look again only after a minute: they open in time on a message alone.
        let own = super::build(|| {
            builder(&proxies[1])
                .retry_base(Duration::from_secs(30))
                .retry_cap(Duration::from_secs(60))
        });
        let clients = Clients {
            shared,
            own,
            proxies,
        };
        let conn = server.conn();
        Harness {
            server,
            clients,
            conn,
        }
    }

    pub fn run(&mut self, ops: &[Op]) -> Result<(), String> {
        let name = fresh_name("latch");
        let handles = [
            self.clients.of(0).count_down_latch(&name),
            self.clients.of(2).count_down_latch(&name),
        ];
        let mut case = Case {
            h: self,
            name,
            handles,
            counts: BTreeSet::from([0]),
            pending: [Vec::new(), Vec::new()],
            stalled: [false; 2],
            armed: [None; 2],
            waiters: Vec::new(),
            next_waiter: 0,
            log: Vec::new(),
        };
        let result = case.play(ops).and_then(|()| case.end());
        result.map_err(|err| format!("{err}\nsteps:\n{}", case.log.join("\n")))
    }
}

struct Case<'h> {
    h: &'h mut Harness,
    name: String,
    handles: [CountDownLatch; 2],
    /// The counts the latch may have now.
    counts: BTreeSet<u64>,
    /// The writes each stalled client sent that failed: they may land when it thaws.
    pending: [Vec<Write>; 2],
    stalled: [bool; 2],
    armed: [Option<(Call, Reply)>; 2],
    waiters: Vec<Waiter>,
    next_waiter: usize,
    log: Vec<String>,
}

impl Case<'_> {
    fn play(&mut self, ops: &[Op]) -> Result<(), String> {
        for op in ops {
            self.log.push(format!("{op:?}"));
            self.step(op)?;
            for client in 0..2 {
                if self.h.clients.proxy(client).trap_sprung() {
                    self.armed[client] = None;
                }
            }
            self.check()?;
        }
        Ok(())
    }

    /// The count the model predicts, when it knows one.
    fn known(&self) -> Option<u64> {
        match self.counts.len() {
            1 => self.counts.first().copied(),
            _ => None,
        }
    }

    /// A write of ours came back with `result`; `expected` is its reply for a known count.
    fn ours<T: PartialEq + std::fmt::Debug>(
        &mut self,
        client: usize,
        write: Write,
        result: redmutex::Result<T>,
        expected: impl Fn(u64) -> T,
    ) -> Result<(), String> {
        self.log.push(format!("  {result:?}"));
        match result {
            Ok(reply) => {
                if let Some(count) = self.known()
                    && reply != expected(count)
                {
                    return Err(format!(
                        "{write:?} replied {reply:?} at a count of {count}, not {:?}",
                        expected(count)
                    ));
                }
                self.apply(write);
                Ok(())
            }
            Err(err) if err.is_connection() => {
                if self.stalled[client] {
                    self.pending[client].push(write);
                } else {
                    self.settle(client);
                    self.maybe(write);
                }
                Ok(())
            }
            Err(err) => Err(format!("{write:?} failed: {err}")),
        }
    }

    fn apply(&mut self, write: Write) {
        self.counts = self.counts.iter().map(|c| write.apply(*c)).collect();
        self.saw_counts();
    }

    /// A write that may or may not have run.
    fn maybe(&mut self, write: Write) {
        let after: Vec<u64> = self.counts.iter().map(|c| write.apply(*c)).collect();
        self.counts.extend(after);
        self.saw_counts();
    }

    /// The latch may be open now: every waiter has lived through that.
    fn saw_counts(&mut self) {
        if self.counts.contains(&0) {
            for waiter in &mut self.waiters {
                waiter.open_seen = true;
            }
        }
    }

    fn step(&mut self, op: &Op) -> Result<(), String> {
        match *op {
            Op::Set { client, n } => {
                let result = self.handles[client].try_set_count(n);
                self.ours(client, Write::Set(n), result, |count| count == 0)
            }
            Op::CountDown { client } => {
                let result = self.handles[client].count_down();
                self.ours(client, Write::CountDown, result, |count| {
                    count.saturating_sub(1)
                })
            }
            Op::Delete { client } => {
                let result = self.handles[client].delete();
                self.ours(client, Write::Delete, result, |count| count > 0)
            }
            Op::Count { client } => {
                let result = self.handles[client].count();
                self.log.push(format!("  {result:?}"));
                match result {
                    Ok(count) if self.counts.contains(&count) => Ok(()),
                    Ok(count) => Err(format!(
                        "count() said {count}, not one of {:?}",
                        self.counts
                    )),
                    // A fault, a stall, a restart or a busy machine.
                    Err(err) if err.is_connection() => Ok(()),
                    Err(err) => Err(format!("count() failed: {err}")),
                }
            }
            Op::JavaSet { n } => {
                let set: i64 = redis::Script::new(
                    "if redis.call('exists', KEYS[1]) == 1 then return 0 end \
                     redis.call('set', KEYS[1], ARGV[1]) \
                     redis.call('publish', ARGV[2], '1') \
                     return 1",
                )
                .key(&self.name)
                .arg(n)
                .arg(self.channel())
                .invoke(&mut self.h.conn)
                .unwrap();
                self.log.push(format!("  Java set: {set}"));
                self.java(Write::Set(n), set == 1, |count| count == 0)
            }
            Op::JavaCountDown => {
                let left: i64 = redis::Script::new(
                    "local left = redis.call('decr', KEYS[1]) \
                     if left <= 0 then redis.call('del', KEYS[1]) end \
                     if left == 0 then redis.call('publish', ARGV[1], '0') end \
                     return left",
                )
                .key(&self.name)
                .arg(self.channel())
                .invoke(&mut self.h.conn)
                .unwrap();
                self.log.push(format!("  Java counted down to {left}"));
                self.java(Write::CountDown, left.max(0) as u64, |count| {
                    count.saturating_sub(1)
                })
            }
            Op::Wait { client, ms } => {
                self.wait(client, Some(Duration::from_millis(ms)));
                Ok(())
            }
            Op::Park { client } => {
                self.wait(client, None);
                Ok(())
            }
            Op::Pass { ms } => {
                std::thread::sleep(Duration::from_millis(ms));
                Ok(())
            }
            Op::Fault {
                client,
                call,
                reply,
            } => {
                super::arm(self.h.clients.proxy(client), &needle(call), reply);
                self.armed[client] = Some((call, reply));
                Ok(())
            }
            Op::Stall { client } => {
                if !self.stalled[client] {
                    self.h.clients.proxy(client).pause();
                    self.stalled[client] = true;
                }
                Ok(())
            }
            Op::Thaw { client } => {
                self.thaw(client);
                Ok(())
            }
            Op::Restart => {
                self.h.server.restart();
                self.h.conn = self.h.server.conn();
                self.counts = BTreeSet::from([0]);
                self.saw_counts();
                Ok(())
            }
        }
    }

    fn channel(&self) -> String {
        format!("redisson_countdownlatch__channel__{{{}}}", self.name)
    }

    /// A write of Java's, which always gets through: its reply checked as ours.
    fn java<T: PartialEq + std::fmt::Debug>(
        &mut self,
        write: Write,
        reply: T,
        expected: impl Fn(u64) -> T,
    ) -> Result<(), String> {
        if let Some(count) = self.known()
            && reply != expected(count)
        {
            return Err(format!(
                "Java's {write:?} replied {reply:?} at a count of {count}"
            ));
        }
        self.apply(write);
        Ok(())
    }

    fn wait(&mut self, client: usize, wait: Option<Duration>) {
        let latch = self.handles[client].clone();
        let (done, result) = mpsc::channel();
        std::thread::spawn(move || {
            let waited = match wait {
                Some(wait) => latch.wait_for(wait),
                None => latch.wait_for(Duration::from_secs(300)),
            };
            let _ = done.send(waited.map_err(|err| (err.is_connection(), err.to_string())));
        });
        let label = format!("waiter {} (client {client}, {wait:?})", self.next_waiter);
        self.log.push(format!("  {label}"));
        self.next_waiter += 1;
        self.waiters.push(Waiter {
            long: wait.is_none(),
            open_seen: self.counts.contains(&0),
            result,
            label,
        });
    }

    fn thaw(&mut self, client: usize) {
        if !std::mem::take(&mut self.stalled[client]) {
            return;
        }
        self.h.clients.proxy(client).resume();
        self.settle(client);
        // Each may have landed or not, and in any order: they went out on connections of
        // their own, which the proxy lets go in no particular order.
        let pending = std::mem::take(&mut self.pending[client]);
        let mut reached: BTreeSet<(u64, u32)> = self.counts.iter().map(|c| (*c, 0)).collect();
        let mut frontier: Vec<(u64, u32)> = reached.iter().copied().collect();
        while let Some((count, used)) = frontier.pop() {
            for (i, write) in pending.iter().enumerate() {
                let next = (write.apply(count), used | 1 << i);
                if used & 1 << i == 0 && reached.insert(next) {
                    frontier.push(next);
                }
            }
        }
        self.counts = reached.into_iter().map(|(count, _)| count).collect();
        self.saw_counts();
    }

    /// Makes `client`'s failed writes final: each has run by the time this returns, or
    /// never will. What a stall held goes on; then every connection of the client is cut,
    /// so that nothing the proxy has not passed on yet (a busy machine can keep it from
    /// reading what came long ago) reaches the server later; what reached it has run once
    /// the server answers a PING.
    fn settle(&mut self, client: usize) {
        let proxy = self.h.clients.proxy(client);
        assert!(
            proxy.flushed(Duration::from_secs(10)),
            "what the stall held did not go on"
        );
        proxy.cut_all();
        super::landed(&mut self.h.conn);
    }

    /// The server's count is one the model allows; the model takes it. Waiters that
    /// returned are judged.
    fn check(&mut self) -> Result<(), String> {
        let stored: Option<String> = redis::cmd("GET")
            .arg(&self.name)
            .query(&mut self.h.conn)
            .unwrap();
        let count = match stored {
            None => 0,
            Some(text) => text
                .parse::<u64>()
                .map_err(|_| format!("the latch holds {text:?}"))?,
        };
        if !self.counts.contains(&count) {
            return Err(format!(
                "the server's count is {count}, the model's one of {:?}",
                self.counts
            ));
        }
        self.counts = BTreeSet::from([count]);
        self.saw_counts();
        self.judge_waiters(None)
    }

    /// Judges the waiters that returned, waiting `wait` for each at most.
    fn judge_waiters(&mut self, wait: Option<Duration>) -> Result<(), String> {
        let mut still = Vec::new();
        for waiter in std::mem::take(&mut self.waiters) {
            let result = match wait {
                None => waiter.result.try_recv().ok(),
                Some(wait) => waiter.result.recv_timeout(wait).ok(),
            };
            let label = &waiter.label;
            match result {
                None if wait.is_some() => {
                    return Err(format!("{label} did not return by the end of the case"));
                }
                None => still.push(waiter),
                Some(Ok(true)) if !waiter.open_seen => {
                    return Err(format!("{label} opened while the latch was never open"));
                }
                Some(Ok(false)) if waiter.long => {
                    return Err(format!("{label} timed out"));
                }
                Some(Ok(opened)) => self.log.push(format!("  {label}: {opened}")),
                // A fault, a stall, a restart or a busy machine.
                Some(Err((true, err))) => self.log.push(format!("  {label}: {err}")),
                Some(Err((_, err))) => return Err(format!("{label} failed: {err}")),
            }
        }
        self.waiters = still;
        Ok(())
    }

    /// Every fault ended, the latch opened by our deletion: every waiter left returns
    /// opened.
    fn end(&mut self) -> Result<(), String> {
        for client in 0..2 {
            self.thaw(client);
            self.h.clients.proxy(client).disarm();
            self.armed[client] = None;
        }
        self.check()?;
        self.log.push("end: delete".into());
        loop {
            match self.handles[0].delete() {
                Ok(_) => break,
                Err(err) if err.is_connection() => continue,
                Err(err) => return Err(format!("the last deletion failed: {err}")),
            }
        }
        self.counts = BTreeSet::from([0]);
        self.saw_counts();
        self.check()?;
        self.judge_waiters(Some(OPENED))
    }
}

impl crate::model::Model for Harness {
    const NAME: &'static str = "count-down latch";
    type Case = Vec<Op>;
    fn new() -> Self {
        Harness::new()
    }
    fn cases() -> BoxedStrategy<Vec<Op>> {
        case().boxed()
    }
    fn run_case(&mut self, case: &Vec<Op>) -> Result<(), String> {
        self.run(case)
    }
}
