//! A Redis Cluster as one node of a client: a shard per primary, chosen by the slot of each
//! command's first key, on plain connections.
//!
//! The `redis` crate's cluster connection is not used: its blocking flavour re-sends a
//! command that timed out up to 16 times and stops following `MOVED` when its retries are
//! turned off, and it has no pub/sub. Here each primary is a [`Shard`] like a standalone
//! server (pool, subscriber, deadlines, scripts loaded per server on `NOSCRIPT`), and the
//! routing is ours: `MOVED` patches the slot map and sends the command to the new owner,
//! `ASK` sends it once to the importing server after `ASKING`, `TRYAGAIN` and `CLUSTERDOWN`
//! are retried after a pause, and a server that cannot be reached makes the map be read
//! again (a failover promotes a replica). Every retry keeps to the caller's deadline; every
//! script is safe to repeat.
//!
//! When the map changes, shards that serve no slot any more are dropped (their waiters are
//! woken and subscribe again on the new owner) and the listeners run (every watched hold is
//! renewed at once, where its slot is now).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard, RwLock};
use redis::{
    Arg, Client, Cmd, ConnectionAddr, ErrorKind, FromRedisValue, RedisError, ServerErrorKind, Value,
};

use crate::base::config::Config;
use crate::base::error::{Error, Result};
use crate::base::retry::Backoff;
use crate::notify::hub::Lost;
use crate::notify::interrupt;
use crate::topology::endpoint;
use crate::topology::server::Topology;
use crate::topology::slots::{self, Addr, SlotMap};
use crate::transport::scripts;
use crate::transport::shard::{Acked, Shard};

/// How often at most the slot map is read again after a server could not be reached.
const REFRESH_EVERY: Duration = Duration::from_millis(100);

type Listener = Box<dyn Fn() -> bool + Send + Sync>;

/// The primaries of one cluster and which slots each serves.
pub(crate) struct Cluster {
    /// `cluster@host:port` of the first seed, for errors and logs.
    pub name: String,
    /// The seeds: where to ask for the map when no known primary answers; the first one's
    /// credentials and TLS settings serve every shard.
    seeds: Vec<Client>,
    config: Config,
    map: RwLock<SlotMap>,
    shards: Mutex<HashMap<Addr, Arc<Shard>>>,
    /// When the last read of the map began; held while the map is read and installed.
    refreshed: Mutex<Option<Instant>>,
    /// This cluster, for its shards' subscribers to report a lost server.
    this: Weak<Cluster>,
    listeners: Arc<Mutex<Vec<Listener>>>,
    /// Whether every primary has sharded pub/sub (Redis 7): scripts then `SPUBLISH` and
    /// waiters `SSUBSCRIBE`. Decided when the client is built.
    sharded: OnceLock<bool>,
}

/// What a cluster error asks of the client.
enum Redirect {
    /// The slot is served elsewhere for good.
    Moved(Addr),
    /// This one command goes to the importing server.
    Ask(Addr),
    /// The slot is being migrated or has no primary for now: try again shortly.
    Later,
    /// The server could not be reached: read the map again, then try again.
    Unreachable,
}

impl Cluster {
    /// Checks the seed URLs; connects to nothing yet.
    pub fn new(urls: &[String], config: &Config) -> Result<Arc<Cluster>> {
        let seeds = urls
            .iter()
            .map(|url| Ok(endpoint::client_for_url(url, &config.tls)?.1))
            .collect::<Result<Vec<_>>>()?;
        let first = seeds.first().ok_or_else(|| Error::InvalidConfig {
            setting: "urls",
            reason: "at least one seed URL is needed".into(),
        })?;
        let name = format!("cluster@{}", first.get_connection_info().addr());
        Ok(Arc::new_cyclic(|this| Cluster {
            name,
            seeds,
            config: config.clone(),
            map: RwLock::default(),
            shards: Mutex::default(),
            refreshed: Mutex::default(),
            this: this.clone(),
            listeners: Arc::default(),
            sharded: OnceLock::new(),
        }))
    }

    /// Runs `listener` after every change of the slot map, until it returns false.
    pub fn on_move(&self, listener: impl Fn() -> bool + Send + Sync + 'static) {
        self.listeners.lock().push(Box::new(listener));
    }

    /// Runs `cmd` (and `wait` after it) on the primary serving the slot of its first key.
    /// The first try ends by `end`, each later one within a round (connect and response
    /// timeouts); redirections are followed, and a slot that is being migrated or has no
    /// primary is waited for, until `settle` (never before `end`), or until the calling
    /// thread's wait is [interrupted](interrupt::pause). A server that cannot be reached is
    /// tried again until `end` only.
    ///
    /// A release that a migrating slot refuses for its latch (a key yet to be written) is
    /// sent without it, if `unlatch` allows and no try so far may have run (see
    /// [`scripts::unlatched`]); such a send is never repeated after it may have run. An
    /// error after which the command did not run never stands for an earlier one after which
    /// it may have; a slot still unsettled at the bound is [`Error::SlotMoving`].
    pub fn run<T: FromRedisValue>(
        &self,
        cmd: &Cmd,
        wait: Option<&Cmd>,
        (end, settle): (Instant, Instant),
        unlatch: bool,
    ) -> Result<Acked<T>> {
        let slot = routing_key(cmd).map_or(0, slots::slot);
        let mut cmd = self.flavour(cmd);
        let mut unlatched = unlatch.then(|| scripts::unlatched(&cmd)).flatten();
        let mut bare = false;
        // The last error after which the command may have run.
        let mut unsure: Option<Error> = None;
        let give_up = |err: Error, ran: bool, unsure: Option<Error>| match unsure {
            _ if ran => err,
            Some(unsure) if err.is_redirect() || !err.may_have_run() => unsure,
            _ if err.is_redirect() => err.slot_moving(slot),
            _ => err,
        };
        let settle = settle.max(end);
        let round = self.config.connect_timeout + self.config.response_timeout;
        let mut asking: Option<Arc<Shard>> = None;
        let mut backoff = Backoff::new(Duration::from_millis(2), Duration::from_millis(100));
        let mut redirects = 0;
        let mut try_end = end;
        loop {
            let (shard, ask) = match asking.take() {
                Some(shard) => (shard, true),
                None => match self.shard_for(slot, settle) {
                    Ok(shard) => (shard, false),
                    Err(err) => return Err(give_up(err, false, unsure)),
                },
            };
            let err = match shard.run_routed(&cmd, wait, ask, try_end) {
                Ok(acked) => return Ok(acked),
                Err(err) => err,
            };
            let failed = Instant::now();
            let Some(redirect) = redirect(&err, &shard) else {
                return Err(give_up(err, false, unsure));
            };
            let ran = matches!(redirect, Redirect::Unreachable) && err.may_have_run();
            if ran && bare {
                return Err(err);
            }
            // Refused for its latch: sent without it, at once, while nothing may have run.
            if matches!(redirect, Redirect::Later)
                && unsure.is_none()
                && let Some(unlatched) = unlatched.take()
            {
                log::debug!("slot {slot} is migrating: a release goes without its latch");
                (cmd, bare) = (Cow::Owned(unlatched), true);
                continue;
            }
            // A server that cannot be reached: the map is read again (or a read begun since
            // is joined). When it names another owner now (a replica promoted), the command
            // follows it as it follows a move, and a call with no time to settle gets one
            // round there; else the server is tried again within the first try's bound
            // only, since waiting for it is no slot settling.
            let bound = match redirect {
                Redirect::Unreachable => {
                    self.refresh_after(failed, settle.max(end + round));
                    let now = self.shard_now(slot);
                    match now.is_ok_and(|now| !Arc::ptr_eq(&now, &shard)) {
                        true if settle > end => settle,
                        true => end + round,
                        false => end,
                    }
                }
                _ => settle,
            };
            if Instant::now() >= bound {
                return Err(give_up(err, ran, unsure));
            }
            redirects += 1;
            let pause = match redirect {
                Redirect::Moved(addr) => {
                    log::debug!("slot {slot} moved to {}:{}", addr.0, addr.1);
                    self.map.write().moved(slot, addr);
                    // Other slots may have moved too (a failover moves a whole shard's).
                    self.refresh_soon();
                    redirects > 3
                }
                Redirect::Ask(addr) => match self.shard_at(&addr) {
                    Ok(shard) => {
                        asking = Some(shard);
                        redirects > 3
                    }
                    Err(at) => return Err(give_up(at, false, unsure)),
                },
                Redirect::Later | Redirect::Unreachable => true,
            };
            if pause {
                let left = bound.saturating_duration_since(Instant::now());
                if interrupt::pause(backoff.next_delay(Some(left))) {
                    return Err(give_up(err, ran, unsure));
                }
            }
            if ran {
                unsure = Some(err);
            }
            try_end = (Instant::now() + round).min(bound).max(end);
        }
    }

    /// `cmd` as this cluster runs it: a script that publishes in its sharded flavour when
    /// the cluster has sharded pub/sub.
    pub fn flavour<'a>(&self, cmd: &'a Cmd) -> Cow<'a, Cmd> {
        match self.is_sharded() {
            true => scripts::sharded(cmd).map_or(Cow::Borrowed(cmd), Cow::Owned),
            false => Cow::Borrowed(cmd),
        }
    }

    /// Reads the slot map and decides, once, whether to use sharded pub/sub: when no
    /// primary refuses `PUBSUB SHARDNUMSUB` (Redis 7 and later answer it), as Redisson
    /// decides. A primary that cannot be reached now does not decide.
    pub fn start(&self) -> Result<()> {
        self.refresh()?;
        if self.sharded.get().is_some() {
            return Ok(());
        }
        let primaries: Vec<Addr> = self.map.read().primaries().cloned().collect();
        let sharded = primaries.iter().all(|addr| {
            let answered = self.client_at(addr).and_then(|client| {
                let mut conn = endpoint::connect(
                    &client,
                    self.config.connect_timeout,
                    self.config.response_timeout,
                )?;
                redis::cmd("PUBSUB")
                    .arg("SHARDNUMSUB")
                    .query::<Value>(&mut conn)
            });
            match answered {
                Err(err) if err.code().is_some() => {
                    log::info!("{}:{} has no sharded pub/sub: {err}", addr.0, addr.1);
                    false
                }
                _ => true,
            }
        });
        let _ = self.sharded.set(sharded);
        Ok(())
    }

    /// Whether scripts `SPUBLISH` and waiters `SSUBSCRIBE`; false until decided.
    fn is_sharded(&self) -> bool {
        self.sharded.get() == Some(&true)
    }

    /// The shard serving the slot of `cmd`'s first key, as the map says now.
    pub fn shard_of(&self, cmd: &Cmd) -> Result<Arc<Shard>> {
        let slot = routing_key(cmd).map_or(0, slots::slot);
        self.shard_now(slot)
    }

    /// The shard serving `key`'s slot as the map says now, without waiting.
    pub fn shard_for_key(&self, key: &[u8]) -> Result<Arc<Shard>> {
        self.shard_now(slots::slot(key))
    }

    fn shard_now(&self, slot: u16) -> Result<Arc<Shard>> {
        let owner = self.map.read().owner(slot).cloned();
        match owner {
            Some(addr) => self.shard_at(&addr),
            None => {
                self.refresh_soon();
                Err(self.unserved(slot))
            }
        }
    }

    /// The shard serving `slot`, reading the map again while none does, until `end`.
    fn shard_for(&self, slot: u16, end: Instant) -> Result<Arc<Shard>> {
        let mut backoff = Backoff::new(Duration::from_millis(5), Duration::from_millis(100));
        loop {
            match self.shard_now(slot) {
                Err(err) if Instant::now() < end => {
                    log::debug!("{err:#}; reading the slot map again");
                    let left = end.saturating_duration_since(Instant::now());
                    if interrupt::pause(backoff.next_delay(Some(left))) {
                        return Err(err);
                    }
                }
                shard => return shard,
            }
        }
    }

    fn unserved(&self, slot: u16) -> Error {
        let down = RedisError::from((
            ErrorKind::Server(ServerErrorKind::ClusterDown),
            "no primary is known to serve the slot",
            format!("slot {slot}"),
        ));
        Error::redis_at(&self.name, down).slot_moving(slot)
    }

    /// The shard of the primary at `addr`, made on first use.
    fn shard_at(&self, addr: &Addr) -> Result<Arc<Shard>> {
        let mut shards = self.shards.lock();
        if let Some(shard) = shards.get(addr) {
            return Ok(shard.clone());
        }
        let client = (self.client_at(addr))
            .map_err(|source| Error::redis_at(&format!("{}:{}", addr.0, addr.1), source))?;
        // The subscriber of a primary that was killed cannot reach it: the map is read
        // again, and once a replica serves its slots this shard is retired, which wakes its
        // waiters to subscribe where their locks are now.
        let this = self.this.clone();
        let wait = self.config.connect_timeout + self.config.response_timeout;
        let lost: Lost = Arc::new(move |at| {
            if let Some(cluster) = this.upgrade() {
                cluster.refresh_after(at, Instant::now() + wait);
            }
        });
        let shard = Arc::new(Shard::at(
            format!("{}:{}", addr.0, addr.1),
            Topology::Fixed(Box::new(client)),
            &self.config,
            self.is_sharded(),
            Some(lost),
        ));
        shards.insert(addr.clone(), shard.clone());
        Ok(shard)
    }

    /// A client for the server at `addr`, with the first seed's credentials and TLS
    /// settings.
    fn client_at(&self, addr: &Addr) -> redis::RedisResult<Client> {
        let seed = self.seeds[0].get_connection_info();
        let (host, port) = (addr.0.clone(), addr.1);
        let at = match seed.addr() {
            ConnectionAddr::TcpTls { insecure, .. } => ConnectionAddr::TcpTls {
                host,
                port,
                insecure: *insecure,
                tls_params: None,
            },
            _ => ConnectionAddr::Tcp(host, port),
        };
        endpoint::client(seed.clone().set_addr(at), &self.config.tls)
    }

    /// Reads the slot map from the first server that answers, the known primaries first,
    /// then the seeds, and installs it.
    pub fn refresh(&self) -> Result<()> {
        self.reread(self.refreshed.lock())
    }

    /// Reads the map again unless that was begun within [`REFRESH_EVERY`] or is under way.
    fn refresh_soon(&self) {
        let Some(refreshed) = self.refreshed.try_lock() else {
            return;
        };
        if refreshed.is_some_and(|began| began.elapsed() < REFRESH_EVERY) {
            return;
        }
        if let Err(err) = self.reread(refreshed) {
            log::debug!("reading the slot map of {} failed: {err:#}", self.name);
        }
    }

    /// Reads the map again after a server could not be reached at `failed`, unless a read
    /// begun since has done so already. A read under way is joined (waited for, until
    /// `until` at most), not repeated: every call that failed on a dead primary follows the
    /// map that read installs.
    fn refresh_after(&self, failed: Instant, until: Instant) {
        let Some(refreshed) = self.refreshed.try_lock_until(until) else {
            return;
        };
        if refreshed.is_some_and(|began| began >= failed) {
            return;
        }
        if let Err(err) = self.reread(refreshed) {
            log::debug!("reading the slot map of {} failed: {err:#}", self.name);
        }
    }

    /// Reads the map and installs it, holding `refreshed`, so that a caller that joined the
    /// read finds the new map installed when it gets the lock.
    fn reread(&self, mut refreshed: MutexGuard<'_, Option<Instant>>) -> Result<()> {
        let began = Instant::now();
        let result = self.read_map();
        *refreshed = Some(began);
        self.install(result?);
        Ok(())
    }

    fn read_map(&self) -> Result<SlotMap> {
        let known: Vec<Addr> = self.map.read().primaries().cloned().collect();
        let mut last = None;
        for i in 0..known.len() + self.seeds.len() {
            let (client, host) = match known.get(i) {
                Some(addr) => match self.client_at(addr) {
                    Ok(client) => (client, addr.0.clone()),
                    Err(_) => continue,
                },
                None => {
                    let seed = self.seeds[i - known.len()].clone();
                    let host = host_of(seed.get_connection_info().addr());
                    (seed, host)
                }
            };
            let name = client.get_connection_info().addr().to_string();
            let asked = endpoint::connect(
                &client,
                self.config.connect_timeout,
                self.config.response_timeout,
            )
            .and_then(|mut conn| redis::cmd("CLUSTER").arg("SLOTS").query::<Value>(&mut conn));
            let error = match asked {
                Ok(reply) => match SlotMap::from_cluster_slots(reply, &host) {
                    Some(map) => return Ok(map),
                    None => RedisError::from((
                        ErrorKind::Parse,
                        "CLUSTER SLOTS answered with an unexpected shape",
                    )),
                },
                Err(err) => err,
            };
            last = Some(Error::redis_at(&name, error));
        }
        Err(last.unwrap_or_else(|| self.unserved(0)))
    }

    /// Installs `map`. Shards that serve no slot any more are dropped (their waiters
    /// subscribe again where the slot is now); when there were such (a failover), the
    /// listeners run. A slot that migrated between primaries that remain needs neither: its
    /// keys moved with it.
    fn install(&self, map: SlotMap) {
        if !map.is_complete() {
            log::warn!("{}: some slots have no primary", self.name);
        }
        let primaries: Vec<Addr> = map.primaries().cloned().collect();
        *self.map.write() = map;
        let gone: Vec<Arc<Shard>> = {
            let mut shards = self.shards.lock();
            let stale: Vec<Addr> = (shards.keys())
                .filter(|addr| !primaries.contains(addr))
                .cloned()
                .collect();
            stale
                .iter()
                .filter_map(|addr| shards.remove(addr))
                .collect()
        };
        for shard in &gone {
            log::info!("{} no longer serves any slot of {}", shard.name, self.name);
            shard.notifier.retire();
        }
        if gone.is_empty() {
            return;
        }
        // The caller may be a watchdog thread whose renewal found the change, and a listener
        // hands work to every watchdog thread: it runs on a thread of its own.
        let listeners = self.listeners.clone();
        let spawned = std::thread::Builder::new()
            .name("redmutex-cluster".into())
            .stack_size(64 * 1024)
            .spawn(move || listeners.lock().retain(|listener| listener()));
        if let Err(err) = spawned {
            log::warn!("{}: holds are renewed at their next turn: {err}", self.name);
        }
    }
}

impl Cluster {
    /// Each primary the map names now, with a key it serves: `probe` and a number, for
    /// checks that must run on every primary (no hash tag, so that names built around the
    /// key in braces, as a lock's channel is, share its slot).
    pub fn probes(&self, probe: &[u8]) -> Result<Vec<(Arc<Shard>, Vec<u8>)>> {
        let map = self.map.read();
        let mut found: Vec<(Addr, Vec<u8>)> = Vec::new();
        let wanted = map.primaries().count();
        for n in 0..=u16::MAX {
            if found.len() == wanted {
                break;
            }
            let key = [probe, format!(":{n}").as_bytes()].concat();
            if let Some(owner) = map.owner(slots::slot(&key))
                && !found.iter().any(|(addr, _)| addr == owner)
            {
                found.push((owner.clone(), key));
            }
        }
        drop(map);
        (found.into_iter())
            .map(|(addr, key)| Ok((self.shard_at(&addr)?, key)))
            .collect()
    }

    /// The primaries the map names now.
    pub fn primaries(&self) -> Result<Vec<Arc<Shard>>> {
        let known: Vec<Addr> = self.map.read().primaries().cloned().collect();
        known.iter().map(|addr| self.shard_at(addr)).collect()
    }
}

/// The first key of `cmd`: the first of a script's keys (`EVALSHA sha numkeys key ..`), else
/// the first argument; `None` for a script without keys.
fn routing_key(cmd: &Cmd) -> Option<&[u8]> {
    let mut args = cmd.args_iter().map(|arg| match arg {
        Arg::Simple(bytes) => Some(bytes),
        _ => None,
    });
    let name = args.next()??;
    let scripted = [
        &b"EVALSHA"[..],
        b"EVAL",
        b"EVALSHA_RO",
        b"EVAL_RO",
        b"FCALL",
    ]
    .iter()
    .any(|known| name.eq_ignore_ascii_case(known));
    if scripted {
        args.next()?;
        if args.next()?? == b"0" {
            return None;
        }
    }
    args.next()?
}

/// What `err`, returned by `shard`, asks of the routing; `None`: it is the command's answer.
fn redirect(err: &Error, shard: &Shard) -> Option<Redirect> {
    let source = match err {
        Error::Pool { .. } => return Some(Redirect::Unreachable),
        err => err.redis()?,
    };
    if let Some((to, _)) = source.redirect_node() {
        let (host, port) = to.rsplit_once(':')?;
        let port = port.parse().ok()?;
        let host = match host {
            "" | "?" => shard.name.rsplit_once(':')?.0.to_owned(),
            host => host.to_owned(),
        };
        return Some(match source.kind() {
            ErrorKind::Server(ServerErrorKind::Ask) => Redirect::Ask((host, port)),
            _ => Redirect::Moved((host, port)),
        });
    }
    match source.kind() {
        ErrorKind::Server(ServerErrorKind::TryAgain | ServerErrorKind::ClusterDown) => {
            Some(Redirect::Later)
        }
        _ if source.is_io_error() || source.is_connection_dropped() => Some(Redirect::Unreachable),
        _ => None,
    }
}

fn host_of(addr: &ConnectionAddr) -> String {
    match addr {
        ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. } => host.clone(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_routes_by_its_first_key() {
        let mut script = redis::cmd("EVALSHA");
        script
            .arg("sha")
            .arg(2)
            .arg("lock")
            .arg("channel")
            .arg("argv");
        assert_eq!(routing_key(&script), Some(&b"lock"[..]));
        let mut keyless = redis::cmd("EVALSHA");
        keyless.arg("sha").arg(0).arg("argv");
        assert_eq!(routing_key(&keyless), None);
        let mut publish = redis::cmd("PUBLISH");
        publish.arg("channel").arg("0");
        assert_eq!(routing_key(&publish), Some(&b"channel"[..]));
    }
}
