//! The one error type of the crate.

use std::fmt;
use std::time::Duration;

/// Everything that can go wrong, with the context needed to act on it.
///
/// The enum is `#[non_exhaustive]`: match the predicates ([`Error::is_timeout`],
/// [`Error::is_not_held`], ...) rather than every variant.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Redis failed a command, or the connection broke while it ran.
    Redis {
        /// The lock concerned, when the command was about one.
        lock: Option<String>,
        /// The Redis node, as `host:port`.
        node: String,
        /// What the `redis` crate reported.
        source: redis::RedisError,
    },
    /// No pooled connection became available within the connect timeout.
    Pool {
        /// The lock concerned, when the call was about one.
        lock: Option<String>,
        /// The Redis node, as `host:port`.
        node: String,
        /// What `r2d2` reported.
        source: r2d2::Error,
    },
    /// The lock stayed busy until the caller's deadline.
    Timeout {
        /// The lock waited for.
        lock: String,
        /// How long the call waited before giving up.
        waited: Duration,
        /// What held the lock when the wait gave up, when Redis could tell in time (boxed,
        /// to keep the error small).
        held_by: Option<Box<crate::base::held_by::HeldBy>>,
    },
    /// This thread holds no hold of the lock it tried to release. Nothing was changed on the
    /// server.
    NotHeld {
        /// The lock concerned.
        lock: String,
    },
    /// The hold is gone: it expired or was deleted from outside, so the critical section it
    /// guarded was not protected to its end. Returned by a release or a re-entry that finds
    /// this; the loss was also reported to
    /// [`on_lock_lost`](crate::LockClientBuilder::on_lock_lost) and counted in
    /// [`Stats::locks_lost`](crate::Stats::locks_lost). Nothing was changed on the server:
    /// the key may belong to someone else by now.
    Lost {
        /// The lock concerned.
        lock: String,
    },
    /// The lock's key holds another kind of lock (or other data) than the handle's kind: a
    /// token lock asked for a key that holds a reentrant lock's hash, say. Nothing was
    /// changed on the server.
    WrongKind {
        /// The lock concerned.
        lock: String,
        /// What the key holds, such as `"a reentrant or fenced lock (a hash)"`.
        found: &'static str,
    },
    /// This thread holds the read lock and asked for the write lock of the same read-write
    /// lock: the write lock waits for every reader to leave, this thread included, so it
    /// would wait for ever. Nothing was sent. Release the read holds first.
    Upgrade {
        /// The lock concerned.
        lock: String,
    },
    /// The lock cannot work on this client, such as a fenced lock over several independent
    /// masters (Redlock). Nothing was sent.
    Unsupported {
        /// The lock concerned.
        lock: String,
        /// Why.
        reason: &'static str,
    },
    /// The Redis user may not run what the locks need (Redis ACLs). Nothing was written.
    Permission {
        /// The Redis node, as `host:port`.
        node: String,
        /// What is denied, as `"COMMAND target"`, such as
        /// `"PUBLISH on redisson_lock__channel:{orders:42}"`.
        denied: Vec<String>,
    },
    /// The client was created in another process: this process is a `fork()` of it and would
    /// share its owner id, its held locks and its connections. Build a new client here.
    Forked {
        /// The process id the client was created in.
        parent: u32,
    },
    /// A lock name that cannot be used: empty or longer than [`crate::MAX_NAME_LEN`].
    InvalidName {
        /// The name as given (lossily decoded, cut to 64 bytes).
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A builder setting that cannot work, reported by `build()`.
    InvalidConfig {
        /// The setting, named after its builder method.
        setting: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// An argument of a lock call that cannot work, such as a zero lease.
    InvalidArgument {
        /// The lock concerned.
        lock: String,
        /// The argument, named after the parameter.
        argument: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The connection URL could not be parsed. Passwords are not repeated here.
    InvalidUrl {
        /// The URL with any user information removed.
        url: String,
        /// What the `redis` crate reported.
        source: redis::RedisError,
    },
    /// Fewer nodes than a quorum (N/2 + 1 of the configured N) answered: the lock was not
    /// taken (and anything taken on the nodes that answered was given back).
    NoQuorum {
        /// The lock concerned, when the call was about one.
        lock: Option<String>,
        /// How many nodes must answer.
        needed: usize,
        /// How many nodes are configured.
        of: usize,
        /// The nodes that did not answer, and why.
        failed: Vec<NodeError>,
    },
    /// A quorum of nodes granted the lock, but taking it used up the whole lease (less the
    /// clock drift allowance), so it was given back.
    ValidityExhausted {
        /// The lock concerned.
        lock: String,
        /// How long the acquisition took.
        elapsed: Duration,
        /// The lease asked for.
        lease: Duration,
    },
    /// A release reached a quorum of nodes, so the lock is released, but some nodes could not
    /// be told; their copies expire with their lease.
    PartialRelease {
        /// The lock concerned.
        lock: String,
        /// On how many nodes the hold was given back.
        released: usize,
        /// How many nodes are configured.
        of: usize,
        /// The nodes that could not be told, and why.
        failed: Vec<NodeError>,
    },
    /// Too few replicas acknowledged an acquisition within the
    /// [`min_replica_acks`](crate::LockClientBuilder::min_replica_acks) timeout; the hold
    /// was given back.
    NotReplicated {
        /// The lock concerned.
        lock: Option<String>,
        /// The Redis node, as `host:port`.
        node: String,
        /// How many replicas acknowledged.
        acked: u32,
        /// How many were required.
        needed: u32,
    },
    /// No sentinel named a primary for the master name: none could be reached, or none
    /// knew the name. Each sentinel's failure is listed; wrong sentinel credentials make
    /// [`Error::is_auth`] true.
    NoPrimary {
        /// The master name the sentinels were asked about.
        master: String,
        /// The sentinels asked, as `host:port`, and why each did not answer.
        failed: Vec<NodeError>,
    },
    /// The wait was cancelled: by the [`Cancel`](crate::Cancel) token of the handle, or
    /// (`closed`) by [`LockClient::close`](crate::LockClient::close), after which every call
    /// that would start something new fails so at once. Nothing is held for the call, and
    /// a fair lock's waiter has left the queue.
    Cancelled {
        /// The lock concerned.
        lock: String,
        /// Whether the client was closed, rather than the handle's token cancelled.
        closed: bool,
    },
    /// The watchdog thread for a held lock could not be started; the hold was given back.
    Watchdog {
        /// The lock concerned.
        lock: String,
        /// What the operating system reported.
        source: std::io::Error,
    },
}

/// A failure on one node of a multi-node client.
#[derive(Debug)]
pub struct NodeError {
    /// The node, as `host:port`.
    pub node: String,
    /// What went wrong there.
    pub error: Error,
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The caller's deadline passed while the lock was busy.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout { .. })
    }

    /// The wait was cancelled, by a [`Cancel`](crate::Cancel) token or by closing the
    /// client ([`is_closed`](Self::is_closed)).
    pub fn is_cancelled(&self) -> bool {
        matches!(self, Error::Cancelled { .. })
    }

    /// The client was closed ([`LockClient::close`](crate::LockClient::close)).
    pub fn is_closed(&self) -> bool {
        matches!(self, Error::Cancelled { closed: true, .. })
    }

    /// A release of a hold this thread does not have.
    pub fn is_not_held(&self) -> bool {
        matches!(self, Error::NotHeld { .. })
    }

    /// The hold had been lost (expired or deleted from outside) before this call found it.
    pub fn is_lost(&self) -> bool {
        matches!(self, Error::Lost { .. })
    }

    /// Too few replicas acknowledged an acquisition (see
    /// [`min_replica_acks`](crate::LockClientBuilder::min_replica_acks)).
    pub fn is_not_replicated(&self) -> bool {
        match self {
            Error::NotReplicated { .. } => true,
            Error::NoQuorum { failed, .. } => failed.iter().any(|f| f.error.is_not_replicated()),
            _ => false,
        }
    }

    /// A thread that holds a read lock asked for the write lock of the same lock.
    pub fn is_upgrade(&self) -> bool {
        matches!(self, Error::Upgrade { .. })
    }

    /// The lock cannot work on this client (a fenced lock on Redlock).
    pub fn is_unsupported(&self) -> bool {
        matches!(self, Error::Unsupported { .. })
    }

    /// The key holds another kind of lock than the handle's: on a single node, or on
    /// enough Redlock nodes that no quorum could be had.
    pub fn is_wrong_kind(&self) -> bool {
        match self {
            Error::WrongKind { .. } => true,
            Error::NoQuorum { failed, .. } => failed.iter().any(|f| f.error.is_wrong_kind()),
            _ => false,
        }
    }

    /// The Redis user lacks a permission the locks need: found when the client was built, or
    /// refused by Redis (`NOPERM`) on a node.
    pub fn is_permission(&self) -> bool {
        match self {
            Error::Permission { .. } => true,
            Error::Redis { source, .. } => {
                source.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm)
            }
            Error::NoQuorum { failed, .. } => failed.iter().any(|f| f.error.is_permission()),
            _ => false,
        }
    }

    /// Redis refused the credentials, or wants some (`NOAUTH`, `WRONGPASS`).
    pub fn is_auth(&self) -> bool {
        match self {
            Error::Redis { source, .. } => is_auth(source),
            Error::Pool { source, .. } => {
                source.to_string().contains("NOAUTH") || source.to_string().contains("WRONGPASS")
            }
            Error::NoQuorum { failed, .. } | Error::NoPrimary { failed, .. } => {
                failed.iter().any(|f| f.error.is_auth())
            }
            _ => false,
        }
    }

    /// A TLS handshake failed or TLS broke the connection: a server certificate that the
    /// trusted CAs do not vouch for, a client certificate the server refused or did not get.
    /// Always false without the `tls` feature.
    pub fn is_tls(&self) -> bool {
        match self {
            Error::Redis { source, .. } => crate::base::tls::is_tls_error(source),
            Error::NoQuorum { failed, .. } => failed.iter().any(|f| f.error.is_tls()),
            _ => false,
        }
    }

    /// Bad input from the caller: name, configuration, argument or URL. Nothing reached Redis.
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            Error::InvalidName { .. }
                | Error::InvalidConfig { .. }
                | Error::InvalidArgument { .. }
                | Error::InvalidUrl { .. }
        )
    }

    /// Too few nodes answered to form a quorum.
    pub fn is_no_quorum(&self) -> bool {
        matches!(self, Error::NoQuorum { .. })
    }

    /// A quorum granted the lock too slowly for any validity to remain.
    pub fn is_validity_exhausted(&self) -> bool {
        matches!(self, Error::ValidityExhausted { .. })
    }

    /// Redis could not be reached or the connection broke; retrying later may succeed. On
    /// several nodes (Redlock, sentinels): when any node failed so, not when every node
    /// answered with a refusal (`NOPERM`, a key of another kind).
    pub fn is_connection(&self) -> bool {
        match self {
            Error::Pool { .. } => true,
            Error::Redis { source, .. } => {
                source.is_io_error() || source.is_connection_dropped() || source.is_timeout()
            }
            Error::NoQuorum { failed, .. } | Error::NoPrimary { failed, .. } => {
                failed.iter().any(|f| f.error.is_connection())
            }
            _ => false,
        }
    }

    /// The lock this error is about, if any.
    pub fn lock_name(&self) -> Option<&str> {
        match self {
            Error::Redis { lock, .. }
            | Error::Pool { lock, .. }
            | Error::NoQuorum { lock, .. }
            | Error::NotReplicated { lock, .. } => lock.as_deref(),
            Error::Timeout { lock, .. }
            | Error::NotHeld { lock }
            | Error::Lost { lock }
            | Error::WrongKind { lock, .. }
            | Error::Upgrade { lock }
            | Error::Unsupported { lock, .. }
            | Error::InvalidArgument { lock, .. }
            | Error::ValidityExhausted { lock, .. }
            | Error::PartialRelease { lock, .. }
            | Error::Cancelled { lock, .. }
            | Error::Watchdog { lock, .. } => Some(lock),
            _ => None,
        }
    }

    pub(crate) fn with_lock(mut self, name: &str) -> Self {
        if let Error::Redis { lock, .. }
        | Error::Pool { lock, .. }
        | Error::NoQuorum { lock, .. }
        | Error::NotReplicated { lock, .. } = &mut self
        {
            *lock = Some(name.to_owned());
        }
        self
    }

    /// Whether the command may have reached Redis before this error (anything but failing
    /// to get a connection at all).
    pub(crate) fn may_have_run(&self) -> bool {
        !matches!(self, Error::Pool { .. })
    }

    /// Redis said the key holds another type than the command works on.
    pub(crate) fn is_wrong_type(&self) -> bool {
        matches!(self, Error::Redis { source, .. } if source.code() == Some("WRONGTYPE"))
    }

    /// The connection died under the command (as after a Redis restart): worth one more try.
    pub(crate) fn is_dropped_connection(&self) -> bool {
        matches!(self, Error::Redis { source, .. } if source.is_connection_dropped())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let about = |lock: &Option<String>| match lock {
            Some(name) => format!(" (lock {name:?})"),
            None => String::new(),
        };
        match self {
            Error::Redis { lock, node, source } => {
                write!(
                    f,
                    "redis command failed on {node}{}: {}",
                    about(lock),
                    cause(source)
                )?;
                if is_auth(source) {
                    write!(f, "{CREDENTIALS}")?;
                }
                Ok(())
            }
            Error::Pool { lock, node, .. } => {
                write!(
                    f,
                    "no connection to {node} available{} within the connect timeout",
                    about(lock)
                )?;
                if self.is_auth() {
                    write!(f, "{CREDENTIALS}")?;
                }
                Ok(())
            }
            Error::Timeout {
                lock,
                waited,
                held_by,
            } => {
                write!(f, "lock {lock:?} still busy after waiting {waited:?}")?;
                match held_by {
                    Some(held_by) => write!(f, ": {held_by}"),
                    None => Ok(()),
                }
            }
            Error::NotHeld { lock } => write!(f, "lock {lock:?} is not held by this thread"),
            Error::Lost { lock } => write!(
                f,
                "lock {lock:?} was lost while held: it expired or was deleted from outside"
            ),
            Error::WrongKind { lock, found } => write!(
                f,
                "lock {lock:?} is another kind of lock: its key holds {found}"
            ),
            Error::Upgrade { lock } => write!(
                f,
                "lock {lock:?}: this thread holds the read lock, and the write lock would wait for it for ever"
            ),
            Error::Unsupported { lock, reason } => {
                write!(f, "lock {lock:?} cannot work on this client: {reason}")
            }
            Error::NotReplicated {
                lock,
                node,
                acked,
                needed,
            } => write!(
                f,
                "acquisition on {node}{} reached {acked} of the {needed} replicas required in time; it was given back",
                about(lock)
            ),
            Error::Permission { node, denied } => write!(
                f,
                "the Redis user on {node} may not run what the locks need: {} denied",
                denied.join(", ")
            ),
            Error::Forked { parent } => write!(
                f,
                "this client was created in process {parent}, not in this fork of it; build a new client"
            ),
            Error::InvalidName { name, reason } => {
                write!(f, "invalid lock name {name:?}: {reason}")
            }
            Error::InvalidConfig { setting, reason } => write!(f, "invalid {setting}: {reason}"),
            Error::InvalidArgument {
                lock,
                argument,
                reason,
            } => write!(f, "invalid {argument} for lock {lock:?}: {reason}"),
            // The parse error is the cause itself: shown here, and not again as `source()`.
            Error::InvalidUrl { url, source } => write!(f, "invalid redis URL {url:?}: {source}"),
            Error::NoQuorum {
                lock,
                needed,
                of,
                failed,
            } => {
                write!(
                    f,
                    "no quorum{}: {needed} of {of} nodes needed, failed: {}",
                    about(lock),
                    causes(failed)
                )
            }
            Error::ValidityExhausted {
                lock,
                elapsed,
                lease,
            } => write!(
                f,
                "lock {lock:?} was granted too late: acquiring took {elapsed:?} of a {lease:?} lease"
            ),
            Error::PartialRelease {
                lock,
                released,
                of,
                failed,
            } => {
                write!(
                    f,
                    "lock {lock:?} released on {released} of {of} nodes; not reached: {}",
                    causes(failed)
                )
            }
            Error::NoPrimary { master, failed } => write!(
                f,
                "no sentinel named the primary of {master:?}; asked: {}",
                causes(failed)
            ),
            Error::Cancelled {
                lock,
                closed: false,
            } => {
                write!(f, "waiting for lock {lock:?} was cancelled")
            }
            Error::Cancelled { lock, closed: true } => {
                write!(f, "lock {lock:?}: the client is closed")
            }
            Error::Watchdog { lock, .. } => {
                write!(f, "could not start the watchdog thread for lock {lock:?}")
            }
        }
    }
}

/// What a `Display` of an authentication failure adds.
const CREDENTIALS: &str = " (credentials go in the URL: redis://user:password@host:port/; \
     a Sentinel primary's in LockClientBuilder::primary_credentials)";

fn is_auth(source: &redis::RedisError) -> bool {
    source.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(source.code(), Some("NOAUTH" | "WRONGPASS"))
}

/// What went wrong, in a few words: the error code Redis replied with, or how the
/// connection failed. The `redis` crate's own message is the error's `source()`.
fn cause(source: &redis::RedisError) -> String {
    if let Some(code) = source.code() {
        format!("the server replied {code}")
    } else if source.kind() == redis::ErrorKind::AuthenticationFailed {
        "authentication failed".into()
    } else if source.is_timeout() {
        "no reply within the response timeout".into()
    } else if source.is_connection_refusal() {
        "connection refused".into()
    } else if source.is_connection_dropped() {
        "the connection dropped".into()
    } else if source.is_io_error() {
        "input/output error".into()
    } else {
        format!("{:?}", source.kind())
    }
}

/// `node: cause; ...` for the nodes that failed. Each node's error is listed here, so an
/// error with several causes has no `source()`.
fn causes(failed: &[NodeError]) -> String {
    let causes: Vec<_> = failed
        .iter()
        .map(|f| match &f.error {
            Error::Redis { source, .. } => format!("{} ({})", f.node, cause(source)),
            other => format!("{} ({other})", f.node),
        })
        .collect();
    causes.join(", ")
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Redis { source, .. } => Some(source),
            Error::Pool { source, .. } => Some(source),
            Error::Watchdog { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The URL without its user information, fit for errors and logs.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}
