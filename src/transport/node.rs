//! The Redis deployments a client locks on, and how many of them must agree.
//!
//! A node is one deployment: a standalone server, the primary Sentinel names, or a Redis
//! Cluster, whose commands go to the primary serving their key's slot. Where a key lives is
//! the node's business; how many nodes must agree is [`Nodes`]'s.
//!
//! A single-node client has one node and a quorum of one. A Redlock client has N independent
//! deployments and a quorum of N/2 + 1; its commands go out to all of them before any reply
//! is read, so a round costs the slowest node's round trip, not the sum of them.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{Cmd, FromRedisValue};

use crate::base::config::Config;
use crate::base::error::{Error, NodeError, Result, Subject};
use crate::notify::notifier::Notifier;
use crate::topology::quorum;
use crate::topology::quorum::Tally;
use crate::transport::cluster::Cluster;
use crate::transport::scripts;
use crate::transport::shard::{Acked, Pooled, Shard};

/// One deployment.
pub(crate) struct Node {
    /// `host:port`, a Sentinel master name, or `cluster@host:port`, for errors and logs.
    pub name: String,
    route: Route,
}

/// Where a node's commands go.
enum Route {
    /// To its one server.
    One(Arc<Shard>),
    /// To the primary serving their key's slot.
    Cluster(Arc<Cluster>),
}

/// A command sent on a connection whose reply is still to be read.
struct Sent {
    shard: Arc<Shard>,
    conn: Pooled,
}

impl Node {
    /// The server at `url`; opens nothing yet.
    pub fn new(url: &str, config: &Config) -> Result<Node> {
        Ok(Node::one(Shard::new(url, config)?))
    }

    /// The primary that the sentinels at `sentinel_urls` name for `master`, followed across
    /// failovers; named after `master`. Asks nothing yet.
    pub fn sentinel(sentinel_urls: &[String], master: &str, config: &Config) -> Result<Node> {
        Ok(Node::one(Shard::sentinel(sentinel_urls, master, config)?))
    }

    /// The Redis Cluster that the servers at `seed_urls` belong to; asks nothing yet.
    pub fn cluster(seed_urls: &[String], config: &Config) -> Result<Node> {
        let cluster = Cluster::new(seed_urls, config)?;
        Ok(Node {
            name: cluster.name.clone(),
            route: Route::Cluster(cluster),
        })
    }

    fn one(shard: Shard) -> Node {
        Node {
            name: shard.name.clone(),
            route: Route::One(Arc::new(shard)),
        }
    }

    /// Whether keys are placed by their cluster slot, so that a lock's keys must share one.
    pub fn routes_by_slot(&self) -> bool {
        matches!(self.route, Route::Cluster(_))
    }

    /// Runs `listener` each time where the node's keys live changes (a Sentinel failover, a
    /// new cluster slot map), until it returns false.
    pub fn on_move(&self, listener: impl Fn() -> bool + Send + Sync + 'static) {
        match &self.route {
            Route::One(shard) => shard.on_move(listener),
            Route::Cluster(cluster) => cluster.on_move(listener),
        }
    }

    /// Connects and checks that the user may run what the locks need on `probe_key`, as
    /// [`Shard::check`] does: the first failure of [`checks`](Self::checks).
    pub fn check(&self, probe_key: &[u8]) -> Result<()> {
        self.checks(probe_key)
            .into_iter()
            .try_for_each(|(_, checked)| checked)
    }

    /// [`Shard::check`] on each server of the node, by its name: its one server, or every
    /// primary of a cluster (after reading the slot map), each on a key under `probe_key`
    /// that it serves.
    pub fn checks(&self, probe_key: &[u8]) -> Vec<(String, Result<()>)> {
        let probes = match &self.route {
            Route::One(shard) => return vec![(shard.name.clone(), shard.check(probe_key))],
            Route::Cluster(cluster) => cluster.start().and_then(|()| cluster.probes(probe_key)),
        };
        match probes {
            Ok(probes) => (probes.into_iter())
                .map(|(shard, key)| (shard.name.clone(), shard.check(&key)))
                .collect(),
            Err(err) => vec![(self.name.clone(), Err(err))],
        }
    }

    /// The unlock notifier of the server where `channel` is published.
    pub fn notifier(&self, channel: &[u8]) -> Result<Arc<Notifier>> {
        match &self.route {
            Route::One(shard) => Ok(shard.notifier.clone()),
            Route::Cluster(cluster) => Ok(cluster.shard_for_key(channel)?.notifier.clone()),
        }
    }

    /// The server `key` lives on, as `host:port`: the node's own, or the cluster primary
    /// serving its slot as the slot map says now.
    pub fn server_of(&self, key: &[u8]) -> String {
        match &self.route {
            Route::One(shard) => shard.name.clone(),
            Route::Cluster(cluster) => (cluster.shard_for_key(key))
                .map_or_else(|_| self.name.clone(), |shard| shard.name.clone()),
        }
    }

    /// The servers of the node: its one server, or a cluster's primaries.
    pub fn shards(&self) -> Result<Vec<Arc<Shard>>> {
        match &self.route {
            Route::One(shard) => Ok(vec![shard.clone()]),
            Route::Cluster(cluster) => cluster.primaries(),
        }
    }

    /// Runs `cmd` where its key lives, giving up at `end` at the latest.
    pub fn run<T: FromRedisValue>(&self, cmd: &Cmd, end: Instant) -> Result<T> {
        self.run_settling(cmd, end, end)
    }

    /// Runs `cmd` where its key lives, its first try ending by `end`; on a cluster, a slot
    /// being migrated or without a primary is waited for until `settle` (see
    /// [`Cluster::run`]).
    pub fn run_settling<T: FromRedisValue>(
        &self,
        cmd: &Cmd,
        end: Instant,
        settle: Instant,
    ) -> Result<T> {
        self.settling(cmd, (end, settle), true)
    }

    /// [`run_settling`](Self::run_settling) for a resend of a release after a send that
    /// may have run: on a cluster, it keeps its latch even while its slot migrates (see
    /// [`Cluster::run`]), so that it answers as that send would have.
    pub fn resend_settling<T: FromRedisValue>(
        &self,
        cmd: &Cmd,
        end: Instant,
        settle: Instant,
    ) -> Result<T> {
        self.settling(cmd, (end, settle), false)
    }

    fn settling<T: FromRedisValue>(
        &self,
        cmd: &Cmd,
        (end, settle): (Instant, Instant),
        unlatch: bool,
    ) -> Result<T> {
        match &self.route {
            Route::One(shard) => shard.run(cmd, end),
            Route::Cluster(cluster) => {
                (cluster.run(cmd, None, (end, settle), unlatch)).map(|(reply, _)| reply)
            }
        }
    }

    /// Runs `cmd` and then `wait` (a `WAIT`) on the same connection; the second value is
    /// WAIT's reply, when one was sent.
    fn run_acked<T: FromRedisValue>(
        &self,
        cmd: &Cmd,
        wait: Option<&Cmd>,
        end: Instant,
        settle: Instant,
    ) -> Result<Acked<T>> {
        match &self.route {
            Route::One(shard) => shard.run_routed(cmd, wait, false, end),
            Route::Cluster(cluster) => cluster.run(cmd, wait, (end, settle), true),
        }
    }

    /// Sends `packed` (which is `cmd`, and maybe a `WAIT` after it) to where `cmd`'s key
    /// lives, waiting for a connection until `deadline` at most.
    fn send(&self, cmd: &Cmd, packed: &[u8], deadline: Instant) -> Result<Sent> {
        let (shard, conn) = match &self.route {
            Route::One(shard) => (shard.clone(), shard.send(packed, deadline)?),
            Route::Cluster(cluster) => {
                let shard = cluster.shard_of(cmd)?;
                let conn = match cluster.flavour(cmd) {
                    Cow::Borrowed(_) => shard.send(packed, deadline)?,
                    Cow::Owned(flavoured) => {
                        let mut repacked = flavoured.get_packed_command();
                        repacked.extend_from_slice(&packed[cmd.get_packed_command().len()..]);
                        shard.send(&repacked, deadline)?
                    }
                };
                (shard, conn)
            }
        };
        Ok(Sent { shard, conn })
    }

    /// Reads the reply to what [`send`](Self::send) sent. On a cluster, a reply that sends
    /// the command elsewhere is followed as [`run`](Self::run) does.
    fn receive<T: FromRedisValue>(
        &self,
        mut sent: Sent,
        cmd: &Cmd,
        wait: Option<&Cmd>,
        (deadline, settle): (Instant, Instant),
    ) -> Result<Acked<T>> {
        let flavoured = match &self.route {
            Route::One(_) => Cow::Borrowed(cmd),
            Route::Cluster(cluster) => cluster.flavour(cmd),
        };
        let reply = (sent.shard).receive(&mut sent.conn, &flavoured, wait, deadline);
        match (&self.route, &reply) {
            (Route::Cluster(_), Err(err)) if err.is_redirect() => {
                drop(sent);
                self.run_acked(cmd, wait, deadline, settle)
            }
            _ => reply,
        }
    }
}

/// The nodes of one client and how many of them must agree.
pub(crate) struct Nodes {
    list: Vec<Arc<Node>>,
    /// `WAIT` after each acquisition, if replicas must acknowledge it.
    wait: Option<(Cmd, u32)>,
    /// How long one round of a command on every node may take: the response timeout, plus
    /// the connect timeout on a single node (whose round may have to open a connection).
    timeout: Duration,
    /// How long a call without a deadline of its own waits for a cluster slot being
    /// migrated or without a primary: the lease.
    unhurried: Duration,
}

impl Nodes {
    pub fn new(list: Vec<Arc<Node>>, config: &Config) -> Nodes {
        let timeout = match list.len() {
            1 => config.connect_timeout + config.response_timeout,
            _ => config.response_timeout,
        };
        let wait = config.replica_acks.map(|acks| {
            let mut wait = redis::cmd("WAIT");
            wait.arg(acks.replicas).arg(scripts::millis(acks.timeout));
            (wait, acks.replicas)
        });
        Nodes {
            list,
            wait,
            timeout,
            unhurried: config.lease,
        }
    }

    pub fn list(&self) -> &[Arc<Node>] {
        &self.list
    }

    /// Whether any node places keys by cluster slot.
    pub fn routes_by_slot(&self) -> bool {
        self.list.iter().any(|node| node.routes_by_slot())
    }

    /// A round's yes-or-no answers: `yes` of them said yes, `failed` nodes said nothing.
    pub fn tally(&self, yes: usize, failed: &[NodeError]) -> Tally {
        Tally {
            yes,
            failed: failed.len(),
            of: self.list.len(),
        }
    }

    /// N/2 + 1 of the configured N, reachable or not.
    pub fn quorum(&self) -> usize {
        quorum::quorum(self.list.len())
    }

    /// Runs `cmd` on every node at once; one result per node, in order. The first try on
    /// each node keeps to one deadline: the round timeout, or `limit` if that comes first.
    /// A node whose pooled connection turns out dead (as after a restart) gets the command
    /// again on another; on a cluster, a slot being migrated or without a primary is waited
    /// for until `limit` (one round without it).
    pub fn run_all<T: FromRedisValue>(&self, cmd: &Cmd, limit: Option<Instant>) -> Vec<Result<T>> {
        let round = Instant::now() + self.timeout;
        let deadline = limit.map_or(round, |limit| limit.min(round));
        self.run_all_settling(cmd, deadline, limit.unwrap_or(round))
    }

    /// Runs `cmd` on every node as [`run_all`](Self::run_all) does, each first try within a
    /// round; on a cluster, a slot being migrated or without a primary is waited for until
    /// `settle` (a release's and a renewal's: the hold's validity).
    pub fn run_all_until<T: FromRedisValue>(&self, cmd: &Cmd, settle: Instant) -> Vec<Result<T>> {
        let round = Instant::now() + self.timeout;
        self.run_all_settling(cmd, round, settle)
    }

    /// Runs `cmd` on every node as [`run_all`](Self::run_all) does, for a call without a
    /// deadline of its own (a forced unlock, a look at a lock, setting permits): on a
    /// cluster, a slot being migrated or without a primary is waited for as long as a lease.
    pub fn run_all_unhurried<T: FromRedisValue>(&self, cmd: &Cmd) -> Vec<Result<T>> {
        self.run_all_until(cmd, Instant::now() + self.unhurried)
    }

    fn run_all_settling<T: FromRedisValue>(
        &self,
        cmd: &Cmd,
        deadline: Instant,
        settle: Instant,
    ) -> Vec<Result<T>> {
        if let [node] = &self.list[..] {
            return vec![node.run_settling(cmd, deadline, settle)];
        }
        let replies = self.fan_out(cmd, None, (deadline, settle));
        replies
            .into_iter()
            .map(|r| r.map(|(reply, _)| reply))
            .collect()
    }

    /// Runs the acquisition `cmd` on every node, as [`run_all`](Self::run_all) does. When
    /// replicas must acknowledge acquisitions, each node runs `WAIT` right after it on the
    /// same connection, and a reply that `granted` a hold which too few replicas
    /// acknowledged becomes [`Error::NotReplicated`] for that node: a node that may have run
    /// the command, so the caller gives the hold back.
    pub fn acquire<T: FromRedisValue>(
        &self,
        cmd: &Cmd,
        limit: Option<Instant>,
        granted: impl Fn(&T) -> bool,
    ) -> Vec<Result<T>> {
        let Some((wait, needed)) = &self.wait else {
            return self.run_all(cmd, limit);
        };
        let round = Instant::now() + self.timeout;
        let deadline = limit.map_or(round, |limit| limit.min(round));
        let settle = limit.unwrap_or(round);
        let replies = match &self.list[..] {
            [node] => vec![node.run_acked(cmd, Some(wait), deadline, settle)],
            _ => self.fan_out(cmd, Some(wait), (deadline, settle)),
        };
        let checked = self.list.iter().zip(replies).map(|(node, reply)| {
            let (reply, acked) = reply?;
            let acked = acked.and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
            if acked < *needed && granted(&reply) {
                return Err(Error::NotReplicated {
                    lock: None,
                    node: node.name.clone(),
                    acked,
                    needed: *needed,
                });
            }
            Ok(reply)
        });
        checked.collect()
    }

    /// Sends `cmd` (and `wait` after it) to every node before reading any reply.
    fn fan_out<T: FromRedisValue>(
        &self,
        cmd: &Cmd,
        wait: Option<&Cmd>,
        (deadline, until): (Instant, Instant),
    ) -> Vec<Result<Acked<T>>> {
        let mut packed = cmd.get_packed_command();
        if let Some(wait) = wait {
            wait.write_packed_command(&mut packed);
        }
        let mut results: Vec<Option<Result<Acked<T>>>> = self.list.iter().map(|_| None).collect();
        let mut pending: Vec<usize> = (0..self.list.len()).collect();
        while !pending.is_empty() {
            let mut sent = Vec::with_capacity(pending.len());
            for i in pending.drain(..) {
                match self.list[i].send(cmd, &packed, deadline) {
                    Ok(conn) => sent.push((i, conn)),
                    Err(err) => settle(&mut results[i], Err(err)),
                }
            }
            for (i, conn) in sent {
                let result = self.list[i].receive(conn, cmd, wait, (deadline, until));
                if matches!(&result, Err(err) if err.is_dropped_connection())
                    && Instant::now() < deadline
                {
                    pending.push(i);
                }
                settle(&mut results[i], result);
            }
        }
        results
            .into_iter()
            .map(|result| result.expect("every node had a round"))
            .collect()
    }

    /// Splits per-node results into answers and failures.
    pub fn split<T>(&self, results: Vec<Result<T>>) -> (Vec<T>, Vec<NodeError>) {
        let mut answers = Vec::with_capacity(results.len());
        let mut failed = Vec::new();
        for (node, result) in self.list.iter().zip(results) {
            match result {
                Ok(answer) => answers.push(answer),
                Err(error) => failed.push(NodeError {
                    node: node.name.clone(),
                    error,
                }),
            }
        }
        (answers, failed)
    }

    /// The answers, when at least a quorum of nodes gave one.
    pub fn answers<T>(&self, results: Vec<Result<T>>) -> Result<Vec<T>> {
        let (answers, failed) = self.split(results);
        if answers.len() >= self.quorum() {
            Ok(answers)
        } else {
            Err(self.no_quorum(failed))
        }
    }

    /// The value a quorum agrees on at least: the quorum-th largest answer. With one node,
    /// its answer.
    pub fn agreed<T: Ord + Copy>(&self, results: Vec<Result<T>>) -> Result<T> {
        let (answers, failed) = self.split(results);
        quorum::agreed(answers, self.list.len()).ok_or_else(|| self.no_quorum(failed))
    }

    /// The result of a release that a quorum confirmed on `released` nodes: an error naming
    /// the nodes that did not answer, if any.
    pub fn partial_release(
        &self,
        released: usize,
        failed: Vec<NodeError>,
        lock: &Subject,
    ) -> Result<()> {
        if failed.is_empty() {
            return Ok(());
        }
        Err(Error::PartialRelease {
            lock: lock.clone(),
            released,
            of: self.list.len(),
            failed,
        })
    }

    /// The error for too few answers: with one node, that node's own error.
    pub fn no_quorum(&self, mut failed: Vec<NodeError>) -> Error {
        if self.list.len() == 1 && failed.len() == 1 {
            return failed.remove(0).error;
        }
        Error::NoQuorum {
            lock: None,
            needed: self.quorum(),
            of: self.list.len(),
            failed,
        }
    }
}

/// Records a node's result, except that an error saying the command may have run is not
/// replaced by a later one saying it never ran: a retry must not make us forget a first try
/// that may have taken the lock.
fn settle<T>(slot: &mut Option<Result<T>>, result: Result<T>) {
    let keep_earlier = matches!(slot, Some(Err(earlier)) if earlier.may_have_run())
        && matches!(&result, Err(later) if !later.may_have_run());
    if !keep_earlier {
        *slot = Some(result);
    }
}
