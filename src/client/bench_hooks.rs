//! Timings of internals that the public API cannot isolate, for `examples/bench.rs`. Hidden
//! from the documentation and not part of the API.

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
