//! The failure underneath an error: what the Redis client reported, or the last failed
//! connect behind a pool that had no connection to give. Kept opaque, so that the types of
//! those libraries are no part of the crate's API; the error's `source()` gives their own
//! message, and this module says in a few words what happened.

use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::sync::Arc;

use redis::{ErrorKind, RedisError};

use crate::base::tls;

/// The failure underneath an [`Error::Redis`](crate::Error::Redis) or
/// [`Error::Pool`](crate::Error::Pool): opaque, so that the versions of the libraries the
/// crate uses are no part of its API. Ask the error's predicates
/// ([`is_connection`](crate::Error::is_connection), [`is_auth`](crate::Error::is_auth),
/// [`server_code`](crate::Error::server_code), ...); the library's own message is the
/// error's [`source()`](std::error::Error::source).
pub struct Cause(Repr, Option<&'static str>);

enum Repr {
    /// What the Redis client reported.
    Redis(RedisError),
    /// The server's refusal of a script call, from a server found to run no scripts at all.
    NoScripts(RedisError),
    /// Why the last connection the pool tried to open failed (an error of this crate).
    Connect(Arc<dyn StdError + Send + Sync>),
    /// Nothing failed: every pooled connection stayed busy.
    Busy,
}

impl Cause {
    pub(crate) fn redis(err: RedisError) -> Cause {
        Cause(Repr::Redis(err), None)
    }

    /// `err`, a server's refusal of a script call, from a server that turned out to run no
    /// scripts at all.
    pub(crate) fn no_scripts(err: RedisError) -> Cause {
        Cause(Repr::NoScripts(err), None)
    }

    /// This cause, with what its failure leaves unknown about the call: the error's
    /// message says it after what failed.
    pub(crate) fn noted(self, note: &'static str) -> Cause {
        Cause(self.0, Some(note))
    }

    /// What the failure leaves unknown about the call, if the call said.
    pub(crate) fn note(&self) -> Option<&'static str> {
        self.1
    }

    /// Whether the server runs no scripts (see [`no_scripts`](Self::no_scripts)).
    pub(crate) fn is_no_scripts(&self) -> bool {
        matches!(self.0, Repr::NoScripts(_))
    }

    /// A pool's failure to give a connection: `last` is why its last connect failed, if it
    /// did.
    pub(crate) fn pool(last: Option<Arc<dyn StdError + Send + Sync>>) -> Cause {
        Cause(last.map_or(Repr::Busy, Repr::Connect), None)
    }

    /// What the Redis client reported, if it was that.
    pub(crate) fn as_redis(&self) -> Option<&RedisError> {
        match &self.0 {
            Repr::Redis(err) | Repr::NoScripts(err) => Some(err),
            _ => None,
        }
    }

    /// Whether nothing failed: every pooled connection stayed busy.
    pub(crate) fn is_busy(&self) -> bool {
        matches!(self.0, Repr::Busy)
    }

    /// Why the pool's last connect failed, if it was that.
    pub(crate) fn as_connect(&self) -> Option<&(dyn StdError + Send + Sync + 'static)> {
        match &self.0 {
            Repr::Connect(err) => Some(err.as_ref()),
            _ => None,
        }
    }
}

impl fmt::Debug for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Redis(err) => f.debug_tuple("Redis").field(err).finish()?,
            Repr::NoScripts(err) => f.debug_tuple("NoScripts").field(err).finish()?,
            Repr::Connect(err) => f.debug_tuple("Connect").field(err).finish()?,
            Repr::Busy => f.write_str("Busy")?,
        }
        match self.1 {
            Some(note) => write!(f, " ({note})"),
            None => Ok(()),
        }
    }
}

/// What went wrong, in a few words and without the Redis client's own message (which is
/// the error's `source()`).
pub(crate) fn what(err: &RedisError) -> &'static str {
    let io = io_kind(err);
    if is_not_redis(err) {
        "did not answer as a Redis server"
    } else if err.code() == Some("NOAUTH") {
        "wants credentials"
    } else if is_auth(err) {
        "refused the credentials"
    } else if tls::is_tls_error(err) {
        "the TLS handshake failed"
    } else if err.code().is_some() {
        "the server refused the command"
    } else if err.is_connection_refusal() {
        "could not connect"
    } else if io == Some(io::ErrorKind::TimedOut) {
        "could not connect within the connect timeout"
    } else if err.is_timeout() {
        "no reply within the response timeout"
    } else if err.is_connection_dropped() {
        "the connection dropped"
    } else if err.is_io_error() {
        "the connection failed"
    } else if err.kind() == ErrorKind::Parse {
        "the reply could not be read"
    } else {
        "the Redis client failed"
    }
}

/// Redis refused the credentials, or wants some (`NOAUTH`, `WRONGPASS`).
pub(crate) fn is_auth(err: &RedisError) -> bool {
    err.kind() == ErrorKind::AuthenticationFailed
        || matches!(err.code(), Some("NOAUTH" | "WRONGPASS"))
}

/// Redis could not be reached, the connection broke, or what answered was no Redis.
pub(crate) fn is_connection(err: &RedisError) -> bool {
    err.is_io_error() || err.is_connection_dropped() || err.is_timeout()
}

/// No reply came within the response timeout (on a connection that was open: a connect
/// that timed out is `TimedOut` underneath, as `what` tells them apart).
pub(crate) fn is_reply_timeout(err: &RedisError) -> bool {
    err.is_timeout() && io_kind(err) != Some(io::ErrorKind::TimedOut)
}

/// The I/O error underneath, if any: the Redis client keeps it behind an `Arc`.
pub(crate) fn io_error(err: &RedisError) -> Option<&io::Error> {
    type Shared = Arc<dyn StdError + Send + Sync>;
    let source = err.source()?;
    match source.downcast_ref::<Shared>() {
        Some(shared) => shared.downcast_ref::<io::Error>(),
        None => source.downcast_ref::<io::Error>(),
    }
}

fn io_kind(err: &RedisError) -> Option<io::ErrorKind> {
    io_error(err).map(io::Error::kind)
}

/// A reply that is not the Redis protocol, read while a connection was being set up: the
/// port is served by something else (an HTTP server, say).
#[derive(Debug)]
struct NotRedis(RedisError);

impl fmt::Display for NotRedis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Only the parser's words: what this means is said by the error above it.
        fmt::Display::fmt(&self.0, f)
    }
}

impl StdError for NotRedis {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.0.source()
    }
}

/// `err`, met while setting up a connection: a reply the client could not parse means the
/// server is no Redis, which is a connection problem (an I/O error), not a bad reply.
pub(crate) fn while_connecting(err: RedisError) -> RedisError {
    if err.kind() == ErrorKind::Parse {
        RedisError::from(io::Error::new(io::ErrorKind::InvalidData, NotRedis(err)))
    } else {
        err
    }
}

fn is_not_redis(err: &RedisError) -> bool {
    io_error(err)
        .and_then(io::Error::get_ref)
        .is_some_and(|inner| inner.is::<NotRedis>())
}

/// The first error of the chain from `err` whose message is not its source's: wrappers
/// that only repeat the error they wrap (the Redis client's around an I/O error, say) are
/// skipped, so that a reporter walking the chain prints each message once.
pub(crate) fn distinct<'a>(mut err: &'a (dyn StdError + 'static)) -> &'a (dyn StdError + 'static) {
    while let Some(source) = err.source() {
        if source.to_string() != err.to_string() {
            break;
        }
        err = source;
    }
    err
}

/// `err` and every error below it, each message once, joined by `": "`.
pub(crate) fn chain(err: Option<&(dyn StdError + 'static)>) -> String {
    let mut text = String::new();
    let mut next = err;
    while let Some(err) = next {
        let err = distinct(err);
        let message = err.to_string();
        if !text.contains(&message) {
            text.push_str(": ");
            text.push_str(&message);
        }
        next = err.source();
    }
    text
}
