//! The client: the nodes it locks on, an owner id, and the table of what it holds.

use std::collections::HashSet;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::config::{Config, LockClientBuilder};
use crate::error::{Error, NodeError, Result};
use crate::fenced::Fenced;
use crate::holds::{HoldId, Holding, Holds};
use crate::lock::Lock;
use crate::node::{Node, Nodes};
use crate::scripts;
use crate::stats::{Counters, Stats};
use crate::token::Token;
use crate::watchdog::{Job, Parked, Renewal};

/// Most nodes one client may lock on.
const MAX_NODES: usize = 64;

/// A connection to Redis — one server, or N independent masters for Redlock — from which
/// locks are made.
///
/// Cheap to clone: clones share the pools, the owner id and the watchdog threads. Locks taken
/// through different clients are different owners, even in one thread.
///
/// ```no_run
/// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
/// let lock = client.lock("orders:42");
/// let guard = lock.lock()?;
/// // ... only one thread in the whole system gets here at a time ...
/// guard.unlock()?;
/// # Ok::<(), redmutex::Error>(())
/// ```
///
/// # Redlock
///
/// A client over N independent masters ([`redlock`](Self::redlock)) takes each lock on a
/// majority of them, as the Redlock algorithm in the Redis documentation describes. Its locks
/// have the same API, guards and watchdog; see the crate README for when it is worth it.
///
/// ```no_run
/// let client = redmutex::LockClient::redlock(&[
///     "redis://10.0.0.1:6379/",
///     "redis://10.0.0.2:6379/",
///     "redis://10.0.0.3:6379/",
/// ])?;
/// let guard = client.lock("orders:42").lock()?; // held on at least 2 of the 3
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone)]
pub struct LockClient {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub config: Config,
    pub nodes: Nodes,
    /// The client's UUID, the first half of every owner field.
    pub id: String,
    pub holds: Mutex<Holds>,
    pub parked: Arc<Parked>,
    pub counters: Counters,
    /// The process the client was built in; a forked child must not act as its owner.
    pid: u32,
}

/// A holding found gone, as handed to the
/// [`on_lock_lost`](LockClientBuilder::on_lock_lost) callback.
#[derive(Debug)]
#[non_exhaustive]
pub struct LockLost {
    /// The lock's name (lossily decoded).
    pub name: String,
    /// `None` when Redis said the hold is gone (deleted or expired); the last renewal error
    /// when Redis could not be reached until the hold's validity ran out.
    pub error: Option<Error>,
}

/// What one renewal round found: on how many nodes the hold was still there, and where the
/// round failed.
pub(crate) struct Renewed {
    pub kept: usize,
    pub failed: Vec<NodeError>,
}

impl LockClient {
    /// Connects to one Redis with every default setting (see [`LockClientBuilder`]).
    pub fn open(url: &str) -> Result<LockClient> {
        Self::builder(url).build()
    }

    /// Starts a builder for one Redis with tuned settings.
    pub fn builder(url: &str) -> LockClientBuilder {
        LockClientBuilder::new(&[url])
    }

    /// Connects to N independent Redis masters for Redlock, with every default setting.
    /// Fails unless a quorum (N/2 + 1) of them answers; the others are tried again as needed.
    pub fn redlock(urls: &[&str]) -> Result<LockClient> {
        Self::redlock_builder(urls).build()
    }

    /// Starts a builder for N independent Redis masters (Redlock) with tuned settings.
    pub fn redlock_builder(urls: &[&str]) -> LockClientBuilder {
        LockClientBuilder::new(urls)
    }

    /// Starts a builder for the primary that Redis Sentinel manages under `master_name`,
    /// asking the sentinels at `sentinel_urls` where it is and following it across
    /// failovers. Every setting of [`builder`](Self::builder) applies; the sentinels'
    /// credentials go in their URLs (`redis://user:password@host:26379/`), the primary's in
    /// [`primary_credentials`](LockClientBuilder::primary_credentials).
    ///
    /// After a failover, no command goes to the old primary once a sentinel has announced
    /// the new one: its connections are retired, waiters are woken to retry on the new one,
    /// and every watched hold is renewed there at once, or reported lost if its key did not
    /// reach it. See the crate README on what Sentinel cannot promise.
    ///
    /// ```no_run
    /// let client = redmutex::LockClient::sentinel(
    ///     &["redis://10.0.0.1:26379/", "redis://10.0.0.2:26379/", "redis://10.0.0.3:26379/"],
    ///     "mymaster",
    /// )
    /// .primary_credentials("locker", "secret")
    /// .build()?;
    /// let guard = client.lock("orders:42").lock()?;
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn sentinel(sentinel_urls: &[&str], master_name: &str) -> LockClientBuilder {
        LockClientBuilder::sentinel(sentinel_urls, master_name)
    }

    /// A Redlock client over the nodes of existing clients, sharing their connection pools.
    /// Settings come from the first client; the owner id is new.
    pub fn redlock_from(clients: &[LockClient]) -> Result<LockClient> {
        let first = clients.first().ok_or_else(|| Error::InvalidConfig {
            setting: "clients",
            reason: "at least one client is needed".into(),
        })?;
        let nodes = clients
            .iter()
            .flat_map(|client| client.inner.nodes.list().iter().cloned())
            .collect();
        Self::assemble(first.inner.config.clone(), nodes)
    }

    /// A handle on the lock `name`, stored under the key `key_prefix + name`.
    ///
    /// Any bytes up to [`MAX_NAME_LEN`](crate::MAX_NAME_LEN) make a name; an empty or longer
    /// one makes a handle whose every call returns [`Error::InvalidName`].
    pub fn lock(&self, name: impl AsRef<[u8]>) -> Lock {
        Lock::new(self.clone(), name.as_ref())
    }

    /// A handle on the fenced lock `name`: the reentrant lock whose guards carry fencing
    /// tokens. See [`Fenced`](crate::Fenced).
    pub fn fenced_lock(&self, name: impl AsRef<[u8]>) -> Lock<Fenced> {
        Lock::new(self.clone(), name.as_ref())
    }

    /// A handle on the token lock `name` (`SET key token NX PX`, the layout of redis-py,
    /// redsync and node-redlock), stored under the key `key_prefix + name`. Not reentrant;
    /// its guards may move between threads. See [`Token`](crate::Token).
    pub fn token_lock(&self, name: impl AsRef<[u8]>) -> Lock<Token> {
        Lock::new(self.clone(), name.as_ref())
    }

    /// This client's UUID: the first half of the `"<uuid>:<thread>"` field of its holds.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The nodes this client locks on, as `host:port`; a Sentinel client's one node is named
    /// after its master name.
    pub fn nodes(&self) -> Vec<&str> {
        let list = self.inner.nodes.list();
        list.iter().map(|node| node.name.as_str()).collect()
    }

    /// What this client's watchdogs have done so far.
    pub fn stats(&self) -> Stats {
        self.inner.counters.snapshot()
    }

    /// Opens the nodes and checks that enough of them answer: the one node of a single-node
    /// client, a quorum of a Redlock client.
    pub(crate) fn connect(urls: &[String], config: Config) -> Result<LockClient> {
        let nodes = match &config.sentinel {
            Some(master) => vec![Arc::new(Node::sentinel(urls, master, &config)?)],
            None => urls
                .iter()
                .map(|url| Node::new(url, &config).map(Arc::new))
                .collect::<Result<Vec<_>>>()?,
        };
        let client = Self::assemble(config, nodes)?;
        let inner = &client.inner;
        let probe = [&inner.config.key_prefix[..], b"redmutex:probe"].concat();
        let nodes = &inner.nodes;
        let (answers, mut failed) =
            nodes.split(nodes.list().iter().map(|node| node.check(&probe)).collect());
        // Missing rights are a mistake to fix, not an outage to ride out on a quorum.
        if let Some(at) = failed
            .iter()
            .position(|f| matches!(f.error, Error::Permission { .. }))
        {
            return Err(failed.swap_remove(at).error);
        }
        if answers.len() < nodes.quorum() {
            return Err(nodes.no_quorum(failed));
        }
        Ok(client)
    }

    fn assemble(config: Config, list: Vec<Arc<Node>>) -> Result<LockClient> {
        let bad = |reason: String| Error::InvalidConfig {
            setting: "urls",
            reason,
        };
        if list.is_empty() || list.len() > MAX_NODES {
            return Err(bad(format!("1 to {MAX_NODES} nodes are needed")));
        }
        let mut seen = HashSet::new();
        if let Some(twice) = list.iter().find(|node| !seen.insert(node.name.as_str())) {
            return Err(bad(format!("{} is named twice", twice.name)));
        }
        let inner = Arc::new(Inner {
            id: crate::owner::new_client_id(),
            nodes: Nodes::new(list, config.connect_timeout, config.response_timeout),
            config,
            holds: Mutex::default(),
            parked: Arc::default(),
            counters: Counters::default(),
            pid: std::process::id(),
        });
        // A node that moves (a Sentinel failover) has every watched hold renewed there.
        for node in inner.nodes.list() {
            let weak = Arc::downgrade(&inner);
            node.on_move(move || weak.upgrade().map(|inner| inner.renew_now()).is_some());
        }
        Ok(LockClient { inner })
    }
}

impl Inner {
    /// Has every watched hold renewed at once: after a failover, on the new primary.
    fn renew_now(&self) {
        for hold in self.holds.lock().values() {
            if let Some(watchdog) = &hold.watchdog {
                watchdog.renew_now();
            }
        }
    }

    /// One watchdog round on every node. When the hold is still there on a quorum but gone
    /// from some nodes (restarted empty), a second round puts it back where the key is free;
    /// a single node never gets it back.
    pub fn renew(&self, renewal: &dyn Renewal, lease: Duration) -> Renewed {
        let round = |restore: bool| {
            let cmd = renewal.command(self, lease, restore);
            self.nodes.split(self.nodes.run_all::<i64>(&cmd, None))
        };
        let (answers, failed) = round(false);
        let kept = answers.iter().filter(|&&reply| reply == 1).count();
        let gone = answers.len() - kept;
        if kept >= self.nodes.quorum() {
            Counters::bump(&self.counters.renewals);
            if gone > 0 && self.nodes.list().len() > 1 {
                let (answers, _) = round(true);
                let restored = answers.iter().filter(|&&r| r == scripts::RESTORED).count();
                if restored > 0 {
                    log::info!("put a hold back on {restored} node(s) that had lost it");
                }
            }
        } else if !failed.is_empty() {
            Counters::bump(&self.counters.renewal_failures);
        }
        Renewed { kept, failed }
    }

    /// Refuses to act for a client built in another process (this one is a fork of it).
    pub fn check_process(&self) -> Result<()> {
        if std::process::id() == self.pid {
            Ok(())
        } else {
            Err(Error::Forked { parent: self.pid })
        }
    }

    /// Forgets a holding the watchdog found gone and reports it, unless the holding already
    /// ended. Runs on the watchdog's thread.
    pub fn declare_lost(&self, job: &Job, error: Option<Error>) {
        if job.renewal.forget(self, &job.holding) {
            self.report_lost(&job.name, &job.holding, error);
        }
    }

    /// Forgets `holding` if it is still the current one of `id`.
    pub fn forget(&self, id: &HoldId, holding: &Arc<Holding>) {
        let mut holds = self.holds.lock();
        if holds
            .get(id)
            .is_some_and(|hold| Arc::ptr_eq(&hold.holding, holding))
        {
            holds.remove(id);
        }
    }

    /// Marks a holding lost and, the first time, counts it, logs it and tells the callback:
    /// the one way every finder of a loss (watchdog, release, re-entry) reports it.
    pub fn report_lost(&self, name: &str, holding: &Holding, error: Option<Error>) {
        if !holding.mark_lost() {
            return;
        }
        Counters::bump(&self.counters.locks_lost);
        match &error {
            None => log::warn!("lock {name:?} was lost: its key or field is gone"),
            Some(err) => log::warn!(
                "lock {name:?} was lost: renewals failed until its validity ran out: {err}"
            ),
        }
        if let Some(callback) = &self.config.on_lock_lost {
            let lost = LockLost {
                name: name.to_owned(),
                error,
            };
            if std::panic::catch_unwind(AssertUnwindSafe(|| callback(&lost))).is_err() {
                log::error!("the on_lock_lost callback panicked for lock {name:?}");
            }
        }
    }
}

impl fmt::Debug for LockClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockClient")
            .field("nodes", &self.nodes())
            .field("id", &self.inner.id)
            .finish_non_exhaustive()
    }
}
