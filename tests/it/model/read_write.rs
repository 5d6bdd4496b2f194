//! The read-write lock against its model: parties (our owners, the Java owner) with their
//! read and write holds, and how long each may still be in Redis.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use redmutex::{Health, LockClient, LockGuard, Read, ReadWriteLock, Write};

use super::exclusive::{GRACE, Lease, lease};
use super::{
    Bound, Call, Clients, Faults, OWNERS, Owner, Reply, SLACK, SLEEPY, WATCHDOG_LEASE, client_of,
    expiry, fresh_name, lasting_leftovers, owner_field, pttl, ran_first, settle_time, settles,
};
use crate::support::Server;
use crate::support::history::{History, Window};
use crate::support::redisson::{self, JAVA, arg};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Read,
    Write,
}

#[derive(Clone, Debug)]
pub enum Op {
    Take {
        owner: usize,
        side: Side,
        lease: Lease,
    },
    /// `try_lock_for(wait)` of a side started on the owner's thread; the sequence goes on
    /// meanwhile.
    Wait {
        owner: usize,
        side: Side,
        lease: u64,
        wait: u64,
    },
    /// Waits for the owner's `Wait` to end.
    Join {
        owner: usize,
    },
    /// `try_lock_for(wait)` of a side: gives up after `wait` unless the lock frees up.
    GiveUp {
        owner: usize,
        side: Side,
        lease: Lease,
        wait: u64,
    },
    Release {
        owner: usize,
        which: usize,
    },
    Pass {
        ms: u64,
    },
    /// `read().force_unlock()` or `write().force_unlock()`.
    Force {
        side: Side,
    },
    JavaTake {
        side: Side,
        lease: u64,
    },
    JavaRelease,
    /// The reply to client `client`'s next `call` of `side` (0: the shared client, 1:
    /// owner 2's) is lost or late: the call may or may not have run.
    Fault {
        client: usize,
        side: Side,
        call: Call,
        reply: Reply,
    },
    /// Every connection of client `client` stalls until `Thaw`: its holders pause, their
    /// renewals with them, while the other client goes on.
    Stall {
        client: usize,
    },
    Thaw {
        client: usize,
    },
    /// Redis restarts without persistence: every key is gone.
    Restart,
    /// An operator deletes the lock's hash with a plain DEL (read lease keys stay).
    Delete,
}

fn side() -> impl Strategy<Value = Side> {
    prop_oneof![3 => Just(Side::Read), 2 => Just(Side::Write)]
}

pub fn ops() -> impl Strategy<Value = Vec<Op>> {
    let owner = 0..OWNERS;
    let op = prop_oneof![
        8 => (owner.clone(), side(), lease())
            .prop_map(|(owner, side, lease)| Op::Take { owner, side, lease }),
        2 => (owner.clone(), side(), lease(), 5u64..40)
            .prop_map(|(owner, side, lease, wait)| Op::GiveUp { owner, side, lease, wait }),
        2 => (owner.clone(), side(), 10u64..60, 20u64..400)
            .prop_map(|(owner, side, lease, wait)| Op::Wait { owner, side, lease, wait }),
        // The sleepy owner, which only a message wakes before its wait ends.
        1 => (side(), 10u64..60, 2500u64..3500)
            .prop_map(|(side, lease, wait)| Op::Wait { owner: SLEEPY, side, lease, wait }),
        2 => owner.clone().prop_map(|owner| Op::Join { owner }),
        5 => (owner, 0..3usize).prop_map(|(owner, which)| Op::Release { owner, which }),
        4 => (1u64..60).prop_map(|ms| Op::Pass { ms }),
        // Long enough for the watchdog to renew.
        1 => (80u64..200).prop_map(|ms| Op::Pass { ms }),
        1 => side().prop_map(|side| Op::Force { side }),
        3 => (side(), 10u64..80).prop_map(|(side, lease)| Op::JavaTake { side, lease }),
        2 => Just(Op::JavaRelease),
        2 => (0..2usize, side(), super::call(), super::reply())
            .prop_map(|(client, side, call, reply)| Op::Fault { client, side, call, reply }),
        1 => (0..2usize).prop_map(|client| Op::Stall { client }),
        1 => (0..2usize).prop_map(|client| Op::Thaw { client }),
        1 => Just(Op::Restart),
        1 => Just(Op::Delete),
    ];
    proptest::collection::vec(op, 1..40)
}

enum Guard {
    Read(LockGuard<Read>),
    Write(LockGuard<Write>),
}

/// What a guard says.
#[derive(Clone, Copy, Debug)]
struct View {
    health: Health,
    lost: bool,
    valid_until: Instant,
}

impl View {
    /// Held, with validity left after `at`.
    fn live(&self, at: Instant) -> bool {
        self.health == Health::Held && self.valid_until > at
    }
}

impl Guard {
    fn view(&self) -> View {
        let (health, lost, valid_until) = match self {
            Guard::Read(g) => (g.health(), g.is_lost(), g.valid_until()),
            Guard::Write(g) => (g.health(), g.is_lost(), g.valid_until()),
        };
        View {
            health,
            lost,
            valid_until,
        }
    }

    fn unlock(self) -> redmutex::Result<()> {
        match self {
            Guard::Read(g) => g.unlock(),
            Guard::Write(g) => g.unlock(),
        }
    }
}

struct Mine {
    lock: Option<ReadWriteLock>,
    guards: Vec<Guard>,
}

#[derive(Clone, Debug)]
struct Hold {
    side: Side,
    /// When its acquisition was sent.
    sent: Instant,
    /// When its acquisition returned.
    taken: Instant,
    lease: Lease,
    revoked: bool,
    /// Found gone by a re-entry: no longer in the client's hold table.
    stale: bool,
}

#[derive(Default)]
struct Party {
    holds: Vec<Hold>,
    held: Option<Bound>,
    ghost: Option<Bound>,
    /// Held the write side since it last held nothing: its hash may be in write mode.
    wrote: bool,
    /// The latest end of an explicit lease taken since it last held nothing: read lease
    /// keys go by position, so a watched hold may be left with an earlier hold's key.
    leased_until: Option<Instant>,
    waiting: Option<Waiting>,
    /// The longest lease among the holds taken since it last held nothing.
    longest: Duration,
    /// Its client stalled while a call of its was on its way: the call reaches Redis when
    /// the stall ends, and what it takes lasts this long after.
    stalled_lease: Option<Duration>,
}

struct Waiting {
    result: mpsc::Receiver<Attempted>,
    side: Side,
    lease: u64,
    started: Instant,
    wait: Duration,
    /// A forced unlock ran meanwhile: what it took may have been deleted.
    forced: bool,
    /// Since when nothing could keep the lock from it, after an unlock message.
    free_since: Option<Instant>,
    /// Its client stalled meanwhile: it may have missed a message.
    stalled: bool,
}

/// An attempt's outcome: when it was sent, the new guard's view if taken, and when it
/// returned.
type Attempted = (Instant, redmutex::Result<Option<View>>, Instant);

fn attempt(mine: &mut Mine, side: Side, lease: Lease, wait: Option<Duration>) -> Attempted {
    let lock = mine.lock.as_ref().unwrap();
    let sent = Instant::now();
    let result = match side {
        Side::Read => match (lease.explicit(), wait) {
            (None, None) => lock.read().try_lock(),
            (Some(lease), None) => lock.read().try_lock_with_lease(lease),
            (None, Some(wait)) => lock.read().try_lock_for(wait),
            (Some(lease), Some(wait)) => lock.read().try_lock_with_lease_for(wait, lease),
        }
        .map(|g| g.map(Guard::Read)),
        Side::Write => match (lease.explicit(), wait) {
            (None, None) => lock.write().try_lock(),
            (Some(lease), None) => lock.write().try_lock_with_lease(lease),
            (None, Some(wait)) => lock.write().try_lock_for(wait),
            (Some(lease), Some(wait)) => lock.write().try_lock_with_lease_for(wait, lease),
        }
        .map(|g| g.map(Guard::Write)),
    };
    let returned = Instant::now();
    let result = result.map(|g| {
        g.map(|g| {
            let view = g.view();
            mine.guards.push(g);
            view
        })
    });
    (sent, result, returned)
}

impl Party {
    /// The lease an acquisition of `side` with `lease` sets on Redis: a re-entry into a
    /// watched holding of that side keeps the watchdog's lease, whatever it asked for.
    fn script_lease(&self, side: Side, lease: Lease) -> Duration {
        let watched = (self.holds.iter())
            .any(|h| h.side == side && !h.stale && matches!(h.lease, Lease::Watched));
        match watched {
            true => lease.script().max(WATCHDOG_LEASE),
            false => lease.script(),
        }
    }

    fn bound(&self) -> Bound {
        let waiting = self.waiting.as_ref().map(|_| Bound::Forever);
        [self.held, self.ghost, waiting]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(Bound::Gone)
    }

    fn rebound(&mut self, now: Instant) {
        if self.holds.is_empty() {
            self.held = None;
            self.wrote = false;
            self.leased_until = None;
            self.longest = Duration::ZERO;
        } else if self.holds.iter().any(|h| matches!(h.lease, Lease::Watched)) {
            self.longest = self.longest.max(WATCHDOG_LEASE);
            self.held = Some(Bound::Forever);
        } else {
            // A release sets what remains to the holding's lease, which may be that of a
            // hold already released: the longest taken since it last held nothing.
            let longest = self.holds.iter().map(|h| h.lease.script()).max().unwrap();
            self.longest = self.longest.max(longest);
            let longest = self.longest;
            self.held = Some(self.held.unwrap_or(Bound::Gone).extend(now + longest));
        }
    }

    /// Whether it may keep another owner from `side` at `at`.
    fn blocks(&self, side: Side, at: Instant) -> bool {
        let writes = self.wrote
            || self.ghost.is_some_and(|g| !g.over_by(at))
            || self.waiting.as_ref().is_some_and(|w| w.side == Side::Write);
        !self.bound().over_by(at) && (side == Side::Write || writes)
    }
}

/// The Java owner's holds, last taken last, each with the least its key's expiry is and
/// when its acquisition was sent.
#[derive(Default)]
struct JavaParty {
    holds: Vec<(Side, Instant, Instant)>,
    bound: Option<Bound>,
}

impl JavaParty {
    fn live(&self, side: Side, at: Instant) -> bool {
        self.holds
            .iter()
            .any(|(s, until, _)| *s == side && *until > at + SLACK)
    }
}

pub struct Harness {
    server: Server,
    clients: Clients,
    owners: Vec<Owner<Mine>>,
    /// Each owner's reader field; its writer field adds `:write`.
    fields: Vec<String>,
    conn: redis::Connection,
    /// How many failed acquisitions were looked at for what they left.
    pub settled: u64,
}

impl Harness {
    pub fn new() -> Harness {
        let server = Server::start();
        let clients = Clients::new(&server);
        let mut fields = Vec::new();
        let owners = (0..OWNERS)
            .map(|i| {
                let owner = Owner::spawn(|| Mine {
                    lock: None,
                    guards: Vec::new(),
                });
                fields.push(owner_field(&owner, clients.of(i), &server));
                owner
            })
            .collect();
        let conn = server.conn();
        Harness {
            server,
            clients,
            owners,
            fields,
            conn,
            settled: 0,
        }
    }

    pub fn run(&mut self, ops: &[Op]) -> Result<(), String> {
        let name = fresh_name("rw");
        for (i, owner) in self.owners.iter().enumerate() {
            let lock = self.clients.of(i).read_write_lock(&name);
            owner.run(move |mine| {
                mine.guards.clear();
                mine.lock = Some(lock);
            });
        }
        let mut case = Case {
            h: self,
            name,
            parties: (0..OWNERS).map(|_| Party::default()).collect(),
            java: JavaParty::default(),
            linger: Bound::Gone,
            history: History::default(),
            reads: History::default(),
            messaged: false,
            faults: Faults::default(),
            log: Vec::new(),
        };
        let result = case.play(ops);
        let ended = if result.is_ok() { case.end() } else { Ok(()) };
        result
            .and(ended)
            .map_err(|err| format!("{err}\nsteps:\n{}", case.log.join("\n")))
    }

    fn client(&self, owner: usize) -> &LockClient {
        self.clients.of(owner)
    }
}

struct Case<'h> {
    h: &'h mut Harness,
    name: String,
    parties: Vec<Party>,
    java: JavaParty,
    /// Until when read lease keys may linger: those of forcibly deleted holds, and the
    /// Java owner's once a release of its finds nothing.
    linger: Bound,
    /// The writers' windows.
    history: History,
    /// The readers' windows.
    reads: History,
    /// The last step published an unlock message.
    messaged: bool,
    faults: Faults,
    log: Vec<String>,
}

impl Case<'_> {
    fn play(&mut self, ops: &[Op]) -> Result<(), String> {
        for op in ops {
            self.log.push(format!("{op:?}"));
            self.step(op)?;
            self.faults.sprung(&self.h.clients);
            self.check()?;
        }
        Ok(())
    }

    /// The window history of `side`.
    fn windows(&self, side: Side) -> &History {
        match side {
            Side::Read => &self.reads,
            Side::Write => &self.history,
        }
    }

    /// Whether `owner`'s client is stalled.
    fn stalled(&self, owner: usize) -> bool {
        self.faults.stalled[client_of(owner)].is_some()
    }

    /// Whether no other owner of `owner`'s client is waiting (sending calls of its own),
    /// and the client is not stalled: a fault aimed at the client's next call hits
    /// `owner`'s, and its calls reach Redis in order.
    fn quiet(&self, owner: usize) -> bool {
        let client = client_of(owner);
        !self.stalled(owner)
            && (0..OWNERS)
                .filter(|&o| o != owner && client_of(o) == client)
                .all(|o| self.parties[o].waiting.is_none())
    }

    /// Every hold may be gone from Redis, whoever's it was, as after a forced unlock at
    /// `at`: the holds count no more (their windows end there), and a wait going on may
    /// have lost what it took. When `known`, they are surely gone, all but read lease keys
    /// (`keys`: those too).
    fn revoke_all(&mut self, at: Instant, known: bool, keys: bool) {
        for (i, party) in self.parties.iter_mut().enumerate() {
            if let Some(waiting) = &mut party.waiting {
                // A waiting owner's thread is busy, and it holds nothing yet.
                waiting.forced = true;
                continue;
            }
            let views = self.h.owners[i]
                .run(|mine| mine.guards.iter().map(Guard::view).collect::<Vec<_>>());
            for (hold, view) in party.holds.iter_mut().zip(views) {
                if !hold.revoked {
                    let who = format!("owner {i}");
                    let windows = match hold.side {
                        Side::Read => &self.reads,
                        Side::Write => &self.history,
                    };
                    windows.record(&who, hold.taken, at, view.valid_until);
                }
                hold.revoked = true;
            }
            if !known {
                continue;
            }
            if !keys {
                // Read leases stay until they run out; watched ones are renewed no more
                // once the field is gone.
                self.linger = match party.bound() {
                    Bound::Forever => self.linger.extend(at + WATCHDOG_LEASE),
                    bound => self.linger.max(bound),
                };
                if let Some(until) = party.leased_until {
                    self.linger = self.linger.extend(until);
                }
            }
            party.held = None;
            party.wrote = false;
        }
        if !known {
            self.java.holds.iter_mut().for_each(|hold| hold.1 = at);
            return;
        }
        if !keys {
            self.linger = self.linger.max(self.java.bound.unwrap_or(Bound::Gone));
        }
        self.java = JavaParty::default();
    }

    /// After `client`'s stall ended: what its calls on their way take lasts until their
    /// lease after now.
    fn thawed(&mut self, client: usize) {
        let now = super::landed(&mut self.h.conn);
        for owner in (0..OWNERS).filter(|&o| client_of(o) == client) {
            let party = &mut self.parties[owner];
            if let Some(lease) = party.stalled_lease.take() {
                party.ghost = Some(party.ghost.unwrap_or(Bound::Gone).extend(now + lease));
            }
        }
    }

    /// After `owner`'s acquisition sent at `sent` failed with `err` in a call the armed
    /// fault `reply` hit, while the owner held nothing: within a response timeout (and
    /// some slack) of its return, no reader field, writer field or read lease key of the
    /// owner may be left in Redis, since no guard accounts for it.
    fn settled(
        &mut self,
        owner: usize,
        reply: Option<Reply>,
        (sent, returned): (Instant, Instant),
        err: &str,
    ) -> Result<(), String> {
        let proxy = self.h.clients.proxy(client_of(owner));
        if !ran_first(proxy, reply, sent, returned) {
            return Ok(());
        }
        self.log.push(format!("  (the {reply:?} reply was to it)"));
        self.h.settled += 1;
        let name = self.name.clone();
        let field = self.h.fields[owner].clone();
        let leases = format!("{{{name}}}:{field}:rwlock_timeout:*");
        let conn = &mut self.h.conn;
        let mut left = String::new();
        let gone = settles(returned, || {
            let (read, write, keys): (Option<i64>, Option<i64>, Vec<String>) = redis::pipe()
                .cmd("HGET")
                .arg(&name)
                .arg(&field)
                .cmd("HGET")
                .arg(&name)
                .arg(format!("{field}:write"))
                .cmd("KEYS")
                .arg(&leases)
                .query(conn)
                .unwrap();
            left = format!("reader field {read:?}, writer field {write:?}, lease keys {keys:?}");
            read.is_none() && write.is_none() && keys.is_empty()
        });
        if gone {
            return Ok(());
        }
        Err(format!(
            "owner {owner}'s acquisition failed ({err}), and {:?} after it returned: {left}",
            settle_time()
        ))
    }

    fn step(&mut self, op: &Op) -> Result<(), String> {
        self.messaged = false;
        match *op {
            Op::Take { owner, side, lease } => self.take(owner, side, lease, None),
            Op::Wait {
                owner,
                side,
                lease,
                wait,
            } => self.wait(owner, side, lease, wait),
            Op::Join { owner } => self.join(owner),
            Op::GiveUp {
                owner,
                side,
                lease,
                wait,
            } => self.take(owner, side, lease, Some(Duration::from_millis(wait))),
            Op::Release { owner, which } => {
                let party = &self.parties[owner];
                if party.waiting.is_some() || party.holds.is_empty() {
                    return Ok(());
                }
                let which = which % party.holds.len();
                let (view, started, result, ended) = self.h.owners[owner].run(move |mine| {
                    let guard = mine.guards.remove(which);
                    let view = guard.view();
                    let started = Instant::now();
                    let result = guard.unlock();
                    (view, started, result, Instant::now())
                });
                let hold = self.parties[owner].holds.remove(which);
                self.log.push(format!("  {result:?}"));
                let released = result.is_ok();
                if !hold.revoked {
                    let who = format!("owner {owner}");
                    (self.windows(hold.side)).record(&who, hold.taken, started, view.valid_until);
                }
                if result.is_err() {
                    // Its lease keys stay until they run out.
                    let stalled = self.stalled(owner);
                    let party = &mut self.parties[owner];
                    let ghost = party.ghost.unwrap_or(Bound::Gone);
                    party.ghost = Some(ghost.extend(Instant::now() + hold.lease.script()));
                    if stalled {
                        party.stalled_lease = party.stalled_lease.max(Some(hold.lease.script()));
                    }
                }
                match result {
                    Ok(()) => {}
                    // Judged by the reply, not the call's start: a busy machine can hold
                    // the script back past the guard's validity.
                    Err(err) if err.is_lost() || err.is_not_held() => {
                        if !hold.revoked && view.live(ended + SLACK) {
                            return Err(format!(
                                "owner {owner}'s release found no {:?} hold, while its guard \
                                 said Held for {:?} more after the reply: {err}",
                                hold.side,
                                view.valid_until - ended
                            ));
                        }
                        // The client forgot the whole holding: every guard of that side
                        // is stale, as after an acquisition that found it lost. A stale
                        // guard's holding was forgotten before: its release says nothing
                        // of a holding taken since.
                        if err.is_lost() && !hold.stale {
                            let party = &mut self.parties[owner];
                            for other in party.holds.iter_mut().filter(|h| h.side == hold.side) {
                                other.revoked = true;
                                other.stale = true;
                            }
                        }
                    }
                    // A reply that did not come in time: the hold stays until its lease
                    // ends (counted below).
                    Err(err) if err.is_connection() => {}
                    Err(err) => return Err(format!("owner {owner}'s release failed: {err}")),
                }
                self.parties[owner].rebound(Instant::now());
                // The last hold's release tells a waiter.
                self.messaged = released && self.parties[owner].holds.is_empty();
                Ok(())
            }
            Op::Pass { ms } => {
                std::thread::sleep(Duration::from_millis(ms));
                Ok(())
            }
            Op::Force { side } => {
                // A stalled client's call would reach Redis when the stall ends, at a time
                // the model does not know: the operator waits.
                if self.stalled(0) {
                    return Ok(());
                }
                let lock = self.h.client(0).read_write_lock(&self.name);
                let at = Instant::now();
                // A reply that did not come in time: it may or may not have deleted the
                // lock, so the holds count no more, and may still be there.
                let (deleted, known) = match match side {
                    Side::Read => lock.read().force_unlock(),
                    Side::Write => lock.write().force_unlock(),
                } {
                    Ok(deleted) => (deleted, true),
                    Err(err) if err.is_connection() => (false, false),
                    Err(err) => return Err(format!("force_unlock: {err}")),
                };
                self.log.push(format!("  deleted: {deleted}"));
                self.messaged = deleted;
                if deleted || !known {
                    self.revoke_all(at, known, false);
                }
                Ok(())
            }
            Op::Delete => {
                let at = Instant::now();
                let _: i64 = redis::cmd("DEL")
                    .arg(&self.name)
                    .query(&mut self.h.conn)
                    .unwrap();
                self.revoke_all(at, true, false);
                Ok(())
            }
            Op::Restart => {
                let at = Instant::now();
                self.h.server.restart();
                self.h.conn = self.h.server.conn();
                self.revoke_all(at, true, true);
                self.linger = Bound::Gone;
                for owner in 0..OWNERS {
                    let stalled = self.stalled(owner);
                    let party = &mut self.parties[owner];
                    if party.waiting.is_none() && !stalled {
                        party.ghost = None;
                    }
                }
                Ok(())
            }
            Op::Fault {
                client,
                side,
                call,
                reply,
            } => {
                let kind = match side {
                    Side::Read => "read",
                    Side::Write => "write",
                };
                if !self.faults.arm(&self.h.clients, kind, client, call, reply) {
                    self.log.push("  (no such call)".into());
                }
                Ok(())
            }
            Op::Stall { client } => {
                if !self.faults.stall(&self.h.clients, client) {
                    return Ok(());
                }
                for owner in (0..OWNERS).filter(|&o| client_of(o) == client) {
                    let party = &mut self.parties[owner];
                    if let Some(waiting) = &mut party.waiting {
                        waiting.stalled = true;
                        waiting.forced = true;
                        let lease = Duration::from_millis(waiting.lease);
                        party.stalled_lease = party.stalled_lease.max(Some(lease));
                    }
                }
                Ok(())
            }
            Op::Thaw { client } => {
                if self.faults.thaw(&self.h.clients, client) {
                    self.thawed(client);
                }
                Ok(())
            }
            Op::JavaTake { side, lease } => self.java_take(side, lease),
            Op::JavaRelease => self.java_release(),
        }
    }

    fn take(
        &mut self,
        owner: usize,
        side: Side,
        lease: Lease,
        wait: Option<Duration>,
    ) -> Result<(), String> {
        if self.parties[owner].waiting.is_some() {
            return Ok(());
        }
        let before = Instant::now();
        let free_of_others = self.free_for(owner, side, before);
        let views = self.h.owners[owner]
            .run(|mine| mine.guards.iter().map(Guard::view).collect::<Vec<_>>());
        let mine = &self.parties[owner];
        // Stale holds (found gone by a re-entry) are no longer in the client's hold table,
        // nor those that have run out (a release may find them gone and forget them).
        let live = |view: &View| view.live(Instant::now() + SLACK);
        let reading = (mine.holds.iter().zip(&views))
            .any(|(h, view)| h.side == Side::Read && !h.revoked && live(view));
        // Any write hold may still be in the hold table (a forced unlock's are until found
        // out): then a write acquisition is a re-entry, not an upgrade.
        let writing = (mine.holds.iter()).any(|h| h.side == Side::Write && !h.stale);
        let free = free_of_others && mine.holds.is_empty();
        // A forced unlock leaves the client's hold table as it was until a renewal or
        // release finds out: its read holds may still count.
        let upgrade = side == Side::Write && reading && !writing;
        // A write holding deleted from outside, or whose validity ran out, may have been
        // found out and forgotten by its watchdog: then the acquisition is an upgrade.
        let surely_writing = (mine.holds.iter().zip(&views))
            .any(|(h, view)| h.side == Side::Write && !h.stale && !h.revoked && live(view));
        let may_upgrade = side == Side::Write
            && mine.holds.iter().any(|h| h.side == Side::Read)
            && !surely_writing;
        // Whether a failed call must leave nothing: the owner holds nothing, nothing of its
        // earlier calls nor of forcibly deleted holds may be left, and the fault aimed at
        // it.
        let fresh = mine.holds.is_empty()
            && mine.ghost.is_none_or(|g| g.over_by(before))
            && self.linger.over_by(before);
        let reply = self.faults.aimed(client_of(owner), Call::Acquire);
        let watch = fresh && self.quiet(owner) && reply.is_some();
        let (sent, result, returned) =
            self.h.owners[owner].run(move |mine| attempt(mine, side, lease, wait));
        let failed = match &result {
            Err(err) if watch => Some(err.to_string()),
            _ => None,
        };
        let result = result.map(|view| view.is_some());
        self.outcome(
            owner,
            side,
            lease,
            (sent, result, returned),
            free,
            (upgrade, may_upgrade),
        )?;
        match failed {
            Some(err) => self.settled(owner, reply, (sent, returned), &err),
            None => Ok(()),
        }
    }

    /// Records an attempt's outcome; `free`: nothing could keep the lock from the owner;
    /// `upgrade`: taking it would be an upgrade (surely, possibly).
    fn outcome(
        &mut self,
        owner: usize,
        side: Side,
        lease: Lease,
        (sent, result, returned): (Instant, redmutex::Result<bool>, Instant),
        free: bool,
        (upgrade, may_upgrade): (bool, bool),
    ) -> Result<(), String> {
        match result {
            Ok(true) => {
                self.log.push(format!("  owner {owner} took {side:?}"));
                if upgrade {
                    return Err(format!(
                        "owner {owner} upgraded its read hold to a write hold"
                    ));
                }
                let party = &mut self.parties[owner];
                party.holds.push(Hold {
                    side,
                    sent,
                    taken: returned,
                    lease,
                    revoked: false,
                    stale: false,
                });
                party.wrote |= side == Side::Write;
                if let Some(lease) = lease.explicit() {
                    let until = returned + lease;
                    party.leased_until = Some(party.leased_until.map_or(until, |u| u.max(until)));
                }
                party.rebound(returned);
                Ok(())
            }
            Ok(false) if free => Err(format!(
                "owner {owner} was refused the {side:?} side, which nobody could keep from it"
            )),
            Ok(false) => {
                self.log.push(format!("  owner {owner}: busy"));
                Ok(())
            }
            Err(err) if err.is_upgrade() && may_upgrade => Ok(()),
            Err(err) => {
                self.log.push(format!("  owner {owner}: {err}"));
                let had = !self.parties[owner].holds.is_empty();
                let tolerated = err.is_validity_exhausted() || err.is_connection();
                if !(tolerated || (err.is_lost() && had)) {
                    return Err(format!(
                        "owner {owner}'s {side:?} acquisition failed: {err}"
                    ));
                }
                let stalled = self.stalled(owner);
                let party = &mut self.parties[owner];
                let script_lease = party.script_lease(side, lease);
                if stalled {
                    party.stalled_lease = party.stalled_lease.max(Some(script_lease));
                }
                if err.is_lost() {
                    // Every guard of that side's holding is stale now.
                    for hold in party.holds.iter_mut().filter(|h| h.side == side) {
                        hold.revoked = true;
                        hold.stale = true;
                    }
                }
                let ghost = party.ghost.unwrap_or(Bound::Gone);
                party.ghost = Some(ghost.extend(Instant::now() + script_lease));
                Ok(())
            }
        }
    }

    /// Whether nothing but `owner` itself could keep `side` from it at `at`.
    fn free_for(&self, owner: usize, side: Side, at: Instant) -> bool {
        let others = (self.parties.iter().enumerate())
            .filter(|(i, _)| *i != owner)
            .all(|(_, p)| !p.blocks(side, at));
        let java = match side {
            Side::Read => !self.java.holds.iter().any(|(s, _, _)| *s == Side::Write),
            Side::Write => self.java.holds.is_empty(),
        } || self.java.bound.is_none_or(|b| b.over_by(at));
        others && java
    }

    fn wait(&mut self, owner: usize, side: Side, lease: u64, wait: u64) -> Result<(), String> {
        let party = &self.parties[owner];
        if party.waiting.is_some() || !party.holds.is_empty() {
            return Ok(());
        }
        let wait = Duration::from_millis(wait);
        let started = Instant::now();
        let result = self.h.owners[owner]
            .start(move |mine| attempt(mine, side, Lease::Ms(lease), Some(wait)));
        let stalled = self.stalled(owner);
        let party = &mut self.parties[owner];
        if stalled {
            party.stalled_lease = party.stalled_lease.max(Some(Duration::from_millis(lease)));
        }
        party.waiting = Some(Waiting {
            result,
            side,
            lease,
            started,
            wait,
            forced: stalled,
            free_since: None,
            stalled,
        });
        Ok(())
    }

    fn join(&mut self, owner: usize) -> Result<(), String> {
        let Some(waiting) = self.parties[owner].waiting.take() else {
            return Ok(());
        };
        let (sent, result, returned) = waiting
            .result
            .recv_timeout(waiting.wait + Duration::from_secs(20))
            .map_err(|err| format!("owner {owner}'s wait did not end: {err}"))?;
        // Its call may have held the lock at any time: keep its bound until now.
        let ghost = self.parties[owner].ghost.unwrap_or(Bound::Gone);
        self.parties[owner].ghost = Some(ghost.extend(Instant::now()));
        let lease = Duration::from_millis(waiting.lease);
        // When its successful attempt was sent (its validity began then), or its wait ended.
        let attempt = match &result {
            Ok(Some(view)) => {
                Some(view.valid_until - (lease - lease / 100 - Duration::from_millis(2)))
            }
            Ok(None) => Some(waiting.started + waiting.wait),
            Err(_) => None,
        };
        let sent = match (&result, attempt) {
            (Ok(Some(_)), Some(attempt)) => attempt.max(sent),
            _ => sent,
        };
        let late = attempt
            .zip(waiting.free_since)
            .filter(|(at, since)| *since + GRACE < *at);
        if let (SLEEPY, Some((attempt, since)), false) = (owner, late, waiting.stalled) {
            return Err(format!(
                "owner {owner}'s {:?} waiter was not woken: nothing kept the lock from it for \
                 {:?} before its {}",
                waiting.side,
                attempt - since,
                if result.as_ref().is_ok_and(Option::is_none) {
                    "wait ended in vain"
                } else {
                    "attempt that took it"
                }
            ));
        }
        let result = result.map(|view| view.is_some());
        let taken = matches!(result, Ok(true));
        self.outcome(
            owner,
            waiting.side,
            Lease::Ms(waiting.lease),
            (sent, result, returned),
            false,
            (false, false),
        )?;
        if let (true, true, Some(hold)) =
            (taken, waiting.forced, self.parties[owner].holds.last_mut())
        {
            hold.revoked = true;
        }
        Ok(())
    }

    fn java_take(&mut self, side: Side, lease: u64) -> Result<(), String> {
        let name = self.name.clone();
        let sent = Instant::now();
        if self.java.bound.is_none_or(|b| b.over_by(sent)) {
            // Whatever Java held has run out.
            self.java = JavaParty::default();
        }
        let got: Option<i64> = match side {
            Side::Read => {
                let prefix = format!("{{{name}}}:{JAVA}:rwlock_timeout");
                redisson::eval(
                    &mut self.h.conn,
                    redisson::READ_ACQUIRE,
                    &[&name, &prefix],
                    &[arg(lease), arg(JAVA), arg(format!("{JAVA}:write"))],
                )
            }
            Side::Write => redisson::eval(
                &mut self.h.conn,
                redisson::WRITE_ACQUIRE,
                &[&name],
                &[arg(lease), arg(format!("{JAVA}:write"))],
            ),
        };
        let returned = Instant::now();
        self.log.push(format!("  Java: {got:?}"));
        if got.is_none() {
            let lease = Duration::from_millis(lease);
            let bound = self.java.bound.unwrap_or(Bound::Gone);
            let writing = self.java.holds.iter().any(|(s, _, _)| *s == Side::Write);
            self.java.bound = Some(match (side, bound) {
                // A write re-entry sets the key to what was left plus the lease.
                (Side::Write, Bound::Until(until)) if writing => Bound::Until(until + lease),
                _ => bound.extend(returned + lease),
            });
            self.java.holds.push((side, sent + lease, sent));
        }
        Ok(())
    }

    fn java_release(&mut self) -> Result<(), String> {
        let Some(&(side, _, _)) = self.java.holds.last() else {
            return Ok(());
        };
        let name = self.name.clone();
        let channel = format!("redisson_rwlock:{{{name}}}");
        let lease = 30u64;
        let sent = Instant::now();
        let released: Option<i64> = match side {
            Side::Read => {
                let prefix = format!("{{{name}}}:{JAVA}:rwlock_timeout");
                let key_prefix = format!("{{{name}}}");
                redisson::eval(
                    &mut self.h.conn,
                    redisson::READ_UNLOCK,
                    &[&name, &channel, &prefix, &key_prefix],
                    &[arg(0), arg(JAVA)],
                )
            }
            Side::Write => redisson::eval(
                &mut self.h.conn,
                redisson::WRITE_UNLOCK,
                &[&name, &channel],
                &[arg(1), arg(lease), arg(format!("{JAVA}:write"))],
            ),
        };
        self.log
            .push(format!("  Java released {side:?}: {released:?}"));
        self.java.holds.pop();
        self.messaged = released == Some(1);
        if released.is_none() {
            // Its holds are gone from the hash, but not always its lease keys: Redisson's
            // read unlock deletes no other reader's key, and frees the lock when none has
            // more than 0 ms left (a key with 0 ms lasts to the end of that millisecond);
            // a write release that leaves holds cuts the hash to its lease, below a read
            // lease key. Each lasts until its own lease ends.
            self.linger = self.linger.max(self.java.bound.unwrap_or(Bound::Gone));
            self.java.holds.clear();
        }
        if side == Side::Write && released == Some(0) {
            // What remains expires after Redisson's lease.
            let until = sent + Duration::from_millis(lease);
            for hold in &mut self.java.holds {
                hold.1 = hold.1.min(until);
            }
        }
        if self.java.holds.is_empty() {
            self.java.bound = None;
        }
        Ok(())
    }

    fn check(&mut self) -> Result<(), String> {
        let now = Instant::now();
        for i in 0..OWNERS {
            let Some(side) = self.parties[i].waiting.as_ref().map(|w| w.side) else {
                continue;
            };
            let free = self.free_for(i, side, now);
            let messaged = self.messaged;
            let waiting = self.parties[i].waiting.as_mut().unwrap();
            // Freed by a message (a release, a forced unlock), not by a lease running out:
            // a waiter may sleep on after that, up to its backoff.
            waiting.free_since = match (free, waiting.free_since) {
                (true, Some(since)) => Some(since),
                (true, None) if messaged => Some(now),
                _ => None,
            };
        }
        let mut views = Vec::new();
        for (i, party) in self.parties.iter().enumerate() {
            if party.waiting.is_some() {
                continue;
            }
            let guards = self.h.owners[i]
                .run(|mine| mine.guards.iter().map(Guard::view).collect::<Vec<_>>());
            for (hold, view) in party.holds.iter().zip(guards) {
                if !hold.revoked {
                    views.push((i, hold.clone(), view));
                }
            }
        }
        let (ttl, read) = pttl(&mut self.h.conn, &self.name);
        let now = Instant::now();
        self.told(&views, now)?;
        // The windows so far, with those still open as their guards say now: no writer's
        // overlaps another owner's reader's or writer's.
        let (writes, reads) = (History::default(), History::default());
        for (windows, so_far) in [(&writes, &self.history), (&reads, &self.reads)] {
            for window in so_far.windows() {
                windows.add(window);
            }
        }
        for (i, hold, view) in &views {
            if view.health == Health::Held && !view.lost {
                let windows = match hold.side {
                    Side::Read => &reads,
                    Side::Write => &writes,
                };
                windows.record(&format!("owner {i}"), hold.taken, now, view.valid_until);
            }
        }
        if let Some((a, b)) = conflict(&writes, &reads) {
            return Err(format!(
                "a writer's window overlaps another owner's: {} until {} ns after the start of \
                 {}'s",
                a.holder,
                a.to - b.from,
                b.holder
            ));
        }
        let live: Vec<(usize, Side, Instant)> = (views.iter())
            .filter(|(_, _, view)| view.live(now))
            .map(|(i, hold, view)| (*i, hold.side, view.valid_until))
            .collect();
        let writers: Vec<usize> = live
            .iter()
            .filter(|(_, side, _)| *side == Side::Write)
            .map(|(i, _, _)| *i)
            .collect();
        let readers: Vec<usize> = live
            .iter()
            .filter(|(_, side, _)| *side == Side::Read)
            .map(|(i, _, _)| *i)
            .collect();
        let java_writes = self.java.live(Side::Write, now);
        let java_reads = self.java.live(Side::Read, now);
        for &w in &writers {
            if writers.iter().any(|&o| o != w) || java_writes {
                return Err(format!(
                    "two writers at once: owner {w}, and {writers:?} or Java"
                ));
            }
            if readers.iter().any(|&r| r != w) || java_reads {
                return Err(format!(
                    "owner {w} writes beside readers: {readers:?}{}",
                    if java_reads { " and Java" } else { "" }
                ));
            }
        }
        if java_writes && !readers.is_empty() {
            return Err(format!("Java writes beside readers {readers:?}"));
        }
        for (i, side, until) in &live {
            if expiry(ttl, read).is_none_or(|expires| *until > expires) {
                return Err(format!(
                    "owner {i}'s {side:?} guard is valid for {:?} more, but the key's PTTL is \
                     {ttl} ms",
                    until.saturating_duration_since(read)
                ));
            }
        }
        Ok(())
    }

    /// A watched hold whose validity ended before another party's acquisition of a side
    /// that excludes it (that holds now) was sent is surely gone: its guard must say it is
    /// lost, not only uncertain, by then, whatever its renewal waits on. `views` were read
    /// before `now`.
    fn told(&self, views: &[(usize, Hold, View)], now: Instant) -> Result<(), String> {
        let java = (self.java.holds.iter())
            .filter(|(_, until, _)| *until > now + SLACK)
            .map(|(side, _, sent)| ("Java".to_owned(), *side, *sent));
        let successors = (views.iter())
            .filter(|(_, _, view)| view.live(now))
            .map(|(i, hold, _)| (format!("owner {i}"), hold.side, hold.sent))
            .chain(java);
        for (who, side, sent) in successors {
            let unaware = views.iter().find(|(i, hold, view)| {
                format!("owner {i}") != who
                    && (side == Side::Write || hold.side == Side::Write)
                    && matches!(hold.lease, Lease::Watched)
                    && !view.lost
                    && view.valid_until + SLACK < sent
            });
            if let Some((i, hold, view)) = unaware {
                return Err(format!(
                    "owner {i}'s watched {:?} hold ran out {:?} before {who}'s {side:?} \
                     acquisition, which holds now, was sent, and its guard still does not say \
                     it is lost ({:?})",
                    hold.side,
                    sent - view.valid_until,
                    view.health
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
        // Holders first, so that waiters get their turn.
        for owner in 0..OWNERS {
            while self.parties[owner].waiting.is_none() && !self.parties[owner].holds.is_empty() {
                self.step(&Op::Release { owner, which: 0 })?;
            }
        }
        while !self.java.holds.is_empty() {
            self.java_release()?;
        }
        for owner in 0..OWNERS {
            self.join(owner)?;
            while !self.parties[owner].holds.is_empty() {
                self.step(&Op::Release { owner, which: 0 })?;
            }
        }
        if let Some((a, b)) = conflict(&self.history, &self.reads) {
            return Err(format!(
                "a writer's window overlaps another owner's: {} and {}",
                a.holder, b.holder
            ));
        }
        let bounds = self
            .parties
            .iter()
            .map(Party::bound)
            .max()
            .unwrap_or(Bound::Gone);
        if !super::await_bound(bounds.max(self.linger)) {
            return Ok(());
        }
        let left = lasting_leftovers(&mut self.h.conn, &self.name);
        if !left.is_empty() {
            let left = super::described(&mut self.h.conn, &left);
            return Err(format!("left in Redis after every release: {left:?}"));
        }
        Ok(())
    }
}

/// Two windows of different owners that overlap, of which one (the first) is a writer's:
/// `writes` and `reads` are the writers' and readers' windows.
pub(super) fn conflict(writes: &History, reads: &History) -> Option<(Window, Window)> {
    if let Some(found) = writes.overlap() {
        return Some(found);
    }
    let reads = reads.windows();
    writes.windows().into_iter().find_map(|w| {
        (reads.iter())
            .find(|r| r.holder != w.holder && w.from < r.to && r.from < w.to)
            .map(|r| (w.clone(), r.clone()))
    })
}

impl crate::model::Model for Harness {
    const NAME: &'static str = "read-write";
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
    fn summary(&self) -> Option<String> {
        Some(format!(
            "{} failed acquisitions looked at for what they left",
            self.settled
        ))
    }
}
