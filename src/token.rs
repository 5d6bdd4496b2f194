//! The token lock: `SET key token NX PX lease`, the layout of redis-py's `Lock`, redsync and
//! node-redlock. Owned by a random token, not by a thread, so its guard may move.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::Cmd;

use crate::client::Inner;
use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::holds::{Holding, validity_end};
use crate::kind::{Attempt, sealed::Machinery};
use crate::layout;
use crate::lock::Lock;
use crate::scripts::{self, millis};
use crate::watchdog::{self, Job, Renewal, Ticket};

/// The token kind: the lock is a Redis string holding its owner's token, set with `SET key
/// token NX PX lease`, the layout redis-py's `Lock`, redsync and node-redlock use, so a
/// service using any of them on the same key excludes and is excluded.
///
/// Not reentrant: a second `lock()` on a held token lock waits like anyone else. The hold
/// belongs to its token, drawn from a CSPRNG, not to a thread, so its guard is `Send`: a job
/// may take the lock on one thread and release it on another. Releasing and
/// [extending](crate::LockGuard::extend) compare the token in Lua, so nobody releases
/// another's hold.
///
/// Our releases wake our waiters through pub/sub; a foreign library's release publishes
/// nothing, so a waiter also retries on its jittered loop, at least every retry cap.
#[derive(Debug, Clone, Copy, Default)]
pub struct Token;

/// What a token guard carries.
pub struct TokenHeld {
    token: String,
    /// The watchdog's ticket, for a hold taken without a lease; dropped at release.
    watchdog: Mutex<Option<Ticket>>,
}

impl Machinery for Token {
    type Held = TokenHeld;
    type Affinity = ();
    const POLLS: bool = true;

    fn attempt(
        lock: &Lock<Self>,
        lease: Option<Duration>,
        limit: Option<Instant>,
    ) -> Result<Attempt<Self>> {
        let inner = &lock.client.inner;
        let nodes = &inner.nodes;
        let key = lock.key()?;
        let token = layout::random_id();
        let script_lease = lease.unwrap_or(inner.config.lease);
        let mut cmd = Cmd::with_capacity(6, key.len() + 64);
        cmd.arg("SET")
            .arg(key)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(millis(script_lease));
        let sent = Instant::now();
        let (answers, failed) = nodes.split(nodes.run_all::<Option<String>>(&cmd, limit));
        let elapsed = sent.elapsed();
        let granted = answers.iter().filter(|reply| reply.is_some()).count();
        let valid_until = validity_end(sent, script_lease).filter(|end| *end > Instant::now());
        let quorum = nodes.quorum();
        if granted >= quorum
            && let Some(valid_until) = valid_until
        {
            return acquired(lock, lease, token, sent, valid_until);
        }
        if granted > 0 || failed.iter().any(|f| f.error.may_have_run()) {
            give_back(lock, &token, limit);
        }
        if nodes.list().len() - failed.len() < quorum {
            return Err(nodes.no_quorum(failed).with_lock(lock.name()));
        }
        if granted >= quorum {
            return Ok(Attempt::Retry(Error::ValidityExhausted {
                lock: lock.name().to_owned(),
                elapsed,
                lease: script_lease,
            }));
        }
        busy(lock, limit)
    }

    fn release(guard: &LockGuard<Self>) -> Result<()> {
        let lock = &guard.lock;
        let inner = &lock.client.inner;
        inner.check_process()?;
        if guard.holding.is_lost() {
            return Err(lock.lost());
        }
        // Stops the renewals; a renewal already on its way finishes first (`round`).
        drop(guard.held.watchdog.lock().take());
        let nodes = &inner.nodes;
        let round = guard.holding.round.lock();
        let (answers, failed) =
            nodes.split(nodes.run_all::<i64>(&release_cmd(lock, &guard.held.token)?, None));
        drop(round);
        let released = answers.iter().filter(|&&reply| reply == 1).count();
        let not_ours = answers.len() - released;
        let quorum = nodes.quorum();
        if released >= quorum {
            if failed.is_empty() {
                return Ok(());
            }
            return Err(Error::PartialRelease {
                lock: lock.name().to_owned(),
                released,
                of: nodes.list().len(),
                failed,
            });
        }
        if not_ours <= nodes.list().len() - quorum {
            return Err(nodes.no_quorum(failed).with_lock(lock.name()));
        }
        inner.report_lost(lock.name(), &guard.holding, None);
        Err(lock.lost())
    }
}

impl LockGuard<Token> {
    /// The token this hold is stored under: the value of the lock's key.
    pub fn token(&self) -> &str {
        &self.held.token
    }

    /// Sets the hold's remaining lease to `lease` ([`MIN_LEASE`](crate::MIN_LEASE) to
    /// [`MAX_LEASE`](crate::MAX_LEASE)), if the key still holds this guard's token (on a
    /// quorum of nodes). Returns [`Error::Lost`] when it no longer does. On a hold the
    /// watchdog renews, the next renewal sets the client's lease again.
    pub fn extend(&self, lease: Duration) -> Result<()> {
        let lock = &self.lock;
        crate::config::check_lease(lease).map_err(|reason| Error::InvalidArgument {
            lock: lock.name().to_owned(),
            argument: "lease",
            reason,
        })?;
        let inner = &lock.client.inner;
        inner.check_process()?;
        if self.holding.is_lost() {
            return Err(lock.lost());
        }
        let nodes = &inner.nodes;
        let cmd = scripts::token_renew(lock.key()?, &self.held.token, lease, false);
        let round = self.holding.round.lock();
        let sent = Instant::now();
        let (answers, failed) = nodes.split(nodes.run_all::<i64>(&cmd, None));
        drop(round);
        let kept = answers.iter().filter(|&&reply| reply == 1).count();
        if kept >= nodes.quorum() {
            if let Some(until) = validity_end(sent, lease) {
                self.holding.set_valid_until(until);
            }
            return Ok(());
        }
        if kept + failed.len() >= nodes.quorum() {
            return Err(nodes.no_quorum(failed).with_lock(lock.name()));
        }
        inner.report_lost(lock.name(), &self.holding, None);
        Err(lock.lost())
    }
}

fn acquired(
    lock: &Lock<Token>,
    lease: Option<Duration>,
    token: String,
    sent: Instant,
    valid_until: Instant,
) -> Result<Attempt<Token>> {
    let inner = &lock.client.inner;
    let holding = Arc::new(Holding::default());
    holding.set_valid_until(valid_until);
    let mut ticket = None;
    if lease.is_none() {
        let job = Job {
            client: Arc::downgrade(inner),
            name: lock.name().to_owned(),
            holding: holding.clone(),
            since: sent,
            renewal: Box::new(Renew {
                key: lock.name.key.clone(),
                token: token.clone(),
            }),
        };
        match watchdog::start(&inner.parked, inner.config.watchdog_stack_size, job) {
            Ok(started) => ticket = Some(started),
            Err(source) => {
                give_back(lock, &token, None);
                return Err(Error::Watchdog {
                    lock: lock.name().to_owned(),
                    source,
                });
            }
        }
    }
    let held = TokenHeld {
        token,
        watchdog: Mutex::new(ticket),
    };
    Ok(Attempt::Acquired(LockGuard::new(
        lock.clone(),
        holding,
        lease.is_none(),
        held,
    )))
}

/// Deletes the key wherever it holds `token`, as after a failed attempt; failures are only
/// logged, the lease cleans up after them.
fn give_back(lock: &Lock<Token>, token: &str, limit: Option<Instant>) {
    let nodes = &lock.client.inner.nodes;
    let Ok(cmd) = release_cmd(lock, token) else {
        return;
    };
    for (node, result) in nodes.list().iter().zip(nodes.run_all::<i64>(&cmd, limit)) {
        if let Err(err) = result {
            log::warn!(
                "giving back lock {:?} on {} failed: {err}",
                lock.name(),
                node.name
            );
        }
    }
}

/// Why the key is taken: busy with the shortest PTTL among the nodes that hold a string, or
/// another kind of lock.
fn busy(lock: &Lock<Token>, limit: Option<Instant>) -> Result<Attempt<Token>> {
    let nodes = &lock.client.inner.nodes;
    let cmd = scripts::token_probe(lock.key()?);
    let (answers, _) = nodes.split(nodes.run_all::<(String, i64)>(&cmd, limit));
    if let Some((found, _)) = answers
        .iter()
        .find(|(kind, _)| kind != "string" && kind != "none")
    {
        return Err(Error::WrongKind {
            lock: lock.name().to_owned(),
            found: layout::kind_of(found),
        });
    }
    let ttl = answers
        .iter()
        .filter_map(|&(_, ttl)| u64::try_from(ttl).ok())
        .map(Duration::from_millis)
        .min();
    Ok(Attempt::Busy(ttl))
}

fn release_cmd(lock: &Lock<Token>, token: &str) -> Result<Cmd> {
    let key = lock.key()?;
    let latch = layout::unlock_latch(key, &layout::random_id());
    let latch_ttl = lock.client.inner.config.latch_ttl();
    Ok(scripts::token_release(
        key,
        &lock.name.channel,
        &latch,
        token,
        latch_ttl,
    ))
}

/// What the watchdog renews for a token hold.
struct Renew {
    key: Arc<[u8]>,
    token: String,
}

impl Renewal for Renew {
    fn command(&self, _: &Inner, lease: Duration, restore: bool) -> Cmd {
        scripts::token_renew(&self.key, &self.token, lease, restore)
    }

    fn forget(&self, _: &Inner, _: &Arc<Holding>) -> bool {
        // Only the guard's release stops a token hold's renewals, and the watchdog checks
        // for that before it calls a hold lost.
        true
    }
}
