//! The client: a connection pool, an owner id, and the table of what it holds.

use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use redis::{Connection, IntoConnectionInfo, RedisResult};
use scheduled_thread_pool::{OnPoolDropBehavior, ScheduledThreadPool};

use crate::config::{Config, LockClientBuilder};
use crate::error::{Error, Result};
use crate::holds::Holds;
use crate::lock::Lock;
use crate::notify::Notifier;
use crate::pool::Manager;
use crate::scripts;
use crate::stats::{Counters, Stats};
use crate::watchdog::{Job, Parked};

/// A connection to one Redis server from which locks are made.
///
/// Cheap to clone: clones share the pool, the owner id and the watchdog threads. Locks taken
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
#[derive(Clone)]
pub struct LockClient {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub config: Config,
    pub node: String,
    /// The client's UUID, the first half of every owner field.
    pub id: String,
    pool: r2d2::Pool<Manager>,
    pub holds: Mutex<Holds>,
    pub parked: Arc<Parked>,
    pub notifier: Notifier,
    pub counters: Counters,
}

/// A hold the watchdog found gone, as handed to the
/// [`on_lock_lost`](LockClientBuilder::on_lock_lost) callback.
#[derive(Debug)]
#[non_exhaustive]
pub struct LockLost {
    /// The lock's name (lossily decoded).
    pub name: String,
    /// `None` when Redis said the hold is gone (deleted or expired); the last renewal error
    /// when Redis could not be reached for a whole lease.
    pub error: Option<Error>,
}

impl LockClient {
    /// Connects with every default setting (see [`LockClientBuilder`]).
    pub fn open(url: &str) -> Result<LockClient> {
        Self::builder(url).build()
    }

    /// Starts a builder for tuned settings.
    pub fn builder(url: &str) -> LockClientBuilder {
        LockClientBuilder::new(url)
    }

    /// A handle on the lock `name`, stored under the key `key_prefix + name`.
    ///
    /// Any bytes up to [`MAX_NAME_LEN`](crate::MAX_NAME_LEN) make a name; an empty or longer
    /// one makes a handle whose every call returns [`Error::InvalidName`].
    pub fn lock(&self, name: impl AsRef<[u8]>) -> Lock {
        Lock::new(self.clone(), name.as_ref())
    }

    /// This client's UUID: the first half of the `"<uuid>:<thread>"` field of its holds.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// What this client's watchdogs have done so far.
    pub fn stats(&self) -> Stats {
        self.inner.counters.snapshot()
    }

    pub(crate) fn connect(url: &str, config: Config) -> Result<LockClient> {
        let invalid = |source| Error::InvalidUrl {
            url: redact(url),
            source,
        };
        let info = url.into_connection_info().map_err(invalid)?;
        let node = info.addr().to_string();
        let notifier = Notifier::new(
            info.clone(),
            config.connect_timeout.max(config.response_timeout),
        );
        let client = redis::Client::open(info).map_err(invalid)?;
        let manager = Manager {
            client,
            connect_timeout: config.connect_timeout,
            response_timeout: config.response_timeout,
        };
        // Prove Redis answers now, within the connect timeout, rather than at the first lock.
        manager
            .open()
            .and_then(|mut conn| conn.run(|c| redis::cmd("PING").query::<()>(c)))
            .map_err(|source| Error::Redis {
                lock: None,
                node: node.clone(),
                source,
            })?;
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
            .min_idle(Some(0))
            .test_on_check_out(false)
            .connection_timeout(config.connect_timeout)
            .build_unchecked(manager);
        Ok(LockClient {
            inner: Arc::new(Inner {
                id: crate::owner::new_client_id(),
                config,
                node,
                pool,
                holds: Mutex::default(),
                parked: Arc::default(),
                notifier,
                counters: Counters::default(),
            }),
        })
    }
}

impl Inner {
    /// Runs `f` on a pooled connection.
    ///
    /// With `retry`, a connection found dead (Redis restarted, the connection closed while
    /// idle) is dropped and `f` runs again on another, so an idle client recovers on its own.
    /// Only calls that are safe to repeat pass `retry`: a release is not one of them.
    pub fn query<T>(
        &self,
        retry: bool,
        mut f: impl FnMut(&mut Connection) -> RedisResult<T>,
    ) -> Result<T> {
        let mut attempts_left = if retry { self.config.pool_size + 1 } else { 1 };
        loop {
            let mut conn = self.pool.get().map_err(|source| Error::Pool {
                lock: None,
                node: self.node.clone(),
                source,
            })?;
            attempts_left -= 1;
            match conn.run(&mut f) {
                Err(err) if attempts_left > 0 && err.is_connection_dropped() => {
                    log::debug!("connection to {} dropped, retrying: {err}", self.node);
                }
                result => {
                    return result.map_err(|source| Error::Redis {
                        lock: None,
                        node: self.node.clone(),
                        source,
                    });
                }
            }
        }
    }

    /// One watchdog renewal: whether the field was still there.
    pub fn renew(&self, key: &[u8], field: &str, lease: Duration) -> Result<bool> {
        let renewed = self.query(true, |c| {
            scripts::RENEW
                .key(key)
                .arg(lease.as_millis() as u64)
                .arg(field)
                .invoke(c)
        });
        match renewed {
            Ok(true) => Counters::bump(&self.counters.renewals),
            Ok(false) => {}
            Err(_) => Counters::bump(&self.counters.renewal_failures),
        }
        renewed
    }

    /// Forgets a holding the watchdog found gone, marks its guards lost and tells the
    /// callback, unless the holding already ended. Runs on the watchdog's thread.
    pub fn declare_lost(&self, job: &Job, error: Option<Error>) {
        let mut holds = self.holds.lock();
        let current = holds.get(&job.id).is_some_and(|hold| {
            Arc::ptr_eq(&hold.holding, &job.holding) && hold.watchdog.is_some()
        });
        if !current {
            return;
        }
        // Kept until the callback returns: dropping it lets this thread take another job.
        let _hold = holds.remove(&job.id);
        drop(holds);
        job.holding.mark_lost();
        Counters::bump(&self.counters.locks_lost);
        match &error {
            None => log::warn!("lock {:?} was lost: its key or field is gone", job.name),
            Some(err) => log::warn!(
                "lock {:?} was lost: renewals failed for a whole lease: {err}",
                job.name
            ),
        }
        if let Some(callback) = &self.config.on_lock_lost {
            let lost = LockLost {
                name: job.name.clone(),
                error,
            };
            if std::panic::catch_unwind(AssertUnwindSafe(|| callback(&lost))).is_err() {
                log::error!("the on_lock_lost callback panicked for lock {:?}", job.name);
            }
        }
    }
}

impl fmt::Debug for LockClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockClient")
            .field("node", &self.inner.node)
            .field("id", &self.inner.id)
            .finish_non_exhaustive()
    }
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
