//! Client settings, their defaults and their limits.

use std::sync::Arc;
use std::time::Duration;

use crate::base::error::{Error, Result};
use crate::base::health::HealthChange;
use crate::base::lost::LockLost;
use crate::base::tls::Certificates;

/// Longest lock name accepted, in bytes (the key prefix is not counted).
pub const MAX_NAME_LEN: usize = 1024;

/// Longest lease accepted, by the builder and by the `*_with_lease` calls: 7 days.
pub const MAX_LEASE: Duration = Duration::from_secs(7 * 24 * 3600);

const MAX_POOL_SIZE: u32 = 1024;
const MAX_TIMEOUT: Duration = Duration::from_secs(600);
const MAX_PREFIX_LEN: usize = 256;
const MIN_STACK: usize = 64 * 1024;
const MAX_REPLICAS: u32 = 64;
/// Shortest place in a fair lock's queue: a waiter comes back three times within it.
const MIN_QUEUE_WAIT: Duration = Duration::from_millis(100);

/// Shortest deadlock timeout: a waiter writes its wait after half of it, and looks for a
/// cycle once it has passed, a few round trips each.
const MIN_DEADLOCK_TIMEOUT: Duration = Duration::from_millis(10);

pub(crate) type LostCallback = Arc<dyn Fn(&LockLost) + Send + Sync>;
pub(crate) type HealthCallback = Arc<dyn Fn(&HealthChange) + Send + Sync>;

/// The settings of a [`LockClient`](crate::LockClient). All defaults live in the `Default` impl below.
#[derive(Clone)]
pub(crate) struct Config {
    pub pool_size: u32,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
    /// Whether the user chose `response_timeout`; if not, it is derived from the renew
    /// interval by [`Config::derive_defaults`].
    pub response_timeout_set: bool,
    pub lease: Duration,
    /// `None`: a third of the lease.
    pub renew_interval: Option<Duration>,
    pub retry_base: Duration,
    pub retry_cap: Duration,
    /// A spin lock's first and longest sleep between attempts.
    pub spin_backoff: (Duration, Duration),
    /// Whether the client may use pub/sub: when not, `build()` does not ask for the rights
    /// and no waiter subscribes.
    pub pubsub: bool,
    pub max_wait: Option<Duration>,
    /// How long a waiter waits before it looks for a deadlock through itself; `None`: never.
    pub deadlock_timeout: Option<Duration>,
    pub key_prefix: Vec<u8>,
    pub watchdog_stack_size: usize,
    /// How often the subscriber connection is checked with a probe.
    pub ping_interval: Duration,
    /// How long a fair-lock waiter keeps its place in the queue without coming back.
    pub fair_queue_wait: Duration,
    /// Whether a fair lock's release hands the lock straight to the next waiter of this
    /// crate's, and this client's waiters take such grants (see `kinds::fair`).
    pub direct_handoff: bool,
    pub on_lock_lost: Option<LostCallback>,
    pub on_health_change: Option<HealthCallback>,
    /// Replicas that must acknowledge each acquisition, and how long to wait for them.
    pub replica_acks: Option<ReplicaAcks>,
    /// The master name, for a client whose URLs are those of sentinels.
    pub sentinel: Option<String>,
    /// Whether the URLs are seeds of one Redis Cluster.
    pub cluster: bool,
    /// What the primary found through Sentinel wants.
    pub primary_credentials: Option<Credentials>,
    /// Certificates for `rediss://` servers.
    pub tls: Certificates,
    /// The name shown beside this client's holds: host name and process id by default.
    pub client_name: String,
    /// The client's id, the first half of its owner fields; set when it is built.
    pub client_id: String,
}

/// The user and password the primary wants. Never shown.
#[derive(Clone)]
pub(crate) struct Credentials {
    /// `None`: the password alone (`requirepass`).
    pub username: Option<String>,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credentials(***)")
    }
}

/// `WAIT replicas timeout` after every acquisition.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReplicaAcks {
    pub replicas: u32,
    pub timeout: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            pool_size: 8,
            connect_timeout: Duration::from_secs(2),
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
            response_timeout_set: false,
            lease: Duration::from_secs(30),
            renew_interval: None,
            retry_base: Duration::from_millis(5),
            retry_cap: Duration::from_millis(200),
            spin_backoff: (Duration::from_millis(1), Duration::from_millis(128)),
            pubsub: true,
            max_wait: None,
            deadlock_timeout: Some(Duration::from_secs(1)),
            key_prefix: Vec::new(),
            watchdog_stack_size: 128 * 1024,
            ping_interval: Duration::from_secs(1),
            fair_queue_wait: Duration::from_secs(5),
            direct_handoff: true,
            on_lock_lost: None,
            on_health_change: None,
            replica_acks: None,
            sentinel: None,
            cluster: false,
            primary_credentials: None,
            tls: Certificates::default(),
            client_name: default_client_name(),
            client_id: String::new(),
        }
    }
}

/// Longest client name accepted, in bytes.
const MAX_CLIENT_NAME_LEN: usize = 64;

/// The host name and this process's id, as `host/pid`, in the characters a Redis
/// connection name may have.
fn default_client_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::env::var("HOSTNAME"))
        .or_else(|_| std::env::var("COMPUTERNAME"))
        .unwrap_or_else(|_| "localhost".into());
    let host: String = (host.trim().chars())
        .map(|c| if c.is_ascii_graphic() { c } else { '-' })
        .take(MAX_CLIENT_NAME_LEN - 11)
        .collect();
    format!("{host}/{}", std::process::id())
}

/// The response timeout when neither it nor a short lease says otherwise.
const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

impl Config {
    /// The name of this client's connections in `CLIENT LIST`, which the operations tool
    /// reads to name the holders: `<role>:<client id>:<client name>`, the role `redmutex`
    /// for pooled connections and `redmutex-notify` for the subscriber's.
    pub fn connection_name(&self, role: &str) -> String {
        format!("{role}:{}:{}", self.client_id, self.client_name)
    }

    /// Sets what the user left unset and depends on another setting: the response timeout
    /// is the smaller of 2 s and a third of what the lease leaves after the renew interval
    /// (two thirds of the renew interval when it is the default third of the lease), so
    /// that every lease and every renew interval builds, a renewal that hangs can be tried
    /// again before the lease runs out, and leases of 9 s and more keep the 2 s (at 10,000
    /// held locks a 10 s lease lost holds with less: renewals in a burst took over 1.7 s on
    /// a 2-core machine).
    pub fn derive_defaults(&mut self) {
        if !self.response_timeout_set {
            let after_renewal = self.lease.saturating_sub(self.renew_interval());
            self.response_timeout = DEFAULT_RESPONSE_TIMEOUT.min(after_renewal / 3);
        }
    }

    /// How often the watchdog renews the lease.
    pub fn renew_interval(&self) -> Duration {
        self.renew_interval.unwrap_or(self.lease / 3)
    }

    /// How long a release leaves its latch behind: longer than every retry of one call.
    pub fn latch_ttl(&self) -> Duration {
        2 * (self.connect_timeout + self.response_timeout)
    }

    pub fn validate(&self) -> Result<()> {
        let bad = |setting, reason: String| Err(Error::InvalidConfig { setting, reason });
        let name = &self.client_name;
        if name.is_empty() || name.len() > MAX_CLIENT_NAME_LEN {
            return bad(
                "client_name",
                format!("must be 1 to {MAX_CLIENT_NAME_LEN} bytes"),
            );
        }
        if !name.bytes().all(|b| b.is_ascii_graphic()) {
            return bad(
                "client_name",
                "may have printable ASCII characters only, without spaces, as a Redis \
                 connection name"
                    .into(),
            );
        }
        if self.pool_size == 0 || self.pool_size > MAX_POOL_SIZE {
            return bad("pool_size", format!("must be 1..={MAX_POOL_SIZE}"));
        }
        // The lease and the renew interval first: the response timeout may follow them.
        check_lease(self.lease).or_else(|reason| bad("lease", reason))?;
        // At most half the lease: a renewal that fails is tried again before it runs out.
        let renew = self.renew_interval();
        if renew < Duration::from_millis(1) || renew > self.lease / 2 {
            return bad(
                "renew_interval",
                format!(
                    "must be at least 1 ms and at most half the lease ({:?})",
                    self.lease
                ),
            );
        }
        for (setting, value) in [
            ("connect_timeout", self.connect_timeout),
            ("response_timeout", self.response_timeout),
        ] {
            if value.is_zero() || value > MAX_TIMEOUT {
                return bad(
                    setting,
                    format!("must be above zero and at most {MAX_TIMEOUT:?}"),
                );
            }
        }
        // A renewal, and its retry, that each hang for the whole response timeout must both
        // end before the lease left after the renew interval runs out; with the default
        // renew interval (a third of the lease), that is below the interval.
        let most = (self.lease - renew) / 2;
        if self.response_timeout >= most {
            return bad(
                "response_timeout",
                format!(
                    "must be below half of what the lease leaves after the renew interval \
                     ({most:?}); keep it small against the lease"
                ),
            );
        }
        if self.ping_interval < Duration::from_millis(10) || self.ping_interval > MAX_TIMEOUT {
            return bad("ping_interval", format!("must be 10 ms..={MAX_TIMEOUT:?}"));
        }
        if !(MIN_QUEUE_WAIT..=MAX_LEASE).contains(&self.fair_queue_wait) {
            return bad(
                "fair_queue_wait",
                format!("must be {MIN_QUEUE_WAIT:?}..={MAX_LEASE:?}"),
            );
        }
        if self.retry_base < Duration::from_micros(100) || self.retry_base > MAX_TIMEOUT {
            return bad("retry_base", format!("must be 100 µs..={MAX_TIMEOUT:?}"));
        }
        if self.retry_cap < self.retry_base || self.retry_cap > MAX_TIMEOUT {
            return bad("retry_cap", format!("must be retry_base..={MAX_TIMEOUT:?}"));
        }
        let (first, most) = self.spin_backoff;
        if first < Duration::from_micros(100) || first > most || most > MAX_TIMEOUT {
            return bad(
                "spin_backoff",
                format!("must be 100 µs <= initial <= max <= {MAX_TIMEOUT:?}"),
            );
        }
        if self.max_wait.is_some_and(|wait| wait > MAX_LEASE) {
            return bad("max_wait", format!("must be at most {MAX_LEASE:?}"));
        }
        if self
            .deadlock_timeout
            .is_some_and(|timeout| !(MIN_DEADLOCK_TIMEOUT..=MAX_TIMEOUT).contains(&timeout))
        {
            return bad(
                "deadlock_timeout",
                format!("must be {MIN_DEADLOCK_TIMEOUT:?}..={MAX_TIMEOUT:?}, or None"),
            );
        }
        if self.key_prefix.len() > MAX_PREFIX_LEN {
            return bad(
                "key_prefix",
                format!("must be at most {MAX_PREFIX_LEN} bytes"),
            );
        }
        if let Some(acks) = self.replica_acks {
            if acks.replicas == 0 || acks.replicas > MAX_REPLICAS {
                return bad(
                    "min_replica_acks",
                    format!("replicas must be 1..={MAX_REPLICAS}"),
                );
            }
            // The acknowledgement is part of the acquisition's reply, which must come within
            // the response timeout; WAIT with 0 would wait for ever.
            if acks.timeout < Duration::from_millis(1) || acks.timeout >= self.response_timeout {
                return bad(
                    "min_replica_acks",
                    format!(
                        "the timeout must be at least 1 ms and below the response timeout ({:?})",
                        self.response_timeout
                    ),
                );
            }
        }
        if self.primary_credentials.is_some() && self.sentinel.is_none() {
            return bad(
                "primary_credentials",
                "only for a Sentinel client; put credentials in the URL".into(),
            );
        }
        if self.watchdog_stack_size < MIN_STACK {
            return bad(
                "watchdog_stack_size",
                format!("must be at least {MIN_STACK} bytes"),
            );
        }
        Ok(())
    }
}

/// Shortest lease accepted: below it the clock drift allowance (1% + 2 ms) leaves no validity.
pub const MIN_LEASE: Duration = Duration::from_millis(10);

/// Checks a lease: [`MIN_LEASE`] to [`MAX_LEASE`]; Redis counts it in whole milliseconds.
pub(crate) fn check_lease(lease: Duration) -> std::result::Result<(), String> {
    if !(MIN_LEASE..=MAX_LEASE).contains(&lease) {
        return Err(format!("must be {MIN_LEASE:?}..={MAX_LEASE:?}"));
    }
    Ok(())
}
