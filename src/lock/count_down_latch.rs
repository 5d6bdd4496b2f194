//! The count-down latch's handle and its wait: the count is read, and while it is above
//! zero the waiter sleeps on its latch's channel until a message wakes it (any message on
//! it wakes every waiter, which reads the count again), polling at a bounded back-off
//! without notifications. A latch is no hold, so its wait is not the lock machine's
//! acquisition loop; both share the waiting state of `waiting`, subscribing after a look
//! and looking again when the subscription may have come after a count-down.

use std::fmt;
use std::time::{Duration, Instant};

use crate::base::error::{Error, Result};
use crate::base::retry::Backoff;
use crate::kinds::call::Call;
use crate::kinds::latch::{self, MAX_COUNT};
use crate::layout::names;
use crate::lease::target::Target;
use crate::lock::waiting::Waiting;
use crate::notify::cancel::Cancel;
use crate::notify::interrupt;

/// A count-down latch shared by every thread and process that names it: waiters wait until
/// its count, set once by [`try_set_count`](Self::try_set_count), has been counted down to
/// zero. Made by [`LockClient::count_down_latch`](crate::LockClient::count_down_latch);
/// Redisson's `RCountDownLatch` layout, so Java services share it.
///
/// The count is a number at the latch's key, deleted when it reaches zero: a latch without
/// a count is open, and may be set again. Waiters are woken by the message the last
/// count-down publishes, and look at the count again at least every lease (30 s by
/// default), or at the client's retry back-off when the client has no pub/sub (built with
/// [`pubsub(false)`](crate::LockClientBuilder::pubsub)) or cannot subscribe.
///
/// A count-down is counted once: if its reply is lost with its connection, the command is
/// sent again on another, and a key it leaves for a few seconds
/// (`redisson_unlock_latch:{<key>}:<id>`) makes that second run report what the first did
/// without counting down again. A count-down with no reply at all within the response
/// timeout fails with an error whose outcome is unknown
/// ([`Error::is_outcome_unknown`](crate::Error::is_outcome_unknown)); it is not retried,
/// and a retry by the caller is a second count-down.
///
/// One deployment only: on a Redlock client every call is
/// [`Error::Unsupported`](crate::Error::Unsupported).
///
/// ```no_run
/// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
/// let ready = client.count_down_latch("workers-ready");
/// ready.try_set_count(3)?; // only if no count is set
/// // ... each of three workers, anywhere:
/// ready.count_down()?;
/// // ... the coordinator:
/// ready.wait()?; // until the count reaches zero
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone)]
pub struct CountDownLatch {
    target: Target,
    cancel: Option<Cancel>,
}

impl CountDownLatch {
    pub(crate) fn new(target: Target) -> Self {
        CountDownLatch {
            target,
            cancel: None,
        }
    }

    /// The latch's whole name, lossily decoded as [`Lock::name`](crate::Lock::name) says.
    pub fn name(&self) -> &str {
        self.target.name()
    }

    /// This latch, with its waits cancellable by `cancel`: once it is cancelled, a wait in
    /// progress and every later one end with [`Error::Cancelled`] within one round trip
    /// with Redis. Other calls are single round trips and are not affected.
    pub fn with_cancel(&self, cancel: &Cancel) -> Self {
        CountDownLatch {
            cancel: Some(cancel.clone()),
            ..self.clone()
        }
    }

    /// Sets the count to `count` (1 to 2^40) if the latch has none; false, with nothing
    /// changed, when it has one (it is counting down). A count of 0 or above the bound
    /// is [`Error::InvalidArgument`], and a key that holds anything but a count
    /// [`Error::WrongKind`]; nothing is written either way.
    pub fn try_set_count(&self, count: u64) -> Result<bool> {
        if !(1..=MAX_COUNT).contains(&count) {
            let reason = format!("must be 1..={MAX_COUNT}");
            return Err(self.target.invalid_argument("count", reason));
        }
        latch::try_set(&self.target, count)
    }

    /// Counts down by one and returns the count left; reaching zero opens the latch and
    /// wakes its waiters. A latch already open stays open (0). Counted once even when
    /// its reply is lost and the command is sent again (see [`CountDownLatch`]).
    pub fn count_down(&self) -> Result<u64> {
        latch::count_down(&self.target)
    }

    /// The count now; 0 when the latch is open.
    pub fn count(&self) -> Result<u64> {
        latch::count(&self.target, None)
    }

    /// Deletes the latch, which opens it; returns whether it had a count. Publishes
    /// Redisson's message for a new count, which wakes this crate's waiters (they find the
    /// latch open) but not Redisson's, who wait on until their timeout.
    pub fn delete(&self) -> Result<bool> {
        latch::delete(&self.target)
    }

    /// Waits until the latch is open (its count zero, or never set). Waits without bound
    /// unless the client has a [`max_wait`](crate::LockClientBuilder::max_wait), past which
    /// it returns [`Error::Timeout`].
    pub fn wait(&self) -> Result<()> {
        let started = Instant::now();
        let max_wait = self.target.shared.config().max_wait;
        match self.wait_inner(max_wait.map(|wait| started + wait))? {
            true => Ok(()),
            false => Err(Error::Timeout {
                lock: self.target.subject().clone(),
                waited: started.elapsed(),
                held_by: None,
            }),
        }
    }

    /// Waits at most `timeout` for the latch to open; whether it did. A timeout whose end
    /// the clock cannot hold (such as `Duration::MAX`) sets no deadline.
    pub fn wait_for(&self, timeout: Duration) -> Result<bool> {
        self.wait_inner(Instant::now().checked_add(timeout))
    }

    /// Waits until `deadline` at most for the latch to open; whether it did.
    pub fn wait_until(&self, deadline: Instant) -> Result<bool> {
        self.wait_inner(Some(deadline))
    }

    fn wait_inner(&self, deadline: Option<Instant>) -> Result<bool> {
        // A pause deep in a call (a cluster slot being migrated) ends with a cancel too.
        let tokens = (self.cancel.iter().cloned())
            .chain([self.target.shared.closing().clone()])
            .collect();
        interrupt::with(tokens, || self.wait_loop(deadline))
    }

    /// Look at the count; while above zero, subscribe to the channel and look again at
    /// once (a count-down before the subscription would otherwise go unseen), then sleep
    /// until a message, the poll bound or the deadline. Every look ends within a response
    /// timeout of `deadline`.
    fn wait_loop(&self, deadline: Option<Instant>) -> Result<bool> {
        let target = &self.target;
        let key = latch::key(target)?;
        let config = target.shared.config();
        let limit = deadline.and_then(|d| d.checked_add(config.response_timeout));
        let channel = names::latch_channel(key);
        let mut backoff = Backoff::new(config.retry_base, config.retry_cap);
        // Subscribed, a waiter still looks now and then: a count can go without a
        // message (an expiry, a plain DEL).
        let subscribed_poll = config.lease.max(config.retry_cap);
        let mut waiting = Waiting::new();
        waiting.notifications = config.pubsub;
        let _closing = target.shared.closing().register(&waiting.signal);
        let _cancel = self.cancel.as_ref().map(|c| c.register(&waiting.signal));
        loop {
            self.target.check_cancelled(self.cancel.as_ref())?;
            let mut notified = waiting.confirmed();
            let sent = Instant::now();
            let end = limit.map(|limit| limit.min(sent + config.response_timeout));
            let count = latch::count(target, end);
            if count.is_err() {
                self.target.check_cancelled(self.cancel.as_ref())?;
            }
            if count? == 0 {
                waiting.woken = false;
                waiting.signal.take();
                return Ok(true);
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left == Some(Duration::ZERO) {
                return Ok(false);
            }
            if waiting.needs_subscription() {
                // Subscribed before the look was sent, nothing since is missed; else a
                // count-down may have come between the two, and the next look finds it.
                if waiting.subscribe(target, &channel, false, deadline, sent) {
                    notified = true;
                } else if waiting.notifications {
                    continue;
                }
            }
            let bound = match notified {
                true => subscribed_poll,
                false => backoff.next_delay(None),
            };
            waiting.woken = waiting
                .signal
                .wait(left.map_or(bound, |left| bound.min(left)));
        }
    }
}

impl fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountDownLatch")
            .field("name", &self.name())
            .finish()
    }
}
