//! The leased semaphore against its model: the permits held, ours and the Java owner's,
//! each with how long it may still be held.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use redmutex::{Health, LeasedPermit, LeasedSemaphore};

use super::exclusive::{Lease, lease};
use super::{
    Bound, Call, Clients, Faults, Reply, SLACK, epoch_ms, fresh_name, leftovers, ran_first,
    settle_time, settles,
};
use crate::support::Server;
use crate::support::redisson::{self, arg};

#[derive(Clone, Debug)]
pub enum Op {
    /// `try_acquire` by one of the two clients.
    Take {
        client: usize,
        lease: Lease,
    },
    /// `try_acquire_with_lease_for(wait, lease)`: gives up after `wait` unless a permit
    /// comes back.
    Wait {
        client: usize,
        lease: u64,
        wait: u64,
    },
    Release {
        which: usize,
    },
    /// A release that reaches Redis `ms` late, as on a busy machine: the server is paused
    /// from just before the call until `ms` after.
    LateRelease {
        which: usize,
        ms: u64,
    },
    Pass {
        ms: u64,
    },
    JavaTake {
        lease: u64,
    },
    JavaRelease {
        which: usize,
    },
    /// The reply to client `client`'s next `call` is lost or late: it may have run.
    Fault {
        client: usize,
        call: Call,
        reply: Reply,
    },
    /// Every connection of client `client` stalls until `Thaw`: its permits' renewals
    /// pause.
    Stall {
        client: usize,
    },
    Thaw {
        client: usize,
    },
    /// Redis restarts without persistence; the operator sets the permits again.
    Restart,
    /// An operator deletes the semaphore's keys and sets its permits again.
    Delete,
}

pub fn case() -> impl Strategy<Value = (u64, Vec<Op>)> {
    let op = prop_oneof![
        8 => (0..2usize, lease()).prop_map(|(client, lease)| Op::Take { client, lease }),
        2 => (0..2usize, 10u64..60, 5u64..40)
            .prop_map(|(client, lease, wait)| Op::Wait { client, lease, wait }),
        5 => (0..4usize).prop_map(|which| Op::Release { which }),
        1 => (0..4usize, 1u64..40).prop_map(|(which, ms)| Op::LateRelease { which, ms }),
        4 => (1u64..60).prop_map(|ms| Op::Pass { ms }),
        1 => (80u64..200).prop_map(|ms| Op::Pass { ms }),
        3 => (10u64..80).prop_map(|lease| Op::JavaTake { lease }),
        2 => (0..4usize).prop_map(|which| Op::JavaRelease { which }),
        2 => (0..2usize, super::call(), super::reply())
            .prop_map(|(client, call, reply)| Op::Fault { client, call, reply }),
        1 => (0..2usize).prop_map(|client| Op::Stall { client }),
        1 => (0..2usize).prop_map(|client| Op::Thaw { client }),
        1 => Just(Op::Restart),
        1 => Just(Op::Delete),
    ];
    (1u64..=3, proptest::collection::vec(op, 1..40))
}

struct Ours {
    permit: LeasedPermit,
    lease: Lease,
    bound: Bound,
    /// Deleted from outside (a restart, an operator): it counts no more.
    revoked: bool,
}

struct Theirs {
    id: [u8; 16],
    /// Its lease ends no earlier than this.
    sure_until: Instant,
    bound: Bound,
}

pub struct Harness {
    server: Server,
    clients: Clients,
    conn: redis::Connection,
}

impl Harness {
    pub fn new() -> Harness {
        let server = Server::start();
        let clients = Clients::new(&server);
        let conn = server.conn();
        Harness {
            server,
            clients,
            conn,
        }
    }

    pub fn run(&mut self, permits: u64, ops: &[Op]) -> Result<(), String> {
        let name = fresh_name("semaphore");
        let handles = [
            self.clients.of(0).leased_semaphore(&name),
            self.clients.of(2).leased_semaphore(&name),
        ];
        // A fresh name: the permits are set by the first call that gets through (the end
        // of the case counts them).
        while let Err(err) = handles[0].try_set_permits(permits) {
            assert!(err.is_connection(), "try_set_permits: {err}");
        }
        let mut case = Case {
            h: self,
            name,
            permits,
            handles,
            ours: Vec::new(),
            theirs: Vec::new(),
            ghost: Bound::Gone,
            faults: Faults::default(),
            stalled_lease: [None; 2],
            log: Vec::new(),
        };
        let result = case.play(ops);
        let ended = if result.is_ok() { case.end() } else { Ok(()) };
        result
            .and(ended)
            .map_err(|err| format!("{err}\nsteps ({permits} permits):\n{}", case.log.join("\n")))
    }
}

struct Case<'h> {
    h: &'h mut Harness,
    name: String,
    permits: u64,
    handles: [LeasedSemaphore; 2],
    ours: Vec<Ours>,
    theirs: Vec<Theirs>,
    /// What failed calls may hold.
    ghost: Bound,
    faults: Faults,
    /// The longest lease of the calls each stalled client sent: they reach Redis when the
    /// stall ends.
    stalled_lease: [Option<Duration>; 2],
    log: Vec<String>,
}

impl Case<'_> {
    fn timeouts(&self) -> String {
        format!("{{{}}}:timeout", self.name)
    }

    fn play(&mut self, ops: &[Op]) -> Result<(), String> {
        for op in ops {
            self.log.push(format!("{op:?}"));
            self.step(op)?;
            self.faults.sprung(&self.h.clients);
            self.check()?;
        }
        Ok(())
    }

    /// Notes a call of `client` that failed while it was stalled: it reaches Redis when
    /// the stall ends.
    fn stalled_call(&mut self, client: usize, lease: Lease) {
        if self.faults.stalled[client].is_some() {
            let lease = Some(lease.script());
            self.stalled_lease[client] = self.stalled_lease[client].max(lease);
        }
    }

    fn thawed(&mut self, client: usize) {
        if let Some(lease) = self.stalled_lease[client].take() {
            self.ghost = self.ghost.extend(super::landed(&mut self.h.conn) + lease);
        }
    }

    /// Every permit is gone from Redis (a restart, an operator's delete): the operator
    /// sets the permits again.
    fn wiped(&mut self) {
        for ours in &mut self.ours {
            ours.revoked = true;
        }
        self.theirs.clear();
        if self.faults.stalled.iter().all(Option::is_none) {
            self.ghost = Bound::Gone;
        }
        let _: () = redis::cmd("SET")
            .arg(&self.name)
            .arg(self.permits)
            .query(&mut self.h.conn)
            .unwrap();
    }

    /// After an acquisition sent at `sent` by `client` failed with `err` in a call that
    /// the armed fault `reply` hit: within a response timeout (and some slack) of its
    /// return, no permit may be held that nobody knows of.
    fn settled(
        &mut self,
        client: usize,
        reply: Option<Reply>,
        (sent, returned): (Instant, Instant),
        err: &str,
    ) -> Result<(), String> {
        if !ran_first(self.h.clients.proxy(client), reply, sent, returned) {
            return Ok(());
        }
        self.log.push(format!("  (the {reply:?} reply was to it)"));
        let mut known: Vec<Vec<u8>> = self.ours.iter().map(|o| hex(&o.permit.id())).collect();
        known.extend(self.theirs.iter().map(|t| t.id.to_vec()));
        let timeouts = self.timeouts();
        let conn = &mut self.h.conn;
        let mut unknown = 0;
        let gone = settles(returned, || {
            let ids: Vec<Vec<u8>> = redis::Script::new(
                "local t = redis.call('time') \
                 local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) \
                 return redis.call('zrangebyscore', KEYS[1], now, '+inf')",
            )
            .key(&timeouts)
            .invoke(conn)
            .unwrap();
            unknown = ids.iter().filter(|id| !known.contains(id)).count();
            unknown == 0
        });
        if gone {
            return Ok(());
        }
        Err(format!(
            "an acquisition failed ({err}), and {:?} after it returned {unknown} permit(s) \
             nobody knows of are held",
            settle_time()
        ))
    }

    /// How many permits may be held at `at`, at most.
    fn may_be_held(&self, at: Instant) -> u64 {
        let ours = self.ours.iter().filter(|o| !o.bound.over_by(at)).count();
        let theirs = self.theirs.iter().filter(|t| !t.bound.over_by(at)).count();
        let ghost = usize::from(!self.ghost.over_by(at)) * self.permits as usize;
        (ours + theirs + ghost) as u64
    }

    fn step(&mut self, op: &Op) -> Result<(), String> {
        match *op {
            Op::Take { client, lease } => {
                let sem = &self.handles[client];
                let before = Instant::now();
                let free = self.may_be_held(before) < self.permits;
                // Whether a failed call must leave nothing: nothing earlier may be left,
                // and the fault aimed at it.
                let reply = self.faults.aimed(client, Call::Acquire);
                let watch = self.ghost.over_by(before)
                    && self.faults.stalled[client].is_none()
                    && reply.is_some();
                let result = match lease.explicit() {
                    None => sem.try_acquire(),
                    Some(lease) => sem.try_acquire_with_lease(lease),
                };
                let returned = Instant::now();
                let failed = match &result {
                    Err(err) if watch => Some(err.to_string()),
                    _ => None,
                };
                self.stalled_call(client, lease);
                self.taken(lease, result, free)?;
                match failed {
                    Some(err) => self.settled(client, reply, (before, returned), &err),
                    None => Ok(()),
                }
            }
            Op::Wait {
                client,
                lease,
                wait,
            } => {
                let sem = &self.handles[client];
                let free = self.may_be_held(Instant::now()) < self.permits;
                let (wait, lease_d) = (Duration::from_millis(wait), Duration::from_millis(lease));
                let result = sem.try_acquire_with_lease_for(wait, lease_d);
                self.stalled_call(client, Lease::Ms(lease));
                self.taken(Lease::Ms(lease), result, free)
            }
            Op::Release { which } => self.release(which, None),
            Op::LateRelease { which, ms } => self.release(which, Some(Duration::from_millis(ms))),
            Op::Pass { ms } => {
                std::thread::sleep(Duration::from_millis(ms));
                Ok(())
            }
            Op::JavaTake { lease } => {
                let id: [u8; 16] = rand::random();
                let keys = [
                    self.name.clone(),
                    self.timeouts(),
                    format!("redisson_sc:{{{}}}", self.name),
                ];
                let sent = Instant::now();
                let now = epoch_ms();
                let args = [
                    arg(1),
                    arg(now + lease),
                    arg(now),
                    arg(922_337_203_685_477u64),
                    arg("publish"),
                    id.to_vec(),
                ];
                let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                let got: Option<String> =
                    redisson::eval(&mut self.h.conn, redisson::PERMIT_ACQUIRE, &keys, &args);
                self.log.push(format!("  Java: {got:?}"));
                if got.as_deref() == Some("OK") {
                    let lease = Duration::from_millis(lease);
                    self.theirs.push(Theirs {
                        id,
                        sure_until: sent + lease,
                        bound: Bound::Gone.extend(Instant::now() + lease),
                    });
                }
                Ok(())
            }
            Op::JavaRelease { which } => {
                if self.theirs.is_empty() {
                    return Ok(());
                }
                let theirs = self.theirs.remove(which % self.theirs.len());
                let keys = [
                    self.name.clone(),
                    format!("redisson_sc:{{{}}}", self.name),
                    self.timeouts(),
                ];
                let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                let args = [theirs.id.to_vec(), arg(1), arg(epoch_ms()), arg("publish")];
                let released: i64 =
                    redisson::eval(&mut self.h.conn, redisson::PERMIT_RELEASE, &keys, &args);
                self.log.push(format!("  Java released: {released}"));
                Ok(())
            }
            Op::Fault {
                client,
                call,
                reply,
            } => {
                if !self
                    .faults
                    .arm(&self.h.clients, "semaphore", client, call, reply)
                {
                    self.log.push("  (no such call)".into());
                }
                Ok(())
            }
            Op::Stall { client } => {
                self.faults.stall(&self.h.clients, client);
                Ok(())
            }
            Op::Thaw { client } => {
                if self.faults.thaw(&self.h.clients, client) {
                    self.thawed(client);
                }
                Ok(())
            }
            Op::Restart => {
                self.h.server.restart();
                self.h.conn = self.h.server.conn();
                self.wiped();
                Ok(())
            }
            Op::Delete => {
                let _: i64 = redis::cmd("DEL")
                    .arg(&self.name)
                    .arg(self.timeouts())
                    .query(&mut self.h.conn)
                    .unwrap();
                self.wiped();
                Ok(())
            }
        }
    }

    /// Releases one of our permits, with the server paused for `late` first.
    fn release(&mut self, which: usize, late: Option<Duration>) -> Result<(), String> {
        if self.ours.is_empty() {
            return Ok(());
        }
        let ours = self.ours.remove(which % self.ours.len());
        let (health, until) = (ours.permit.health(), ours.permit.valid_until());
        let client_stalled = self.faults.stalled.iter().any(Option::is_some);
        let server = &self.h.server;
        let result = std::thread::scope(|scope| {
            if let Some(late) = late {
                server.pause();
                scope.spawn(move || {
                    std::thread::sleep(late);
                    server.resume();
                });
            }
            ours.permit.release()
        });
        // The script ran at some time during the call, not necessarily as it began: a busy
        // machine can hold a call back for longer than a lease has left. Only a guard still
        // valid when the reply came says the permit was gone while held.
        let ended = Instant::now();
        self.log.push(format!("  {result:?}"));
        match result {
            Ok(()) => Ok(()),
            Err(err) if err.is_lost() => {
                if !ours.revoked && health == Health::Held && until > ended + SLACK {
                    return Err(format!(
                        "a permit's release found it gone, while it said Held for {:?} \
                         more after the reply: {err}",
                        until - ended
                    ));
                }
                Ok(())
            }
            Err(err) if err.is_connection() => {
                self.ghost = self.ghost.extend(Instant::now() + ours.lease.script());
                if client_stalled {
                    // Whichever client released it, its call may wait for the stall.
                    for client in 0..2 {
                        self.stalled_call(client, ours.lease);
                    }
                }
                Ok(())
            }
            Err(err) => Err(format!("a permit's release failed: {err}")),
        }
    }

    fn taken(
        &mut self,
        lease: Lease,
        result: redmutex::Result<Option<LeasedPermit>>,
        free: bool,
    ) -> Result<(), String> {
        match result {
            Ok(Some(permit)) => {
                self.log.push(format!("  took {}", permit.id()));
                let bound = match lease {
                    Lease::Watched => Bound::Forever,
                    Lease::Ms(ms) => Bound::Gone.extend(Instant::now() + Duration::from_millis(ms)),
                };
                self.ours.push(Ours {
                    permit,
                    lease,
                    bound,
                    revoked: false,
                });
                Ok(())
            }
            Ok(None) if free => Err("refused a permit that nobody could hold any more".into()),
            Ok(None) => {
                self.log.push("  none free".into());
                Ok(())
            }
            Err(err) if err.is_validity_exhausted() || err.is_connection() => {
                self.ghost = self.ghost.extend(Instant::now() + lease.script());
                Ok(())
            }
            Err(err) => Err(format!("an acquisition failed: {err}")),
        }
    }

    fn check(&mut self) -> Result<(), String> {
        let now = Instant::now();
        let live: Vec<&Ours> = self
            .ours
            .iter()
            .filter(|o| !o.revoked)
            .filter(|o| o.permit.health() == Health::Held && o.permit.valid_until() > now)
            .collect();
        let theirs = self
            .theirs
            .iter()
            .filter(|t| t.sure_until > now + SLACK)
            .count();
        if (live.len() + theirs) as u64 > self.permits {
            return Err(format!(
                "{} permits of ours and {theirs} of Java's held at once, of {}",
                live.len(),
                self.permits
            ));
        }
        let timeouts = self.timeouts();
        for ours in live {
            let id = hex(&ours.permit.id());
            // The guard's view first: a renewal after it can only move the score later.
            let until = ours.permit.valid_until();
            let (score, server_now): (Option<i64>, i64) = redis::Script::new(
                "local t = redis.call('time') \
                 return {redis.call('zscore', KEYS[1], ARGV[1]), \
                         tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)}",
            )
            .key(&timeouts)
            .arg(&id[..])
            .invoke(&mut self.h.conn)
            .map(|(score, now): (Option<String>, i64)| (score.and_then(|s| s.parse().ok()), now))
            .unwrap();
            let read = Instant::now();
            let Some(score) = score else {
                if until > Instant::now() {
                    return Err(format!(
                        "permit {} ({:?}) is valid for {:?} more, but not in {timeouts}",
                        ours.permit.id(),
                        ours.lease,
                        until - read
                    ));
                }
                continue;
            };
            let left = Duration::from_millis(u64::try_from(score - server_now).unwrap_or(0));
            if until > read + left + SLACK {
                return Err(format!(
                    "permit {} is valid for {:?} more, but its lease ends in {left:?}",
                    ours.permit.id(),
                    until - read
                ));
            }
        }
        Ok(())
    }

    fn end(&mut self) -> Result<(), String> {
        for client in 0..2 {
            if self.faults.stalled[client].is_some() {
                self.faults.thaw(&self.h.clients, client);
                self.thawed(client);
            }
        }
        self.faults.clear(&self.h.clients);
        while !self.ours.is_empty() {
            self.step(&Op::Release { which: 0 })?;
        }
        while !self.theirs.is_empty() {
            self.step(&Op::JavaRelease { which: 0 })?;
        }
        if let Bound::Until(until) = self.ghost {
            std::thread::sleep(until.saturating_duration_since(Instant::now()));
        }
        // Permits whose leases ran out come back at the next acquisition. A busy machine can
        // make a call outlast the short response timeout: it is made again, and what the
        // failed one may have left is waited for (a permit an acquisition took comes back by
        // its undo, one whose release did not run by its lease).
        const LAST_LEASE: Duration = Duration::from_secs(5);
        let deadline = Instant::now() + 2 * LAST_LEASE;
        let mut failed = false;
        let permit = loop {
            match self.handles[0].try_acquire_with_lease(LAST_LEASE) {
                Ok(Some(permit)) => break permit,
                Ok(None) if failed && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(None) => return Err("every permit is back, yet none could be taken".into()),
                Err(err) if err.is_connection() => failed = true,
                Err(err) => return Err(format!("the last acquisition failed: {err}")),
            }
        };
        match permit.release() {
            Ok(()) => {}
            Err(err) if err.is_connection() => failed = true,
            Err(err) => return Err(format!("the last release: {err}")),
        }
        let available = loop {
            let late = Instant::now() >= deadline;
            match self.handles[0].available_permits() {
                Ok(available) if available == self.permits as i64 || !failed || late => {
                    break available;
                }
                Err(err) if !err.is_connection() || late => {
                    return Err(format!("available_permits: {err}"));
                }
                _ => std::thread::sleep(Duration::from_millis(10)),
            }
        };
        if available != self.permits as i64 {
            return Err(format!("{available} permits back of {}", self.permits));
        }
        let left: Vec<String> = leftovers(&mut self.h.conn, &self.name)
            .into_iter()
            .filter(|key| *key != self.name)
            .collect();
        if !left.is_empty() {
            let left = super::described(&mut self.h.conn, &left);
            return Err(format!("left in Redis after every release: {left:?}"));
        }
        Ok(())
    }
}

/// 32 hex digits as their 16 bytes.
fn hex(id: &str) -> Vec<u8> {
    (0..id.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&id[i..i + 2], 16).unwrap())
        .collect()
}

impl crate::model::Model for Harness {
    const NAME: &'static str = "semaphore";
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
