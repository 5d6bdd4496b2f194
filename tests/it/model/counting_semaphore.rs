//! The counting semaphore (no leases) against its model: the count the server must hold,
//! given what the guards took, what the handles gave back or added, and the Java owner's
//! takes and releases (Redisson's scripts, written here from the layout). Calls whose
//! replies were late or that a stall held may or may not have run; the model keeps their
//! effect as possible, at most once each, and requires what a failed acquisition took to
//! come back once it settles: nothing taken that no guard holds.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use redmutex::{CountedPermits, CountingSemaphore};

use super::{Clients, Reply, fresh_name};
use crate::support::Server;

/// How long a failed acquisition's undo may take to give back what it took: at once, or
/// at a retry of the background (every 200 ms) once a stall ends; generous for a busy
/// machine.
const SETTLE: Duration = Duration::from_secs(5);

/// A call a fault step aims at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aim {
    Acquire,
    /// A guard's release, a handle's release or a change of the pool: the same script.
    Add,
}

#[derive(Clone, Debug)]
pub enum Op {
    /// `try_acquire_many(n)` by one of the two clients.
    Take {
        client: usize,
        n: u64,
    },
    /// `try_acquire_many_for(n, wait)`.
    Wait {
        client: usize,
        n: u64,
        wait: u64,
    },
    /// A guard's release.
    Release {
        which: usize,
    },
    /// `release(n)` on a handle, by anyone.
    Give {
        client: usize,
        n: u64,
    },
    /// `add_permits(delta)`, or `reduce_permits(-delta)` below zero.
    Add {
        client: usize,
        delta: i64,
    },
    /// Redisson's `tryAcquire(n)`, as its script does it.
    JavaTake {
        n: u64,
    },
    /// Redisson's `release(n)`.
    JavaGive {
        n: u64,
    },
    Pass {
        ms: u64,
    },
    /// The reply to client `client`'s next call of `aim` is lost or late: it may have run.
    Fault {
        client: usize,
        aim: Aim,
        reply: Reply,
    },
    /// Every connection of client `client` stalls until `Thaw`.
    Stall {
        client: usize,
    },
    Thaw {
        client: usize,
    },
}

pub fn case() -> impl Strategy<Value = (u64, Vec<Op>)> {
    let n = || 1u64..=3;
    let op = prop_oneof![
        8 => (0..2usize, n()).prop_map(|(client, n)| Op::Take { client, n }),
        2 => (0..2usize, n(), 5u64..40).prop_map(|(client, n, wait)| Op::Wait { client, n, wait }),
        6 => (0..4usize).prop_map(|which| Op::Release { which }),
        2 => (0..2usize, n()).prop_map(|(client, n)| Op::Give { client, n }),
        2 => (0..2usize, prop_oneof![-3i64..=-1, 1i64..=3])
            .prop_map(|(client, delta)| Op::Add { client, delta }),
        2 => n().prop_map(|n| Op::JavaTake { n }),
        1 => n().prop_map(|n| Op::JavaGive { n }),
        2 => (1u64..30).prop_map(|ms| Op::Pass { ms }),
        3 => (0..2usize, prop_oneof![Just(Aim::Acquire), Just(Aim::Add)], super::reply())
            .prop_map(|(client, aim, reply)| Op::Fault { client, aim, reply }),
        1 => (0..2usize).prop_map(|client| Op::Stall { client }),
        1 => (0..2usize).prop_map(|client| Op::Thaw { client }),
    ];
    (1u64..=4, proptest::collection::vec(op, 1..30))
}

fn needle(aim: Aim) -> Vec<u8> {
    let source = match aim {
        Aim::Acquire => include_str!("../../../src/kinds/counted/csem_acquire.lua"),
        Aim::Add => include_str!("../../../src/kinds/counted/csem_add.lua"),
    };
    redis::Script::new(source).get_hash().as_bytes().to_vec()
}

/// Redisson's `tryAcquire(n)` on the count.
const JAVA_TAKE: &str = "local v = redis.call('get', KEYS[1]) \
    if v ~= false and tonumber(v) >= tonumber(ARGV[1]) then \
    redis.call('decrby', KEYS[1], ARGV[1]) return 1 end return 0";
/// Redisson's `release(n)`.
const JAVA_GIVE: &str = "local v = redis.call('incrby', KEYS[1], ARGV[1]) \
    redis.call('publish', KEYS[2], v)";

pub struct Harness {
    /// Kept running while the clients talk to it.
    _server: Server,
    clients: Clients,
    conn: redis::Connection,
}

impl Harness {
    pub fn new() -> Harness {
        let server = Server::start();
        let clients = Clients::new(&server);
        let conn = server.conn();
        Harness {
            _server: server,
            clients,
            conn,
        }
    }

    pub fn run(&mut self, permits: u64, ops: &[Op]) -> Result<(), String> {
        let name = fresh_name("counting");
        let handles = [
            self.clients.of(0).counting_semaphore(&name),
            self.clients.of(2).counting_semaphore(&name),
        ];
        while let Err(err) = handles[0].try_set_permits(permits) {
            assert!(err.is_connection(), "try_set_permits: {err}");
        }
        let mut case = Case {
            h: self,
            name,
            handles,
            guards: Vec::new(),
            exact: permits as i64,
            maybe: Vec::new(),
            ghosts: [Vec::new(), Vec::new()],
            armed: [None; 2],
            stalled: [false; 2],
            log: Vec::new(),
        };
        let result = case.play(ops).and_then(|()| case.end());
        result.map_err(|err| format!("{err}\nsteps ({permits} permits):\n{}", case.log.join("\n")))
    }
}

struct Case<'h> {
    h: &'h mut Harness,
    name: String,
    handles: [CountingSemaphore; 2],
    guards: Vec<CountedPermits>,
    /// The count, but for the calls below.
    exact: i64,
    /// Changes by calls that failed and were not seen to run: each may run once, later too.
    maybe: Vec<i64>,
    /// What the failed acquisitions of each client asked for: taken for a moment at most,
    /// until their undo; kept while the client is stalled.
    ghosts: [Vec<u64>; 2],
    armed: [Option<(Aim, Reply)>; 2],
    stalled: [bool; 2],
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
            self.check([true; 2])?;
        }
        Ok(())
    }

    fn count(&mut self) -> i64 {
        let value: Option<i64> = redis::cmd("GET")
            .arg(&self.name)
            .query(&mut self.h.conn)
            .unwrap();
        value.unwrap_or(0)
    }

    /// Every count the server may hold: `exact`, plus any of the `maybe` changes, less any
    /// of the failed acquisitions not yet undone of the clients `ghosts` names.
    fn possible(&self, ghosts: [bool; 2]) -> Vec<i64> {
        let mut sums = vec![self.exact];
        let ghosts = (0..2)
            .filter(|&client| ghosts[client])
            .flat_map(|client| self.ghosts[client].iter().map(|&n| -(n as i64)));
        for change in self.maybe.iter().copied().chain(ghosts) {
            let more: Vec<i64> = sums.iter().map(|sum| sum + change).collect();
            sums.extend(more);
            sums.sort_unstable();
            sums.dedup();
        }
        sums
    }

    /// The server's count is one the model allows, counting the failed acquisitions of
    /// the clients `ghosts` names as possibly not undone yet; waited for, for `SETTLE`,
    /// when some client's are to have come back.
    fn check(&mut self, ghosts: [bool; 2]) -> Result<(), String> {
        let settle = if ghosts == [true; 2] {
            Duration::ZERO
        } else {
            SETTLE
        };
        let deadline = Instant::now() + settle;
        loop {
            let count = self.count();
            let possible = self.possible(ghosts);
            if possible.contains(&count) {
                // One way to get there, and no failed acquisition pending: the changes that
                // came to it have run. The others may still run: a call that gave up may
                // reach the server later (a busy machine holds its bytes in the proxy).
                if self.quiet()
                    && let Some(ran) = self.only_way(count)
                {
                    self.maybe = (self.maybe.iter().enumerate())
                        .filter(|(i, _)| ran & (1 << i) == 0)
                        .map(|(_, change)| *change)
                        .collect();
                    self.exact = count;
                }
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "the count is {count}; the model allows {possible:?} (failed \
                     acquisitions pending: {:?})",
                    self.ghosts
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn quiet(&self) -> bool {
        !self.stalled.iter().any(|s| *s) && self.ghosts.iter().all(Vec::is_empty)
    }

    /// The one choice of the `maybe` changes that comes to `count` (a bit per change), if
    /// there is exactly one.
    fn only_way(&self, count: i64) -> Option<u32> {
        if self.maybe.len() > 16 {
            return None;
        }
        let mut ways = (0u32..1 << self.maybe.len()).filter(|mask| {
            let sum: i64 = (self.maybe.iter().enumerate())
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, change)| change)
                .sum();
            self.exact + sum == count
        });
        match (ways.next(), ways.next()) {
            (Some(mask), None) => Some(mask),
            _ => None,
        }
    }

    /// After a failed acquisition of `client` for `n`: unless its client is stalled, what
    /// it took comes back within `SETTLE`.
    fn failed_acquisition(&mut self, client: usize, n: u64) -> Result<(), String> {
        self.ghosts[client].push(n);
        if self.stalled[client] {
            return Ok(());
        }
        self.settle(client)
    }

    fn settle(&mut self, client: usize) -> Result<(), String> {
        let mut ghosts = [true; 2];
        ghosts[client] = false;
        let checked = self.check(ghosts).map_err(|err| {
            format!(
                "failed acquisitions {:?} left permits taken that no guard holds: {err}",
                self.ghosts[client]
            )
        });
        self.ghosts[client].clear();
        checked
    }

    fn step(&mut self, op: &Op) -> Result<(), String> {
        match *op {
            Op::Take { client, n } | Op::Wait { client, n, .. } => {
                let can = self.possible([true; 2]).iter().all(|&c| c >= n as i64)
                    && self.quiet()
                    && self.armed[client].is_none();
                let sem = &self.handles[client];
                let result = match *op {
                    Op::Wait { wait, .. } => {
                        sem.try_acquire_many_for(n, Duration::from_millis(wait))
                    }
                    _ => sem.try_acquire_many(n),
                };
                match result {
                    Ok(Some(permits)) => {
                        assert_eq!(permits.count(), n);
                        self.exact -= n as i64;
                        self.guards.push(permits);
                    }
                    Ok(None) if can => {
                        return Err(format!("{n} refused with {} available", self.exact));
                    }
                    Ok(None) => {}
                    Err(err) if err.is_invalid_input() || err.is_wrong_kind() => {
                        return Err(format!("acquisition: {err}"));
                    }
                    Err(_) => self.failed_acquisition(client, n)?,
                }
            }
            Op::Release { which } => {
                if self.guards.is_empty() {
                    return Ok(());
                }
                let permits = self.guards.remove(which % self.guards.len());
                let n = permits.count() as i64;
                match permits.release() {
                    Ok(()) => self.exact += n,
                    Err(_) => self.maybe.push(n),
                }
            }
            Op::Give { client, n } => match self.handles[client].release(n) {
                Ok(_) => self.exact += n as i64,
                Err(_) => self.maybe.push(n as i64),
            },
            Op::Add { client, delta } => match match delta.is_negative() {
                true => self.handles[client].reduce_permits(delta.unsigned_abs()),
                false => self.handles[client].add_permits(delta.unsigned_abs()),
            } {
                Ok(_) => self.exact += delta,
                Err(_) => self.maybe.push(delta),
            },
            Op::JavaTake { n } => {
                let taken: i64 = redis::Script::new(JAVA_TAKE)
                    .key(&self.name)
                    .arg(n)
                    .invoke(&mut self.h.conn)
                    .unwrap();
                if taken == 1 {
                    self.exact -= n as i64;
                }
            }
            Op::JavaGive { n } => {
                let () = redis::Script::new(JAVA_GIVE)
                    .key(&self.name)
                    .key(format!("redisson_sc:{{{}}}", self.name))
                    .arg(n)
                    .invoke(&mut self.h.conn)
                    .unwrap();
                self.exact += n as i64;
            }
            Op::Pass { ms } => std::thread::sleep(Duration::from_millis(ms)),
            Op::Fault { client, aim, reply } => {
                if self.armed[client].is_none() {
                    super::arm(self.h.clients.proxy(client), &needle(aim), reply);
                    self.armed[client] = Some((aim, reply));
                }
            }
            Op::Stall { client } => {
                if !self.stalled[client] {
                    self.h.clients.proxy(client).pause();
                    self.stalled[client] = true;
                }
            }
            Op::Thaw { client } => self.thaw(client)?,
        }
        Ok(())
    }

    fn thaw(&mut self, client: usize) -> Result<(), String> {
        if !std::mem::take(&mut self.stalled[client]) {
            return Ok(());
        }
        let proxy = self.h.clients.proxy(client);
        proxy.resume();
        assert!(
            proxy.flushed(Duration::from_secs(10)),
            "what the stall held did not go on"
        );
        // What the proxy wrote is in the server's sockets, but the server may read them
        // after this connection's next command, in the same turn of its event loop: a
        // second round trip, sent after the first came back, runs in a later turn, after
        // every command the stall held. Only then has every late acquisition landed, and
        // the count `settle` waits for is not one they are about to change.
        for _ in 0..2 {
            let () = redis::cmd("PING")
                .query(&mut self.h.conn)
                .map(|_: String| ())
                .unwrap();
        }
        self.settle(client)
    }

    /// Ends the stalls and traps, gives back every guard, and checks the count once more:
    /// what failed acquisitions took has come back.
    fn end(&mut self) -> Result<(), String> {
        for client in 0..2 {
            self.thaw(client)?;
            self.h.clients.proxy(client).disarm();
            self.armed[client] = None;
        }
        for permits in std::mem::take(&mut self.guards) {
            let n = permits.count() as i64;
            match permits.release() {
                Ok(()) => self.exact += n,
                Err(_) => self.maybe.push(n),
            }
        }
        self.check([false; 2])
    }
}

impl crate::model::Model for Harness {
    const NAME: &'static str = "counting semaphore";
    type Case = (u64, Vec<Op>);
    fn new() -> Self {
        Harness::new()
    }
    fn cases() -> BoxedStrategy<(u64, Vec<Op>)> {
        case().boxed()
    }
    fn run_case(&mut self, case: &(u64, Vec<Op>)) -> Result<(), String> {
        self.run(case.0, &case.1)
    }
}
