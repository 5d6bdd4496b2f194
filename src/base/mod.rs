//! What every layer uses: the client's settings and their limits, the one error type and
//! the opaque failure underneath it, a hold's health and the loss report, jittered backoff,
//! the counters, TLS settings, and the wait-for graph's edge. Uses nothing else of the crate.

pub(crate) mod cause;
pub(crate) mod config;
pub(crate) mod error;
pub(crate) mod health;
pub(crate) mod held_by;
pub(crate) mod lost;
pub(crate) mod metrics;
pub(crate) mod retry;
pub(crate) mod stats;
pub(crate) mod subject;
pub(crate) mod tls;
pub(crate) mod wait_edge;
