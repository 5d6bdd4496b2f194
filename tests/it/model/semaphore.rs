//! The leased semaphore against its model: the permits held, ours and the Java owner's,
//! each with how long it may still be held.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use redmutex::{Health, Permit, Semaphore};

use super::exclusive::{Lease, lease};
use super::{Bound, Clients, SLACK, epoch_ms, fresh_name, leftovers};
use crate::support::Server;
use crate::support::redisson::{self, arg};

#[derive(Clone, Debug)]
pub enum Op {
    /// `try_acquire` by one of the two clients.
    Take {
        client: usize,
        lease: Lease,
    },
    /// `try_acquire_for_with_lease(wait, lease)`: gives up after `wait` unless a permit
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
    ];
    (1u64..=3, proptest::collection::vec(op, 1..40))
}

struct Ours {
    permit: Permit,
    lease: Lease,
    bound: Bound,
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
            self.clients.of(0).semaphore(&name),
            self.clients.of(2).semaphore(&name),
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
    handles: [Semaphore; 2],
    ours: Vec<Ours>,
    theirs: Vec<Theirs>,
    /// What failed calls may hold.
    ghost: Bound,
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
            self.check()?;
        }
        Ok(())
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
                let free = self.may_be_held(Instant::now()) < self.permits;
                let result = match lease.explicit() {
                    None => sem.try_acquire(),
                    Some(lease) => sem.try_acquire_with_lease(lease),
                };
                self.taken(lease, result, free)
            }
            Op::Wait {
                client,
                lease,
                wait,
            } => {
                let sem = &self.handles[client];
                let free = self.may_be_held(Instant::now()) < self.permits;
                let (wait, lease_d) = (Duration::from_millis(wait), Duration::from_millis(lease));
                let result = sem.try_acquire_for_with_lease(wait, lease_d);
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
        }
    }

    /// Releases one of our permits, with the server paused for `late` first.
    fn release(&mut self, which: usize, late: Option<Duration>) -> Result<(), String> {
        if self.ours.is_empty() {
            return Ok(());
        }
        let ours = self.ours.remove(which % self.ours.len());
        let (health, until) = (ours.permit.health(), ours.permit.valid_until());
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
                if health == Health::Held && until > ended + SLACK {
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
                Ok(())
            }
            Err(err) => Err(format!("a permit's release failed: {err}")),
        }
    }

    fn taken(
        &mut self,
        lease: Lease,
        result: redmutex::Result<Option<Permit>>,
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
        while !self.ours.is_empty() {
            self.step(&Op::Release { which: 0 })?;
        }
        while !self.theirs.is_empty() {
            self.step(&Op::JavaRelease { which: 0 })?;
        }
        if let Bound::Until(until) = self.ghost {
            std::thread::sleep(until.saturating_duration_since(Instant::now()));
        }
        // Permits whose leases ran out come back at the next acquisition.
        let permit = self.handles[0]
            .try_acquire_with_lease(Duration::from_secs(5))
            .map_err(|err| format!("the last acquisition failed: {err}"))?
            .ok_or("every permit is back, yet none could be taken")?;
        permit
            .release()
            .map_err(|err| format!("the last release: {err}"))?;
        let available = loop {
            match self.handles[0].available_permits() {
                Ok(available) => break available,
                Err(err) if err.is_connection() => continue,
                Err(err) => return Err(format!("available_permits: {err}")),
            }
        };
        if available != self.permits {
            return Err(format!("{available} permits back of {}", self.permits));
        }
        let left: Vec<String> = leftovers(&mut self.h.conn, &self.name)
            .into_iter()
            .filter(|key| *key != self.name)
            .collect();
        if !left.is_empty() {
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

pub fn check(harness: &mut Harness, permits: u64, ops: &[Op]) -> Result<(), TestCaseError> {
    let _ = &harness.server;
    harness.run(permits, ops).map_err(TestCaseError::fail)
}
