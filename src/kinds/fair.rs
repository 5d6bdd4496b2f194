//! The fair lock, Redisson's `RFairLock`: the reentrant lock's hash, taken first come,
//! first served through a queue of waiting owners beside it.

pub(crate) mod scripts;

use std::borrow::Cow;
use std::time::{Duration, Instant};

use redis::{Cmd, Value};

use crate::base::error::Result;
use crate::kinds::call::Call;
use crate::kinds::kind::Kind;
use crate::kinds::kind::{Attempt, Grant, sealed::Machinery};
use crate::kinds::reentrant::ThreadOwned;
use crate::kinds::reentrant::{self, Answer, Hashed, Reentrant, owner};
use crate::kinds::slot::Mode;
use crate::layout::names::{self, Granted};
use crate::layout::owner::current_thread;
use crate::topology::quorum::validity_end;
use crate::transport::common;

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
/// waiters share one first-come, first-served queue. The record lasts as long as those
/// places, so that a crashed waiter of ours is judged by its own time there, never by
/// the reserve in its place.
///
/// Reentrant, and held by a thread like the [`Reentrant`] lock: a thread that holds it
/// takes it again without queuing.
///
/// # Direct hand-off
///
/// With [`direct_handoff`](crate::LockClientBuilder::direct_handoff) on (the default), the
/// last release hands the lock to the head of the queue when that waiter is ours and takes
/// grants, and the waiter returns its guard without asking Redis again: one round trip from
/// release to the next holder instead of two. Every step, and how each edge is undone:
///
/// - **Who is granted.** The release script (`fair_release.lua`) grants only a head whose
///   owner field has a version-8 UUID as client id — the ids of clients with the hand-off
///   on; Redisson's are random version-4 UUIDs, and so are ours with it off — and that is
///   in this crate's set of its own waiters. Telling them apart reads nothing but the queue
///   the release reads anyway. Anyone else at the head is woken with Redisson's `0` and
///   takes the lock itself, exactly as without the hand-off.
/// - **The grant.** In the release's script, the head leaves the queue and its field is
///   set to 1 hold; the key expires when the head's place in the queue would have run out
///   (its last attempt plus `fair_queue_wait`), or one watchdog lease of the releasing
///   client from now if that is sooner (the *grant lease*).
///   `granted:<grant lease ms>:<place>` is published on the head's channel. The grant
///   lease is the head's place (an absolute time of the server's clock) less the server's
///   time at the release, capped.
/// - **The waiter.** Its subscriber thread marks its signal granted, if the signal is
///   armed: only a message published after the waiter registered counts (see
///   `notify::hub::Signal`), so that a grant from an earlier wait can never be taken for
///   this one. The message names the waiter's place as its last attempt set it, and the
///   acquire script's busy reply tells the waiter that place: a grant naming another one
///   came before that attempt, which found the lock busy all the same (the grant had
///   lapsed, or was deleted by force), and only wakes the waiter. A grant taken thus ran
///   after the waiter's last attempt that found the lock busy, so the key lasts at least
///   the grant lease from that attempt's sending, whatever the server's clock did between
///   the two (a step forward shortens the grant lease; the place alone would not show it):
///   that, no longer than `fair_queue_wait` and less the drift allowance, is the guard's
///   validity. Its watchdog renews a third of the way into that validity, which
///   confirms the grant and sets the waiter's own lease (a hold released sooner needs no
///   confirming). A waiter with an explicit lease, one that needs replica
///   acknowledgements, or one whose grant has less than a third of its validity left,
///   confirms by an attempt instead (two round trips, as without the hand-off).
/// - **Lost message.** An attempt finds the waiter's field at 1 while it believes it has
///   no hold: it takes the lock with that count, 1, never 2 (the acquire script sets the
///   count the owner expects, it does not add).
/// - **Gave up.** A waiter that leaves without a guard (deadline, cancellation, error) runs
///   its give-up script, which gives back a hold it did not know it had and passes the
///   turn on: granted to the next waiter that takes grants, or woken.
/// - **Crashed.** A granted waiter that never confirms loses the lock when the grant lease
///   runs out: no later than it would have kept its place at the head of the queue (which
///   held everyone up just as long before), nor later than a watchdog lease.
/// - **Off.** With the hand-off off, a client's id is a version-4 UUID, its releases and
///   give-ups grant nothing, and it is never granted: Redisson's protocol, unchanged.
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

impl Kind for Fair {}
impl ThreadOwned for Fair {}

impl Machinery for Fair {
    const LABEL: &'static str = "fair";

    type Held = ();
    type Affinity = *const ();
    type Request = ();

    reentrant::hashed_calls!();

    fn wait_channel(target: &dyn Call) -> Cow<'_, [u8]> {
        Cow::Owned(names::waiter_channel(&target.shared_key(), &owner(target)))
    }

    /// Wakes the head of the queue on its own channel, where it waits, after dropping the
    /// waiters before it whose places ran out.
    fn force_unlock_cmd(target: &dyn Call, key: &[u8], forced: &common::Forced<'_>) -> Cmd {
        let keys = QueueKeys::of(key);
        scripts::fair_force_unlock(key, target.channel(), keys.get(), forced)
    }

    fn takes_grants(target: &dyn Call, lease: Option<Duration>) -> bool {
        let config = target.config();
        lease.is_none() && config.direct_handoff && config.replica_acks.is_none()
    }

    /// Takes the hold a release granted, valid for what the grant lease keeps at least; it
    /// confirms by an attempt instead when it has an explicit lease, needs replica
    /// acknowledgements, or when less than a third of that validity is left.
    fn granted(
        target: &dyn Call,
        lease: Option<Duration>,
        since: Instant,
        place: Option<u64>,
        grant: Granted,
    ) -> Option<Result<Attempt<Grant<()>>>> {
        if !Self::takes_grants(target, lease) {
            return None;
        }
        let config = target.config();
        // Granted at the place the last busy attempt set: no attempt came after the grant.
        // A grant made before that attempt was undone by the time it ran (it found the
        // lock busy): a late message of it is no hold.
        if place != Some(grant.place) {
            return None;
        }
        let bound = config.fair_queue_wait.min(grant.cap);
        let valid_until = validity_end(since, bound)?;
        // A waiter comes back every third of its place at least: a live one has two
        // thirds of it left, less the delivery, unless it was held up.
        if valid_until <= Instant::now() + bound / 3 {
            return None;
        }
        reentrant::take_granted::<Self>(target, valid_until)
    }

    fn longest_wait(target: &dyn Call) -> Option<Duration> {
        Some(target.config().fair_queue_wait / 3)
    }

    fn give_up(target: &dyn Call, _: &()) {
        let Ok(key) = target.begin() else {
            return;
        };
        if target.nodes().list().len() > 1 {
            return; // refused before anything was sent: see `refuse`
        }
        let keys = QueueKeys::of(key);
        let id = (target.shared_key(), current_thread(), Mode::Only);
        let held = target.holds(&id).0;
        let cmd = scripts::fair_give_up(
            key,
            target.channel(),
            keys.get(),
            &owner(target),
            held,
            grant_cap(target),
        );
        let nodes = target.nodes();
        for result in nodes.run_all::<i64>(&cmd, None) {
            if let Err(err) = result {
                log::warn!(
                    "leaving the queue of {} failed, so waiters behind wait until its place \
                     runs out: {err:#}",
                    target.subject()
                );
            }
        }
    }
}

/// The longest lease this client's releases and give-ups grant the next waiter: its
/// watchdog lease, or `None` with the hand-off off.
fn grant_cap(target: &dyn Call) -> Option<Duration> {
    let config = target.config();
    config.direct_handoff.then_some(config.lease)
}

impl Hashed for Fair {
    fn refuse(target: &dyn Call) -> Result<()> {
        reentrant::one_node(
            target,
            "a queue needs one order, and Redlock's masters each keep their own",
        )
    }

    fn acquire_cmd(target: &dyn Call, key: &[u8], lease: Duration, field: &str, held: u32) -> Cmd {
        let keys = QueueKeys::of(key);
        let place = target.config().fair_queue_wait;
        scripts::fair_acquire(
            key,
            target.channel(),
            keys.get(),
            lease,
            field,
            held,
            place,
            JAVA_WAIT,
        )
    }

    fn release_cmd(target: &dyn Call, field: &str, held: u32, lease: Duration, wake: bool) -> Cmd {
        let key = target.shared_key();
        let latch = names::unlock_latch(&key, &names::random_id());
        let keys = QueueKeys::of(&key);
        let latch_ttl = target.config().latch_ttl();
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
            grant_cap(target),
        )
    }

    /// As the reentrant lock's, but busy is `{pttl, place}`: the place a grant to this
    /// waiter names.
    fn grant(reply: Value) -> redis::RedisResult<Answer> {
        let Value::Array(_) = reply else {
            return Reentrant::grant(reply);
        };
        let (ttl, place): (i64, u64) = redis::from_redis_value(reply)?;
        Ok(Answer::Busy {
            ttl,
            place: Some(place),
        })
    }

    fn held(_: Option<u64>) -> Self::Held {}
}
