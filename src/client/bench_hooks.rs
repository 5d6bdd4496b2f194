//! Timings of internals that the public API cannot isolate, for `examples/bench.rs`, with
//! the `bench` feature only. Hidden from the documentation and not part of the API: it
//! hands out the redis crate's types, which the API does not.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::LockClient;
use crate::notify::hub::Signal;

/// Registers a waiter on `channel` with the first node's subscriber and returns how long it
/// took until Redis confirmed the SUBSCRIBE (at most a response timeout); the registration
/// is dropped again.
#[doc(hidden)]
pub fn subscribe_latency(client: &LockClient, channel: &[u8]) -> io::Result<Duration> {
    let node = &client.shared().nodes().list()[0];
    let signal = Arc::new(Signal::default());
    let started = Instant::now();
    let notifier = node.notifier(channel).map_err(io::Error::other)?;
    let subscription = notifier.subscribe(channel, &signal, None, false, None)?;
    let took = started.elapsed();
    drop(subscription);
    Ok(took)
}

/// The kinds whose uncontended pair [`raw_pair`] builds.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub enum RawKind {
    Reentrant,
    Token,
    Fair,
    Read,
    LeasedSemaphore,
    /// The counting semaphore, on a count of 1.
    Counting,
}

/// The acquire and the release of one uncontended first hold of `kind` on `key`, built as
/// the library builds them (the release's latch named by `request`), for timing the
/// scripts alone on a plain connection; [`load_scripts`] loads them there first.
#[doc(hidden)]
pub fn raw_pair(kind: RawKind, key: &str, request: u64) -> (redis::Cmd, redis::Cmd) {
    use crate::kinds::{counted, fair, permits, read_write, reentrant, token};
    use crate::layout::names;
    const OWNER: &str = "5d4a1b7e-0c3f-4b8e-9a21-6f0e2d3c4b5a:1";
    const TOKEN: &str = "0123456789abcdef0123456789abcdef";
    let key = key.as_bytes();
    let lease = Duration::from_secs(30);
    let latch_ttl = Duration::from_secs(8);
    let latch = names::unlock_latch(key, &format!("{request:032x}"));
    match kind {
        RawKind::Reentrant => (
            reentrant::scripts::acquire(key, lease, OWNER, 0),
            reentrant::scripts::release(
                key,
                &names::channel(key),
                &latch,
                lease,
                OWNER,
                1,
                latch_ttl,
                true,
            ),
        ),
        RawKind::Token => {
            let mut acquire = redis::cmd("SET");
            acquire.arg(key).arg(TOKEN).arg("NX").arg("PX").arg(30_000);
            let channel = names::channel(key);
            let release =
                token::scripts::token_release(key, &channel, &latch, TOKEN, latch_ttl, true);
            (acquire, release)
        }
        RawKind::Fair => {
            let (queue, places, ours) = (
                names::fair_queue(key),
                names::fair_timeouts(key),
                names::fair_alive(key),
            );
            let queue = (&queue[..], &places[..], &ours[..]);
            let wait = Duration::from_secs(5);
            let channel = names::channel(key);
            let acquire =
                fair::scripts::fair_acquire(key, &channel, queue, lease, OWNER, 0, wait, wait * 60);
            let release = fair::scripts::fair_release(
                key,
                &channel,
                &latch,
                queue,
                lease,
                OWNER,
                1,
                latch_ttl,
                true,
                Some(lease),
            );
            (acquire, release)
        }
        RawKind::Read => {
            let timeouts = names::read_timeouts(key, OWNER);
            let writer = format!("{OWNER}:write");
            let acquire =
                read_write::scripts::read_acquire(key, &timeouts, lease, (OWNER, &writer), 0);
            let prefix = names::read_timeouts_prefix(key);
            let release = read_write::scripts::read_release(
                key,
                &names::rwlock_channel(key),
                &latch,
                (&timeouts, &prefix),
                OWNER,
                1,
                latch_ttl,
                true,
            );
            (acquire, release)
        }
        RawKind::LeasedSemaphore => {
            let id: [u8; 16] = rand::random();
            let (timeouts, channel) = (
                names::semaphore_timeouts(key),
                names::semaphore_channel(key),
            );
            let keys = (key, &timeouts[..], &channel[..]);
            (
                permits::scripts::semaphore_acquire(keys, &id, lease, true),
                permits::scripts::semaphore_release(keys, &latch, &id, latch_ttl),
            )
        }
        RawKind::Counting => {
            let marker = names::counting_taken(key, &format!("{request:032x}"));
            let channel = names::semaphore_channel(key);
            (
                counted::scripts::csem_acquire(key, &marker, 1, lease),
                counted::scripts::csem_add(
                    (key, &latch, Some((&marker, true))),
                    &channel,
                    1,
                    latch_ttl,
                    1 << 50,
                ),
            )
        }
    }
}

/// Loads every script of the library on `conn`, for [`raw_pair`]'s commands.
#[doc(hidden)]
pub fn load_scripts(conn: &mut redis::Connection) -> redis::RedisResult<()> {
    crate::client::lock_client::declare_scripts();
    crate::transport::scripts::load_all(conn)
}

/// `cmd` in the flavour a cluster with sharded pub/sub runs: its script publishing with
/// `SPUBLISH` (the same command when its script does not publish).
#[doc(hidden)]
pub fn sharded(cmd: &redis::Cmd) -> redis::Cmd {
    crate::transport::scripts::sharded(cmd).unwrap_or_else(|| cmd.clone())
}
