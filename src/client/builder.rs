//! Where a client begins: its entry points and the builder of its settings.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::base::config::{Config, Credentials, ReplicaAcks};
use crate::base::error::Result;
use crate::base::error::redact;
use crate::base::health::HealthChange;
use crate::base::lost::LockLost;
use crate::client::lock_client::LockClient;

impl LockClient {
    /// Connects to one Redis with every default setting: the one shortcut, the same as
    /// `LockClient::builder(url).build()`.
    pub fn open(url: &str) -> Result<LockClient> {
        Self::builder(url).build()
    }

    /// Starts a builder for one Redis. Each topology has a builder of its own, with the
    /// same settings: [`builder`](Self::builder) for one server,
    /// [`redlock`](Self::redlock) for independent masters, [`sentinel`](Self::sentinel)
    /// for a Sentinel-managed primary, [`cluster`](Self::cluster) for a Redis Cluster.
    pub fn builder(url: &str) -> LockClientBuilder {
        LockClientBuilder::new(&[url])
    }

    /// Starts a builder for N independent Redis masters (Redlock). Its `build()` fails
    /// unless a quorum (N/2 + 1) of them answers; the others are tried again as needed.
    pub fn redlock(urls: &[&str]) -> LockClientBuilder {
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
    /// reach it. See "Sentinel: a primary that fails over" in the crate's
    /// `docs/deploying.md` on what Sentinel cannot promise.
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
        let mut builder = LockClientBuilder::new(sentinel_urls);
        builder.config.sentinel = Some(master_name.to_owned());
        builder
    }

    /// Starts a builder for a Redis Cluster, reached first through any of `seed_urls`
    /// (`redis://host:7000/`; credentials and TLS as in [`builder`](Self::builder), the
    /// same for every node). Every setting of [`builder`](Self::builder) applies.
    ///
    /// The client reads which primary serves each hash slot, keeps a pool per primary and
    /// sends each command to the primary serving its lock's slot, following the cluster as
    /// slots move and replicas are promoted. Every key and channel of a lock share its slot
    /// (Redisson's naming rule); a name whose braces would split them (`a{}b`, `a{b`) is
    /// refused with [`Error::InvalidName`](crate::Error::InvalidName). Waiters subscribe on
    /// the primary serving the lock. For Redlock over several clusters, combine cluster
    /// clients with [`LockClient::redlock_from`]. See "Redis Cluster" in the crate's
    /// `docs/deploying.md` on what survives a resharding and a failover.
    ///
    /// ```no_run
    /// let client = redmutex::LockClient::cluster(&[
    ///     "redis://10.0.0.1:7000/",
    ///     "redis://10.0.0.2:7000/",
    /// ])
    /// .build()?;
    /// let guard = client.lock("orders:42").lock()?;
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn cluster(seed_urls: &[&str]) -> LockClientBuilder {
        let mut builder = LockClientBuilder::new(seed_urls);
        builder.config.cluster = true;
        builder
    }
}

/// Builds a [`LockClient`] with tuned settings; [`LockClient::open`] takes all the defaults.
///
/// | setting | default |
/// |---|---|
/// | [`pool_size`](Self::pool_size) | 8 connections |
/// | [`connect_timeout`](Self::connect_timeout) | 2 s |
/// | [`response_timeout`](Self::response_timeout) | 2 s, or a third of what the lease leaves after the renew interval when that is less |
/// | [`lease`](Self::lease) (watchdog lease) | 30 s |
/// | [`renew_interval`](Self::renew_interval) | lease / 3 |
/// | [`retry_base`](Self::retry_base) / [`retry_cap`](Self::retry_cap) | 5 ms / 200 ms |
/// | [`spin_backoff`](Self::spin_backoff) | 1 ms doubling to 128 ms |
/// | [`pubsub`](Self::pubsub) | on |
/// | [`max_wait`](Self::max_wait) | none: `lock()` waits until it gets the lock |
/// | [`deadlock_timeout`](Self::deadlock_timeout) | 1 s |
/// | [`key_prefix`](Self::key_prefix) | empty |
/// | [`watchdog_stack_size`](Self::watchdog_stack_size) | 128 KiB |
/// | [`ping_interval`](Self::ping_interval) | 1 s |
/// | [`fair_queue_wait`](Self::fair_queue_wait) | 5 s |
/// | [`direct_handoff`](Self::direct_handoff) | on |
/// | [`on_lock_lost`](Self::on_lock_lost) | none (losses are logged) |
/// | [`on_health_change`](Self::on_health_change) | none |
/// | [`min_replica_acks`](Self::min_replica_acks) | off |
/// | [`primary_credentials`](Self::primary_credentials) (Sentinel clients) | none |
///
/// Every value is checked by [`build`](Self::build), which returns
/// [`Error::InvalidConfig`](crate::Error::InvalidConfig) naming the setting.
///
/// ```no_run
/// use std::time::Duration;
/// let client = redmutex::LockClient::builder("redis://127.0.0.1:6379/")
///     .pool_size(16)
///     .connect_timeout(Duration::from_secs(1))
///     .response_timeout(Duration::from_millis(500))
///     .lease(Duration::from_secs(30))
///     .key_prefix("myapp:")
///     .build()?;
/// # Ok::<(), redmutex::Error>(())
/// ```
#[must_use = "a builder does nothing until build() is called"]
pub struct LockClientBuilder {
    urls: Vec<String>,
    config: Config,
}

impl LockClientBuilder {
    pub(crate) fn new(urls: &[&str]) -> Self {
        LockClientBuilder {
            urls: urls.iter().map(|url| url.to_string()).collect(),
            config: Config::default(),
        }
    }

    /// Most pooled connections open at once, 1 to 1024. Defaults to 8. Each call holds one
    /// for one round trip; a call that finds them all busy for a connect timeout, with time
    /// left before its deadline, waits on (cancellably) rather than failing, and one with no
    /// time left (`try_lock`) returns [`Error::Pool`](crate::Error::Pool). A waiter holds
    /// none while it sleeps (its wake-up comes on the client's subscriber connection), so
    /// many waiters need no more: 800 threads queued on one fair lock each take it with the
    /// default. More help where many threads send at once and each call's latency
    /// matters more than the server's connection count ("Scale" in `docs/performance.md`).
    pub fn pool_size(mut self, size: u32) -> Self {
        self.config.pool_size = size;
        self
    }

    /// How long opening a connection, or waiting for a free pooled one, may take.
    /// Defaults to 2 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }

    /// Read and write timeout of every connection, and for a Redlock client the time one
    /// round on all nodes may take. A call with a deadline returns at most this long after
    /// it.
    ///
    /// Defaults to the smaller of 2 s and a third of what the lease leaves after the [renew
    /// interval](Self::renew_interval) (two thirds of the renew interval when that is the
    /// default third of the lease), so that any lease and renew interval build with this left
    /// unset: 2 s for leases of 9 s and more (the default lease of 30 s is renewed every
    /// 10 s), 222 ms for a 1 s lease. A value set here is used as given: above zero, at most
    /// 600 s, and below half of what the lease leaves after the renew interval, so that a
    /// renewal and its retry, each hanging for the whole timeout, both end before the lease
    /// does (with the default renew interval: below the interval); keep it small against
    /// the lease.
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.config.response_timeout = timeout;
        self.config.response_timeout_set = true;
        self
    }

    /// Lease of holds taken without an explicit one; the watchdog keeps renewing it while
    /// the lock is held. [`MIN_LEASE`](crate::MIN_LEASE) to [`MAX_LEASE`](crate::MAX_LEASE). Defaults to 30 s.
    /// Every lease in that range builds with the other settings left at their defaults: the
    /// renew interval and, unless set, the [response timeout](Self::response_timeout) follow
    /// it.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.config.lease = lease;
        self
    }

    /// How often the watchdog renews: at least 1 ms and at most half the lease, so that a
    /// renewal that fails is tried again before the lease runs out. Defaults to a third of
    /// the lease. Unless set, the [response timeout](Self::response_timeout) follows it.
    pub fn renew_interval(mut self, interval: Duration) -> Self {
        self.config.renew_interval = Some(interval);
        self
    }

    /// First sleep between acquisition attempts; each busy reply doubles it up to
    /// [`retry_cap`](Self::retry_cap), and each sleep is jittered. Defaults to 5 ms.
    pub fn retry_base(mut self, base: Duration) -> Self {
        self.config.retry_base = base;
        self
    }

    /// Longest sleep between acquisition attempts. Defaults to 200 ms.
    pub fn retry_cap(mut self, cap: Duration) -> Self {
        self.config.retry_cap = cap;
        self
    }

    /// How a [spin lock](crate::Spin)'s waiters back off: `initial` after the first busy
    /// attempt, doubling after each up to `max` (each sleep jittered in its upper half, and
    /// never past the holder's lease or the caller's deadline). `100 µs <= initial <= max <=
    /// 600 s`. Defaults to 1 ms and 128 ms, as Redisson's `RSpinLock`.
    pub fn spin_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.config.spin_backoff = (initial, max);
        self
    }

    /// Whether this client uses pub/sub. Off, [`build`](Self::build) does not ask for
    /// `PUBLISH`, `SUBSCRIBE` or `UNSUBSCRIBE` rights and no waiter subscribes (every waiter
    /// polls, at least every [`retry_cap`](Self::retry_cap)): for a Redis user without
    /// channel rights, or a deployment that does not want pub/sub. Such a user can use
    /// [spin locks](crate::Spin), which publish nothing; the other kinds' releases publish
    /// and are refused. Defaults to on.
    pub fn pubsub(mut self, enabled: bool) -> Self {
        self.config.pubsub = enabled;
        self
    }

    /// Bounds how long `lock()` and `lock_with_lease()` wait; past it they return
    /// [`Error::Timeout`](crate::Error::Timeout). Defaults to no bound.
    pub fn max_wait(mut self, wait: Duration) -> Self {
        self.config.max_wait = Some(wait);
        self
    }

    /// How long a waiter waits before it looks for a deadlock through itself, as
    /// PostgreSQL's `deadlock_timeout`: 10 ms to 600 s, or `None` to never look. Defaults
    /// to 1 s.
    ///
    /// A waiter that holds locks and is still waiting after half of it records what it
    /// waits for beside each lock it holds, and once it has passed, follows who holds what
    /// it waits for, what they wait for, and so on; it looks again every `deadlock_timeout`
    /// while it waits. When that leads back to itself, the waiter of the cycle that began
    /// waiting last gets [`Error::Deadlock`](crate::Error::Deadlock) naming the cycle,
    /// having left its wait and kept its holds (or, if that one has not by a waiter's next
    /// look, that waiter does); the others go on once it gives them back.
    /// A wait that ends sooner, or a waiter that holds nothing, writes nothing. See
    /// "Deadlocks" in `docs/semantics.md` for what is found and what is not.
    pub fn deadlock_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.config.deadlock_timeout = timeout;
        self
    }

    /// The name others see beside this client's holds: the operations tool
    /// (`redmutex locks`, [`LockClient::inspect`]) shows it next to each holder's id. Up to
    /// 64 printable ASCII characters without spaces; defaults to the host name and process
    /// id (`web-3/41722`). It names the client's connections (`CLIENT SETNAME`), so it
    /// costs nothing on the lock path; a user who may not run `CLIENT SETNAME` locks as
    /// well, unnamed.
    pub fn client_name(mut self, name: &str) -> Self {
        self.config.client_name = name.to_owned();
        self
    }

    /// Prepended to every lock name to form the Redis key, at most 256 bytes.
    /// Defaults to empty.
    pub fn key_prefix(mut self, prefix: impl AsRef<[u8]>) -> Self {
        self.config.key_prefix = prefix.as_ref().to_vec();
        self
    }

    /// Stack size of each watchdog thread, at least 64 KiB. Defaults to 128 KiB.
    pub fn watchdog_stack_size(mut self, bytes: usize) -> Self {
        self.config.watchdog_stack_size = bytes;
        self
    }

    /// How often the subscriber connection that carries unlock messages is checked: a probe
    /// on it that gets no answer within the response timeout (a half-open connection, a NAT
    /// that dropped its state) makes the client reconnect, subscribe again and wake every
    /// waiter. 10 ms to 600 s; defaults to 1 s. TCP keepalive is on as well.
    pub fn ping_interval(mut self, interval: Duration) -> Self {
        self.config.ping_interval = interval;
        self
    }

    /// How long a waiter of a [fair lock](crate::LockClient::fair_lock) keeps its place in
    /// the queue without coming back: a live waiter comes back at least three times within
    /// it, and one that does not (its process crashed) loses its place after it, so that it
    /// holds up this crate's waiters behind it at most this long (Redisson's clients go by
    /// its place in their own sorted set, which can be later: see "Fair lock" in
    /// `docs/kinds.md`). 100 ms to [`MAX_LEASE`](crate::MAX_LEASE); defaults to 5 s.
    pub fn fair_queue_wait(mut self, wait: Duration) -> Self {
        self.config.fair_queue_wait = wait;
        self
    }

    /// Whether the last release of a [fair lock](crate::LockClient::fair_lock) hands it
    /// straight to the waiter at the head of its queue when that waiter is a client of this
    /// crate with this setting on: the release makes it the holder and tells it so, and the
    /// waiter returns its guard without asking Redis again, one round trip after the
    /// release instead of two. Redisson's waiters, and ours with the setting off, are woken
    /// and take the lock themselves, as before. Off, this client neither grants nor is
    /// granted, and speaks Redisson's fair lock protocol exactly. "Fair lock" in
    /// `docs/kinds.md` tells how a grant to a waiter that gave up, crashed or missed the
    /// message is undone. Defaults to on.
    ///
    /// The setting is carried by the client's id (a version-8 UUID when on, version 4 when
    /// off), which the releasing client reads from the queue.
    pub fn direct_handoff(mut self, on: bool) -> Self {
        self.config.direct_handoff = on;
        self
    }

    /// Called each time a watched hold's [`Health`](crate::Health) changes: to
    /// `Uncertain` when a renewal fails while the hold is still valid, back to `Held` when a
    /// later renewal gets through, and to `Lost` when the hold is found gone. A holder can
    /// pause side effects on `Uncertain`, before the loss is certain (Apache Curator's
    /// SUSPENDED against LOST). It runs on the thread that saw the change: the watchdog's,
    /// or the caller's when a release or a re-entry finds a loss. Keep it short. Defaults to
    /// none; [`LockGuard::health`](crate::LockGuard::health) tells the same on demand.
    ///
    /// ```no_run
    /// let client = redmutex::LockClient::builder("redis://127.0.0.1:6379/")
    ///     .on_health_change(|change| {
    ///         if change.to != redmutex::Health::Held {
    ///             eprintln!("pausing work under {}: {:?}", change.name, change.to);
    ///         }
    ///     })
    ///     .build()?;
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn on_health_change(
        mut self,
        callback: impl Fn(&HealthChange) + Send + Sync + 'static,
    ) -> Self {
        self.config.on_health_change = Some(Arc::new(callback));
        self
    }

    /// Called once for each holding found gone: deleted or expired from outside, or not
    /// renewed before its validity ran out. It runs on the thread that found the loss: the
    /// watchdog's, or the caller's when a release or a re-entry finds it. Keep it short.
    /// Defaults to none: losses are only logged and visible through
    /// [`LockGuard::is_lost`](crate::LockGuard::is_lost) and [`Stats::locks_lost`](crate::Stats::locks_lost).
    pub fn on_lock_lost(mut self, callback: impl Fn(&LockLost) + Send + Sync + 'static) -> Self {
        self.config.on_lock_lost = Some(Arc::new(callback));
        self
    }

    /// Makes every acquisition wait until `replicas` replicas of the node have received it
    /// (`WAIT replicas timeout` on the same connection, right after the acquire script), so
    /// that a failover to one of them keeps the lock. When fewer acknowledge within
    /// `timeout`, the acquisition is given back and [`Error::NotReplicated`](crate::Error::NotReplicated)
    /// returned. `replicas` 1 to 64; `timeout` at least 1 ms and below the
    /// [`response_timeout`](Self::response_timeout). Defaults to off.
    ///
    /// Renewals and releases do not wait. A renewal that a promoted replica missed leaves
    /// the key there with its previous expiry, still at least a renew interval away, and
    /// the next renewal on the new primary extends it, or finds it gone and reports the
    /// loss. A release that a promoted replica missed leaves the lock held there until its
    /// lease runs out: late, never doubly granted.
    ///
    /// Acknowledgements narrow, but do not close, the window in which a failover loses a
    /// lock: Redis replication stays asynchronous, and a replica that acknowledged may still
    /// not be the one promoted.
    pub fn min_replica_acks(mut self, replicas: u32, timeout: Duration) -> Self {
        self.config.replica_acks = Some(ReplicaAcks { replicas, timeout });
        self
    }

    /// For a [Sentinel](LockClient::sentinel) client: the user and password of the primary
    /// (and of whichever replica is promoted). An empty `username` sends the password alone,
    /// as `requirepass` wants. The sentinels' own credentials go in their URLs. Defaults to
    /// none; `build()` refuses it on other clients.
    pub fn primary_credentials(mut self, username: &str, password: &str) -> Self {
        self.config.primary_credentials = Some(Credentials {
            username: (!username.is_empty()).then(|| username.to_owned()),
            password: password.to_owned(),
        });
        self
    }

    /// Trusts the certificate authorities in `pem` (PEM, one or more certificates) for
    /// `rediss://` servers, instead of the public root certificates. The system certificate
    /// store is not read. Needs the `tls` feature.
    ///
    /// ```no_run
    /// let client = redmutex::LockClient::builder("rediss://redis.internal:6380/")
    ///     .tls_root_ca(std::fs::read("ca.crt")?)
    ///     .build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "tls")]
    pub fn tls_root_ca(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.config.tls.root_ca = Some(pem.into());
        self
    }

    /// Presents this certificate chain and private key (both PEM) to `rediss://` servers
    /// that ask for a client certificate (`tls-auth-clients yes`): mutual TLS. Needs the `tls`
    /// feature.
    ///
    /// ```no_run
    /// let client = redmutex::LockClient::builder("rediss://redis.internal:6380/")
    ///     .tls_root_ca(std::fs::read("ca.crt")?)
    ///     .tls_client_cert(std::fs::read("client.crt")?, std::fs::read("client.key")?)
    ///     .build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "tls")]
    pub fn tls_client_cert(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.config.tls.client = Some((cert_pem.into(), key_pem.into()));
        self
    }

    /// Checks the settings, opens a connection to each node to prove it answers, and returns
    /// the client.
    ///
    /// Fails with [`Error::InvalidConfig`](crate::Error::InvalidConfig) or [`Error::InvalidUrl`](crate::Error::InvalidUrl) on bad input; with
    /// [`Error::Redis`](crate::Error::Redis) when the one Redis cannot be reached, does not answer or is no Redis
    /// (within the connect timeout plus one response timeout; `docs/semantics.md` gives the exact bound); with
    /// [`Error::Permission`](crate::Error::Permission) when the Redis user may not run a command the locks need (Redis
    /// 7 and later tell); with an error for which [`is_scripting_disabled`](crate::Error::is_scripting_disabled)
    /// holds when a server runs no scripts (on any node of Redlock); and for Redlock with [`Error::NoQuorum`](crate::Error::NoQuorum) when fewer than a quorum of
    /// nodes answer.
    pub fn build(self) -> Result<LockClient> {
        let (urls, config) = self.settled()?;
        LockClient::connect(&urls, config)
    }

    /// The URLs and the settings, the defaults derived and all checked, with a new client
    /// id.
    pub(crate) fn settled(mut self) -> Result<(Vec<String>, Config)> {
        self.config.derive_defaults();
        self.config.validate()?;
        self.config.client_id = crate::layout::owner::new_client_id(self.config.direct_handoff);
        Ok((self.urls, self.config))
    }

    /// The URLs, their passwords hidden, separated by commas: what a finding about the
    /// whole client names.
    pub(crate) fn urls_text(&self) -> String {
        (self.urls.iter().map(|url| redact(url)))
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl fmt::Debug for LockClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockClientBuilder")
            .field(
                "urls",
                &self.urls.iter().map(|url| redact(url)).collect::<Vec<_>>(),
            )
            .field("master_name", &self.config.sentinel)
            .field("cluster", &self.config.cluster)
            .finish_non_exhaustive()
    }
}
