//! Leader election against its model: three owners on two clients campaign, resign and
//! drop their leaderships while an operator forces resignations, deletes the key and
//! restarts Redis. The model knows each leadership by its epoch and by the token the key
//! held with it, and how long that key may still be in Redis; how long a failed campaign
//! may have left a leader nobody holds (a phantom); and what an observer on each client
//! has told. Steps run one after the other (a campaign waits a short while at most);
//! leases run out while time passes and while a client stalls.
//!
//! After every step: never two valid leaderships at once, and a valid one is the key's
//! until its validity ends; epochs grow between restarts; a leadership whose key is gone
//! (resigned, ended from outside, seen gone) never comes back, nor is renewed past a lease
//! after it was ended; a leader nobody holds is a phantom that may still be about, and one
//! a fault is known to have left is gone within the give-back's bound; `leader()` names
//! the leadership that is surely valid; observers tell every election, in order.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use redmutex::{Election, LeaderChange, Leadership, Observer};

use super::{
    Bound, Call, Clients, Faults, OWNERS, Reply, SLACK, WATCHDOG_LEASE, client_of, expiry,
    fresh_name, lasting_leftovers, ran_first, settle_time, settles,
};
use crate::support::Server;
use crate::support::history::History;

/// One step of a sequence.
#[derive(Clone, Debug)]
pub enum Op {
    /// `try_campaign()`, or `try_campaign_for(wait)` with a wait in milliseconds.
    Campaign {
        owner: usize,
        wait: Option<u64>,
    },
    /// `resign()` of one of the owner's leaderships, by position.
    Resign {
        owner: usize,
        which: usize,
    },
    /// Drops one of the owner's leaderships: it resigns, and nobody hears how that went.
    Drop {
        owner: usize,
        which: usize,
    },
    /// `force_resign()` through client `client` (0: the shared one, 1: owner 2's).
    Force {
        client: usize,
    },
    /// `force_resign_held_by` through client `client`, naming a leader that does not lead:
    /// one of those known, by position, or one that never was.
    ForceStale {
        client: usize,
        which: usize,
    },
    /// `leader()` through client `client`.
    Leader {
        client: usize,
    },
    /// The observer on client `client` tells what it has: `recv_timeout(0)` until `None`.
    Observe {
        client: usize,
    },
    /// Time passes: leases run out.
    Pass {
        ms: u64,
    },
    /// The reply to client `client`'s next `call` is lost or late: it may or may not have
    /// run. A resignation and a forced one send the same script.
    Fault {
        client: usize,
        call: Call,
        reply: Reply,
    },
    /// Every reply to client `client` comes `ms` late from now on, below its response
    /// timeout (0: on time again), as on a congested network: what a call reads has
    /// changed longer ago when it acts on it.
    Slow {
        client: usize,
        ms: u64,
    },
    /// Every connection of client `client` stalls until `Thaw`, as if its process were
    /// stopped: its leaders' renewals pause, and their leases run out.
    Stall {
        client: usize,
    },
    Thaw {
        client: usize,
    },
    /// Redis restarts without persistence: every key is gone, and epochs start again.
    Restart,
    /// An operator deletes the election's key with a plain DEL.
    Delete,
}

/// Sequences of steps.
pub fn ops() -> impl Strategy<Value = Vec<Op>> {
    let owner = || 0..OWNERS;
    let wait = prop_oneof![Just(None), (20u64..300).prop_map(Some)];
    let op = prop_oneof![
        6 => (owner(), wait).prop_map(|(owner, wait)| Op::Campaign { owner, wait }),
        4 => (owner(), 0..3usize).prop_map(|(owner, which)| Op::Resign { owner, which }),
        2 => (owner(), 0..3usize).prop_map(|(owner, which)| Op::Drop { owner, which }),
        1 => (0..2usize).prop_map(|client| Op::Force { client }),
        1 => (0..2usize, 0..4usize).prop_map(|(client, which)| Op::ForceStale { client, which }),
        3 => (0..2usize).prop_map(|client| Op::Leader { client }),
        2 => (0..2usize).prop_map(|client| Op::Observe { client }),
        3 => (1u64..60).prop_map(|ms| Op::Pass { ms }),
        // Long enough for a lease to run out.
        1 => (200u64..400).prop_map(|ms| Op::Pass { ms }),
        3 => (0..2usize, super::call(), super::reply())
            .prop_map(|(client, call, reply)| Op::Fault { client, call, reply }),
        1 => (0..2usize, prop_oneof![Just(0u64), 10u64..60])
            .prop_map(|(client, ms)| Op::Slow { client, ms }),
        1 => (0..2usize).prop_map(|client| Op::Stall { client }),
        1 => (0..2usize).prop_map(|client| Op::Thaw { client }),
        1 => Just(Op::Restart),
        1 => Just(Op::Delete),
    ];
    proptest::collection::vec(op, 1..30)
}

/// A token no leader ever had.
const NEVER: &str = "00000000000000000000000000000000";

/// Every leadership a campaign of the case returned.
struct Known {
    owner: usize,
    epoch: u64,
    /// The token the key held with the leadership's epoch right after the campaign.
    token: Option<String>,
    /// How many restarts came before it.
    generation: u32,
    /// When its campaign was sent and when it returned (its window's start).
    sent: Instant,
    taken: Instant,
    /// Until when its key may still be in Redis.
    bound: Bound,
    /// Why its key is gone for good, when it is: it may never come back.
    gone: Option<&'static str>,
    /// Deleted from outside (a forced resignation, a DEL, a restart), or maybe deleted: its
    /// guard may say it is valid until a renewal finds out, and no invariant of validity
    /// counts it.
    revoked: bool,
    /// When it was surely deleted from outside: no renewal sent after that gets through.
    revoked_at: Option<Instant>,
    /// Its guard said it was lost.
    lost: bool,
}

impl Known {
    fn named(&self) -> String {
        format!("owner {}'s leadership of epoch {}", self.owner, self.epoch)
    }

    fn forget(&mut self, why: &'static str) {
        self.gone.get_or_insert(why);
        self.bound = Bound::Gone;
    }
}

/// What a leadership says.
#[derive(Clone, Debug)]
struct View {
    read: Instant,
    lost: bool,
    valid_until: Instant,
    epoch: u64,
}

impl View {
    fn of(leadership: &Leadership) -> View {
        View {
            read: Instant::now(),
            lost: leadership.is_lost(),
            valid_until: leadership.valid_until(),
            epoch: leadership.epoch(),
        }
    }

    /// Valid, as the leadership says: not lost, and valid until after `at`.
    fn valid(&self, at: Instant) -> bool {
        !self.lost && self.valid_until > at
    }
}

/// An observer and what it told.
struct Watcher {
    observer: Observer,
    /// When its first change came: every leader elected after that is to be told.
    since: Option<Instant>,
    last: Option<u64>,
    told: HashSet<u64>,
}

impl Watcher {
    fn new(election: &Election) -> Watcher {
        Watcher {
            observer: election.observe(),
            since: None,
            last: None,
            told: HashSet::new(),
        }
    }
}

/// Runs sequences on one server; `Err` names the broken invariant.
pub struct Harness {
    /// Kept running for the clients below; restarted by `Restart`.
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

    pub fn run(&mut self, ops: &[Op]) -> Result<(), String> {
        let name = fresh_name("election");
        let elections = (0..OWNERS)
            .map(|owner| self.clients.of(owner).election(&name))
            .collect();
        let admins = [
            self.clients.shared.election(&name),
            self.clients.own.election(&name),
        ];
        let observers = [Watcher::new(&admins[0]), Watcher::new(&admins[1])];
        let mut case = Case {
            h: self,
            name,
            elections,
            admins,
            observers,
            held: (0..OWNERS).map(|_| Vec::new()).collect(),
            known: Vec::new(),
            ghost: Bound::Gone,
            generation: 0,
            floor: 0,
            history: History::default(),
            faults: Faults::default(),
            stalled_campaign: [false; 2],
            log: Vec::new(),
        };
        let result = case.play(ops);
        let ended = match result {
            Ok(()) => case.end(),
            Err(_) => {
                case.abandon();
                Ok(())
            }
        };
        if std::env::var("MODEL_LOG").is_ok() {
            eprintln!("{}", case.log.join("\n"));
        }
        result
            .and(ended)
            .map_err(|err| format!("{err}\nsteps:\n{}", case.log.join("\n")))
    }
}

struct Case<'h> {
    h: &'h mut Harness,
    name: String,
    /// Each owner's handle.
    elections: Vec<Election>,
    /// Each client's handle for the operator's calls and reads.
    admins: [Election; 2],
    observers: [Watcher; 2],
    /// Each owner's leaderships, with their place in `known`.
    held: Vec<Vec<(Leadership, usize)>>,
    known: Vec<Known>,
    /// Until when a failed campaign may have left a leader nobody holds.
    ghost: Bound,
    /// Restarts so far.
    generation: u32,
    /// The highest epoch seen since the last restart: every later campaign's is above it.
    floor: u64,
    /// The windows of the leaderships that ended.
    history: History,
    faults: Faults,
    /// A campaign of the client was sent while it stalled: it reaches Redis when the
    /// stall ends.
    stalled_campaign: [bool; 2],
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

    fn stalled(&self, client: usize) -> bool {
        self.faults.stalled[client].is_some()
    }

    /// What every leadership held says now, with its place in `known`.
    fn views(&self) -> Vec<(usize, View)> {
        (self.held.iter().flatten())
            .map(|(leadership, id)| (*id, View::of(leadership)))
            .collect()
    }

    /// Whether nobody can lead at `at`: no key of a leadership, nor a phantom, may be left.
    fn free(&self, at: Instant) -> bool {
        self.ghost.over_by(at) && self.known.iter().all(|k| k.bound.over_by(at))
    }

    /// The leaderships surely valid from the views' reading until `after`.
    fn surely_valid<'v>(
        &self,
        views: &'v [(usize, View)],
        after: Instant,
    ) -> Vec<&'v (usize, View)> {
        (views.iter())
            .filter(|(id, view)| !self.known[*id].revoked && view.valid(after + SLACK))
            .collect()
    }

    /// The leadership `id` ended at `at` (a resignation, a drop): its window closes.
    fn ended(&mut self, id: usize, at: Instant, view: &View) {
        let known = &self.known[id];
        if !known.revoked {
            let who = format!("owner {} (epoch {})", known.owner, known.epoch);
            self.history.record(&who, known.taken, at, view.valid_until);
        }
    }

    /// Every leadership may be ended from outside from `at` on: their windows close there
    /// and they count no more. With `done`, the key was surely gone by then, and with it
    /// whatever it held.
    fn revoke_all(&mut self, at: Instant, done: Option<Instant>, why: &'static str) {
        for (id, view) in self.views() {
            if !self.known[id].revoked {
                self.ended(id, at, &view);
                self.known[id].revoked = true;
            }
            if let Some(done) = done {
                self.known[id].revoked_at.get_or_insert(done);
            }
        }
        if done.is_some() {
            for k in &mut self.known {
                k.forget(why);
            }
            self.ghost = Bound::Gone;
        }
    }

    fn step(&mut self, op: &Op) -> Result<(), String> {
        match *op {
            Op::Campaign { owner, wait } => self.campaign(owner, wait),
            Op::Resign { owner, which } => self.resign(owner, which),
            Op::Drop { owner, which } => {
                if self.held[owner].is_empty() {
                    return Ok(());
                }
                let which = which % self.held[owner].len();
                let (leadership, id) = self.held[owner].remove(which);
                let view = View::of(&leadership);
                let started = Instant::now();
                drop(leadership);
                let returned = Instant::now();
                self.ended(id, started, &view);
                // It resigned, or gave up once its validity had ended (or sent nothing).
                let known = &mut self.known[id];
                known.bound = Bound::Gone.extend(returned.max(view.valid_until) + WATCHDOG_LEASE);
                Ok(())
            }
            Op::Force { client } => self.force(client),
            Op::ForceStale { client, which } => self.force_stale(client, which),
            Op::Leader { client } => self.leader(client),
            Op::Observe { client } => self.observe(client),
            Op::Pass { ms } => {
                std::thread::sleep(Duration::from_millis(ms));
                Ok(())
            }
            Op::Fault {
                client,
                call,
                reply,
            } => {
                if !(self.faults).arm(&self.h.clients, "election", client, call, reply) {
                    self.log.push("  (no such call)".into());
                }
                Ok(())
            }
            Op::Slow { client, ms } => {
                let delay = Duration::from_millis(ms);
                self.h.clients.proxy(client).delay_replies(delay);
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
                let at = Instant::now();
                self.h.server.restart();
                self.h.conn = self.h.server.conn();
                let done = Some(Instant::now());
                self.revoke_all(at, done, "wiped by a restart");
                self.generation += 1;
                self.floor = 0;
                // Observers that started before would look for epochs above the old ones.
                self.observers = [Watcher::new(&self.admins[0]), Watcher::new(&self.admins[1])];
                Ok(())
            }
            Op::Delete => {
                let at = Instant::now();
                let _: i64 = redis::cmd("DEL")
                    .arg(&self.name)
                    .query(&mut self.h.conn)
                    .unwrap();
                let done = Some(Instant::now());
                self.revoke_all(at, done, "deleted by an operator");
                Ok(())
            }
        }
    }

    /// After `client`'s stall ended: what its calls held on their way take lasts a lease
    /// after they landed (a renewal, a campaign).
    fn thawed(&mut self, client: usize) {
        let landed = super::landed(&mut self.h.conn);
        for known in &mut self.known {
            if client_of(known.owner) == client && known.gone.is_none() {
                known.bound = known.bound.extend(landed + WATCHDOG_LEASE);
            }
        }
        if std::mem::take(&mut self.stalled_campaign[client]) {
            self.ghost = self.ghost.extend(landed + WATCHDOG_LEASE);
        }
    }

    fn campaign(&mut self, owner: usize, wait: Option<u64>) -> Result<(), String> {
        let client = client_of(owner);
        let before = Instant::now();
        let free = self.free(before) && !self.stalled(client);
        // Whether a failed campaign must leave nothing: the fault aimed at it, and no
        // other phantom may be about.
        let reply = self.faults.aimed(client, Call::Acquire);
        let watch = reply.is_some() && !self.stalled(client) && self.ghost.over_by(before);
        let election = &self.elections[owner];
        let sent = Instant::now();
        let result = match wait {
            None => election.try_campaign(),
            Some(ms) => election.try_campaign_for(Duration::from_millis(ms)),
        };
        let returned = Instant::now();
        match result {
            Ok(Some(leadership)) => self.led(owner, leadership, sent, returned),
            Ok(None) if free => Err(format!(
                "owner {owner} was refused an election nobody could lead"
            )),
            Ok(None) => {
                self.log.push(format!("  owner {owner}: someone leads"));
                Ok(())
            }
            Err(err) => {
                self.log.push(format!("  owner {owner}: {err}"));
                let passing =
                    err.is_connection() || err.is_outcome_unknown() || err.is_validity_exhausted();
                if !passing {
                    return Err(format!("owner {owner}'s campaign failed: {err}"));
                }
                if self.stalled(client) {
                    self.stalled_campaign[client] = true;
                }
                self.ghost = self.ghost.extend(returned + WATCHDOG_LEASE);
                let proxy = self.h.clients.proxy(client);
                if watch && ran_first(proxy, reply, sent, returned) {
                    return self.given_back(owner, returned, &err.to_string());
                }
                Ok(())
            }
        }
    }

    /// After `owner`'s campaign, whose reply the armed fault hit, failed with `err`: within
    /// the give-back's bound after it returned, nobody leads unless a leadership says so.
    fn given_back(&mut self, owner: usize, returned: Instant, err: &str) -> Result<(), String> {
        self.log.push("  (the fault's reply was to it)".into());
        let tokens: HashSet<String> = (self.known.iter())
            .filter_map(|k| k.token.clone())
            .collect();
        let (name, conn) = (&self.name, &mut self.h.conn);
        let mut phantom = None;
        let gone = settles(returned, || {
            let token: Option<String> = redis::cmd("HGET")
                .arg(name)
                .arg("token")
                .query(conn)
                .unwrap();
            phantom = token.filter(|token| !tokens.contains(token));
            phantom.is_none()
        });
        if gone {
            return Ok(());
        }
        Err(format!(
            "owner {owner}'s campaign failed ({err}), and {:?} after it returned a leader \
             nobody holds leads (token {phantom:?})",
            settle_time()
        ))
    }

    /// Records a leadership `owner`'s campaign returned.
    fn led(
        &mut self,
        owner: usize,
        leadership: Leadership,
        sent: Instant,
        taken: Instant,
    ) -> Result<(), String> {
        let epoch = leadership.epoch();
        self.log
            .push(format!("  owner {owner} leads, epoch {epoch}"));
        if epoch <= self.floor {
            return Err(format!(
                "owner {owner} leads with epoch {epoch}, not above {} seen before",
                self.floor
            ));
        }
        self.floor = epoch;
        let (token, stored): (Option<String>, Option<u64>) = redis::cmd("HMGET")
            .arg(&self.name)
            .arg("token")
            .arg("epoch")
            .query(&mut self.h.conn)
            .unwrap();
        self.known.push(Known {
            owner,
            epoch,
            token: token.filter(|_| stored == Some(epoch)),
            generation: self.generation,
            sent,
            taken,
            bound: Bound::Forever,
            gone: None,
            revoked: false,
            revoked_at: None,
            lost: false,
        });
        self.held[owner].push((leadership, self.known.len() - 1));
        Ok(())
    }

    fn resign(&mut self, owner: usize, which: usize) -> Result<(), String> {
        if self.held[owner].is_empty() {
            return Ok(());
        }
        let which = which % self.held[owner].len();
        let (leadership, id) = self.held[owner].remove(which);
        let view = View::of(&leadership);
        let started = Instant::now();
        let result = leadership.resign();
        let returned = Instant::now();
        self.ended(id, started, &view);
        let known = &mut self.known[id];
        match result {
            Ok(()) => {
                self.log.push("  resigned".into());
                known.forget("resigned");
            }
            Err(err) if err.is_lost() => {
                self.log.push(format!("  {err}"));
                // Valid until after the call returned, the key was its own when the
                // resignation (its first send, or a later one) ran.
                if !known.revoked && view.valid(returned + SLACK) {
                    return Err(format!(
                        "{}'s resignation found it lost, while it was valid for {:?} after \
                         the call returned",
                        known.named(),
                        view.valid_until - returned
                    ));
                }
                known.forget("resigned, found lost");
            }
            // Sent again until its validity ended, never answered.
            Err(err) if err.is_outcome_unknown() => {
                self.log.push(format!("  {err}"));
                if returned < view.valid_until {
                    return Err(format!(
                        "{}'s resignation gave up {:?} before its validity ended: {err}",
                        known.named(),
                        view.valid_until - returned
                    ));
                }
                known.bound = Bound::Gone.extend(returned + WATCHDOG_LEASE);
            }
            // Sent nowhere (no connection): the key lasts its lease.
            Err(err) if err.is_connection() => {
                self.log.push(format!("  {err}"));
                known.bound = Bound::Gone.extend(returned.max(view.valid_until) + WATCHDOG_LEASE);
            }
            Err(err) => return Err(format!("{}'s resignation failed: {err}", known.named())),
        }
        Ok(())
    }

    fn force(&mut self, client: usize) -> Result<(), String> {
        // A stalled client's call would reach Redis when the stall ends, at a time the
        // model does not know: the operator waits.
        if self.stalled(client) {
            return Ok(());
        }
        let views = self.views();
        let at = Instant::now();
        let result = self.admins[client].force_resign();
        let after = Instant::now();
        self.log.push(format!("  {result:?}"));
        match result {
            // The key is gone now, whoever's it was.
            Ok(true) => self.revoke_all(at, Some(after), "resigned by force"),
            Ok(false) => {
                if let Some((_, view)) = self.surely_valid(&views, after).first() {
                    return Err(format!(
                        "force_resign found nobody leading while the leadership of epoch {} \
                         was valid for {:?} more",
                        view.epoch,
                        view.valid_until - after
                    ));
                }
                for k in &mut self.known {
                    k.forget("not there for a forced resignation");
                }
                self.ghost = Bound::Gone;
            }
            Err(err) if err.is_connection() || err.is_outcome_unknown() => {
                self.revoke_all(at, None, "");
            }
            Err(err) => return Err(format!("force_resign failed: {err}")),
        }
        Ok(())
    }

    fn force_stale(&mut self, client: usize, which: usize) -> Result<(), String> {
        if self.stalled(client) {
            return Ok(());
        }
        let now: Option<String> = redis::cmd("HGET")
            .arg(&self.name)
            .arg("token")
            .query(&mut self.h.conn)
            .unwrap();
        let stale: Vec<String> = (self.known.iter())
            .filter_map(|k| k.token.clone())
            .filter(|token| Some(token) != now.as_ref())
            .collect();
        let token = match stale.is_empty() {
            true => NEVER.to_owned(),
            false => stale[which % stale.len()].clone(),
        };
        match self.admins[client].force_resign_held_by(&token) {
            Ok(false) => Ok(()),
            Ok(true) => Err(format!(
                "force_resign_held_by ended a leadership naming {token}, which did not lead"
            )),
            Err(err) if err.is_connection() || err.is_outcome_unknown() => Ok(()),
            Err(err) => Err(format!("force_resign_held_by failed: {err}")),
        }
    }

    fn leader(&mut self, client: usize) -> Result<(), String> {
        let views = self.views();
        let before = Instant::now();
        let result = self.admins[client].leader();
        let after = Instant::now();
        let found = match result {
            Ok(found) => found,
            Err(err) if err.is_connection() => return Ok(()),
            Err(err) => return Err(format!("leader() failed: {err}")),
        };
        self.log.push(format!("  {found:?}"));
        let surely = self.surely_valid(&views, after);
        let epoch = found.as_ref().map(|leader| leader.epoch());
        if let Some((_, view)) = surely.first()
            && epoch != Some(view.epoch)
        {
            return Err(format!(
                "leader() says {found:?}, while the leadership of epoch {} is valid for {:?} \
                 more",
                view.epoch,
                view.valid_until - after
            ));
        }
        match epoch {
            Some(epoch) => {
                self.floor = self.floor.max(epoch);
                self.accounted(epoch, before, "leader()")
            }
            None => Ok(()),
        }
    }

    /// A leader of epoch `epoch` seen by `who` in a read that began at `at`: a leadership
    /// whose key is not known to be gone, or a phantom while one may be about.
    fn accounted(&self, epoch: u64, at: Instant, who: &str) -> Result<(), String> {
        let known =
            (self.known.iter()).find(|k| k.generation == self.generation && k.epoch == epoch);
        match known {
            Some(known) => match known.gone {
                Some(why) => Err(format!("{who} names {} ({why})", known.named())),
                None => Ok(()),
            },
            None if self.ghost.over_by(at) => Err(format!(
                "{who} names a leader of epoch {epoch} that nobody holds, and no failed \
                 campaign may have left"
            )),
            None => Ok(()),
        }
    }

    fn observe(&mut self, client: usize) -> Result<(), String> {
        let started = Instant::now();
        for _ in 0..1000 {
            let watcher = &mut self.observers[client];
            let change = match watcher.observer.recv_timeout(Duration::ZERO) {
                Ok(Some(change)) => change,
                Ok(None) => return self.all_told(client, started),
                Err(err) if err.is_connection() => return Ok(()),
                Err(err) => return Err(format!("the observer on client {client}: {err}")),
            };
            self.log.push(format!("  observer {client}: {change:?}"));
            watcher.since.get_or_insert_with(Instant::now);
            let LeaderChange::Elected(leader) = change else {
                continue;
            };
            let epoch = leader.epoch();
            if let Some(last) = watcher.last.filter(|&last| epoch <= last) {
                return Err(format!(
                    "the observer on client {client} told epoch {epoch} after {last}"
                ));
            }
            watcher.last = Some(epoch);
            watcher.told.insert(epoch);
            self.floor = self.floor.max(epoch);
        }
        Err(format!(
            "the observer on client {client} tells changes without end"
        ))
    }

    /// Every leadership taken after the observer's first change and before `started` was
    /// told by it.
    fn all_told(&self, client: usize, started: Instant) -> Result<(), String> {
        let watcher = &self.observers[client];
        let Some(since) = watcher.since else {
            return Ok(());
        };
        let untold = self.known.iter().find(|k| {
            k.generation == self.generation
                && since < k.sent
                && k.taken < started
                && !watcher.told.contains(&k.epoch)
        });
        match untold {
            Some(known) => Err(format!(
                "the observer on client {client} never told {}",
                known.named()
            )),
            None => Ok(()),
        }
    }

    /// The invariants after a step.
    fn check(&mut self) -> Result<(), String> {
        let views = self.views();
        for (id, view) in &views {
            let known = &mut self.known[*id];
            if known.lost && !view.lost {
                return Err(format!("{} said it was lost, and no more", known.named()));
            }
            known.lost |= view.lost;
            // A renewal sent after the key was deleted gets nowhere; one sent before may
            // come back later, with a lease from its sending.
            if let Some(at) = known.revoked_at
                && view.valid_until > at + WATCHDOG_LEASE + SLACK
            {
                return Err(format!(
                    "{} was ended from outside, and then renewed: valid {:?} after that",
                    known.named(),
                    view.valid_until - at
                ));
            }
            if !view.lost && view.valid_until + SLACK < view.read {
                return Err(format!(
                    "{}'s validity ended {:?} before it was asked, and it does not say it \
                     is lost",
                    known.named(),
                    view.read - view.valid_until
                ));
            }
        }
        let before = Instant::now();
        let ((token, epoch), ttl): ((Option<String>, Option<u64>), i64) = redis::pipe()
            .atomic()
            .cmd("HMGET")
            .arg(&self.name)
            .arg("token")
            .arg("epoch")
            .cmd("PTTL")
            .arg(&self.name)
            .query(&mut self.h.conn)
            .unwrap();
        let read = Instant::now();
        // Never two valid leaderships at once, and a valid one is the key's.
        let valid = self.surely_valid(&views, read);
        if let [(a, _), (b, _), ..] = &valid[..] {
            return Err(format!(
                "two valid leaderships at once: {} and {}",
                self.known[*a].named(),
                self.known[*b].named()
            ));
        }
        if let Some((id, view)) = valid.first() {
            let known = &self.known[*id];
            let ours = epoch == Some(view.epoch)
                && known
                    .token
                    .as_ref()
                    .is_none_or(|t| token.as_ref() == Some(t));
            if !ours {
                return Err(format!(
                    "{} is valid for {:?} more, but the key holds epoch {epoch:?}",
                    known.named(),
                    view.valid_until - read
                ));
            }
            if expiry(ttl, read).is_none_or(|expires| view.valid_until > expires) {
                return Err(format!(
                    "{} is valid for {:?} more, but the key's PTTL is {ttl} ms",
                    known.named(),
                    view.valid_until - read
                ));
            }
        }
        // The windows so far, with those open now: none of two leaderships overlap.
        let history = History::default();
        for window in self.history.windows() {
            history.add(window);
        }
        for (id, view) in &views {
            let known = &self.known[*id];
            if !known.revoked && !view.lost {
                let who = format!("owner {} (epoch {})", known.owner, known.epoch);
                history.record(&who, known.taken, read, view.valid_until);
            }
        }
        if let Some((a, b)) = history.overlap() {
            return Err(format!(
                "two leaderships' windows overlap: {} until {} ns after the start of {}'s",
                a.holder,
                a.to - b.from,
                b.holder
            ));
        }
        // A leadership whose key was gone never comes back; a key nobody's leadership
        // wrote is a phantom's.
        if let Some(token) = &token {
            match self.known.iter().find(|k| k.token.as_ref() == Some(token)) {
                Some(known) if known.gone.is_some() => {
                    return Err(format!(
                        "{} is in the key again ({})",
                        known.named(),
                        known.gone.unwrap()
                    ));
                }
                Some(_) => {}
                None => self.accounted(epoch.unwrap_or(0), before, "the key")?,
            }
            self.floor = self.floor.max(epoch.unwrap_or(0));
        }
        for known in &mut self.known {
            if known.token.is_some() && known.token != token {
                known.forget("seen gone from the key");
            }
        }
        Ok(())
    }

    /// Ends the case: every stall and fault ended, every leadership resigned; then nothing
    /// may be left but latches that expire, the counter and the record of leaders.
    fn end(&mut self) -> Result<(), String> {
        for client in 0..2 {
            if self.faults.thaw(&self.h.clients, client) {
                self.thawed(client);
            }
        }
        self.on_time();
        for owner in 0..OWNERS {
            while !self.held[owner].is_empty() {
                self.log.push(format!("(end) Resign {{ owner: {owner} }}"));
                self.resign(owner, 0)?;
                self.check()?;
            }
        }
        let bound = (self.known.iter().map(|k| k.bound))
            .chain([self.ghost])
            .max()
            .unwrap_or(Bound::Gone);
        if !super::await_bound(bound) {
            return Ok(());
        }
        let left = lasting_leftovers(&mut self.h.conn, &self.name);
        if !left.is_empty() {
            let left = super::described(&mut self.h.conn, &left);
            return Err(format!("left in Redis after every resignation: {left:?}"));
        }
        Ok(())
    }

    /// Ends a failed case: stalls and faults end, and the leaderships are dropped.
    fn abandon(&mut self) {
        self.on_time();
        self.held.clear();
    }

    /// Takes back every fault and slow reply, and ends every stall.
    fn on_time(&mut self) {
        self.faults.clear(&self.h.clients);
        for client in 0..2 {
            self.h.clients.proxy(client).delay_replies(Duration::ZERO);
        }
    }
}

impl crate::model::Model for Harness {
    const NAME: &'static str = "election";
    /// Fewer: each case runs longer, with its leases running out.
    const CASES: u32 = 12;
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
