//! The spin lock, Redisson's `RSpinLock`: the reentrant lock's hash, without pub/sub. Its
//! waiters back off exponentially between attempts and its releases publish nothing.

use std::time::Duration;

use redis::{Cmd, Value};

use crate::base::retry::Backoff;
use crate::kinds::call::Call;
use crate::kinds::kind::Kind;
use crate::kinds::kind::sealed::Machinery;
use crate::kinds::reentrant::ThreadOwned;
use crate::kinds::reentrant::{self, Answer, Hashed, Reentrant};
use crate::transport::common;

/// The spin kind, Redisson's `RSpinLock` layout: the [`Reentrant`] lock's hash (so a
/// reentrant lock and a spin lock of one name exclude each other, and Java's `RLock` and
/// `RSpinLock` share it), taken and renewed the same way, but without pub/sub. A waiter does
/// not subscribe: it tries again after a back-off that starts at 1 ms and doubles up to
/// 128 ms ([`spin_backoff`](crate::LockClientBuilder::spin_backoff)), never sleeping past
/// the holder's lease or its deadline; a release publishes nothing.
///
/// For deployments without pub/sub, or a Redis user without channel rights (with
/// [`pubsub(false)`](crate::LockClientBuilder::pubsub)). It costs a few attempts per wait
/// and hands over up to one back-off late. A reentrant lock's waiter on the same name is
/// not woken by its release: it comes back when the lease it last saw would have run out.
///
/// ```no_run
/// use std::time::Duration;
/// let client = redmutex::LockClient::builder("redis://127.0.0.1:6379/")
///     .pubsub(false) // this Redis user has no channel rights
///     .build()?;
/// let lock = client.spin_lock("orders:42");
/// if let Some(guard) = lock.try_lock_for(Duration::from_secs(5))? {
///     // ... only one thread in the whole system gets here at a time ...
///     guard.unlock()?;
/// }
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Spin;

impl Kind for Spin {}
impl ThreadOwned for Spin {}

impl Machinery for Spin {
    const LABEL: &'static str = "spin";
    const SUBSCRIBES: bool = false;

    type Held = ();
    type Affinity = *const ();
    type Request = ();

    reentrant::hashed_calls!();

    fn backoff(target: &dyn Call) -> Backoff {
        let (initial, max) = target.config().spin_backoff;
        Backoff::new(initial, max)
    }

    fn force_unlock_cmd(target: &dyn Call, key: &[u8], forced: &common::Forced<'_>) -> Cmd {
        common::force_unlock(key, target.channel(), "", Self::STORED_AS, forced)
    }
}

impl Hashed for Spin {
    fn acquire_cmd(target: &dyn Call, key: &[u8], lease: Duration, field: &str, held: u32) -> Cmd {
        Reentrant::acquire_cmd(target, key, lease, field, held)
    }

    /// Redisson's spin release: nothing published, whether the last hold goes or not.
    fn release_cmd(target: &dyn Call, field: &str, held: u32, lease: Duration, _wake: bool) -> Cmd {
        Reentrant::release_cmd(target, field, held, lease, false)
    }

    fn grant(reply: Value) -> redis::RedisResult<Answer> {
        Reentrant::grant(reply)
    }

    fn held(_: Option<u64>) {}
}
