//! Client settings, their defaults and their limits, and the builder that checks them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::{LockClient, LockLost};

/// Longest lock name accepted, in bytes (the key prefix is not counted).
pub const MAX_NAME_LEN: usize = 1024;

/// Longest lease accepted, by the builder and by the `*_with_lease` calls: 7 days.
pub const MAX_LEASE: Duration = Duration::from_secs(7 * 24 * 3600);

const MAX_POOL_SIZE: u32 = 1024;
const MAX_TIMEOUT: Duration = Duration::from_secs(600);
const MAX_PREFIX_LEN: usize = 256;
const MIN_STACK: usize = 64 * 1024;

pub(crate) type LostCallback = Arc<dyn Fn(&LockLost) + Send + Sync>;

/// The settings of a [`LockClient`]. All defaults live in the `Default` impl below.
#[derive(Clone)]
pub(crate) struct Config {
    pub pool_size: u32,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
    pub lease: Duration,
    /// `None`: a third of the lease.
    pub renew_interval: Option<Duration>,
    pub retry_base: Duration,
    pub retry_cap: Duration,
    pub max_wait: Option<Duration>,
    pub key_prefix: Vec<u8>,
    pub watchdog_stack_size: usize,
    /// How often the subscriber connection is checked with a probe.
    pub ping_interval: Duration,
    pub on_lock_lost: Option<LostCallback>,
    #[cfg(feature = "tls")]
    pub tls: crate::tls::Certificates,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            pool_size: 8,
            connect_timeout: Duration::from_secs(2),
            response_timeout: Duration::from_secs(2),
            lease: Duration::from_secs(30),
            renew_interval: None,
            retry_base: Duration::from_millis(5),
            retry_cap: Duration::from_millis(200),
            max_wait: None,
            key_prefix: Vec::new(),
            watchdog_stack_size: 128 * 1024,
            ping_interval: Duration::from_secs(1),
            on_lock_lost: None,
            #[cfg(feature = "tls")]
            tls: Default::default(),
        }
    }
}

impl Config {
    /// How often the watchdog renews the lease.
    pub fn renew_interval(&self) -> Duration {
        self.renew_interval.unwrap_or(self.lease / 3)
    }

    /// How long a release leaves its latch behind: longer than every retry of one call.
    pub fn latch_ttl(&self) -> Duration {
        2 * (self.connect_timeout + self.response_timeout)
    }

    fn validate(&self) -> Result<()> {
        let bad = |setting, reason: String| Err(Error::InvalidConfig { setting, reason });
        if self.pool_size == 0 || self.pool_size > MAX_POOL_SIZE {
            return bad("pool_size", format!("must be 1..={MAX_POOL_SIZE}"));
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
        check_lease(self.lease).or_else(|reason| bad("lease", reason))?;
        let renew = self.renew_interval();
        if renew < Duration::from_millis(1) || renew >= self.lease {
            return bad(
                "renew_interval",
                format!(
                    "must be at least 1 ms and below the lease ({:?})",
                    self.lease
                ),
            );
        }
        // A renewal that hangs for a response timeout as long as the renew interval would let
        // the lease run out before the watchdog sees an error.
        if self.response_timeout >= renew {
            return bad(
                "response_timeout",
                format!(
                    "must be below the renew interval ({renew:?}); keep it small against the lease"
                ),
            );
        }
        if self.ping_interval < Duration::from_millis(10) || self.ping_interval > MAX_TIMEOUT {
            return bad("ping_interval", format!("must be 10 ms..={MAX_TIMEOUT:?}"));
        }
        if self.retry_base < Duration::from_micros(100) || self.retry_base > MAX_TIMEOUT {
            return bad("retry_base", format!("must be 100 µs..={MAX_TIMEOUT:?}"));
        }
        if self.retry_cap < self.retry_base || self.retry_cap > MAX_TIMEOUT {
            return bad("retry_cap", format!("must be retry_base..={MAX_TIMEOUT:?}"));
        }
        if self.max_wait.is_some_and(|wait| wait > MAX_LEASE) {
            return bad("max_wait", format!("must be at most {MAX_LEASE:?}"));
        }
        if self.key_prefix.len() > MAX_PREFIX_LEN {
            return bad(
                "key_prefix",
                format!("must be at most {MAX_PREFIX_LEN} bytes"),
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

/// Builds a [`LockClient`] with tuned settings; [`LockClient::open`] takes all the defaults.
///
/// | setting | default |
/// |---|---|
/// | [`pool_size`](Self::pool_size) | 8 connections |
/// | [`connect_timeout`](Self::connect_timeout) | 2 s |
/// | [`response_timeout`](Self::response_timeout) | 2 s |
/// | [`lease`](Self::lease) (watchdog lease) | 30 s |
/// | [`renew_interval`](Self::renew_interval) | lease / 3 |
/// | [`retry_base`](Self::retry_base) / [`retry_cap`](Self::retry_cap) | 5 ms / 200 ms |
/// | [`max_wait`](Self::max_wait) | none: `lock()` waits until it gets the lock |
/// | [`key_prefix`](Self::key_prefix) | empty |
/// | [`watchdog_stack_size`](Self::watchdog_stack_size) | 128 KiB |
/// | [`ping_interval`](Self::ping_interval) | 1 s |
/// | [`on_lock_lost`](Self::on_lock_lost) | none (losses are logged) |
///
/// Every value is checked by [`build`](Self::build), which returns
/// [`Error::InvalidConfig`] naming the setting.
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

    /// Most pooled connections open at once, 1 to 1024. Defaults to 8.
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
    /// round on all nodes may take. It must be below the renew interval (a renewal that hangs
    /// longer would let the lease run out unnoticed), and should be small against the lease.
    /// A call with a deadline returns at most this long after it. Defaults to 2 s.
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.config.response_timeout = timeout;
        self
    }

    /// Lease of holds taken without an explicit one; the watchdog keeps renewing it while
    /// the lock is held. [`MIN_LEASE`] to [`MAX_LEASE`]. Defaults to 30 s.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.config.lease = lease;
        self
    }

    /// How often the watchdog renews; must be below the lease. Defaults to a third of the lease.
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

    /// Bounds how long `lock()` and `lock_with_lease()` wait; past it they return
    /// [`Error::Timeout`]. Defaults to no bound.
    pub fn max_wait(mut self, wait: Duration) -> Self {
        self.config.max_wait = Some(wait);
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

    /// Called once for each holding found gone: deleted or expired from outside, or not
    /// renewed before its validity ran out. It runs on the thread that found the loss: the
    /// watchdog's, or the caller's when a release or a re-entry finds it. Keep it short.
    /// Defaults to none: losses are only logged and visible through
    /// [`LockGuard::is_lost`](crate::LockGuard::is_lost) and [`Stats::locks_lost`](crate::Stats::locks_lost).
    pub fn on_lock_lost(mut self, callback: impl Fn(&LockLost) + Send + Sync + 'static) -> Self {
        self.config.on_lock_lost = Some(Arc::new(callback));
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
    /// Fails with [`Error::InvalidConfig`] or [`Error::InvalidUrl`] on bad input; with
    /// [`Error::Redis`] when the one Redis cannot be reached within the connect timeout; with
    /// [`Error::Permission`] when the Redis user may not run a command the locks need (Redis
    /// 7 and later tell); and for Redlock with [`Error::NoQuorum`] when fewer than a quorum of
    /// nodes answer.
    pub fn build(self) -> Result<LockClient> {
        self.config.validate()?;
        LockClient::connect(&self.urls, self.config)
    }
}

impl fmt::Debug for LockClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockClientBuilder")
            .field(
                "urls",
                &self
                    .urls
                    .iter()
                    .map(|url| crate::node::redact(url))
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}
