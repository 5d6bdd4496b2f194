//! The Redis nodes a client locks on: per node a connection pool and an unlock subscriber,
//! and commands sent to every node at once.
//!
//! A single-node client has one node and a quorum of one. A Redlock client has N independent
//! masters and a quorum of N/2 + 1; its commands go out to all nodes before any reply is
//! read, so a round costs the slowest node's round trip, not the sum of them.
//!
//! A node does not keep an address: its topology says where its server is now (a fixed
//! address, or the primary Sentinel names), and a reply from a server the node has moved
//! away from is refused and the command sent again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redis::{
    Cmd, Connection, ErrorKind, FromRedisValue, IntoConnectionInfo, RedisError, RedisResult,
    ServerErrorKind,
};
use scheduled_thread_pool::{OnPoolDropBehavior, ScheduledThreadPool};

use crate::base::config::Config;
use crate::base::error::redact;
use crate::base::error::{Error, NodeError, Result};
use crate::layout::names;
use crate::notify::hub::{Settings, Waker};
use crate::notify::notifier::Notifier;
use crate::topology::endpoint;
use crate::topology::quorum;
use crate::topology::quorum::Tally;
use crate::topology::sentinel::Sentinel;
use crate::topology::server::Topology;
use crate::transport::pool::{Conn, Manager};
use crate::transport::scripts;

type Pooled = r2d2::PooledConnection<Manager>;

/// One Redis server.
pub(crate) struct Node {
    /// `host:port`, for errors and logs.
    pub name: String,
    pool: r2d2::Pool<Manager>,
    /// Opens connections outside the pool, to check the node at build time.
    direct: Manager,
    /// Whether the last attempt to open a connection failed. Rounds then wait only a moment
    /// for a connection to this node (which still starts a reconnect in the background)
    /// instead of their whole timeout; the next successful connect clears it.
    unreachable: Arc<AtomicBool>,
    pub notifier: Arc<Notifier>,
    /// Where the server is now.
    topology: Arc<Topology>,
}

impl Node {
    /// Parses `url` and prepares the pool; opens nothing yet.
    pub fn new(url: &str, config: &Config) -> Result<Node> {
        let invalid = |source| Error::InvalidUrl {
            url: redact(url),
            source,
        };
        crate::base::tls::check_url(url).map_err(invalid)?;
        let info = url.into_connection_info().map_err(invalid)?;
        let name = info.addr().to_string();
        let client =
            endpoint::client(info, &config.tls).map_err(|source| Error::InvalidConfig {
                setting: "tls certificates",
                reason: source.to_string(),
            })?;
        Ok(Node::at(name, Topology::Fixed(Box::new(client)), config))
    }

    /// The primary that the sentinels at `sentinel_urls` name for `master`, followed across
    /// failovers; named after `master`. Asks nothing yet.
    pub fn sentinel(sentinel_urls: &[String], master: &str, config: &Config) -> Result<Node> {
        let sentinel = Sentinel::start(sentinel_urls, master, config)?;
        let node = Node::at(master.to_owned(), Topology::Sentinel(sentinel), config);
        // The subscriber follows the primary: it reconnects there, subscribes again and
        // wakes every waiter.
        let notifier = Arc::downgrade(&node.notifier);
        node.on_move(move || notifier.upgrade().map(|n| n.reconnect()).is_some());
        Ok(node)
    }

    fn at(name: String, topology: Topology, config: &Config) -> Node {
        let topology = Arc::new(topology);
        let unreachable = Arc::new(AtomicBool::new(false));
        let manager = || Manager {
            topology: topology.clone(),
            connect_timeout: config.connect_timeout,
            response_timeout: config.response_timeout,
            unreachable: unreachable.clone(),
        };
        // r2d2's default maintenance pool has 3 threads and, on drop, still runs its pending
        // reaper job (every 30 s) before they end; one thread that ends at once is enough.
        let maintenance = ScheduledThreadPool::builder()
            .num_threads(1)
            .thread_name_pattern("redmutex-pool")
            .on_drop_behavior(OnPoolDropBehavior::DiscardPendingScheduled)
            .build();
        let pool = r2d2::Pool::builder()
            .thread_pool(Arc::new(maintenance))
            .max_size(config.pool_size)
            // One connection kept ready in the background, so that a round on many nodes
            // rarely waits to open one.
            .min_idle(Some(1))
            .test_on_check_out(false)
            .connection_timeout(config.connect_timeout)
            .build_unchecked(manager());
        let notifier = Arc::new(Notifier::new(Settings {
            topology: topology.clone(),
            connect_timeout: config.connect_timeout,
            response_timeout: config.response_timeout,
            ping_interval: config.ping_interval,
            wake_prefix: names::wake_channel_prefix(&config.key_prefix),
            waker: waker(pool.clone(), topology.clone()),
        }));
        Node {
            name,
            pool,
            direct: manager(),
            unreachable,
            notifier,
            topology,
        }
    }

    /// Runs `listener` each time the node's server moves (a Sentinel failover), after the
    /// connections to the old one are retired, until it returns false.
    pub fn on_move(&self, listener: impl Fn() -> bool + Send + Sync + 'static) {
        self.topology.on_move(listener);
    }

    /// Opens a fresh connection, within the connect and response timeouts, loads the scripts
    /// and checks that the user may run what the locks need on `probe_key` (a lock key under
    /// the client's prefix), its channel and its latch.
    pub fn check(&self, probe_key: &[u8]) -> Result<()> {
        let channel = names::channel(probe_key);
        let latch = names::unlock_latch(probe_key, &names::random_id());
        let cmd = scripts::check(probe_key, &channel, &latch);
        self.topology.endpoint()?;
        let denied: Vec<String> = self
            .direct
            .open()
            .and_then(|mut conn| conn.run(|c| query_loading_scripts(c, &cmd)))
            .map_err(|source| match source.kind() {
                ErrorKind::Server(ServerErrorKind::NoPerm) => Error::Permission {
                    node: self.name.clone(),
                    denied: vec![source.to_string()],
                },
                _ => self.redis_error(source),
            })?;
        if denied.is_empty() {
            Ok(())
        } else {
            Err(Error::Permission {
                node: self.name.clone(),
                denied,
            })
        }
    }

    /// Runs `cmd`, loading the scripts if Redis lost them, giving up at `end` at the latest. A
    /// connection found dead (Redis restarted, the connection closed while idle) is dropped
    /// and the command sent again on another; every command this crate sends is safe to
    /// repeat.
    pub fn run<T: FromRedisValue>(&self, cmd: &Cmd, end: Instant) -> Result<T> {
        self.run_with(end, |c| query_loading_scripts(c, cmd))
    }

    /// Runs `cmd` and then `wait` (a `WAIT`) on the same connection, as `run` does; the
    /// second value is WAIT's reply.
    fn run_waiting<T: FromRedisValue>(
        &self,
        cmd: &Cmd,
        wait: &Cmd,
        end: Instant,
    ) -> Result<(T, i64)> {
        self.run_with(end, |c| exchange_waiting(c, cmd, wait))
    }

    fn run_with<T>(
        &self,
        end: Instant,
        exchange: impl Fn(&mut Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let mut attempts_left = self.pool.max_size() + 1;
        loop {
            let mut conn = self.checkout(|| {
                let left = end.saturating_duration_since(Instant::now());
                left.min(self.direct.connect_timeout)
            })?;
            attempts_left -= 1;
            let result = self.within(&mut conn, end, &exchange);
            match self.moved(&mut conn, result) {
                Err(err)
                    if attempts_left > 0 && err.is_connection_dropped() && Instant::now() < end =>
                {
                    log::debug!("connection to {} dropped, retrying: {err}", self.name);
                }
                result => return result.map_err(|source| self.redis_error(source)),
            }
        }
    }

    /// A pooled connection, as [`checkout`] gives one.
    fn checkout(&self, wait: impl Fn() -> Duration) -> Result<Pooled> {
        checkout(&self.pool, &self.topology, wait).map_err(|source| self.pool_error(source))
    }

    /// Refuses a reply from a server that is no longer the node's: one answered `READONLY`
    /// on a topology that follows its primary (which then finds where it went), or one read
    /// after the server moved. The command is then to be sent again to where the server is
    /// now, as after a dropped connection; a lock granted by a demoted primary is no lock.
    fn moved<T>(&self, conn: &mut Conn, result: RedisResult<T>) -> RedisResult<T> {
        let readonly = self.topology.follows()
            && matches!(&result, Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly));
        if readonly {
            self.topology.demoted(conn.generation);
        }
        if !readonly && conn.generation == self.topology.generation() {
            return result;
        }
        conn.retire();
        Err(RedisError::from(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "the primary moved; the reply came from the old one",
        )))
    }

    /// Runs `f` on `conn` with replies awaited no later than `end`. The connection's own read
    /// timeout is the full response timeout, so it is only shortened (two system calls) when
    /// less than that is left.
    fn within<T>(
        &self,
        conn: &mut Conn,
        end: Instant,
        f: impl FnOnce(&mut Connection) -> redis::RedisResult<T>,
    ) -> redis::RedisResult<T> {
        let full = self.direct.response_timeout;
        let wait = end.saturating_duration_since(Instant::now());
        let shorten = wait < full - full / 10;
        conn.run(|c| {
            if shorten {
                c.set_read_timeout(Some(wait.max(Duration::from_millis(1))))?;
            }
            let result = f(c);
            if shorten {
                c.set_read_timeout(Some(full))?;
            }
            result
        })
    }

    /// Checks out a connection, waiting at most until `deadline` (only a moment while the
    /// node is unreachable), and sends `packed`.
    fn send(&self, packed: &[u8], deadline: Instant) -> Result<Pooled> {
        let mut conn = self.checkout(|| match self.unreachable.load(Ordering::Relaxed) {
            true => Duration::ZERO,
            false => deadline.saturating_duration_since(Instant::now()),
        })?;
        conn.run(|c| c.send_packed_command(packed))
            .map_err(|source| self.redis_error(source))?;
        Ok(conn)
    }

    /// Reads the reply to what `send` sent, waiting at most until `deadline`.
    fn receive<T: FromRedisValue>(
        &self,
        conn: &mut Conn,
        cmd: &Cmd,
        wait: Option<&Cmd>,
        deadline: Instant,
    ) -> Result<Acked<T>> {
        let reply = self.within(conn, deadline, |c| match wait {
            None => match c.recv_response()?.extract_error() {
                Err(err) if is_noscript(&err) => Ok((query_loading_scripts(c, cmd)?, None)),
                value => Ok((redis::from_redis_value(value?)?, None)),
            },
            Some(wait) => match receive_waiting(c) {
                Err(err) if is_noscript(&err) => {
                    scripts::load_all(c)?;
                    let (reply, acked) = exchange_waiting(c, cmd, wait)?;
                    Ok((reply, Some(acked)))
                }
                reply => reply.map(|(reply, acked)| (reply, Some(acked))),
            },
        });
        self.moved(conn, reply)
            .map_err(|source| self.redis_error(source))
    }

    fn redis_error(&self, source: redis::RedisError) -> Error {
        Error::Redis {
            lock: None,
            node: self.name.clone(),
            source,
        }
    }

    fn pool_error(&self, source: r2d2::Error) -> Error {
        Error::Pool {
            lock: None,
            node: self.name.clone(),
            source,
        }
    }
}

/// A reply, and the reply of the `WAIT` sent after it, if one was.
type Acked<T> = (T, Option<i64>);

/// A connection of `pool`, opened where the server is now: any opened before it moved is
/// retired on the way. `wait` says how long to wait for one when none is idle.
fn checkout(
    pool: &r2d2::Pool<Manager>,
    topology: &Topology,
    wait: impl Fn() -> Duration,
) -> std::result::Result<Pooled, r2d2::Error> {
    loop {
        let mut conn = match pool.try_get() {
            Some(conn) => conn,
            None => pool.get_timeout(wait().max(Duration::from_millis(1)))?,
        };
        if conn.generation == topology.generation() {
            return Ok(conn);
        }
        conn.retire();
    }
}

/// Publishes a wake-up for the subscriber thread over a pooled connection.
fn waker(pool: r2d2::Pool<Manager>, topology: Arc<Topology>) -> Waker {
    Arc::new(move |channel: &[u8], wait: Duration| {
        let mut conn = checkout(&pool, &topology, || wait)
            .map_err(|err| redis::RedisError::from(std::io::Error::other(err.to_string())))?;
        conn.run(|c| redis::cmd("PUBLISH").arg(channel).arg("w").query::<i64>(c))
            .map(drop)
    })
}

/// The nodes of one client and how many of them must agree.
pub(crate) struct Nodes {
    list: Vec<Arc<Node>>,
    /// `WAIT` after each acquisition, if replicas must acknowledge it.
    wait: Option<(Cmd, u32)>,
    /// How long one round of a command on every node may take: the response timeout, plus
    /// the connect timeout on a single node (whose round may have to open a connection).
    timeout: Duration,
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
        }
    }

    pub fn list(&self) -> &[Arc<Node>] {
        &self.list
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

    /// Runs `cmd` on every node at once; one result per node, in order. The whole call,
    /// retries included, keeps to one deadline: the round timeout, or `limit` if that comes
    /// first. A node whose pooled connection turns out dead (as after a restart) gets the
    /// command again on another.
    pub fn run_all<T: FromRedisValue>(&self, cmd: &Cmd, limit: Option<Instant>) -> Vec<Result<T>> {
        let round = Instant::now() + self.timeout;
        let deadline = limit.map_or(round, |limit| limit.min(round));
        if let [node] = &self.list[..] {
            return vec![node.run(cmd, deadline)];
        }
        let replies = self.fan_out(cmd, None, deadline);
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
        let replies = match &self.list[..] {
            [node] => vec![
                node.run_waiting(cmd, wait, deadline)
                    .map(|(reply, acked)| (reply, Some(acked))),
            ],
            _ => self.fan_out(cmd, Some(wait), deadline),
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
        deadline: Instant,
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
                match self.list[i].send(&packed, deadline) {
                    Ok(conn) => sent.push((i, conn)),
                    Err(err) => settle(&mut results[i], Err(err)),
                }
            }
            for (i, mut conn) in sent {
                let result = self.list[i].receive(&mut conn, cmd, wait, deadline);
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
        lock: &str,
    ) -> Result<()> {
        if failed.is_empty() {
            return Ok(());
        }
        Err(Error::PartialRelease {
            lock: lock.to_owned(),
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

fn query_loading_scripts<T: FromRedisValue>(
    c: &mut Connection,
    cmd: &Cmd,
) -> redis::RedisResult<T> {
    match cmd.query(c) {
        Err(err) if is_noscript(&err) => {
            scripts::load_all(c)?;
            cmd.query(c)
        }
        result => result,
    }
}

/// Sends `cmd` and `wait` in one write and reads both replies, loading the scripts and
/// trying once more if Redis lost them.
fn exchange_waiting<T: FromRedisValue>(
    c: &mut Connection,
    cmd: &Cmd,
    wait: &Cmd,
) -> redis::RedisResult<(T, i64)> {
    let mut packed = cmd.get_packed_command();
    wait.write_packed_command(&mut packed);
    c.send_packed_command(&packed)?;
    match receive_waiting(c) {
        Err(err) if is_noscript(&err) => {
            scripts::load_all(c)?;
            c.send_packed_command(&packed)?;
            receive_waiting(c)
        }
        result => result,
    }
}

/// Reads the replies to a command and the `WAIT` sent after it. Both are read even when the
/// first is an error, so that the connection stays in step.
fn receive_waiting<T: FromRedisValue>(c: &mut Connection) -> redis::RedisResult<(T, i64)> {
    let reply = c.recv_response()?;
    let acked = c.recv_response()?.extract_error();
    let reply = redis::from_redis_value(reply.extract_error()?)?;
    Ok((reply, redis::from_redis_value(acked?)?))
}

fn is_noscript(err: &redis::RedisError) -> bool {
    err.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}
