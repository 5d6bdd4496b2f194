//! The client: where locks are made, on the nodes it was built for.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use crate::base::config::Config;
use crate::base::error::{Error, Noun, Result};
use crate::base::stats::Stats;
use crate::kinds::fair::Fair;
use crate::kinds::fenced::Fenced;
use crate::kinds::non_reentrant::{NonReentrant, NonReentrantFair};
use crate::kinds::spin::Spin;
use crate::kinds::token::Token;
use crate::lease::shared::Shared;
use crate::lease::target::Target;
use crate::lock::count_down_latch::CountDownLatch;
use crate::lock::counting_semaphore::CountingSemaphore;
use crate::lock::election::Election;
use crate::lock::handle::Lock;
use crate::lock::multi_lock::MultiLock;
use crate::lock::read_write_lock::ReadWriteLock;
use crate::lock::semaphore::LeasedSemaphore;
use crate::transport::node::{Node, Nodes};
use crate::transport::{common, scripts};

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
/// have the same API, guards and watchdog; see "Redlock" in the crate's `docs/deploying.md`
/// for when it is worth it.
///
/// ```no_run
/// let client = redmutex::LockClient::redlock(&[
///     "redis://10.0.0.1:6379/",
///     "redis://10.0.0.2:6379/",
///     "redis://10.0.0.3:6379/",
/// ]).build()?;
/// let guard = client.lock("orders:42").lock()?; // held on at least 2 of the 3
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone)]
pub struct LockClient {
    shared: Arc<Shared>,
}

impl LockClient {
    /// A Redlock client over the nodes of existing clients, sharing their connection pools.
    /// Settings come from the first client; the owner id is new.
    pub fn redlock_from(clients: &[LockClient]) -> Result<LockClient> {
        let first = clients.first().ok_or_else(|| Error::InvalidConfig {
            setting: "clients",
            reason: "at least one client is needed".into(),
        })?;
        let nodes = clients
            .iter()
            .flat_map(|client| client.shared.nodes().list().iter().cloned())
            .collect();
        let mut config = first.shared.config().clone();
        // A client of its own: owner fields shared with the first client would make each
        // take the other's holds for its own.
        config.client_id = crate::layout::owner::new_client_id(config.direct_handoff);
        Self::assemble(config, nodes)
    }

    /// A handle on the lock `name`, stored under the key `key_prefix + name`.
    ///
    /// Any bytes up to [`MAX_NAME_LEN`](crate::MAX_NAME_LEN) make a name; an empty or longer
    /// one makes a handle whose every call returns [`Error::InvalidName`].
    pub fn lock(&self, name: impl AsRef<[u8]>) -> Lock {
        Lock::new(self.target(name.as_ref(), Noun::Lock))
    }

    /// A handle on the fenced lock `name`: the reentrant lock whose guards carry fencing
    /// tokens. See [`Fenced`](crate::Fenced).
    pub fn fenced_lock(&self, name: impl AsRef<[u8]>) -> Lock<Fenced> {
        Lock::new(self.target(name.as_ref(), Noun::Lock))
    }

    /// A handle on the fair lock `name`: the reentrant lock, taken first come, first
    /// served across threads and processes. See [`Fair`](crate::Fair).
    pub fn fair_lock(&self, name: impl AsRef<[u8]>) -> Lock<Fair> {
        Lock::new(self.target(name.as_ref(), Noun::Lock))
    }

    /// A handle on the non-reentrant lock `name`: the reentrant lock's layout, which its
    /// holder asks for again only to get [`Error::Reentry`](crate::Error::Reentry). See
    /// [`NonReentrant`](crate::NonReentrant).
    pub fn non_reentrant_lock(&self, name: impl AsRef<[u8]>) -> Lock<NonReentrant> {
        Lock::new(self.target(name.as_ref(), Noun::Lock))
    }

    /// A handle on the non-reentrant fair lock `name`: the fair lock, taken once by its
    /// holder. See [`NonReentrantFair`](crate::NonReentrantFair).
    pub fn non_reentrant_fair_lock(&self, name: impl AsRef<[u8]>) -> Lock<NonReentrantFair> {
        Lock::new(self.target(name.as_ref(), Noun::Lock))
    }

    /// The reentrant locks `names`, taken all or none as one: Redisson's `RMultiLock` over
    /// its `RLock`s. See [`MultiLock`], which also takes locks of other kinds.
    pub fn multi_lock<N: AsRef<[u8]>>(&self, names: impl IntoIterator<Item = N>) -> MultiLock {
        let locks = names.into_iter().map(|name| self.lock(name));
        locks.fold(MultiLock::new(), MultiLock::and)
    }

    /// The read-write lock `name`: many readers or one writer. See [`ReadWriteLock`].
    pub fn read_write_lock(&self, name: impl AsRef<[u8]>) -> ReadWriteLock {
        ReadWriteLock::new(self.target(name.as_ref(), Noun::ReadWriteLock))
    }

    /// The leased semaphore `name`: up to its number of permits held at once. See
    /// [`LeasedSemaphore`].
    pub fn leased_semaphore(&self, name: impl AsRef<[u8]>) -> LeasedSemaphore {
        LeasedSemaphore::new(self.target(name.as_ref(), Noun::Semaphore))
    }

    /// The semaphore without leases `name`: a count of permits that anyone may take, give
    /// back or add to, whose holders' permits are not given back if they crash. See
    /// [`CountingSemaphore`].
    pub fn counting_semaphore(&self, name: impl AsRef<[u8]>) -> CountingSemaphore {
        CountingSemaphore::new(self.target(name.as_ref(), Noun::Semaphore))
    }

    /// A handle on the spin lock `name`: the reentrant lock whose waiters back off instead
    /// of subscribing, and whose releases publish nothing. See [`Spin`](crate::Spin).
    pub fn spin_lock(&self, name: impl AsRef<[u8]>) -> Lock<Spin> {
        Lock::new(self.target(name.as_ref(), Noun::Lock))
    }

    /// A handle on the token lock `name` (`SET key token NX PX`, the layout of redis-py,
    /// redsync and node-redlock), stored under the key `key_prefix + name`. Not reentrant;
    /// its guards may move between threads. See [`Token`](crate::Token).
    pub fn token_lock(&self, name: impl AsRef<[u8]>) -> Lock<Token> {
        Lock::new(self.target(name.as_ref(), Noun::Lock))
    }

    /// The leader election `name`, among every client that names it: candidates
    /// [campaign](Election::campaign) for it under this client's
    /// [`client_name`](crate::LockClientBuilder::client_name), and anyone may ask who
    /// leads. Its key is `key_prefix + name`. See [`Election`].
    pub fn election(&self, name: impl AsRef<[u8]>) -> Election {
        Election::new(self.target(name.as_ref(), Noun::Election))
    }

    /// The count-down latch `name`, Redisson's `RCountDownLatch`: waiters wait until its
    /// count reaches zero. Its key is `key_prefix + name`. See [`CountDownLatch`].
    pub fn count_down_latch(&self, name: impl AsRef<[u8]>) -> CountDownLatch {
        CountDownLatch::new(self.target(name.as_ref(), Noun::CountDownLatch))
    }

    /// The state behind the client, for the bench hooks.
    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }

    pub(crate) fn target(&self, name: &[u8], noun: Noun) -> Target {
        Target::new(self.shared.clone(), name, noun)
    }

    /// This client's UUID: the first half of the `"<uuid>:<thread>"` field of its holds.
    pub fn id(&self) -> &str {
        self.shared.id()
    }

    /// The nodes this client locks on, as `host:port`; a Sentinel client's one node is named
    /// after its master name.
    pub fn nodes(&self) -> Vec<&str> {
        let list = self.shared.nodes().list();
        list.iter().map(|node| node.name.as_str()).collect()
    }

    /// Closes the client: every wait of its locks and semaphores, in any thread, ends with
    /// [`Error::Cancelled`] ([`is_closed`](Error::is_closed)) within one round trip, and
    /// every later call that would start something (an acquisition, a change of permits, a
    /// forced unlock, a question about a lock) fails so at once, on every clone of the
    /// client. What is held stays held: guards and permits taken before still renew, extend
    /// and release, and a fair lock's waiters still leave the queue. Closing twice does
    /// nothing more.
    ///
    /// ```no_run
    /// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
    /// let lock = client.lock("orders:42");
    /// let waiter = std::thread::spawn(move || lock.lock().map(drop));
    /// client.close(); // on shutdown: the waiter returns Err(e) with e.is_closed()
    /// # let _ = waiter.join();
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn close(&self) {
        self.shared.closing().cancel();
    }

    /// Whether [`close`](Self::close) was called on this client or a clone of it.
    pub fn is_closed(&self) -> bool {
        self.shared.closing().is_cancelled()
    }

    /// What this client's watchdogs have done so far.
    pub fn stats(&self) -> Stats {
        self.shared.counters().snapshot()
    }

    /// Opens the nodes and checks that enough of them answer: the one node of a single-node
    /// client, a quorum of a Redlock client.
    pub(crate) fn connect(urls: &[String], config: Config) -> Result<LockClient> {
        let client = Self::unchecked(urls, config)?;
        let shared = &client.shared;
        let probe = [&shared.config().key_prefix[..], b"redmutex:probe"].concat();
        let nodes = shared.nodes();
        // A reply slower than a short lease's response timeout, on a busy machine, is no
        // reason to refuse the client: each node's checks are tried again while another
        // response timeout fits in the connect timeout and one response timeout from now,
        // the bound of a server that never answers.
        let config = shared.config();
        let until = Instant::now() + config.connect_timeout + config.response_timeout;
        let check = |node: &Arc<Node>| loop {
            let checked = node.check(&probe);
            let again = Instant::now() + config.response_timeout <= until;
            if !(again && checked.as_ref().is_err_and(Error::is_reply_timeout)) {
                return checked;
            }
        };
        let checked: Vec<Result<()>> = (nodes.list().iter().map(check))
            .map(|checked| without_pubsub(checked, config.pubsub))
            .collect();
        let answered: Vec<_> = (nodes.list().iter().zip(&checked))
            .filter(|(_, checked)| checked.is_ok())
            .filter_map(|(node, _)| node.shards().ok())
            .flatten()
            .collect();
        client.admit(checked)?;
        crate::client::checks::warn_about_eviction(&answered, shared.config());
        Ok(client)
    }

    /// The client on the nodes at `urls`, without the checks that [`connect`](Self::connect)
    /// makes: nothing is opened yet.
    pub(crate) fn unchecked(urls: &[String], config: Config) -> Result<LockClient> {
        let nodes = match &config.sentinel {
            Some(master) => vec![Arc::new(Node::sentinel(urls, master, &config)?)],
            None if config.cluster => vec![Arc::new(Node::cluster(urls, &config)?)],
            None => urls
                .iter()
                .map(|url| Node::new(url, &config).map(Arc::new))
                .collect::<Result<Vec<_>>>()?,
        };
        Self::assemble(config, nodes)
    }

    /// Whether this client may lock, given each node's check (in the order of the nodes):
    /// the error `build()` fails with otherwise.
    pub(crate) fn admit(&self, checked: Vec<Result<()>>) -> Result<()> {
        let nodes = self.shared.nodes();
        let (answers, mut failed) = nodes.split(checked);
        // Missing rights, or a server that runs no scripts, are a mistake to fix, not an
        // outage to ride out on a quorum.
        if let Some(at) = failed.iter().position(|f| {
            matches!(f.error, Error::Permission { .. }) || f.error.is_scripting_disabled()
        }) {
            return Err(failed.swap_remove(at).error);
        }
        if answers.len() < nodes.quorum() {
            return Err(nodes.no_quorum(failed));
        }
        Ok(())
    }

    fn assemble(config: Config, list: Vec<Arc<Node>>) -> Result<LockClient> {
        declare_scripts();
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
        let nodes = Nodes::new(list, &config);
        let shared = Arc::new(Shared::new(config, nodes));
        // A node that moves (a Sentinel failover) has every watched hold renewed there.
        for node in shared.nodes().list() {
            let weak = Arc::downgrade(&shared);
            node.on_move(move || weak.upgrade().map(|s| s.workers().all_now()).is_some());
        }
        Ok(LockClient { shared })
    }
}

/// A node's check, with the channel rights left out for a client that uses no pub/sub.
fn without_pubsub(checked: Result<()>, pubsub: bool) -> Result<()> {
    match checked {
        Err(Error::Permission { node, denied }) if !pubsub => {
            let channel = ["PUBLISH on ", "SUBSCRIBE on ", "UNSUBSCRIBE on "];
            let denied: Vec<String> = (denied.into_iter())
                .filter(|what| !channel.iter().any(|c| what.starts_with(c)))
                .collect();
            match denied.is_empty() {
                true => Ok(()),
                false => Err(Error::Permission { node, denied }),
            }
        }
        checked => checked,
    }
}

impl fmt::Debug for LockClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockClient")
            .field("nodes", &self.nodes())
            .field("id", &self.id())
            .finish_non_exhaustive()
    }
}

/// Declares every script of the library to the registry, before a client sends one: a
/// server that lost its scripts then gets all of them back from one load.
pub(crate) fn declare_scripts() {
    scripts::declare(crate::kinds::scripts().chain(common::SCRIPTS.iter().copied()));
}
