//! What the locks report through the `metrics` crate's facade, with the `metrics` feature;
//! without it every function here does nothing. The application installs the recorder
//! (Prometheus, StatsD, ...) of its choice.
//!
//! | name | type | labels |
//! |---|---|---|
//! | `redmutex_acquisitions_total` | counter | `kind`, `outcome`: `acquired`, `busy` (a `try_lock` that found it taken), `timeout`, `cancelled`, `deadlock`, `error` |
//! | `redmutex_wait_seconds` | histogram | `kind`: from the call to the hold, for acquisitions |
//! | `redmutex_handoff_seconds` | histogram | `kind`: from an unlock message to the hold it let in |
//! | `redmutex_hold_seconds` | histogram | `kind`: from the hold to its release |
//! | `redmutex_renewals_total` | counter | |
//! | `redmutex_renewal_failures_total` | counter | |
//! | `redmutex_locks_lost_total` | counter | |
//! | `redmutex_deadlocks_total` | counter | |
//! | `redmutex_errors_total` | counter | `class`: `connection`, `timeout`, `permission`, `lost`, `input`, `other` |

use std::time::Duration;

use crate::base::error::Error;

/// An acquisition call ended: `acquired` after `waited`, `busy` (not to wait, and found
/// taken), a `timeout`, `cancelled` (by its token or by closing the client), or an `error`.
pub(crate) fn acquisition(kind: &'static str, outcome: &'static str, waited: Duration) {
    #[cfg(feature = "metrics")]
    {
        metrics::counter!("redmutex_acquisitions_total", "kind" => kind, "outcome" => outcome)
            .increment(1);
        if outcome == "acquired" {
            metrics::histogram!("redmutex_wait_seconds", "kind" => kind)
                .record(waited.as_secs_f64());
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, outcome, waited);
}

/// A waiter found a deadlock through itself and ended its wait.
pub(crate) fn deadlock() {
    #[cfg(feature = "metrics")]
    metrics::counter!("redmutex_deadlocks_total").increment(1);
}

/// A waiter woken by an unlock message took the lock `took` after the message.
pub(crate) fn handoff(kind: &'static str, took: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!("redmutex_handoff_seconds", "kind" => kind).record(took.as_secs_f64());
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, took);
}

/// A hold was given back after `held`.
pub(crate) fn released(kind: &'static str, held: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!("redmutex_hold_seconds", "kind" => kind).record(held.as_secs_f64());
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, held);
}

/// A renewal round reached a quorum (`true`) or failed.
pub(crate) fn renewal(kept: bool) {
    #[cfg(feature = "metrics")]
    match kept {
        true => metrics::counter!("redmutex_renewals_total").increment(1),
        false => metrics::counter!("redmutex_renewal_failures_total").increment(1),
    }
    #[cfg(not(feature = "metrics"))]
    let _ = kept;
}

/// A holding was found lost.
pub(crate) fn lost() {
    #[cfg(feature = "metrics")]
    metrics::counter!("redmutex_locks_lost_total").increment(1);
}

/// A call returned `err`.
pub(crate) fn error(err: &Error) {
    #[cfg(feature = "metrics")]
    {
        let class = if err.is_timeout() {
            "timeout"
        } else if err.is_connection() {
            "connection"
        } else if err.is_permission() || err.is_auth() {
            "permission"
        } else if err.is_lost() {
            "lost"
        } else if err.is_invalid_input() {
            "input"
        } else {
            "other"
        };
        metrics::counter!("redmutex_errors_total", "class" => class).increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = err;
}
