//! The Redis nodes a client locks on: per node a connection pool and an unlock subscriber,
//! and commands sent to every node at once.
//!
//! A single-node client has one node and a quorum of one. A Redlock client has N independent
//! masters and a quorum of N/2 + 1; its commands go out to all nodes before any reply is
//! read, so a round costs the slowest node's round trip, not the sum of them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redis::io::tcp::{TcpSettings, socket2};
use redis::{Cmd, Connection, ErrorKind, FromRedisValue, IntoConnectionInfo, ServerErrorKind};
use scheduled_thread_pool::{OnPoolDropBehavior, ScheduledThreadPool};

use crate::config::Config;
use crate::error::{Error, NodeError, Result};
use crate::notify::{Notifier, Settings, Waker};
use crate::pool::{Conn, Manager};
use crate::{layout, scripts};

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
    pub notifier: Notifier,
}

impl Node {
    /// Parses `url` and prepares the pool; opens nothing yet.
    pub fn new(url: &str, config: &Config) -> Result<Node> {
        let invalid = |source| Error::InvalidUrl {
            url: redact(url),
            source,
        };
        crate::tls::check_url(url).map_err(invalid)?;
        let info = url.into_connection_info().map_err(invalid)?;
        let name = info.addr().to_string();
        let client =
            crate::tls::client(info.clone(), config).map_err(|source| Error::InvalidConfig {
                setting: "tls certificates",
                reason: source.to_string(),
            })?;
        let unreachable = Arc::new(AtomicBool::new(false));
        let manager = || Manager {
            client: client.clone(),
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
        let notifier = Notifier::new(Settings {
            client: subscriber_client(&client)?,
            connect_timeout: config.connect_timeout,
            response_timeout: config.response_timeout,
            ping_interval: config.ping_interval,
            wake_prefix: layout::wake_channel_prefix(&config.key_prefix),
            waker: waker(pool.clone()),
        });
        Ok(Node {
            name,
            pool,
            direct: manager(),
            unreachable,
            notifier,
        })
    }

    /// Opens a fresh connection, within the connect and response timeouts, loads the scripts
    /// and checks that the user may run what the locks need on `probe_key` (a lock key under
    /// the client's prefix), its channel and its latch.
    pub fn check(&self, probe_key: &[u8]) -> Result<()> {
        let channel = layout::channel(probe_key);
        let latch = layout::unlock_latch(probe_key, &layout::random_id());
        let cmd = scripts::check(probe_key, &channel, &latch);
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
        let mut attempts_left = self.pool.max_size() + 1;
        loop {
            let mut conn = match self.pool.try_get() {
                Some(conn) => conn,
                None => {
                    let left = end.saturating_duration_since(Instant::now());
                    let wait = left.min(self.direct.connect_timeout);
                    self.pool
                        .get_timeout(wait.max(Duration::from_millis(1)))
                        .map_err(|source| self.pool_error(source))?
                }
            };
            attempts_left -= 1;
            match self.within(&mut conn, end, |c| query_loading_scripts(c, cmd)) {
                Err(err)
                    if attempts_left > 0 && err.is_connection_dropped() && Instant::now() < end =>
                {
                    log::debug!("connection to {} dropped, retrying: {err}", self.name);
                }
                result => return result.map_err(|source| self.redis_error(source)),
            }
        }
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
        let mut conn = match self.pool.try_get() {
            Some(conn) => conn,
            None => {
                let wait = match self.unreachable.load(Ordering::Relaxed) {
                    true => Duration::ZERO,
                    false => deadline.saturating_duration_since(Instant::now()),
                };
                self.pool
                    .get_timeout(wait.max(Duration::from_millis(1)))
                    .map_err(|source| self.pool_error(source))?
            }
        };
        conn.run(|c| c.send_packed_command(packed))
            .map_err(|source| self.redis_error(source))?;
        Ok(conn)
    }

    /// Reads the reply to what `send` sent, waiting at most until `deadline`.
    fn receive<T: FromRedisValue>(
        &self,
        conn: &mut Conn,
        cmd: &Cmd,
        deadline: Instant,
    ) -> Result<T> {
        let reply = self.within(conn, deadline, |c| {
            match c.recv_response()?.extract_error() {
                Err(err) if is_noscript(&err) => query_loading_scripts(c, cmd),
                value => Ok(redis::from_redis_value(value?)?),
            }
        });
        reply.map_err(|source| self.redis_error(source))
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

/// The client of the subscriber connections: the pool's address, TLS settings and
/// credentials, over RESP3 (so that it can send commands while subscribed), with TCP
/// keepalive under its own PING as a backstop and without Nagle's delay.
fn subscriber_client(pooled: &redis::Client) -> Result<redis::Client> {
    let info = pooled.get_connection_info().clone();
    let redis_settings = info
        .redis_settings()
        .clone()
        .set_protocol(redis::ProtocolVersion::RESP3);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(10))
        .with_interval(Duration::from_secs(5));
    let tcp = TcpSettings::default()
        .set_nodelay(true)
        .set_keepalive(keepalive);
    let info = info
        .set_redis_settings(redis_settings)
        .set_tcp_settings(tcp);
    redis::Client::open(info).map_err(|source| Error::InvalidUrl {
        url: pooled.get_connection_info().addr().to_string(),
        source,
    })
}

/// Publishes a wake-up for the subscriber thread over a pooled connection.
fn waker(pool: r2d2::Pool<Manager>) -> Waker {
    Arc::new(move |channel: &[u8], wait: Duration| {
        let mut conn = match pool.try_get() {
            Some(conn) => conn,
            None => pool
                .get_timeout(wait.max(Duration::from_millis(1)))
                .map_err(|err| redis::RedisError::from(std::io::Error::other(err.to_string())))?,
        };
        conn.run(|c| redis::cmd("PUBLISH").arg(channel).arg("w").query::<i64>(c))
            .map(drop)
    })
}

/// The nodes of one client and how many of them must agree.
pub(crate) struct Nodes {
    list: Vec<Arc<Node>>,
    /// How long one round of a command on every node may take: the response timeout, plus
    /// the connect timeout on a single node (whose round may have to open a connection).
    timeout: Duration,
}

impl Nodes {
    pub fn new(
        list: Vec<Arc<Node>>,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Nodes {
        let timeout = match list.len() {
            1 => connect_timeout + response_timeout,
            _ => response_timeout,
        };
        Nodes { list, timeout }
    }

    pub fn list(&self) -> &[Arc<Node>] {
        &self.list
    }

    /// N/2 + 1 of the configured N, reachable or not.
    pub fn quorum(&self) -> usize {
        self.list.len() / 2 + 1
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
        let packed = cmd.get_packed_command();
        let mut results: Vec<Option<Result<T>>> = self.list.iter().map(|_| None).collect();
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
                let result = self.list[i].receive(&mut conn, cmd, deadline);
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
        let mut answers = self.answers(results)?;
        answers.sort_unstable_by(|a, b| b.cmp(a));
        Ok(answers[self.quorum() - 1])
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

fn is_noscript(err: &redis::RedisError) -> bool {
    err.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

/// The URL without its user information, fit for errors and logs.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}
