//! A primary managed by Redis Sentinel, followed across failovers.
//!
//! The primary's address comes from the sentinels (`SENTINEL MASTER`, asked in turn within
//! the connect and response timeouts until a majority of them answered), and every
//! connection opened to it must say `ROLE` master: a replica is refused.
//!
//! Moves only go forward. Each sentinel reports the configuration epoch under which it
//! names the primary; a failover makes a new configuration with a higher epoch. A sentinel
//! that missed the failover (partitioned, paused) still names the old primary under the old
//! epoch, and that primary may still say master until it is reconfigured: the client never
//! moves to an address named under an epoch lower than, or equal to, the one it follows.
//! Asked afresh, the sentinels' answer is the one named under the highest epoch.
//!
//! A thread stays subscribed to `+switch-master` on one sentinel, moving to the next when
//! that one stops answering (PING every ping interval), and asks again where the primary
//! is after each subscription and each announcement, since a switch may have been
//! announced meanwhile.
//!
//! A move starts a new generation (see [`crate::topology::server`]): every pooled connection to the
//! old primary is retired instead of being used again, and the listeners run: the node
//! moves its unlock subscriber, the client renews every watched hold on the new primary at
//! once, which also finds the holds whose keys did not reach it. A `READONLY` reply or a
//! connection that finds a replica makes the sentinels be asked again.
//!
//! This matters because a demoted primary keeps accepting writes until Sentinel reconfigures
//! it, and those writes are discarded when it resynchronises as a replica: a lock granted
//! there is no lock.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::thread;
use std::time::Duration;

use parking_lot::Mutex;
use redis::{
    Client, Connection, ConnectionAddr, ErrorKind, IntoConnectionInfo, RedisError, RedisResult,
    ServerErrorKind, Value,
};

use crate::base::config::{Config, Credentials};
use crate::base::error::{Error, NodeError, Result};
use crate::base::retry::Backoff;
use crate::base::tls::Certificates;
use crate::topology::endpoint::{self, Endpoint};

/// The channel on which sentinels announce a new primary:
/// `<master name> <old ip> <old port> <new ip> <new port>`.
const SWITCH_MASTER: &str = "+switch-master";

/// Most sentinels one client may ask.
const MAX_SENTINELS: usize = 64;

/// The primary of one master name.
pub(crate) struct Sentinel {
    master: String,
    /// Each sentinel's `host:port` (for errors and logs) and client (with the credentials
    /// of its URL and the certificates).
    sentinels: Vec<(String, Client)>,
    credentials: Option<Credentials>,
    /// Certificates for `rediss://` sentinels and primaries.
    tls: Certificates,
    connect_timeout: Duration,
    response_timeout: Duration,
    ping_interval: Duration,
    /// Bumped, under `current`'s lock, each time the primary's address changes.
    generation: AtomicU64,
    current: Mutex<Option<Primary>>,
    /// One thread at a time asks the sentinels or moves the primary.
    moving: Mutex<()>,
    /// The sentinel watched last: asked first, since it is the one whose announcements the
    /// client follows.
    watched: AtomicUsize,
    /// Whether a thread is asking the sentinels after a `READONLY`.
    asking: AtomicBool,
    listeners: Mutex<Vec<Listener>>,
}

type Listener = Box<dyn Fn() -> bool + Send + Sync>;

struct Primary {
    host: String,
    port: u16,
    /// The configuration epoch it was named under.
    epoch: u64,
    client: Client,
}

/// A primary as one sentinel names it.
struct Named {
    host: String,
    port: u16,
    /// The sentinel's `config-epoch` for the master name.
    epoch: u64,
}

impl Sentinel {
    /// Checks the sentinel URLs and the master name, and starts the thread that watches for
    /// switches. Asks nothing yet.
    pub fn start(urls: &[String], master: &str, config: &Config) -> Result<Arc<Sentinel>> {
        let bad = |setting, reason: &str| Error::InvalidConfig {
            setting,
            reason: reason.to_owned(),
        };
        if urls.is_empty() || urls.len() > MAX_SENTINELS {
            return Err(bad("sentinel_urls", "1 to 64 sentinels are needed"));
        }
        if master.is_empty() || master.contains(char::is_whitespace) {
            return Err(bad("master_name", "must be non-empty, without spaces"));
        }
        let sentinels = urls
            .iter()
            .map(|url| endpoint::client_for_url(url, &config.tls))
            .collect::<Result<Vec<_>>>()?;
        let sentinel = Arc::new(Sentinel {
            master: master.to_owned(),
            sentinels,
            credentials: config.primary_credentials.clone(),
            tls: config.tls.clone(),
            connect_timeout: config.connect_timeout,
            response_timeout: config.response_timeout,
            ping_interval: config.ping_interval,
            generation: AtomicU64::new(0),
            current: Mutex::new(None),
            moving: Mutex::new(()),
            watched: AtomicUsize::new(0),
            asking: AtomicBool::new(false),
            listeners: Mutex::new(Vec::new()),
        });
        let weak = Arc::downgrade(&sentinel);
        thread::Builder::new()
            .name("redmutex-sentinel".into())
            .stack_size(128 * 1024)
            .spawn(move || watch(&weak))
            .map_err(|source| Error::redis_at(master, source.into()))?;
        Ok(sentinel)
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The primary now, asking the sentinels if it is not known yet.
    pub fn endpoint(&self) -> Result<Endpoint> {
        if let Some(endpoint) = self.known() {
            return Ok(endpoint);
        }
        let _moving = self.moving.lock();
        match self.known() {
            Some(endpoint) => Ok(endpoint),
            None => {
                let named = self.ask()?;
                self.move_to(named)
            }
        }
    }

    fn known(&self) -> Option<Endpoint> {
        let current = self.current.lock();
        current.as_ref().map(|primary| Endpoint {
            client: primary.client.clone(),
            generation: self.generation(),
        })
    }

    /// Refuses a connection to a server that is not a master, and has the sentinels asked
    /// again.
    pub fn verify(self: &Arc<Self>, conn: &mut Connection, generation: u64) -> RedisResult<()> {
        let role: Value = redis::cmd("ROLE").query(conn)?;
        let master = matches!(&role, Value::Array(items)
            if matches!(items.first(), Some(Value::BulkString(role)) if role == b"master"));
        if master {
            return Ok(());
        }
        self.demoted(generation);
        Err(RedisError::from((
            ErrorKind::Server(ServerErrorKind::ReadOnly),
            "not a primary",
            format!(
                "the server named by the sentinels for {:?} is a replica",
                self.master
            ),
        )))
    }

    /// The primary of `generation` turned out to be a replica: has the sentinels asked
    /// again on another thread (so that no caller waits on them past its deadline), unless
    /// the primary moved meanwhile or they are being asked already.
    pub fn demoted(self: &Arc<Self>, generation: u64) {
        if self.generation() != generation || self.asking.swap(true, Ordering::AcqRel) {
            return;
        }
        let sentinel = self.clone();
        let spawned = thread::Builder::new()
            .name("redmutex-sentinel".into())
            .stack_size(128 * 1024)
            .spawn(move || {
                sentinel.ask_again(generation);
                sentinel.asking.store(false, Ordering::Release);
            });
        if let Err(err) = spawned {
            self.asking.store(false, Ordering::Release);
            log::warn!("could not start asking the sentinels: {err}");
        }
    }

    fn ask_again(&self, generation: u64) {
        let _moving = self.moving.lock();
        if self.generation() != generation {
            return;
        }
        log::info!(
            "the primary of {:?} answered as a replica; asking the sentinels",
            self.master
        );
        match self.ask() {
            Ok(named) => {
                let _ = self.move_to(named);
            }
            Err(err) => log::warn!("{err:#}"),
        }
    }

    pub fn on_move(&self, listener: Listener) {
        self.listeners.lock().push(listener);
    }

    /// Makes the `named` primary the current one, unless it is the current one or was named
    /// under an older configuration epoch than the current one; when that is a move, starts
    /// a new generation and runs the listeners. The caller holds `moving`.
    fn move_to(&self, named: Named) -> Result<Endpoint> {
        let Named { host, port, epoch } = named;
        let mut current = self.current.lock();
        if let Some(primary) = current.as_mut() {
            let same = primary.host == host && primary.port == port;
            if same {
                primary.epoch = primary.epoch.max(epoch);
            } else if epoch <= primary.epoch {
                log::warn!(
                    "a sentinel names {host}:{port} the primary of {:?} under configuration \
                     epoch {epoch}, not newer than the {} of {}:{}; staying",
                    self.master,
                    primary.epoch,
                    primary.host,
                    primary.port
                );
            }
            if same || epoch <= primary.epoch {
                return Ok(Endpoint {
                    client: primary.client.clone(),
                    generation: self.generation(),
                });
            }
        }
        let client = self
            .primary_client(&host, port)
            .map_err(|source| Error::redis_at(&self.master, source))?;
        let generation = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        let endpoint = Endpoint {
            client: client.clone(),
            generation,
        };
        let old = current.replace(Primary {
            host,
            port,
            epoch,
            client,
        });
        let new = current.as_ref().map(|p| format!("{}:{}", p.host, p.port));
        drop(current);
        let new = new.unwrap_or_default();
        match old {
            None => log::info!("the primary of {:?} is {new}", self.master),
            Some(old) => {
                log::warn!(
                    "the primary of {:?} moved from {}:{} to {new}",
                    self.master,
                    old.host,
                    old.port
                );
                self.listeners.lock().retain(|listener| listener());
            }
        }
        Ok(endpoint)
    }

    /// A client for the primary at `host:port`: over TLS when the sentinels are reached
    /// over TLS (`rediss://`, with their `#insecure` if given), with the primary's
    /// credentials.
    fn primary_client(&self, host: &str, port: u16) -> RedisResult<Client> {
        let sentinel = self.sentinels.first();
        let addr = match sentinel.map(|(_, client)| client.get_connection_info().addr()) {
            Some(ConnectionAddr::TcpTls { insecure, .. }) => ConnectionAddr::TcpTls {
                host: host.to_owned(),
                port,
                insecure: *insecure,
                tls_params: None,
            },
            _ => ConnectionAddr::Tcp(host.to_owned(), port),
        };
        let info = addr.into_connection_info()?;
        let mut settings = info.redis_settings().clone();
        if let Some(credentials) = &self.credentials {
            if let Some(username) = &credentials.username {
                settings = settings.set_username(username);
            }
            settings = settings.set_password(&credentials.password);
        }
        endpoint::client(info.set_redis_settings(settings), &self.tls)
    }

    /// Asks the sentinels in turn, starting with the one watched last, until a majority of
    /// them answered (or all were asked), for the primary's address: the one named under the
    /// highest configuration epoch. A sentinel that missed a failover is then outvoted by
    /// any that saw it.
    fn ask(&self) -> Result<Named> {
        let n = self.sentinels.len();
        let start = self.watched.load(Ordering::Relaxed);
        let mut failed = Vec::new();
        let mut answers: Vec<Named> = Vec::new();
        for i in (0..n).map(|i| (start + i) % n) {
            if answers.len() > n / 2 {
                break;
            }
            let (name, _) = &self.sentinels[i];
            match self.ask_one(i) {
                Ok(named) => answers.push(named),
                Err(source) => {
                    log::debug!("sentinel {name} did not name the primary: {source}");
                    failed.push(NodeError {
                        node: name.clone(),
                        error: Error::redis_at(name, source),
                    });
                }
            }
        }
        answers
            .into_iter()
            .max_by_key(|named| named.epoch)
            .ok_or_else(|| Error::NoPrimary {
                master: self.master.clone(),
                failed,
            })
    }

    /// What sentinel `i` names the primary, and under which configuration epoch.
    fn ask_one(&self, i: usize) -> RedisResult<Named> {
        let mut conn = self.connect(i)?;
        let fields: Vec<String> = redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg(&self.master)
            .query(&mut conn)?;
        let field = |name: &str| {
            let at = fields.iter().step_by(2).position(|field| field == name)?;
            fields.get(2 * at + 1)
        };
        let number = |name: &str| field(name).and_then(|value| value.parse().ok());
        // While a failover is under way its leader reports the new epoch with the old
        // address: no answer to act on yet.
        if field("flags").is_some_and(|flags| flags.contains("failover_in_progress")) {
            return Err(RedisError::from((
                ErrorKind::Server(ServerErrorKind::TryAgain),
                "failover in progress",
                format!("this sentinel is failing {:?} over", self.master),
            )));
        }
        match (field("ip"), number("port"), number("config-epoch")) {
            (Some(host), Some(port), Some(epoch)) => Ok(Named {
                host: host.clone(),
                port: u16::try_from(port).unwrap_or_default(),
                epoch,
            }),
            _ => Err(RedisError::from((
                ErrorKind::Parse,
                "unexpected reply",
                format!(
                    "SENTINEL MASTER {:?} gave no ip, port and config-epoch",
                    self.master
                ),
            ))),
        }
    }

    /// A connection to sentinel `i`, with the client's timeouts.
    fn connect(&self, i: usize) -> RedisResult<Connection> {
        let client = &self.sentinels[i].1;
        endpoint::connect(client, self.connect_timeout, self.response_timeout)
    }

    /// Handles a `+switch-master` announcement of sentinel `i`: asks it where the primary is
    /// now, and under which configuration epoch (the announcement does not say).
    fn announced(&self, i: usize, payload: &[u8]) {
        let text = String::from_utf8_lossy(payload);
        if text.split_whitespace().next() == Some(self.master.as_str()) {
            self.catch_up(i);
        }
    }

    /// After subscribing on sentinel `i`, and after it announced a switch: asks it where the
    /// primary is, in case a switch was announced while no sentinel was watched.
    fn catch_up(&self, i: usize) {
        self.watched.store(i, Ordering::Relaxed);
        let _moving = self.moving.lock();
        if self.current.lock().is_none() {
            return; // nobody asked yet; the first connect asks
        }
        match self.ask_one(i) {
            Ok(named) => {
                if let Err(err) = self.move_to(named) {
                    log::warn!("{err:#}");
                }
            }
            Err(err) => log::debug!(
                "sentinel {} did not name the primary: {err}",
                self.sentinels[i].0
            ),
        }
    }
}

/// The watching thread: subscribed on one sentinel after the other, until the topology is
/// dropped.
fn watch(weak: &Weak<Sentinel>) {
    let mut next = 0;
    let mut backoff = Backoff::new(Duration::from_millis(10), Duration::from_secs(1));
    loop {
        let Some(sentinel) = weak.upgrade() else {
            return;
        };
        let n = sentinel.sentinels.len();
        let name = sentinel.sentinels[next % n].0.clone();
        let pause = backoff.next_delay(None);
        drop(sentinel);
        match watch_one(weak, next % n) {
            Ok(true) => backoff = Backoff::new(Duration::from_millis(10), Duration::from_secs(1)),
            Ok(false) => return,
            Err(err) => {
                log::debug!("watching sentinel {name} failed: {err}");
                thread::sleep(pause);
            }
        }
        next += 1;
    }
}

/// Follows the announcements of sentinel `i` until its connection fails: `Ok(true)` when it
/// had worked, `Ok(false)` when the topology is gone, `Err` when it could not start.
fn watch_one(weak: &Weak<Sentinel>, i: usize) -> RedisResult<bool> {
    let (mut conn, ping_interval, response_timeout) = {
        let Some(sentinel) = weak.upgrade() else {
            return Ok(false);
        };
        let conn = sentinel.connect(i)?;
        (conn, sentinel.ping_interval, sentinel.response_timeout)
    };
    let mut pubsub = conn.as_pubsub();
    pubsub.subscribe(SWITCH_MASTER)?;
    match weak.upgrade() {
        Some(sentinel) => sentinel.catch_up(i),
        None => return Ok(false),
    }
    let err = loop {
        // A read that times out between messages loses nothing: `get_message` keeps what
        // it has parsed.
        if let Err(err) = pubsub.set_read_timeout(Some(ping_interval)) {
            break err;
        }
        match pubsub.get_message() {
            Ok(message) => match weak.upgrade() {
                Some(sentinel) => sentinel.announced(i, message.get_payload_bytes()),
                None => return Ok(false),
            },
            Err(err) if err.is_timeout() => {
                if weak.strong_count() == 0 {
                    return Ok(false);
                }
                // Silent for a ping interval: make sure the sentinel is still there.
                let pinged = pubsub
                    .set_read_timeout(Some(response_timeout))
                    .and_then(|()| pubsub.ping::<Value>());
                if let Err(err) = pinged {
                    break err;
                }
            }
            Err(err) => break err,
        }
    };
    log::info!("lost the sentinel watched for switches: {err}; moving to the next one");
    Ok(true)
}
