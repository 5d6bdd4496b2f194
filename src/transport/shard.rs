//! One Redis server a client talks to: its connection pool and its unlock subscriber. A
//! standalone or Sentinel deployment is one shard; a cluster has one per primary.
//!
//! A shard does not keep an address: its topology says where its server is now (a fixed
//! address, or the primary Sentinel names), and a reply from a server the shard has moved
//! away from is refused and the command sent again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{Cmd, Connection, ErrorKind, FromRedisValue, RedisError, RedisResult, ServerErrorKind};
use scheduled_thread_pool::{OnPoolDropBehavior, ScheduledThreadPool};

use crate::base::config::Config;
use crate::base::error::{Error, Result};
use crate::layout::names;
use crate::notify::hub::{Lost, Settings, Waker};
use crate::notify::notifier::Notifier;
use crate::topology::endpoint;
use crate::topology::sentinel::Sentinel;
use crate::topology::server::Topology;
use crate::transport::common;
use crate::transport::no_scripts;
use crate::transport::pool::{Conn, KeepFailures, LastFailure, Manager, Opens};
use crate::transport::scripts;

pub(crate) type Pooled = r2d2::PooledConnection<Manager>;

/// How long a shard that fails fast waits for a connection before it looks whether a
/// connect failed meanwhile.
const FAIL_FAST_SLICE: Duration = Duration::from_millis(20);

/// One Redis server.
pub(crate) struct Shard {
    /// `host:port`, for errors and logs.
    pub name: String,
    pool: r2d2::Pool<Manager>,
    /// Opens connections outside the pool, to check the server at build time.
    direct: Manager,
    /// How the attempts to open a connection went. While the last one failed, rounds wait
    /// only a moment for a connection to this server (which still starts a reconnect in the
    /// background) instead of their whole timeout; the next successful connect clears it.
    opens: Arc<Opens>,
    /// Whether a call gives up on this server as soon as a connect made while it waits
    /// fails: a cluster's primary, whose slots a replica may serve by now.
    fails_fast: bool,
    pub notifier: Arc<Notifier>,
    /// Where the server is now.
    topology: Arc<Topology>,
}

impl Shard {
    /// Parses `url` and prepares the pool; opens nothing yet.
    pub fn new(url: &str, config: &Config) -> Result<Shard> {
        let (name, client) = endpoint::client_for_url(url, &config.tls)?;
        Ok(Shard::at(
            name,
            Topology::Fixed(Box::new(client)),
            config,
            false,
            None,
        ))
    }

    /// The primary that the sentinels at `sentinel_urls` name for `master`, followed across
    /// failovers; named after `master`. Asks nothing yet.
    pub fn sentinel(sentinel_urls: &[String], master: &str, config: &Config) -> Result<Shard> {
        let sentinel = Sentinel::start(sentinel_urls, master, config)?;
        let node = Shard::at(
            master.to_owned(),
            Topology::Sentinel(sentinel),
            config,
            false,
            None,
        );
        // The subscriber follows the primary: it reconnects there, subscribes again and
        // wakes every waiter.
        let notifier = Arc::downgrade(&node.notifier);
        node.on_move(move || notifier.upgrade().map(|n| n.reconnect()).is_some());
        Ok(node)
    }

    /// A shard whose server is where `topology` says; with `sharded`, its subscriber uses a
    /// cluster's sharded pub/sub. With `lost` (a cluster's primary, which a replica may
    /// replace), the subscriber tells it when it loses its server, and calls give up on a
    /// server that refuses connections at once (see [`Self::checkout_within`]).
    pub fn at(
        name: String,
        topology: Topology,
        config: &Config,
        sharded: bool,
        lost: Option<Lost>,
    ) -> Shard {
        let topology = Arc::new(topology);
        let opens = Arc::new(Opens::default());
        let last_failure = LastFailure::default();
        let manager = || Manager {
            node: name.clone(),
            topology: topology.clone(),
            connect_timeout: config.connect_timeout,
            response_timeout: config.response_timeout,
            opens: opens.clone(),
            last_failure: last_failure.clone(),
            name: config.connection_name("redmutex"),
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
            .error_handler(Box::new(KeepFailures(last_failure.clone())))
            .build_unchecked(manager());
        let notifier = Arc::new(Notifier::new(Settings {
            topology: topology.clone(),
            connect_timeout: config.connect_timeout,
            response_timeout: config.response_timeout,
            ping_interval: config.ping_interval,
            wake_prefix: names::wake_channel_prefix(&config.key_prefix),
            waker: waker(pool.clone(), topology.clone()),
            sharded,
            name: config.connection_name("redmutex-notify"),
            lost: lost.clone(),
        }));
        let direct = manager();
        Shard {
            name,
            pool,
            direct,
            opens,
            fails_fast: lost.is_some(),
            notifier,
            topology,
        }
    }

    /// Runs `listener` each time the shard's server moves (a Sentinel failover), after the
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
        let cmd = common::check(probe_key, &channel, &latch);
        self.topology.endpoint()?;
        let mut conn = self.direct.open()?;
        let end = Instant::now() + self.direct.response_timeout;
        let denied: Vec<String> =
            conn.run(|c| query_loading_scripts(c, &cmd))
                .map_err(|source| match source.kind() {
                    ErrorKind::Server(ServerErrorKind::NoPerm) => Error::Permission {
                        node: self.name.clone(),
                        denied: vec![source.to_string()],
                    },
                    _ => self.failed(&mut conn, &cmd, source, end),
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
        self.run_with(cmd, end, |c| query_loading_scripts(c, cmd))
    }

    /// Runs `cmd` as [`run`](Self::run) does: after `ASKING` when `asking` (its key's slot
    /// is being migrated to this server), and followed by `wait` (a `WAIT`) on the same
    /// connection when one is given, whose reply is the second value.
    pub fn run_routed<T: FromRedisValue>(
        &self,
        cmd: &Cmd,
        wait: Option<&Cmd>,
        asking: bool,
        end: Instant,
    ) -> Result<Acked<T>> {
        self.run_with(cmd, end, |c| {
            if asking {
                redis::cmd("ASKING").query::<()>(c)?;
            }
            match wait {
                None => query_loading_scripts(c, cmd).map(|reply| (reply, None)),
                Some(wait) => exchange_waiting(c, cmd, wait).map(|(reply, n)| (reply, Some(n))),
            }
        })
    }

    /// Runs `exchange` (which sends `cmd`) as [`run`](Self::run) says.
    fn run_with<T>(
        &self,
        cmd: &Cmd,
        end: Instant,
        exchange: impl Fn(&mut Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let mut attempts_left = self.pool.max_size() + 1;
        loop {
            let mut conn = self.checkout_within(end)?;
            attempts_left -= 1;
            let result = self.within(&mut conn, end, &exchange);
            match self.moved(&mut conn, result) {
                Err(err)
                    if attempts_left > 0 && err.is_connection_dropped() && Instant::now() < end =>
                {
                    log::debug!("connection to {} dropped, retrying: {err}", self.name);
                }
                result => return result.map_err(|source| self.failed(&mut conn, cmd, source, end)),
            }
        }
    }

    /// A pooled connection, waiting for one until `end` and a connect timeout at most. A
    /// shard that fails fast gives up as soon as a connect made
    /// meanwhile fails (a refused connection costs no timeout), so that its cluster reads the
    /// map again and the call goes on where the slot is now.
    fn checkout_within(&self, end: Instant) -> Result<Pooled> {
        let limit = end.min(Instant::now() + self.direct.connect_timeout);
        let left = || limit.saturating_duration_since(Instant::now());
        if !self.fails_fast {
            return self.checkout(left);
        }
        let failures = self.opens.failures();
        loop {
            match self.checkout(|| left().min(FAIL_FAST_SLICE)) {
                Err(_) if left() > Duration::ZERO && self.opens.failures() == failures => {}
                checked_out => return checked_out,
            }
        }
    }

    /// A pooled connection, as [`checkout`] gives one.
    fn checkout(&self, wait: impl Fn() -> Duration) -> Result<Pooled> {
        checkout(&self.pool, &self.topology, wait).map_err(|_| self.pool_error())
    }

    /// Refuses a reply from a server that is no longer the shard's: one answered `READONLY`
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
    /// server is unreachable), and sends `packed`.
    pub fn send(&self, packed: &[u8], deadline: Instant) -> Result<Pooled> {
        let mut conn = self.checkout(|| match self.opens.unreachable() {
            true => Duration::ZERO,
            false => deadline.saturating_duration_since(Instant::now()),
        })?;
        conn.run(|c| c.send_packed_command(packed))
            .map_err(|source| self.redis_error(source))?;
        Ok(conn)
    }

    /// Reads the reply to what `send` sent, waiting at most until `deadline`.
    pub fn receive<T: FromRedisValue>(
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
            .map_err(|source| self.failed(conn, cmd, source, deadline))
    }

    fn redis_error(&self, source: redis::RedisError) -> Error {
        Error::redis_at(&self.name, source)
    }

    /// The error for `source`, the failure of `cmd` on `conn`: when it is a plain `ERR` to
    /// a script call, the server is asked on `conn`, within `end`, whether it runs scripts
    /// at all (see [`no_scripts`]), and the error says so when it does not.
    fn failed(&self, conn: &mut Conn, cmd: &Cmd, source: RedisError, end: Instant) -> Error {
        if !no_scripts::worth_asking(cmd, &source) {
            return self.redis_error(source);
        }
        match self.within(conn, end, no_scripts::runs_none) {
            Ok(true) => Error::no_scripts_at(&self.name, source),
            Ok(false) => self.redis_error(source),
            Err(err) => {
                log::debug!(
                    "{}: could not tell whether it runs scripts: {err}",
                    self.name
                );
                self.redis_error(source)
            }
        }
    }

    /// No connection came in time: why the last connect failed, if it did, is the cause
    /// (`r2d2`'s own error only repeats its message).
    fn pool_error(&self) -> Error {
        Error::pool_at(&self.name, self.direct.last_failure())
    }
}

/// A reply, and the reply of the `WAIT` sent after it, if one was.
pub(crate) type Acked<T> = (T, Option<i64>);

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

/// Publishes a wake-up (or an arming message) for the subscriber thread over a pooled
/// connection.
fn waker(pool: r2d2::Pool<Manager>, topology: Arc<Topology>) -> Waker {
    Arc::new(move |channel: &[u8], payload: &[u8], wait: Duration| {
        let mut conn = checkout(&pool, &topology, || wait)
            .map_err(|err| redis::RedisError::from(std::io::Error::other(err.to_string())))?;
        conn.run(|c| {
            redis::cmd("PUBLISH")
                .arg(channel)
                .arg(payload)
                .query::<i64>(c)
        })
        .map(drop)
    })
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
