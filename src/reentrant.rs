//! The reentrant lock, Redisson's `RLock`: a hash whose field `"<client-uuid>:<thread-id>"`
//! counts the holds of its one owner, a thread of one client.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{Cmd, Value};

use crate::client::Inner;
use crate::config::MAX_LEASE;
use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::holds::{Hold, HoldId, Holding, validity_end};
use crate::kind::{Attempt, sealed::Machinery};
use crate::layout;
use crate::lock::Lock;
use crate::owner::{current_thread, field};
use crate::scripts::{self, FRESH};
use crate::watchdog::{self, Job, Renewal};

/// The reentrant kind, Redisson's `RLock` layout: the lock is a Redis hash whose field
/// `"<client-uuid>:<thread-id>"` counts the holds of its one owner, so Java services using
/// Redisson share it. A hold belongs to the thread that took it (its guard is not `Send`);
/// that thread may take it again without waiting, and each hold is released on its own.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reentrant;

impl Machinery for Reentrant {
    type Held = ();
    type Affinity = *const ();

    fn attempt(
        lock: &Lock<Self>,
        lease: Option<Duration>,
        limit: Option<Instant>,
    ) -> Result<Attempt<Self>> {
        lock.take(lease, limit)
    }

    fn release(guard: &LockGuard<Self>) -> Result<()> {
        guard.lock.release(&guard.holding, guard.watched)
    }
}

impl Hashed for Reentrant {
    fn acquire_cmd(_: &Lock<Self>, key: &[u8], lease: Duration, field: &str, held: u32) -> Cmd {
        scripts::acquire(key, lease, field, held)
    }

    fn grant(reply: Value) -> redis::RedisResult<Grant> {
        Ok(match redis::from_redis_value::<Option<i64>>(reply)? {
            None => Grant::Taken {
                fresh: false,
                token: None,
            },
            Some(FRESH) => Grant::Taken {
                fresh: true,
                token: None,
            },
            Some(ttl) => Grant::Busy(ttl),
        })
    }

    fn held(_: Option<u64>) -> Self::Held {}
}

/// The kinds kept in Redisson's reentrant hash — the reentrant and the fenced lock — which
/// differ only in the acquire script and what their guards carry.
pub trait Hashed: Machinery {
    /// One acquisition attempt for the owner `field`, who believes it has `held` holds.
    fn acquire_cmd(lock: &Lock<Self>, key: &[u8], lease: Duration, field: &str, held: u32) -> Cmd;
    /// One node's reply to it.
    fn grant(reply: Value) -> redis::RedisResult<Grant>;
    /// What the guard of a hold granted with `token` carries.
    fn held(token: Option<u64>) -> Self::Held;
}

/// One node's answer to an acquisition.
pub enum Grant {
    /// Taken; `fresh` when the owner's earlier holds were gone from this node.
    Taken { fresh: bool, token: Option<u64> },
    /// Someone else's: the key's PTTL in milliseconds (-1 without expiry).
    Busy(i64),
}

impl<K: Hashed> Lock<K> {
    /// Whether the current thread holds the lock, as Redis sees it.
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        Ok(self.hold_count()? > 0)
    }

    /// How many holds the current thread has, as Redis sees it (on a quorum of nodes).
    pub fn hold_count(&self) -> Result<u32> {
        let mut cmd = redis::cmd("HGET");
        cmd.arg(self.key()?).arg(self.field());
        self.client.inner.check_process()?;
        let counts = self.client.inner.nodes.run_all::<Option<u32>>(&cmd, None);
        // A key of another type is someone else's lock: no holds of ours.
        let counts = counts.into_iter().map(|count| match count {
            Err(err) if err.is_wrong_type() => Ok(0),
            count => count.map(Option::unwrap_or_default),
        });
        self.client
            .inner
            .nodes
            .agreed(counts.collect())
            .map_err(|err| err.with_lock(self.name()))
    }

    /// One round on every node: take a hold, or learn why not. Taken when a quorum granted
    /// it with validity left (lease − elapsed − drift); otherwise whatever was granted is
    /// given back on every node.
    pub(crate) fn take(
        &self,
        lease: Option<Duration>,
        limit: Option<Instant>,
    ) -> Result<Attempt<K>> {
        let inner = &self.client.inner;
        let nodes = &inner.nodes;
        let id: HoldId = (self.name.key.clone(), current_thread());
        let (held, watchdog_running) = inner
            .holds
            .lock()
            .get(&id)
            .map_or((0, false), |hold| (hold.count, hold.watched > 0));
        // A watchdog-backed holding keeps the watchdog lease even when re-entered with an
        // explicit one, so a short explicit lease cannot outrun the renewals.
        let script_lease = match lease {
            Some(lease) if !watchdog_running => lease,
            _ => inner.config.lease,
        };
        let field = self.field();
        let cmd = K::acquire_cmd(self, &id.0, script_lease, &field, held);
        let sent = Instant::now();
        let replies = nodes.list().iter().zip(nodes.run_all::<Value>(&cmd, limit));
        let results = replies.map(|(node, reply)| match reply {
            Ok(reply) => K::grant(reply).map_err(|source| Error::Redis {
                lock: None,
                node: node.name.clone(),
                source,
            }),
            Err(Error::Redis { source, .. }) if source.code() == Some("WRONGKIND") => {
                Err(Error::WrongKind {
                    lock: self.name().to_owned(),
                    found: layout::kind_of(source.detail().unwrap_or_default().trim()),
                })
            }
            Err(err) => Err(err),
        });
        let (answers, failed) = nodes.split(results.collect());
        let elapsed = sent.elapsed();

        let taken = |fresh: bool| {
            answers
                .iter()
                .filter(move |reply| matches!(reply, Grant::Taken { fresh: f, .. } if *f == fresh))
        };
        let kept = taken(false).count();
        let granted = kept + taken(true).count();
        let valid_until = validity_end(sent, script_lease).filter(|end| *end > Instant::now());
        let quorum = nodes.quorum();
        if kept >= quorum
            && let Some(valid_until) = valid_until
        {
            let token = taken(false)
                .filter_map(|reply| match reply {
                    Grant::Taken { token, .. } => *token,
                    Grant::Busy(_) => None,
                })
                .max();
            return self.acquired(lease, id, field, sent, valid_until, token);
        }

        // Not taken. If this thread held the lock before, and too few nodes still have its
        // holds even counting every node that failed as one that does, they are gone: the
        // code around this re-entry was not protected all along. Undo this attempt, report
        // the loss and say so, rather than quietly taking a fresh hold.
        if held > 0 && kept + failed.len() < quorum {
            self.give_back(&id.0, &field, 1, script_lease, None, limit);
            if let Some(stale) = inner.holds.lock().remove(&id) {
                inner.report_lost(self.name(), &stale.holding, None);
            }
            return Err(Error::Lost {
                lock: self.name().to_owned(),
            });
        }
        // Otherwise undo this attempt wherever it may have counted, leaving earlier holds.
        if granted > 0 || failed.iter().any(|f| f.error.may_have_run()) {
            let holding = inner.holds.lock().get(&id).map(|hold| hold.holding.clone());
            self.give_back(
                &id.0,
                &field,
                held + 1,
                script_lease,
                holding.as_deref(),
                limit,
            );
        }
        if nodes.list().len() - failed.len() < quorum {
            return Err(nodes.no_quorum(failed).with_lock(self.name()));
        }
        if granted >= quorum && valid_until.is_none() {
            return Ok(Attempt::Retry(Error::ValidityExhausted {
                lock: self.name().to_owned(),
                elapsed,
                lease: script_lease,
            }));
        }
        if held > 0 && kept < quorum {
            // Earlier holds confirmed on too few nodes, but the failed ones may have them.
            return Ok(Attempt::Retry(
                nodes.no_quorum(failed).with_lock(self.name()),
            ));
        }
        // Busy: the lock may free up when the earliest of the holder's leases runs out.
        let ttl = answers
            .iter()
            .filter_map(|reply| match *reply {
                Grant::Busy(ttl) if ttl >= 0 => {
                    Some(Duration::from_millis(ttl as u64).min(MAX_LEASE))
                }
                _ => None,
            })
            .min();
        Ok(Attempt::Busy(ttl))
    }

    /// Records a granted hold, starting the watchdog for the first watched one.
    fn acquired(
        &self,
        lease: Option<Duration>,
        id: HoldId,
        field: String,
        sent: Instant,
        valid_until: Instant,
        token: Option<u64>,
    ) -> Result<Attempt<K>> {
        let inner = &self.client.inner;
        let mut holds = inner.holds.lock();
        let hold = holds
            .entry(id.clone())
            .or_insert_with(|| Hold::new(inner.config.lease));
        hold.count += 1;
        match lease {
            Some(lease) => hold.lease = lease,
            None => hold.watched += 1,
        }
        let holding = hold.holding.clone();
        holding.set_valid_until(valid_until);
        if lease.is_none() && hold.watchdog.is_none() {
            let job = Job {
                client: Arc::downgrade(inner),
                name: self.name().to_owned(),
                holding: holding.clone(),
                since: sent,
                renewal: Box::new(Renew { id, field }),
            };
            match watchdog::start(&inner.parked, inner.config.watchdog_stack_size, job) {
                Ok(ticket) => hold.watchdog = Some(ticket),
                Err(source) => {
                    drop(holds);
                    let guard = LockGuard::new(self.clone(), holding, true, K::held(token));
                    if let Err(err) = guard.unlock() {
                        log::warn!("giving back lock {:?} failed: {err}", self.name());
                    }
                    return Err(Error::Watchdog {
                        lock: self.name().to_owned(),
                        source,
                    });
                }
            }
        }
        drop(holds);
        Ok(Attempt::Acquired(LockGuard::new(
            self.clone(),
            holding,
            lease.is_none(),
            K::held(token),
        )))
    }

    /// Sets this thread's count back to `held - 1` on every node (deleting the key at 0), as
    /// after a failed attempt; failures are only logged, the leases clean up after them.
    /// The key's expiry is reset to `lease` where holds remain, so `holding` (if any) can
    /// count on no more than that.
    fn give_back(
        &self,
        key: &[u8],
        field: &str,
        held: u32,
        lease: Duration,
        holding: Option<&Holding>,
        limit: Option<Instant>,
    ) {
        let nodes = &self.client.inner.nodes;
        let cmd = self.release_cmd(key, field, held, lease);
        let sent = Instant::now();
        let results = nodes.run_all::<Option<i64>>(&cmd, limit);
        for (node, result) in nodes.list().iter().zip(results) {
            if let Err(err) = result {
                log::warn!(
                    "giving back lock {:?} on {} failed: {err}",
                    self.name(),
                    node.name
                );
            }
        }
        if let Some(holding) = holding {
            let end = validity_end(sent, lease).unwrap_or(sent);
            holding.set_valid_until(holding.valid_until().min(end));
        }
    }

    /// The release script for one call, with a latch of its own: a retry of this command
    /// after a lost reply reports the first attempt's release instead of "not ours".
    fn release_cmd(&self, key: &[u8], field: &str, held: u32, lease: Duration) -> redis::Cmd {
        let latch = layout::unlock_latch(key, &layout::random_id());
        let latch_ttl = self.client.inner.config.latch_ttl();
        scripts::release(
            key,
            &self.name.channel,
            &latch,
            lease,
            field,
            held,
            latch_ttl,
        )
    }

    /// Gives back one hold of `holding`, taken with (`watched`) or without the watchdog.
    pub(crate) fn release(&self, holding: &Arc<Holding>, watched: bool) -> Result<()> {
        let inner = &self.client.inner;
        inner.check_process()?;
        let nodes = &inner.nodes;
        let id: HoldId = (self.name.key.clone(), current_thread());
        let (held, lease) = {
            let mut holds = inner.holds.lock();
            let Some(hold) = holds
                .get_mut(&id)
                .filter(|hold| Arc::ptr_eq(&hold.holding, holding))
            else {
                // Lost, or already ended: the key may be someone else's now. Leave it.
                return Err(match holding.is_lost() {
                    true => self.lost(),
                    false => self.not_held(),
                });
            };
            let held = hold.count;
            hold.count -= 1;
            if watched {
                hold.watched -= 1;
                if hold.watched == 0 {
                    hold.watchdog = None;
                }
            }
            let lease = if hold.watched > 0 {
                inner.config.lease
            } else {
                hold.lease
            };
            if hold.count == 0 {
                holds.remove(&id);
            }
            (held, lease)
        };
        let cmd = self.release_cmd(&id.0, &self.field(), held, lease);
        // Not while a renewal round is on its way: it could put back what this deletes.
        let round = holding.round.lock();
        let sent = Instant::now();
        let (answers, failed) = nodes.split(nodes.run_all::<Option<i64>>(&cmd, None));
        drop(round);
        let released = answers.iter().filter(|reply| reply.is_some()).count();
        let not_ours = answers.len() - released;
        let quorum = nodes.quorum();
        if released >= quorum {
            if held > 1 {
                // The remaining holds now expire `lease` after this release.
                holding.set_valid_until(validity_end(sent, lease).unwrap_or(sent));
            }
            if failed.is_empty() {
                return Ok(());
            }
            return Err(Error::PartialRelease {
                lock: self.name().to_owned(),
                released,
                of: nodes.list().len(),
                failed,
            });
        }
        if not_ours <= nodes.list().len() - quorum {
            // Too few answers to tell whether a quorum still has our holds.
            return Err(nodes.no_quorum(failed).with_lock(self.name()));
        }
        // Too many nodes no longer have our field for a quorum to: the holds expired or were
        // deleted, and every guard of this holding is stale.
        inner.forget(&id, holding);
        inner.report_lost(self.name(), holding, None);
        Err(self.lost())
    }

    fn field(&self) -> String {
        field(&self.client.inner.id, current_thread())
    }
}

/// What the watchdog renews for a reentrant holding: this thread's field.
struct Renew {
    id: HoldId,
    field: String,
}

impl Renewal for Renew {
    fn command(&self, inner: &Inner, lease: Duration, restore: bool) -> Cmd {
        // Where the key is gone (a node restarted empty), the hold goes back with its count.
        let restore = match restore {
            true => inner
                .holds
                .lock()
                .get(&self.id)
                .map_or(0, |hold| hold.count),
            false => 0,
        };
        scripts::renew(&self.id.0, lease, &self.field, restore)
    }

    fn forget(&self, inner: &Inner, holding: &Arc<Holding>) -> bool {
        let mut holds = inner.holds.lock();
        let current = holds
            .get(&self.id)
            .is_some_and(|hold| Arc::ptr_eq(&hold.holding, holding) && hold.watchdog.is_some());
        let removed = current.then(|| holds.remove(&self.id));
        drop(holds);
        drop(removed); // stops the renewals, outside the table's lock
        current
    }
}
