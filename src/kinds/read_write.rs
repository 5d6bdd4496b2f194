//! The two sides of the read-write lock, Redisson's `RReadWriteLock`: one hash whose `mode`
//! says whether it is read or written, each reader's read holds under its owner field and
//! the writer's under `<owner>:write`; many readers or one writer.

pub(crate) mod scripts;

use std::borrow::Cow;
use std::time::Duration;

use redis::{Cmd, Value};

use crate::base::error::{Error, Result};
use crate::kinds::call::Call;
use crate::kinds::kind::Kind;
use crate::kinds::kind::sealed::Machinery;
use crate::kinds::reentrant::ThreadOwned;
use crate::kinds::reentrant::{self, Answer, Hashed, Reentrant, owner};
use crate::kinds::slot::Mode;
use crate::layout::names;
use crate::layout::owner::current_thread;
use crate::transport::common;

/// The read side of a [`ReadWriteLock`](crate::ReadWriteLock).
#[derive(Debug, Clone, Copy, Default)]
pub struct Read;

/// The write side of a [`ReadWriteLock`](crate::ReadWriteLock).
#[derive(Debug, Clone, Copy, Default)]
pub struct Write;

/// A read-write lock needs one node: Redlock's masters would each decide its mode alone.
fn one_node(target: &dyn Call) -> Result<()> {
    reentrant::one_node(
        target,
        "a read-write lock needs one node, and Redlock's masters each keep their own mode",
    )
}

impl Kind for Read {}
impl ThreadOwned for Read {}

impl Machinery for Read {
    const LABEL: &'static str = "read";

    type Held = ();
    type Affinity = *const ();
    type Request = ();

    reentrant::hashed_calls!();

    fn wait_channel(target: &dyn Call) -> Cow<'_, [u8]> {
        Cow::Owned(names::rwlock_channel(&target.shared_key()))
    }

    /// Only a lock held for reading; the message wakes every waiter: readers and a writer
    /// may all be waiting.
    fn force_unlock_cmd(target: &dyn Call, key: &[u8], forced: &common::Forced<'_>) -> Cmd {
        let channel = Self::wait_channel(target);
        common::force_unlock(key, &channel, "1", "read", forced)
    }
}

impl Hashed for Read {
    const MODE: Mode = Mode::Read;
    /// Each read hold keeps its own lease key, which a release leaves as it was.
    const RELEASE_SETS_LEASE: bool = false;

    fn refuse(target: &dyn Call) -> Result<()> {
        one_node(target)
    }

    fn acquire_cmd(target: &dyn Call, key: &[u8], lease: Duration, field: &str, held: u32) -> Cmd {
        let timeouts = names::read_timeouts(key, field);
        let writer = writer(target);
        scripts::read_acquire(key, &timeouts, lease, (field, &writer), held)
    }

    fn release_cmd(target: &dyn Call, field: &str, held: u32, _: Duration, wake: bool) -> Cmd {
        let key = target.shared_key();
        let latch = names::unlock_latch(&key, &names::random_id());
        let timeouts = names::read_timeouts(&key, field);
        let prefix = names::read_timeouts_prefix(&key);
        scripts::read_release(
            &key,
            &names::rwlock_channel(&key),
            &latch,
            (&timeouts, &prefix),
            field,
            held,
            target.config().latch_ttl(),
            wake,
        )
    }

    fn renew_cmd(key: &[u8], lease: Duration, field: &str, held: &dyn Fn() -> u32, _: bool) -> Cmd {
        // Every read hold has its own lease key to extend.
        let timeouts = names::read_timeouts(key, field);
        scripts::read_renew(key, &timeouts, lease, field, held())
    }

    /// Each read hold's lease key, extended where it is: in a slot being migrated, the
    /// renewal may find some on the other node.
    fn stray_cmds(key: &[u8], lease: Duration, field: &str, held: u32) -> Vec<Cmd> {
        let timeouts = names::read_timeouts(key, field);
        (1..=held)
            .map(|n| scripts::extend(&scripts::read_lease_key(&timeouts, n), lease))
            .collect()
    }

    fn grant(reply: Value) -> redis::RedisResult<Answer> {
        Reentrant::grant(reply)
    }

    fn held(_: Option<u64>) -> Self::Held {}
}

impl Kind for Write {}
impl ThreadOwned for Write {}

impl Machinery for Write {
    const LABEL: &'static str = "write";

    type Held = ();
    type Affinity = *const ();
    type Request = ();

    reentrant::hashed_calls!();

    fn wait_channel(target: &dyn Call) -> Cow<'_, [u8]> {
        Cow::Owned(names::rwlock_channel(&target.shared_key()))
    }

    /// Only a lock held for writing; the message wakes every waiter: readers and a writer
    /// may all be waiting.
    fn force_unlock_cmd(target: &dyn Call, key: &[u8], forced: &common::Forced<'_>) -> Cmd {
        let channel = Self::wait_channel(target);
        common::force_unlock(key, &channel, "1", "write", forced)
    }
}

impl Hashed for Write {
    const MODE: Mode = Mode::Write;

    /// On one node only, and never as an upgrade: a thread that holds the read side and not
    /// the write side would wait for itself.
    fn refuse(target: &dyn Call) -> Result<()> {
        one_node(target)?;
        let reading = (target.shared_key(), current_thread(), Mode::Read);
        let writing = (target.shared_key(), current_thread(), Mode::Write);
        if target.holds(&reading).0 > 0 && target.holds(&writing).0 == 0 {
            return Err(Error::Upgrade {
                lock: target.subject().clone(),
            });
        }
        Ok(())
    }

    fn field(target: &dyn Call) -> String {
        writer(target)
    }

    fn acquire_cmd(_: &dyn Call, key: &[u8], lease: Duration, field: &str, held: u32) -> Cmd {
        scripts::write_acquire(key, lease, field, held)
    }

    /// Raises the hash's expiry only: this thread's read holds may have longer leases. A
    /// read-write lock lives on one node, which never gets a hold back.
    fn renew_cmd(key: &[u8], lease: Duration, field: &str, _: &dyn Fn() -> u32, _: bool) -> Cmd {
        scripts::write_renew(key, lease, field)
    }

    fn release_cmd(target: &dyn Call, field: &str, held: u32, lease: Duration, wake: bool) -> Cmd {
        let key = target.shared_key();
        let latch = names::unlock_latch(&key, &names::random_id());
        scripts::write_release(
            &key,
            &names::rwlock_channel(&key),
            &latch,
            lease,
            field,
            held,
            target.config().latch_ttl(),
            wake,
        )
    }

    fn grant(reply: Value) -> redis::RedisResult<Answer> {
        Reentrant::grant(reply)
    }

    fn held(_: Option<u64>) -> Self::Held {}
}

/// This thread's writer field: its owner field and `:write`.
fn writer(target: &dyn Call) -> String {
    format!("{}:write", owner(target))
}
