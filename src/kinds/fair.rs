//! The fair lock, Redisson's `RFairLock`: the reentrant lock's hash, taken first come,
//! first served through a queue of waiting owners beside it.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use redis::{Cmd, Value};

use crate::base::error::{Error, Result};
use crate::kinds::kind::{Attempt, Hold, sealed::Machinery};
use crate::kinds::reentrant::{self, Grant, Hashed, Reentrant, owner};
use crate::layout::names;
use crate::lease::target::Target;
use crate::transport::scripts;

/// The fair kind, Redisson's `RFairLock` layout: the [`Reentrant`] lock's hash, plus a
/// queue of the waiting owners (`redisson_lock_queue:{<key>}`, a list) and when each loses
/// its place (`redisson_lock_timeout:{<key>}`, a sorted set). A free lock goes to the head
/// of the queue only; each waiter waits on a channel of its own
/// (`redisson_lock__channel:{<key>}:<owner>`), and a release wakes the head alone.
///
/// A waiter that gives up (its deadline passed, its call failed) leaves the queue at once.
/// One that stops coming back (its process crashed) loses its place after the client's
/// [`fair_queue_wait`](crate::LockClientBuilder::fair_queue_wait), 5 s by default; a live
/// waiter comes back at least three times within it, whatever the holder's lease. This
/// crate records its own waiters beside Redisson's keys (`redisson_lock_timeout:{<key>}:redmutex_alive`),
/// and places them in Redisson's sorted set with a reserve for what each Java waiter ahead
/// takes off the places behind it when it acquires or gives up, so that Java and Rust
/// waiters share one first-come, first-served queue.
///
/// Reentrant, and held by a thread like the [`Reentrant`] lock: a thread that holds it
/// takes it again without queuing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fair;

/// The least wait a Redisson waiter is taken to subtract from the places behind it when it
/// acquires or gives up: Redisson's default `fairLockWaitTimeout` (5 minutes). A waiter
/// of ours keeps that much in reserve for each Redisson waiter ahead of it, or the gap
/// between that waiter's place and the one before, if larger.
const JAVA_WAIT: Duration = Duration::from_secs(300);

/// The keys of a fair lock's queue, named after its key.
struct QueueKeys {
    queue: Vec<u8>,
    places: Vec<u8>,
    ours: Vec<u8>,
}

impl QueueKeys {
    fn of(key: &[u8]) -> Self {
        QueueKeys {
            queue: names::fair_queue(key),
            places: names::fair_timeouts(key),
            ours: names::fair_alive(key),
        }
    }

    fn get(&self) -> scripts::Queue<'_> {
        (&self.queue, &self.places, &self.ours)
    }
}

impl Machinery for Fair {
    const LABEL: &'static str = "fair";

    type Held = ();
    type Affinity = *const ();

    fn attempt(
        target: &Target,
        lease: Option<Duration>,
        limit: Option<Instant>,
    ) -> Result<Attempt<()>> {
        if target.shared.nodes().list().len() > 1 {
            return Err(Error::Unsupported {
                lock: target.subject().clone(),
                reason: "a queue needs one order, and Redlock's masters each keep their own",
            });
        }
        reentrant::take::<Self>(target, lease, limit)
    }

    fn release(target: &Target, hold: &Hold<()>) -> Result<()> {
        reentrant::release::<Self>(target, &hold.holding, hold.watched)
    }

    fn wait_channel(target: &Target) -> Cow<'_, [u8]> {
        Cow::Owned(names::waiter_channel(&target.shared_key(), &owner(target)))
    }

    /// Wakes the head of the queue on its own channel, where it waits, after dropping the
    /// waiters before it whose places ran out.
    fn force_unlock_cmd(target: &Target, key: &[u8], latch: &[u8], latch_ttl: Duration) -> Cmd {
        let keys = QueueKeys::of(key);
        scripts::fair_force_unlock(key, target.channel(), latch, keys.get(), latch_ttl)
    }

    fn longest_wait(target: &Target) -> Option<Duration> {
        Some(target.shared.config().fair_queue_wait / 3)
    }

    fn give_up(target: &Target) {
        let Ok(key) = target.begin() else {
            return;
        };
        if target.shared.nodes().list().len() > 1 {
            return; // refused before anything was sent: see `attempt`
        }
        let keys = QueueKeys::of(key);
        let cmd = scripts::fair_give_up(key, target.channel(), keys.get(), &owner(target));
        let nodes = target.shared.nodes();
        for result in nodes.run_all::<i64>(&cmd, None) {
            if let Err(err) = result {
                log::warn!(
                    "leaving the queue of lock {:?} failed, so waiters behind wait until its \
                     place runs out: {err:#}",
                    target.name()
                );
            }
        }
    }
}

impl Hashed for Fair {
    fn acquire_cmd(target: &Target, key: &[u8], lease: Duration, field: &str, held: u32) -> Cmd {
        let keys = QueueKeys::of(key);
        let place = target.shared.config().fair_queue_wait;
        scripts::fair_acquire(key, keys.get(), lease, field, held, place, JAVA_WAIT)
    }

    fn release_cmd(target: &Target, field: &str, held: u32, lease: Duration, wake: bool) -> Cmd {
        let key = target.shared_key();
        let latch = names::unlock_latch(&key, &names::random_id());
        let keys = QueueKeys::of(&key);
        let latch_ttl = target.shared.config().latch_ttl();
        scripts::fair_release(
            &key,
            target.channel(),
            &latch,
            keys.get(),
            lease,
            field,
            held,
            latch_ttl,
            wake,
        )
    }

    fn grant(reply: Value) -> redis::RedisResult<Grant> {
        Reentrant::grant(reply)
    }

    fn held(_: Option<u64>) -> Self::Held {}
}
