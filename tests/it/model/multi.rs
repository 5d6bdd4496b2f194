//! The multi-lock against its model: three owners take random sets of three reentrant
//! locks, with lost and late replies to their acquisitions and releases. After every step
//! the server holds, for each owner and lock, no more holds than the owner's guards over it
//! (and what a failed call may leave until its lease ends), and at least those of its
//! guards that say they are valid; the windows in which guards said they held a lock never
//! overlap between owners.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use redmutex::MultiGuard;

use super::exclusive::{Lease, lease};
use super::{
    Call, Clients, Faults, OWNERS, Owner, Reply, SLACK, client_of, fresh_name, leftovers,
    owner_field, reply, settle_time, settles,
};
use crate::support::Server;
use crate::support::history::History;

/// The locks of a case, by bit of a step's set.
const LOCKS: usize = 3;

#[derive(Clone, Debug)]
pub enum Op {
    /// The owner takes the locks of `set` (bits), at once (`wait` 0) or waiting up to
    /// `wait` milliseconds.
    Take {
        owner: usize,
        set: u8,
        lease: Lease,
        wait: u64,
    },
    /// The owner releases one of its guards (by position).
    Release { owner: usize, which: usize },
    /// Time passes: leases run out.
    Pass { ms: u64 },
    /// The reply to client `client`'s next `call` is lost or late: it may have run. An
    /// acquisition is the one script over several locks (`batch`) or one lock's; a release
    /// or a renewal is one lock's.
    Fault {
        client: usize,
        call: Call,
        batch: bool,
        reply: Reply,
    },
}

pub fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        5 => (0..OWNERS, 1u8..8, lease(), prop_oneof![3 => Just(0u64), 1 => 1u64..60])
            .prop_map(|(owner, set, lease, wait)| Op::Take { owner, set, lease, wait }),
        3 => (0..OWNERS, 0usize..4).prop_map(|(owner, which)| Op::Release { owner, which }),
        1 => (1u64..60).prop_map(|ms| Op::Pass { ms }),
        2 => (0usize..2, fault_call(), any::<bool>(), reply()).prop_map(
            |(client, call, batch, reply)| Op::Fault { client, call, batch, reply }
        ),
    ];
    prop::collection::vec(op, 1..25)
}

fn fault_call() -> impl Strategy<Value = Call> {
    prop_oneof![
        3 => Just(Call::Acquire),
        2 => Just(Call::Release),
        1 => Just(Call::Renew),
    ]
}

/// One guard of an owner, with the locks it holds and when it was taken.
struct Held {
    set: u8,
    guard: MultiGuard,
    taken: Instant,
    /// The lease its holds have on the server.
    lease: Duration,
}

/// What an owner's guards say: per guard, its set, whether it is valid now.
type Views = Vec<(u8, bool)>;

pub struct Harness {
    server: Server,
    clients: Clients,
    owners: Vec<Owner<Vec<Held>>>,
    /// Each owner's field in the locks' hashes.
    fields: Vec<String>,
}

/// What a failed call may have left of `owner`'s holds on the locks of `set`, until when.
struct Allowance {
    owner: usize,
    set: u8,
    until: Instant,
}

fn members(set: u8) -> impl Iterator<Item = usize> {
    (0..LOCKS).filter(move |i| set & (1 << i) != 0)
}

impl Harness {
    pub fn new() -> Harness {
        let server = Server::start();
        let clients = Clients::new(&server);
        let owners: Vec<_> = (0..OWNERS).map(|_| Owner::spawn(Vec::new)).collect();
        let fields = (0..OWNERS)
            .map(|o| owner_field(&owners[o], clients.of(o), &server))
            .collect();
        Harness {
            server,
            clients,
            owners,
            fields,
        }
    }

    /// The holds each owner has of each lock on the server.
    fn counts(&self, names: &[String]) -> Vec<[i64; LOCKS]> {
        let mut conn = self.server.conn();
        (self.fields.iter())
            .map(|field| {
                std::array::from_fn(|i| {
                    let count: Option<i64> = redis::cmd("HGET")
                        .arg(&names[i])
                        .arg(field)
                        .query(&mut conn)
                        .unwrap();
                    count.unwrap_or(0)
                })
            })
            .collect()
    }

    fn views(&self, owner: usize) -> Views {
        self.owners[owner].run(|held| {
            let now = Instant::now();
            (held.iter())
                .map(|h| (h.set, !h.guard.is_lost() && h.guard.valid_until() > now))
                .collect()
        })
    }

    /// What is wrong with the holds on the server now; empty when nothing is.
    fn wrong(&self, names: &[String], allowances: &[Allowance]) -> Vec<String> {
        let counts = self.counts(names);
        // Read after the counts: a guard valid now was valid when they were read.
        let views: Vec<Views> = (0..OWNERS).map(|o| self.views(o)).collect();
        let now = Instant::now();
        let mut wrong = Vec::new();
        for (owner, (counts, views)) in counts.iter().zip(&views).enumerate() {
            for (lock, &count) in counts.iter().enumerate() {
                let covers = |set: u8| set & (1 << lock) != 0;
                let guards = views.iter().filter(|(set, _)| covers(*set)).count();
                let valid = (views.iter())
                    .filter(|(set, valid)| covers(*set) && *valid)
                    .count();
                let allowed = (allowances.iter())
                    .filter(|a| a.owner == owner && covers(a.set) && a.until > now)
                    .count();
                let count = count as usize;
                if count > guards + allowed {
                    wrong.push(format!(
                        "owner {owner} has {count} holds of lock {lock} with {guards} guards over it"
                    ));
                }
                if count < valid {
                    wrong.push(format!(
                        "owner {owner} has {count} holds of lock {lock} with {valid} valid guards"
                    ));
                }
            }
        }
        wrong
    }

    pub fn run(&mut self, ops: &[Op]) -> Result<(), String> {
        // A case that failed left its guards: they are of other names.
        for owner in &self.owners {
            owner.run(|held| held.clear());
        }
        let names: Vec<String> = (0..LOCKS).map(|_| fresh_name("multi")).collect();
        let histories: Vec<History> = (0..LOCKS).map(|_| History::default()).collect();
        let mut faults = Faults::default();
        let mut allowances = Vec::new();
        let mut trace = Vec::new();
        for op in ops {
            trace.push(format!("{op:?}"));
            let client = match *op {
                Op::Take { owner, .. } | Op::Release { owner, .. } => client_of(owner),
                _ => 0,
            };
            let armed = faults.armed[client].map(|(call, _)| call);
            let (lasts, returned, erred) = match *op {
                Op::Take {
                    owner,
                    set,
                    lease,
                    wait,
                } => {
                    let chosen = members(set).map(|i| names[i].clone());
                    let multi = self
                        .clients
                        .of(owner)
                        .multi_lock(chosen.collect::<Vec<_>>());
                    let result = self.owners[owner].run(move |held| {
                        let wait = Duration::from_millis(wait);
                        let result = match lease.explicit() {
                            Some(lease) => multi.try_lock_with_lease_for(wait, lease),
                            None => multi.try_lock_for(wait),
                        };
                        let returned = Instant::now();
                        match result {
                            Ok(Some(guard)) => {
                                held.push(Held {
                                    set,
                                    guard,
                                    taken: returned,
                                    lease: lease.script(),
                                });
                                (Ok(true), returned)
                            }
                            Ok(None) => (Ok(false), returned),
                            Err(err) => (Err(err), returned),
                        }
                    });
                    let (outcome, returned) = result;
                    trace.push(format!("  -> {outcome:?}"));
                    (lease.script(), returned, outcome.is_err())
                }
                Op::Release { owner, which } => {
                    let released = self.owners[owner].run(move |held| {
                        if held.is_empty() {
                            return None;
                        }
                        let h = held.remove(which % held.len());
                        let valid_until = h.guard.valid_until();
                        let released = Instant::now();
                        let result = h.guard.unlock();
                        Some((h.set, h.taken, released, valid_until, h.lease, result))
                    });
                    let Some((set, taken, released, valid_until, lease, result)) = released else {
                        continue;
                    };
                    for lock in members(set) {
                        histories[lock].record(&owner.to_string(), taken, released, valid_until);
                    }
                    trace.push(format!("  -> {result:?}"));
                    if result.is_err() {
                        // Its holds stay until their leases end, unrenewed.
                        allowances.push(Allowance {
                            owner,
                            set,
                            until: Instant::now() + lease + settle_time() + SLACK,
                        });
                    }
                    (Duration::ZERO, Instant::now(), false)
                }
                Op::Pass { ms } => {
                    std::thread::sleep(Duration::from_millis(ms));
                    (Duration::ZERO, Instant::now(), false)
                }
                Op::Fault {
                    client,
                    call,
                    batch,
                    reply,
                } => {
                    let kind = match (call, batch) {
                        (Call::Acquire, true) => "multi",
                        _ => "reentrant",
                    };
                    faults.arm(&self.clients, kind, client, call, reply);
                    continue;
                }
            };
            faults.sprung(&self.clients);
            let sprang = faults.armed[client].is_none().then_some(armed).flatten();
            // A member given back after a lost reply to its release (or a response timeout
            // on a busy machine) stays until its lease ends; what an acquisition whose
            // reply was lost or late may have taken is undone in time.
            let leftover = sprang == Some(Call::Release) || (erred && sprang.is_none());
            if let (true, Op::Take { owner, set, .. }) = (leftover, op) {
                allowances.push(Allowance {
                    owner: *owner,
                    set: *set,
                    until: returned + lasts + settle_time() + SLACK,
                });
            }
            if !settles(returned, || self.wrong(&names, &allowances).is_empty()) {
                let wrong = self.wrong(&names, &allowances);
                if !wrong.is_empty() {
                    return Err(format!("{}\n{}", wrong.join("\n"), trace.join("\n")));
                }
            }
            for (lock, history) in histories.iter().enumerate() {
                if let Some((a, b)) = history.overlap() {
                    return Err(format!(
                        "lock {lock} held by {a:?} and {b:?}\n{}",
                        trace.join("\n")
                    ));
                }
            }
        }
        faults.clear(&self.clients);
        self.end(&names, &histories, &allowances)
            .map_err(|err| format!("{err}\n{}", trace.join("\n")))
    }

    /// Releases every guard left, checks the windows, and that nothing is left once the
    /// leases of what failed calls may have left have run out.
    fn end(
        &self,
        names: &[String],
        histories: &[History],
        allowances: &[Allowance],
    ) -> Result<(), String> {
        for owner in 0..OWNERS {
            let released = self.owners[owner].run(|held| {
                (held.drain(..))
                    .map(|h| {
                        let valid_until = h.guard.valid_until();
                        let released = Instant::now();
                        let _ = h.guard.unlock();
                        (h.set, h.taken, released, valid_until)
                    })
                    .collect::<Vec<_>>()
            });
            for (set, taken, released, valid_until) in released {
                for lock in members(set) {
                    histories[lock].record(&owner.to_string(), taken, released, valid_until);
                }
            }
        }
        for (lock, history) in histories.iter().enumerate() {
            if let Some((a, b)) = history.overlap() {
                return Err(format!("lock {lock} held by {a:?} and {b:?}"));
            }
        }
        let mut conn = self.server.conn();
        let allowed = allowances.iter().map(|a| a.until).max();
        let deadline = allowed.unwrap_or_else(Instant::now).max(Instant::now()) + settle_time();
        if deadline > Instant::now() + Duration::from_secs(2) {
            // A long lease left by a failed call: not worth the wait.
            return Ok(());
        }
        loop {
            let left: Vec<String> = names.iter().flat_map(|n| leftovers(&mut conn, n)).collect();
            if left.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("left after every guard was released: {left:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl crate::model::Model for Harness {
    const NAME: &'static str = "multi-lock";
    type Case = Vec<Op>;
    fn new() -> Self {
        Harness::new()
    }
    fn cases() -> BoxedStrategy<Vec<Op>> {
        ops().boxed()
    }
    fn run_case(&mut self, case: &Vec<Op>) -> Result<(), String> {
        self.run(case)
    }
}
