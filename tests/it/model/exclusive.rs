//! The exclusive kinds — reentrant, fenced, spin, fair, token — against one model: parties
//! (our owners, the Java owner, a crashed waiter of ours) with their holds and how long
//! each may still be in Redis.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use redmutex::{
    Fair, Fenced, Health, Lock, LockGuard, NonReentrant, NonReentrantFair, Reentrant, Spin, Token,
};

use super::{
    Bound, Call, Clients, Faults, OWNERS, Owner, Reply, SLACK, SLEEPY, WATCHDOG_LEASE, client_of,
    epoch_ms, expiry, fresh_name, lasting_leftovers, owner_field, pttl, ran_first, settle_time,
    settles,
};
use crate::support::history::History;
use crate::support::redisson::{self, JAVA, arg};
use crate::support::{MakeLock, Server};

/// A lease in a step: watched (the client's, renewed), or explicit in milliseconds.
#[derive(Clone, Copy, Debug)]
pub enum Lease {
    Watched,
    Ms(u64),
}

impl Lease {
    pub fn explicit(self) -> Option<Duration> {
        match self {
            Lease::Watched => None,
            Lease::Ms(ms) => Some(Duration::from_millis(ms)),
        }
    }

    /// The lease the server gets.
    pub fn script(self) -> Duration {
        self.explicit().unwrap_or(WATCHDOG_LEASE)
    }
}

/// One step of a sequence.
#[derive(Clone, Debug)]
pub enum Op {
    /// `try_lock` (with the lease, or watched).
    Take {
        owner: usize,
        lease: Lease,
    },
    /// `try_lock_for(wait)` started on the owner's thread; the sequence goes on meanwhile.
    Wait {
        owner: usize,
        lease: Lease,
        wait: u64,
    },
    /// Waits for the owner's `Wait` to end.
    Join {
        owner: usize,
    },
    /// Releases one of the owner's holds (by position).
    Release {
        owner: usize,
        which: usize,
    },
    /// Time passes: leases run out.
    Pass {
        ms: u64,
    },
    /// `force_unlock()`, by owner 0's handle.
    Force,
    /// The Java owner acquires (Redisson's script for the kind), with `wait` for its place
    /// in a fair queue (Redisson's default is 300000).
    JavaTake {
        lease: u64,
        wait: u64,
    },
    /// The Java owner releases one hold.
    JavaRelease,
    /// The Java owner leaves a fair queue.
    JavaLeave,
    /// The reply to client `client`'s next `call` of the kind (0: the shared client, 1:
    /// owner 2's) is lost or late: the call may or may not have run.
    Fault {
        client: usize,
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
    /// An operator deletes the lock's key with a plain DEL.
    Delete,
    /// A waiter of ours on a client of its own makes one attempt, which keeps its place (or
    /// the lock, if it takes it) for `wait` milliseconds, and never comes back: its
    /// process crashed. A fair lock's only.
    Crash {
        wait: u64,
    },
}

/// The owner field of the crashed waiter: a client of ours with the direct hand-off on.
const CRASHED: &str = "0b7e3c1a-6d2f-8e8a-b5c9-1f2e3d4c5b6a:1";

/// A lease longer than any case.
pub const LONG_LEASE: u64 = 10_000;

/// How long a lock may stay free, with a lone waiter of the sleepy owner at the head of
/// its queue, before that waiter must have been woken: far beyond a message's delivery,
/// far below the sleepy client's own retries.
pub const GRACE: Duration = Duration::from_millis(1500);

pub fn lease() -> impl Strategy<Value = Lease> {
    prop_oneof![
        2 => Just(Lease::Watched),
        8 => (10u64..80).prop_map(Lease::Ms),
        // Outlasts the case unless released: only a message wakes its waiters in time.
        1 => Just(Lease::Ms(LONG_LEASE)),
    ]
}

/// The lease of a waiter: a short explicit one, or watched, which a fair
/// lock's waiter takes on a release's grant alone (a direct hand-off), where an explicit
/// one confirms the grant by an attempt.
fn wait_lease() -> impl Strategy<Value = Lease> {
    prop_oneof![
        1 => (10u64..60).prop_map(Lease::Ms),
        1 => Just(Lease::Watched),
    ]
}

/// Sequences of steps; with `java`, the Java owner's among them.
pub fn ops(java: bool) -> impl Strategy<Value = Vec<Op>> {
    let owner = || 0..OWNERS;
    let mut ops: Vec<(u32, BoxedStrategy<Op>)> = vec![
        (
            6,
            (owner(), lease())
                .prop_map(|(owner, lease)| Op::Take { owner, lease })
                .boxed(),
        ),
        (
            3,
            (owner(), wait_lease(), 20u64..400)
                .prop_map(|(owner, lease, wait)| Op::Wait { owner, lease, wait })
                .boxed(),
        ),
        // The sleepy owner, which only a message wakes before its wait ends.
        (
            1,
            (wait_lease(), 2500u64..3500)
                .prop_map(|(lease, wait)| Op::Wait {
                    owner: SLEEPY,
                    lease,
                    wait,
                })
                .boxed(),
        ),
        (2, owner().prop_map(|owner| Op::Join { owner }).boxed()),
        (
            5,
            (owner(), 0..3usize)
                .prop_map(|(owner, which)| Op::Release { owner, which })
                .boxed(),
        ),
        (4, (1u64..60).prop_map(|ms| Op::Pass { ms }).boxed()),
        // Long enough for the watchdog to renew.
        (1, (80u64..200).prop_map(|ms| Op::Pass { ms }).boxed()),
        (1, Just(Op::Force).boxed()),
        (
            2,
            (0..2usize, super::call(), super::reply())
                .prop_map(|(client, call, reply)| Op::Fault {
                    client,
                    call,
                    reply,
                })
                .boxed(),
        ),
        (
            2,
            (0..2usize).prop_map(|client| Op::Stall { client }).boxed(),
        ),
        (
            1,
            (0..2usize).prop_map(|client| Op::Thaw { client }).boxed(),
        ),
        (1, Just(Op::Restart).boxed()),
        (1, Just(Op::Delete).boxed()),
    ];
    if java {
        ops.extend([
            (
                3,
                (10u64..80, prop_oneof![Just(100u64), Just(300_000u64)])
                    .prop_map(|(lease, wait)| Op::JavaTake { lease, wait })
                    .boxed(),
            ),
            (2, Just(Op::JavaRelease).boxed()),
            (1, Just(Op::JavaLeave).boxed()),
            (1, (50u64..300).prop_map(|wait| Op::Crash { wait }).boxed()),
        ]);
    }
    proptest::collection::vec(proptest::strategy::Union::new_weighted(ops), 1..40)
}

/// What the Java owner's script is, for a kind.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Java {
    None,
    Lock,
    Fenced,
    Fair,
}

/// A kind under the exclusive model.
pub trait Subject: MakeLock {
    const JAVA: Java;
    /// Whether an owner that holds it takes it again; if not, its second acquisition is
    /// refused with nothing sent.
    const REENTRANT: bool = true;
    /// A fenced guard's token.
    fn token(_: &LockGuard<Self>) -> Option<u64> {
        None
    }
    /// A token lock guard's value of the key.
    fn value(_: &LockGuard<Self>) -> Option<String> {
        None
    }
}

impl Subject for Reentrant {
    const JAVA: Java = Java::Lock;
}

impl Subject for Fenced {
    const JAVA: Java = Java::Fenced;
    fn token(guard: &LockGuard<Self>) -> Option<u64> {
        Some(guard.token())
    }
}

/// Redisson's `RLock` script plays the Java owner: the spin lock's is the same hash.
impl Subject for Spin {
    const JAVA: Java = Java::Lock;
}

impl Subject for Fair {
    const JAVA: Java = Java::Fair;
}

impl Subject for NonReentrant {
    const JAVA: Java = Java::Lock;
    const REENTRANT: bool = false;
}

impl Subject for NonReentrantFair {
    const JAVA: Java = Java::Fair;
    const REENTRANT: bool = false;
}

impl Subject for Token {
    const JAVA: Java = Java::None;
    fn value(guard: &LockGuard<Self>) -> Option<String> {
        Some(guard.token().to_owned())
    }
}

/// What a guard says.
#[derive(Clone, Debug)]
struct View {
    /// When the guard was asked.
    read: Instant,
    health: Health,
    lost: bool,
    valid_until: Instant,
    token: Option<u64>,
    value: Option<String>,
}

impl View {
    fn of<K: Subject>(guard: &LockGuard<K>) -> View {
        View {
            read: Instant::now(),
            health: guard.health(),
            lost: guard.is_lost(),
            valid_until: guard.valid_until(),
            token: K::token(guard),
            value: K::value(guard),
        }
    }

    /// Held, with validity left after `at`.
    fn live(&self, at: Instant) -> bool {
        self.health == Health::Held && self.valid_until > at
    }
}

/// An owner thread's state.
struct Mine<K: Subject> {
    lock: Option<Lock<K>>,
    guards: Vec<LockGuard<K>>,
}

type Taken = (Instant, redmutex::Result<Option<View>>, Instant);

fn take<K: Subject>(mine: &mut Mine<K>, lease: Lease, wait: Option<Duration>) -> Taken {
    let lock = mine.lock.as_ref().unwrap();
    let sent = Instant::now();
    let result = match (lease.explicit(), wait) {
        (None, None) => lock.try_lock(),
        (Some(lease), None) => lock.try_lock_with_lease(lease),
        (None, Some(wait)) => lock.try_lock_for(wait),
        (Some(lease), Some(wait)) => lock.try_lock_with_lease_for(wait, lease),
    };
    let returned = Instant::now();
    let result = result.map(|guard| {
        guard.map(|guard| {
            let view = View::of(&guard);
            mine.guards.push(guard);
            view
        })
    });
    (sent, result, returned)
}

/// One hold in the model.
#[derive(Clone, Debug)]
struct HoldModel {
    /// When the acquisition was sent.
    sent: Instant,
    /// When the acquisition returned: the start of its window in the history.
    taken: Instant,
    lease: Lease,
    /// Deleted by a forced unlock: its guard may go on saying `Held` until a renewal finds
    /// out, and no invariant counts it.
    revoked: bool,
}

struct Waiting {
    result: mpsc::Receiver<Taken>,
    started: Instant,
    wait: Duration,
    lease: Lease,
    /// When the owner was seen in the fair queue, and its rank among those seen.
    queued: Option<(Instant, u64)>,
    /// When a forced unlock first ran meanwhile: what it took, or was granted by a release
    /// before its call returned, may have been deleted, and then it queues anew, last.
    forced: Option<Instant>,
    /// Since when nobody else could hold the lock or be ahead of it in a queue.
    free_since: Option<Instant>,
    /// Its client stalled meanwhile: it may have missed a message, and its place in a
    /// fair queue may have run out.
    stalled: bool,
}

#[derive(Default)]
struct Party {
    holds: Vec<HoldModel>,
    /// How long its holds may last in Redis.
    held: Option<Bound>,
    /// How long what a failed call may have left may last.
    ghost: Option<Bound>,
    waiting: Option<Waiting>,
    /// The longest lease among the holds taken since it last held nothing.
    longest: Duration,
    /// Its client stalled while a call of its was on its way: the call reaches Redis when
    /// the stall ends, and what it takes lasts this long after.
    stalled_lease: Option<Duration>,
}

impl Party {
    /// The lease an acquisition with `lease` sets on Redis: a re-entry into a watched
    /// holding keeps the watchdog's lease, whatever it asked for.
    fn script_lease(&self, lease: Lease) -> Duration {
        let watched = (self.holds.iter()).any(|h| matches!(h.lease, Lease::Watched));
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

    /// After holds were added or released: how long the remaining ones may last, the key's
    /// expiry set `now` to the longest lease among them.
    fn rebound(&mut self, now: Instant) {
        if self.holds.is_empty() {
            self.longest = Duration::ZERO;
        }
        self.held = if self.holds.is_empty() {
            None
        } else if self.holds.iter().any(|h| matches!(h.lease, Lease::Watched)) {
            self.longest = self.longest.max(WATCHDOG_LEASE);
            Some(Bound::Forever)
        } else {
            // A release sets what remains to the holding's lease, which may be that of a
            // hold already released: the longest taken since it last held nothing.
            let longest = self.holds.iter().map(|h| h.lease.script()).max().unwrap();
            self.longest = self.longest.max(longest);
            let longest = self.longest;
            Some(self.held.unwrap_or(Bound::Gone).extend(now + longest))
        };
    }
}

/// The Java owner in the model.
#[derive(Default)]
struct JavaParty {
    /// Hold count.
    count: u32,
    /// Its key's expiry is at least this (each of its calls sets it), unless revoked.
    sure_until: Option<Instant>,
    bound: Option<Bound>,
    /// In the fair queue, with the rank it was queued at.
    queued: Option<u64>,
    /// The wait of its last fair attempt, which its give-up passes as Redisson's does.
    wait: u64,
}

/// A fresh acquisition, for the fair order: who, and between when and when it happened.
#[derive(Clone, Debug)]
struct Acquisition {
    who: String,
    from: Instant,
    to: Instant,
    /// Its rank in the fair queue when it waited there.
    rank: Option<u64>,
}

/// A fencing token and when it was drawn.
struct Fence {
    who: String,
    token: u64,
    from: Instant,
    to: Instant,
}

/// Runs one sequence of `K` and checks it; `Err` names the broken invariant.
pub struct Harness<K: Subject> {
    /// Kept running for the clients and connections below; restarted by `Restart`.
    server: Server,
    clients: Clients,
    owners: Vec<Owner<Mine<K>>>,
    fields: Vec<String>,
    conn: redis::Connection,
}

impl<K: Subject> Harness<K> {
    /// Holds the owners took on a release's grant alone (a fair lock's direct hand-off).
    pub fn grants_taken(&self) -> u64 {
        self.clients.shared.stats().grants_taken + self.clients.own.stats().grants_taken
    }

    pub fn new() -> Self {
        let server = Server::start();
        let clients = Clients::new(&server);
        let mut fields = Vec::new();
        let owners = (0..OWNERS)
            .map(|i| {
                let owner = Owner::spawn(|| Mine::<K> {
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
        }
    }

    pub fn run(&mut self, ops: &[Op]) -> Result<(), String> {
        let name = fresh_name(K::NAME);
        for (i, owner) in self.owners.iter().enumerate() {
            let lock = K::make(self.clients.of(i), &name);
            owner.run(move |mine| {
                mine.guards.clear();
                mine.lock = Some(lock);
            });
        }
        let mut case = Case::<K> {
            h: self,
            name,
            parties: (0..OWNERS).map(|_| Party::default()).collect(),
            java: JavaParty::default(),
            crashed: Bound::Gone,
            history: History::default(),
            tokens: Vec::new(),
            acquisitions: Vec::new(),
            ranks: 0,
            messaged: false,
            faults: Faults::default(),
            restarted: None,
            values: Vec::new(),
            log: Vec::new(),
        };
        let result = case.play(ops);
        let ended = case.end();
        if std::env::var("MODEL_LOG").is_ok() {
            eprintln!("{}", case.log.join("\n"));
        }
        result
            .and(ended)
            .map_err(|err| format!("{err}\nsteps:\n{}", case.log.join("\n")))
    }
}

struct Case<'h, K: Subject> {
    h: &'h mut Harness<K>,
    name: String,
    parties: Vec<Party>,
    java: JavaParty,
    /// Until when the crashed waiter may hold the lock or be ahead in its queue.
    crashed: Bound,
    history: History,
    tokens: Vec<Fence>,
    acquisitions: Vec<Acquisition>,
    ranks: u64,
    /// The last step published an unlock message.
    messaged: bool,
    faults: Faults,
    /// When Redis last restarted.
    restarted: Option<Instant>,
    /// Every token lock value a guard of this case had.
    values: Vec<String>,
    log: Vec<String>,
}

impl<K: Subject> Case<'_, K> {
    fn queue(&self) -> String {
        format!("redisson_lock_queue:{{{}}}", self.name)
    }

    fn timeouts(&self) -> String {
        format!("redisson_lock_timeout:{{{}}}", self.name)
    }

    fn ours(&self) -> String {
        format!("redisson_lock_timeout:{{{}}}:redmutex_alive", self.name)
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

    /// Whether `owner`'s client is stalled.
    fn stalled(&self, owner: usize) -> bool {
        self.faults.stalled[client_of(owner)].is_some()
    }

    /// Whether no other owner of `owner`'s client is waiting (sending calls of its own),
    /// and the client is not stalled: a fault aimed at the client's next call hits
    /// `owner`'s, and its calls reach Redis in order.
    fn quiet(&self, owner: usize) -> bool {
        let client = client_of(owner);
        let others = (0..OWNERS).filter(|&o| o != owner && client_of(o) == client);
        !self.stalled(owner)
            && others
                .into_iter()
                .all(|o| self.parties[o].waiting.is_none())
    }

    /// Whether every hold is gone from Redis, whoever's it was, as after a forced unlock
    /// at `at`: the holds count no more (their windows end there), and, when `known`, they
    /// are surely gone; a wait going on may have lost what it took, or its place.
    fn revoke_all(&mut self, at: Instant, known: bool) {
        for (i, party) in self.parties.iter_mut().enumerate() {
            // A waiting owner's thread is busy, and it holds nothing yet.
            let views = match party.waiting {
                Some(_) => Vec::new(),
                None => self.h.owners[i]
                    .run(|mine| mine.guards.iter().map(View::of).collect::<Vec<_>>()),
            };
            for (hold, view) in party.holds.iter_mut().zip(views) {
                if !hold.revoked {
                    let who = format!("owner {i}");
                    self.history.record(&who, hold.taken, at, view.valid_until);
                }
                hold.revoked = true;
            }
            // Gone from Redis; a running renewal cannot put a single node's key back.
            if known {
                party.held = None;
            }
            if let Some(waiting) = &mut party.waiting {
                waiting.forced.get_or_insert(at);
            }
        }
        self.java.sure_until = None;
        if known {
            self.java.count = 0;
            self.java.bound = None;
        }
    }

    /// After `owner`'s acquisition sent at `sent` failed with `err` in a call the armed
    /// fault `reply` hit: within a response timeout (and some slack) of its return,
    /// nothing the call took may be left in Redis, since no guard accounts for it.
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
        let name = self.name.clone();
        let field = self.h.fields[owner].clone();
        let queue = self.queue();
        let fair = K::JAVA == Java::Fair;
        let token = K::JAVA == Java::None;
        let values = self.values.clone();
        let conn = &mut self.h.conn;
        let mut left = String::new();
        let gone = settles(returned, || {
            left.clear();
            if token {
                let value: Option<String> = redis::cmd("GET").arg(&name).query(conn).unwrap();
                if let Some(value) = value.filter(|v| !values.contains(v)) {
                    left = format!("the key holds the unknown token {value}");
                }
                return left.is_empty();
            }
            let count: Option<i64> = redis::cmd("HGET")
                .arg(&name)
                .arg(&field)
                .query(conn)
                .unwrap();
            if let Some(count) = count {
                left = format!("its field counts {count}");
            }
            if fair {
                let place: Option<i64> = redis::cmd("LPOS")
                    .arg(&queue)
                    .arg(&field)
                    .query(conn)
                    .unwrap();
                if let Some(place) = place {
                    left.push_str(&format!(" it is queued at {place}"));
                }
            }
            left.is_empty()
        });
        if gone {
            return Ok(());
        }
        Err(format!(
            "owner {owner}'s acquisition failed ({err}), and {:?} after it returned {left}",
            settle_time()
        ))
    }

    /// Whether every party but `me` surely has nothing in Redis at `at`.
    fn free_for(&self, me: Option<usize>, at: Instant) -> bool {
        let others = (self.parties.iter().enumerate())
            .filter(|(i, _)| Some(*i) != me)
            .all(|(_, p)| p.bound().over_by(at));
        let java = me.is_none() || self.java.bound.unwrap_or(Bound::Gone).over_by(at);
        others && java && self.java.queued.is_none() && self.crashed.over_by(at)
    }

    fn step(&mut self, op: &Op) -> Result<(), String> {
        self.messaged = false;
        match *op {
            Op::Take { owner, lease } => {
                if self.parties[owner].waiting.is_some() {
                    return Ok(());
                }
                let before = Instant::now();
                // A token lock's own earlier attempt, landed after its call gave up, holds
                // the key under a token this owner never learnt: it is refused too, where a
                // hash kind's owner would re-enter its own field.
                let own_ghost = K::JAVA == Java::None
                    && (self.parties[owner].ghost).is_some_and(|g| !g.over_by(before));
                let free = self.free_for(Some(owner), before)
                    && self.parties[owner].holds.is_empty()
                    && !own_ghost;
                // Whether a failed call must leave nothing: it is the owner's first hold,
                // nothing of its earlier calls may be left, the fault aimed at it, and
                // nothing else may have left a token behind.
                let party = &self.parties[owner];
                let fresh = party.holds.is_empty()
                    && party.ghost.is_none_or(|g| g.over_by(before))
                    && (K::JAVA != Java::None
                        || self.parties.iter().all(|p| p.bound().over_by(before)));
                let reply = self.faults.aimed(client_of(owner), Call::Acquire);
                let watch = fresh && self.quiet(owner) && reply.is_some();
                let taken = self.h.owners[owner].run(move |mine| take(mine, lease, None));
                let failed = match &taken.1 {
                    Err(err) if watch => Some((taken.0, taken.2, err.to_string())),
                    _ => None,
                };
                self.taken(owner, lease, taken, free, None)?;
                match failed {
                    Some((sent, returned, err)) => {
                        self.settled(owner, reply, (sent, returned), &err)
                    }
                    None => Ok(()),
                }
            }
            Op::Wait { owner, lease, wait } => {
                let party = &self.parties[owner];
                if party.waiting.is_some() || !party.holds.is_empty() {
                    return Ok(());
                }
                let wait = Duration::from_millis(wait);
                let started = Instant::now();
                let result = self.h.owners[owner].start(move |mine| take(mine, lease, Some(wait)));
                let mut waiting = Waiting {
                    result,
                    started,
                    wait,
                    lease,
                    queued: None,
                    forced: None,
                    free_since: None,
                    stalled: false,
                };
                if let Some(at) = self.faults.stalled[client_of(owner)] {
                    waiting.stalled = true;
                    waiting.forced = Some(at);
                    let party = &mut self.parties[owner];
                    party.stalled_lease = party.stalled_lease.max(Some(lease.script()));
                }
                if K::JAVA == Java::Fair {
                    // Until it is seen in the queue and listening on its channel, or its
                    // call ended.
                    let field = self.h.fields[owner].clone();
                    let queue = self.queue();
                    let channel = format!("redisson_lock__channel:{{{}}}:{field}", self.name);
                    let deadline = Instant::now() + Duration::from_secs(10);
                    while Instant::now() < deadline {
                        let (seen, (_, listening)): (Option<i64>, (String, u64)) = redis::pipe()
                            .cmd("LPOS")
                            .arg(&queue)
                            .arg(&field)
                            .cmd("PUBSUB")
                            .arg("NUMSUB")
                            .arg(&channel)
                            .query(&mut self.h.conn)
                            .unwrap();
                        if seen.is_some() && listening > 0 {
                            self.ranks += 1;
                            waiting.queued = Some((Instant::now(), self.ranks));
                            break;
                        }
                        match waiting.result.try_recv() {
                            Ok(taken) => {
                                self.parties[owner].waiting = None;
                                return self.taken(owner, lease, taken, false, None);
                            }
                            Err(mpsc::TryRecvError::Empty) => {}
                            Err(err) => return Err(format!("owner {owner}'s thread: {err}")),
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                self.parties[owner].waiting = Some(waiting);
                Ok(())
            }
            Op::Join { owner } => self.join(owner),
            Op::Release { owner, which } => {
                let party = &self.parties[owner];
                if party.waiting.is_some() || party.holds.is_empty() {
                    return Ok(());
                }
                let which = which % party.holds.len();
                let (view, started, result, ended) = self.h.owners[owner].run(move |mine| {
                    let guard = mine.guards.remove(which);
                    let view = View::of(&guard);
                    let started = Instant::now();
                    let result = guard.unlock();
                    (view, started, result, Instant::now())
                });
                let hold = self.parties[owner].holds.remove(which);
                if !hold.revoked {
                    let who = format!("owner {owner}");
                    self.history
                        .record(&who, hold.taken, started, view.valid_until);
                }
                let released = result.is_ok();
                match result {
                    Ok(()) => {}
                    // The script ran at some time during the call, which a busy machine
                    // can hold back past the guard's validity: only a guard still valid
                    // when the reply came says the hold was gone while held.
                    Err(err) if err.is_lost() || err.is_not_held() => {
                        if !hold.revoked && view.live(ended + SLACK) {
                            return Err(format!(
                                "owner {owner}'s release found no hold, while its guard said \
                                 {:?} valid for {:?} more after the reply: {err}",
                                view.health,
                                view.valid_until - ended
                            ));
                        }
                    }
                    // A reply that did not come in time (a busy machine): the hold stays
                    // until its lease ends.
                    Err(err) if err.is_connection() => {
                        let stalled = self.stalled(owner);
                        let party = &mut self.parties[owner];
                        let ghost = party.ghost.unwrap_or(Bound::Gone);
                        party.ghost = Some(ghost.extend(Instant::now() + hold.lease.script()));
                        if stalled {
                            party.stalled_lease =
                                party.stalled_lease.max(Some(hold.lease.script()));
                        }
                    }
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
            Op::Force => {
                // A stalled client's call would reach Redis when the stall ends, at a time
                // the model does not know: the operator waits.
                if self.stalled(0) {
                    return Ok(());
                }
                let lock = K::make(self.h.clients.of(0), &self.name);
                let at = Instant::now();
                // A reply that did not come in time: it may or may not have deleted the
                // lock, so the holds count no more, and may still be there.
                let (deleted, known) = match lock.force_unlock() {
                    Ok(deleted) => (deleted, true),
                    Err(err) if err.is_connection() => (false, false),
                    Err(err) => return Err(format!("force_unlock: {err}")),
                };
                self.messaged = deleted;
                self.revoke_all(at, known);
                Ok(())
            }
            Op::Delete => {
                let at = Instant::now();
                let _: i64 = redis::cmd("DEL")
                    .arg(&self.name)
                    .query(&mut self.h.conn)
                    .unwrap();
                self.revoke_all(at, true);
                Ok(())
            }
            Op::Restart => {
                let at = Instant::now();
                self.h.server.restart();
                self.h.conn = self.h.server.conn();
                self.revoke_all(at, true);
                // The fencing counter is gone too: tokens start again. A call that began
                // before the restart was over may have drawn from the old counter.
                self.tokens.clear();
                self.restarted = Some(Instant::now());
                self.java = JavaParty::default();
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
                call,
                reply,
            } => {
                let armed = self
                    .faults
                    .arm(&self.h.clients, K::NAME, client, call, reply);
                if !armed {
                    self.log.push("  (no such call)".into());
                }
                Ok(())
            }
            Op::Stall { client } => {
                if !self.faults.stall(&self.h.clients, client) {
                    return Ok(());
                }
                let at = Instant::now();
                for owner in (0..OWNERS).filter(|&o| client_of(o) == client) {
                    let party = &mut self.parties[owner];
                    if let Some(waiting) = &mut party.waiting {
                        waiting.stalled = true;
                        waiting.forced.get_or_insert(at);
                        let lease = waiting.lease.script();
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
            Op::JavaTake { lease, wait } => self.java_take(lease, wait),
            Op::JavaRelease => self.java_release(),
            Op::JavaLeave => self.java_leave(),
            Op::Crash { wait } => self.crash(wait),
        }
    }

    /// After `client`'s stall ended: what its calls on their way take lasts until their
    /// lease after now. In a fair queue, a place they take lasts as long as the client's
    /// queue wait (a give-up sent meanwhile may reach Redis first), past any case.
    fn thawed(&mut self, client: usize) {
        let now = super::landed(&mut self.h.conn);
        let fair = K::JAVA == Java::Fair;
        for owner in (0..OWNERS).filter(|&o| client_of(o) == client) {
            let party = &mut self.parties[owner];
            if let Some(lease) = party.stalled_lease.take() {
                let lease = if fair {
                    Duration::from_secs(180)
                } else {
                    lease
                };
                party.ghost = Some(party.ghost.unwrap_or(Bound::Gone).extend(now + lease));
            }
        }
    }

    /// Records an acquisition's outcome; `free`: nobody else could hold the lock.
    fn taken(
        &mut self,
        owner: usize,
        lease: Lease,
        (sent, result, returned): Taken,
        free: bool,
        rank: Option<u64>,
    ) -> Result<(), String> {
        let had = !self.parties[owner].holds.is_empty();
        match result {
            Ok(Some(view)) => {
                self.log.push(format!("  owner {owner} took it"));
                let from = match lease {
                    // The successful attempt was sent when its validity began.
                    Lease::Ms(ms) if rank.is_some() => {
                        let lease = Duration::from_millis(ms);
                        view.valid_until - (lease - lease / 100 - Duration::from_millis(2))
                    }
                    _ => sent,
                };
                let from = from.max(sent);
                if let Some(token) = view.token {
                    self.fence(format!("owner {owner}"), token, from, returned)?;
                }
                if let Some(value) = &view.value {
                    self.values.push(value.clone());
                }
                if !had {
                    self.acquisitions.push(Acquisition {
                        who: format!("owner {owner}"),
                        from,
                        to: returned,
                        rank,
                    });
                }
                let party = &mut self.parties[owner];
                party.holds.push(HoldModel {
                    sent,
                    taken: returned,
                    lease,
                    revoked: false,
                });
                party.rebound(returned);
                Ok(())
            }
            Ok(None) if free => Err(format!(
                "owner {owner} was refused a lock nobody could hold any more"
            )),
            Ok(None) => {
                self.log.push(format!("  owner {owner}: busy"));
                Ok(())
            }
            Err(err) if err.is_reentry() => match !K::REENTRANT && had {
                // Refused before anything was sent: nothing changes.
                true => Ok(()),
                false => Err(format!("owner {owner} was refused a re-entry: {err}")),
            },
            Err(err) => {
                self.log.push(format!("  owner {owner}: {err}"));
                let stalled = self.stalled(owner);
                let party = &mut self.parties[owner];
                let script_lease = party.script_lease(lease);
                if stalled {
                    party.stalled_lease = party.stalled_lease.max(Some(script_lease));
                }
                if err.is_lost() && had {
                    // The re-entry found the earlier holds gone: every guard of the holding
                    // is stale now.
                    for hold in &mut party.holds {
                        hold.revoked = true;
                    }
                } else if !(err.is_validity_exhausted() || err.is_connection()) {
                    return Err(format!("owner {owner}'s acquisition failed: {err}"));
                }
                let ghost = party.ghost.unwrap_or(Bound::Gone);
                party.ghost = Some(ghost.extend(Instant::now() + script_lease));
                Ok(())
            }
        }
    }

    fn join(&mut self, owner: usize) -> Result<(), String> {
        let Some(waiting) = self.parties[owner].waiting.take() else {
            return Ok(());
        };
        let taken = waiting
            .result
            .recv_timeout(waiting.wait + Duration::from_secs(20))
            .map_err(|err| format!("owner {owner}'s wait did not end: {err}"))?;
        // Its call may have held the lock at any time: keep its bound until now. A fair
        // waiter whose client is still stalled keeps its place in the queue until its
        // give-up gets through, after the thaw: past any case, as after a thaw.
        let ghost = self.parties[owner].ghost.unwrap_or(Bound::Gone);
        let queued = K::JAVA == Java::Fair && self.stalled(owner);
        self.parties[owner].ghost = Some(match queued {
            true => Bound::Forever,
            false => ghost.extend(Instant::now()),
        });
        let rank = waiting.queued.map(|(_, rank)| rank);
        // When its successful attempt was sent (its validity began then), or its wait
        // ended.
        let ended = match &taken.1 {
            Ok(Some(view)) => match waiting.lease {
                Lease::Ms(ms) => {
                    let lease = Duration::from_millis(ms);
                    view.valid_until - (lease - lease / 100 - Duration::from_millis(2))
                }
                Lease::Watched => waiting.started,
            },
            Ok(None) => waiting.started + waiting.wait,
            Err(_) => waiting.started,
        };
        // A lone waiter of the sleepy owner at the head of the queue of a free lock must be
        // woken: it may not take the lock only at its deadline, or not at all.
        if let (SLEEPY, Some(since), false) = (owner, waiting.free_since, waiting.stalled) {
            let deadline = waiting.started + waiting.wait;
            let attempt = match (&taken.1, waiting.lease) {
                (Ok(None), _) => Some(deadline),
                (Ok(Some(_)), Lease::Ms(_)) => Some(ended),
                _ => None,
            };
            if let Some(attempt) = attempt.filter(|at| since + GRACE < *at) {
                return Err(format!(
                    "owner {owner} was not woken: the lock was free, with nobody else waiting, \
                     for {:?} before its {}",
                    attempt - since,
                    if taken.1.as_ref().is_ok_and(Option::is_none) {
                        "wait ended in vain"
                    } else {
                        "attempt that took it"
                    }
                ));
            }
        }
        self.taken(owner, waiting.lease, taken, false, rank)?;
        if let (Some(_), Some(hold)) = (waiting.forced, self.parties[owner].holds.last_mut()) {
            hold.revoked = true;
        }
        // The fair order: nobody queued after it, or not queued, took the lock while it
        // surely waited in the queue.
        if let Some((seen, rank)) = waiting.queued {
            let me = format!("owner {owner}");
            for acq in &self.acquisitions {
                let later = acq.rank.is_none_or(|r| r > rank);
                // From a forced unlock or a restart on, it may have lost its place (its
                // grant deleted, the queue wiped): only holds taken surely before count.
                let placed = waiting.forced.is_none_or(|forced| acq.to < forced);
                if acq.who != me && later && placed && acq.from >= seen && acq.to + SLACK < ended {
                    return Err(format!(
                        "{} took the fair lock while {me}, queued before, still waited ({:?} \
                         before its wait ended)",
                        acq.who,
                        ended - acq.to
                    ));
                }
            }
        }
        Ok(())
    }

    /// A token drawn between `from` and `to`: distinct from every other, and above every
    /// token drawn surely before it (below every one drawn surely after).
    fn fence(&mut self, who: String, token: u64, from: Instant, to: Instant) -> Result<(), String> {
        // Drawn from a counter a restart may have wiped since: in no order with the rest.
        if self.restarted.is_some_and(|at| from < at) {
            return Ok(());
        }
        for other in &self.tokens {
            let wrong = other.token == token
                || (other.to < from && other.token > token)
                || (to < other.from && other.token < token);
            if wrong {
                return Err(format!(
                    "{who} got token {token}, out of order with {}'s {}",
                    other.who, other.token
                ));
            }
        }
        self.tokens.push(Fence {
            who,
            token,
            from,
            to,
        });
        Ok(())
    }

    fn java_take(&mut self, lease: u64, wait: u64) -> Result<(), String> {
        self.java.wait = wait;
        let name = self.name.clone();
        let (queue, timeouts) = (self.queue(), self.timeouts());
        let conn = &mut self.h.conn;
        let sent = Instant::now();
        let got: Option<i64> = match K::JAVA {
            Java::None => return Ok(()),
            Java::Lock => redisson::eval(
                conn,
                redisson::LOCK_ACQUIRE,
                &[&name],
                &[arg(lease), arg(JAVA)],
            ),
            Java::Fenced => {
                let counter = format!("redisson_lock_token:{{{name}}}");
                let (ttl, token): (i64, i64) = redisson::eval(
                    conn,
                    redisson::FENCED_ACQUIRE,
                    &[&name, &counter],
                    &[arg(lease), arg(JAVA)],
                );
                if ttl == -1 {
                    self.fence("Java".into(), token as u64, sent, Instant::now())?;
                    None
                } else {
                    Some(ttl)
                }
            }
            Java::Fair => redisson::eval(
                conn,
                &redisson::fair_acquire(),
                &[&name, &queue, &timeouts],
                &[arg(lease), arg(JAVA), arg(wait), arg(epoch_ms())],
            ),
        };
        let returned = Instant::now();
        match got {
            None => {
                self.log.push("  Java took it".into());
                if self.java.bound.is_none_or(|b| b.over_by(sent)) {
                    // Whatever Java held has run out: this is a first hold.
                    self.java.count = 0;
                }
                if self.java.count == 0 {
                    self.acquisitions.push(Acquisition {
                        who: "Java".into(),
                        from: sent,
                        to: returned,
                        rank: self.java.queued,
                    });
                }
                self.java.queued = None;
                self.java.count += 1;
                self.java.sure_until = Some(sent + Duration::from_millis(lease));
                let bound = self.java.bound.unwrap_or(Bound::Gone);
                self.java.bound = Some(bound.extend(returned + Duration::from_millis(lease)));
            }
            Some(_) => {
                self.log.push("  Java: busy".into());
                if K::JAVA == Java::Fair && self.java.queued.is_none() {
                    self.ranks += 1;
                    self.java.queued = Some(self.ranks);
                }
            }
        }
        Ok(())
    }

    fn java_release(&mut self) -> Result<(), String> {
        if self.java.count == 0 {
            return Ok(());
        }
        let name = self.name.clone();
        let channel = format!("redisson_lock__channel:{{{name}}}");
        // Redisson's unlock sets what remains to the lease of its lock call; 30 ms here.
        let lease = 30u64;
        let sent = Instant::now();
        let released: Option<i64> = if K::JAVA == Java::Fair {
            let (queue, timeouts) = (self.queue(), self.timeouts());
            redisson::eval(
                &mut self.h.conn,
                &redisson::fair_unlock(),
                &[&name, &queue, &timeouts, &channel],
                &[arg(0), arg(lease), arg(JAVA), arg(epoch_ms())],
            )
        } else {
            redisson::eval(
                &mut self.h.conn,
                redisson::LOCK_UNLOCK,
                &[&name, &channel],
                &[arg(0), arg(lease), arg(JAVA)],
            )
        };
        self.log.push(format!("  Java released: {released:?}"));
        match released {
            Some(0) => {
                self.java.count -= 1;
                self.java.sure_until = Some(sent + Duration::from_millis(lease));
                let bound = self.java.bound.unwrap_or(Bound::Gone);
                self.java.bound = Some(bound.extend(Instant::now() + Duration::from_millis(lease)));
            }
            _ => {
                self.messaged = released == Some(1);
                self.java.count = 0;
                self.java.sure_until = None;
                self.java.bound = None;
            }
        }
        Ok(())
    }

    fn java_leave(&mut self) -> Result<(), String> {
        if K::JAVA != Java::Fair || self.java.queued.is_none() {
            return Ok(());
        }
        let (queue, timeouts) = (self.queue(), self.timeouts());
        let _: i64 = redisson::eval(
            &mut self.h.conn,
            redisson::FAIR_GIVE_UP,
            &[&queue, &timeouts],
            &[arg(JAVA), arg(self.java.wait)],
        );
        self.java.queued = None;
        Ok(())
    }

    /// One attempt of the crashed waiter, through our acquire script as its client sends
    /// it: its lease and its place in the queue are both `wait`.
    fn crash(&mut self, wait: u64) -> Result<(), String> {
        if K::JAVA != Java::Fair {
            return Ok(());
        }
        let keys = [
            self.name.clone(),
            self.queue(),
            self.timeouts(),
            self.ours(),
        ];
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let reply: redis::Value = redisson::eval(
            &mut self.h.conn,
            include_str!("../../../src/kinds/fair/fair_acquire.lua"),
            &keys,
            &[
                arg(wait),
                arg(CRASHED),
                arg(0),
                arg(wait),
                arg(300_000),
                arg(format!("redisson_lock__channel:{{{}}}", self.name)),
            ],
        );
        self.log.push(format!("  the crashed waiter: {reply:?}"));
        self.crashed = self
            .crashed
            .extend(Instant::now() + Duration::from_millis(wait));
        Ok(())
    }

    /// The invariants after a step.
    fn check(&mut self) -> Result<(), String> {
        let now = Instant::now();
        for i in 0..OWNERS {
            let free = self.free_for(Some(i), now);
            if let Some(waiting) = &mut self.parties[i].waiting {
                // Freed by a message (a release, a forced unlock), not by a lease running
                // out: a waiter may sleep on after that, up to its backoff.
                waiting.free_since = match (free, waiting.free_since) {
                    (true, Some(since)) => Some(since),
                    (true, None) if self.messaged => Some(now),
                    _ => None,
                };
            }
        }
        let mut views = Vec::new();
        for (i, party) in self.parties.iter().enumerate() {
            if party.waiting.is_some() {
                continue;
            }
            let guards =
                self.h.owners[i].run(|mine| mine.guards.iter().map(View::of).collect::<Vec<_>>());
            for (hold, view) in party.holds.iter().zip(guards) {
                if !hold.revoked {
                    views.push((i, view, hold.clone()));
                }
            }
        }
        let (ttl, read) = pttl(&mut self.h.conn, &self.name);
        let now = Instant::now();
        self.told(&views, now)?;
        // The windows so far, with those still open as their guards say now: none of two
        // owners overlap.
        let history = History::default();
        for window in self.history.windows() {
            history.add(window);
        }
        for (i, view, hold) in &views {
            if view.health == Health::Held && !view.lost {
                history.record(&format!("owner {i}"), hold.taken, now, view.valid_until);
            }
        }
        if let Some((a, b)) = history.overlap() {
            return Err(format!(
                "two exclusive windows overlap: {} until {} ns after the start of {}'s",
                a.holder,
                a.to - b.from,
                b.holder
            ));
        }
        let views: Vec<(usize, View)> = views.into_iter().map(|(i, v, _)| (i, v)).collect();
        let live: Vec<&(usize, View)> = views.iter().filter(|(_, v)| v.live(now)).collect();
        let mut holders: Vec<String> = live.iter().map(|(i, _)| format!("owner {i}")).collect();
        if self.java.count > 0 && self.java.sure_until.is_some_and(|t| t > now + SLACK) {
            holders.push("Java".into());
        }
        holders.dedup();
        holders.sort();
        holders.dedup();
        if holders.len() > 1 {
            return Err(format!("two holders at once: {holders:?}"));
        }
        for (i, view) in &live {
            match expiry(ttl, read) {
                Some(expires) if view.valid_until <= expires => {}
                _ => {
                    return Err(format!(
                        "owner {i}'s guard is valid for {:?} more, but the key's PTTL is {ttl} ms",
                        view.valid_until.saturating_duration_since(read)
                    ));
                }
            }
            if let Some(value) = &view.value {
                let stored: Option<String> = redis::cmd("GET")
                    .arg(&self.name)
                    .query(&mut self.h.conn)
                    .unwrap();
                // The key may have expired since the views were read: only a live one
                // after the read counts.
                if stored.as_ref() != Some(value) && view.live(Instant::now()) {
                    return Err(format!(
                        "owner {i}'s token {value} is not the key's {stored:?}"
                    ));
                }
            }
        }
        // In Redisson's hash, each owner's field counts at least its live guards.
        if K::JAVA != Java::None {
            for owner in 0..OWNERS {
                let guards: Vec<&View> = (live.iter())
                    .filter(|(i, _)| *i == owner)
                    .map(|(_, view)| view)
                    .collect();
                if guards.is_empty() {
                    continue;
                }
                let count: Option<u64> = redis::cmd("HGET")
                    .arg(&self.name)
                    .arg(&self.h.fields[owner])
                    .query(&mut self.h.conn)
                    .unwrap();
                let still = guards.iter().filter(|v| v.live(Instant::now())).count() as u64;
                if count.unwrap_or(0) < still {
                    return Err(format!(
                        "owner {owner} has {still} live guards, but its field counts {count:?}"
                    ));
                }
            }
        }
        Ok(())
    }

    /// A watched hold whose validity ended before another party's acquisition (that holds
    /// now) was sent is surely gone: its guard must say it is lost, not only uncertain, by
    /// then, whatever its renewal waits on. `views` were read before `now`.
    fn told(&self, views: &[(usize, View, HoldModel)], now: Instant) -> Result<(), String> {
        // Whoever holds now: a guard asked past its validity says it is lost.
        let stale =
            (views.iter()).find(|(_, view, _)| !view.lost && view.valid_until + SLACK < view.read);
        if let Some((i, view, hold)) = stale {
            return Err(format!(
                "owner {i}'s hold ({:?}) ran out {:?} before its guard was asked, which does \
                 not say it is lost ({:?})",
                hold.lease,
                view.read - view.valid_until,
                view.health
            ));
        }
        let java = (self.java.count > 0 && self.java.sure_until.is_some_and(|t| t > now + SLACK))
            .then(|| self.acquisitions.iter().rev().find(|a| a.who == "Java"))
            .flatten()
            .map(|a| ("Java".to_owned(), a.from));
        let successors = (views.iter())
            .filter(|(_, view, _)| view.live(now))
            .map(|(i, _, hold)| (format!("owner {i}"), hold.sent))
            .chain(java);
        for (who, sent) in successors {
            let unaware = views.iter().find(|(i, view, hold)| {
                format!("owner {i}") != who
                    && matches!(hold.lease, Lease::Watched)
                    && !view.lost
                    && view.valid_until + SLACK < sent
            });
            if let Some((i, view, _)) = unaware {
                return Err(format!(
                    "owner {i}'s watched hold ran out {:?} before {who}'s acquisition, which \
                     holds now, was sent, and its guard still does not say it is lost ({:?})",
                    sent - view.valid_until,
                    view.health
                ));
            }
        }
        Ok(())
    }

    /// Ends the case: waits for the waiters, releases everything, then nothing may be
    /// left but latches and counters.
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
        while self.java.count > 0 {
            self.java_release()?;
        }
        self.java_leave()?;
        for owner in 0..OWNERS {
            self.join(owner)?;
            while !self.parties[owner].holds.is_empty() {
                self.step(&Op::Release { owner, which: 0 })?;
            }
        }
        if let Some((a, b)) = self.history.overlap() {
            return Err(format!(
                "two exclusive windows overlap: {} until {} ns after the start of {}'s",
                a.holder,
                a.to - b.from,
                b.holder
            ));
        }
        // What a failed call left expires within its lease, and the crashed waiter's place
        // within its wait.
        let ghosts = (self.parties.iter().map(Party::bound))
            .chain([self.crashed])
            .max()
            .unwrap_or(Bound::Gone);
        if !super::await_bound(ghosts) {
            return Ok(());
        }
        if self.crashed != Bound::Gone {
            // Its place in the queue goes when someone comes: a lock nobody can hold any more.
            self.step(&Op::Take {
                owner: 0,
                lease: Lease::Ms(50),
            })?;
            while !self.parties[0].holds.is_empty() {
                self.step(&Op::Release { owner: 0, which: 0 })?;
            }
        }
        let left = lasting_leftovers(&mut self.h.conn, &self.name);
        if !left.is_empty() {
            let left = super::described(&mut self.h.conn, &left);
            return Err(format!("left in Redis after every release: {left:?}"));
        }
        Ok(())
    }
}

impl<K: Subject> crate::model::Model for Harness<K> {
    const NAME: &'static str = K::NAME;
    type Case = Vec<Op>;
    fn new() -> Self {
        Harness::new()
    }
    fn cases() -> BoxedStrategy<Vec<Op>> {
        ops(K::JAVA != Java::None).boxed()
    }
    fn run_case(&mut self, ops: &Vec<Op>) -> Result<(), String> {
        self.run(ops)
    }
    fn summary(&self) -> Option<String> {
        let grants = self.grants_taken();
        (grants > 0).then(|| format!("{grants} holds taken on a grant alone"))
    }
}
