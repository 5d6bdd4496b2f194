//! The one error type of the crate.
//!
//! Its message says what happened, in the crate's words and with its context (the lock or
//! semaphore, the node); the message of the library underneath (the Redis client's, the
//! operating system's) is only its `source()`, so that a reporter walking the chain prints
//! each cause once. An error about several nodes has no one source: its message lists each node's
//! failure with that failure's whole chain.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::RedisError;

use crate::base::cause::{self, Cause};
pub(crate) use crate::base::subject::Noun;
pub use crate::base::subject::Subject;
use crate::base::wait_edge::WaitEdge;

/// Every call's `Result` is at least as large as an `Error`, 120 bytes on 64-bit targets:
/// a variant that would grow it boxes what it adds, or the build fails here.
const _: () = assert!(std::mem::size_of::<Error>() <= 120);

/// Everything that can go wrong, with the context needed to act on it.
///
/// The enum is `#[non_exhaustive]`: match the predicates ([`Error::is_timeout`],
/// [`Error::is_not_held`], ...) rather than every variant.
///
/// Its message (`{}`) says what happened, in this crate's words and with the lock or
/// semaphore ([`Subject`]) and node it concerns; the message of the library or the
/// operating system underneath is only its [`source()`](std::error::Error::source), so that
/// a reporter walking the chain (such as `anyhow`'s `{:#}`) prints each cause once. The
/// alternate form (`{:#}`) of the error itself prints the message followed by the whole
/// chain, for a log line.
///
/// ```no_run
/// let err = redmutex::LockClient::open("redis://127.0.0.1:1/").unwrap_err();
/// assert!(err.is_connection());
/// // "redis 127.0.0.1:1: could not connect", then the system's words:
/// // "redis 127.0.0.1:1: could not connect: Connection refused (os error 111)"
/// println!("{err}\n{err:#}");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Redis could not be reached, refused a command, or the connection broke while it ran.
    /// [`is_connection`](Error::is_connection), [`is_auth`](Error::is_auth),
    /// [`is_permission`](Error::is_permission), [`is_tls`](Error::is_tls),
    /// [`is_scripting_disabled`](Error::is_scripting_disabled) and
    /// [`server_code`](Error::server_code) tell which.
    Redis {
        /// The lock or semaphore concerned, when the command was about one.
        lock: Option<Subject>,
        /// The Redis node, as `host:port`.
        node: String,
        /// What failed underneath: opaque; its message is the error's `source()`.
        cause: Cause,
    },
    /// A Redis Cluster slot that the call needs was being moved between primaries (a
    /// resharding) or had no primary (a failover under way), and stayed so until the call's
    /// bound: the call did not run, and may be made again later. The cluster's own answer
    /// (`TRYAGAIN`, `ASK`, `MOVED`, `CLUSTERDOWN`) is the error's `source()`.
    /// [`is_slot_moving`](Error::is_slot_moving) tells it.
    SlotMoving {
        /// The lock or semaphore concerned, when the call was about one.
        lock: Option<Subject>,
        /// The cluster, as `cluster@host:port` of its first seed, or the primary that
        /// answered, as `host:port`.
        node: String,
        /// The slot.
        slot: u16,
        /// What the cluster answered: opaque; its message is the error's `source()`.
        cause: Cause,
    },
    /// No pooled connection became available within the connect timeout: the server could
    /// not be reached (why is the error's `source()`), or every connection stayed busy.
    Pool {
        /// The lock or semaphore concerned, when the call was about one.
        lock: Option<Subject>,
        /// The Redis node, as `host:port`.
        node: String,
        /// Why the last connect failed, if it did: opaque.
        cause: Cause,
    },
    /// The lock stayed busy (the semaphore had no free permit) until the caller's deadline.
    Timeout {
        /// The lock or semaphore waited for.
        lock: Subject,
        /// How long the call waited before giving up.
        waited: Duration,
        /// What held the lock when the wait gave up, when Redis could tell in time (boxed,
        /// to keep the error small).
        held_by: Option<Box<crate::base::held_by::HeldBy>>,
    },
    /// This thread holds no hold of the lock it tried to release, or the permit a semaphore
    /// was asked to release by id is not held. Nothing was changed on the server.
    NotHeld {
        /// The lock or semaphore concerned.
        lock: Subject,
    },
    /// The hold (or permit) is gone: it expired or was deleted from outside, so the critical
    /// section it guarded was not protected to its end. Returned by a release or a re-entry
    /// that finds this; the loss was also reported to
    /// [`on_lock_lost`](crate::LockClientBuilder::on_lock_lost) and counted in
    /// [`Stats::locks_lost`](crate::Stats::locks_lost). Nothing was changed on the server:
    /// the key may belong to someone else by now.
    Lost {
        /// The lock or semaphore concerned.
        lock: Subject,
    },
    /// The key holds another kind of lock (or other data) than the handle's kind: a token
    /// lock asked for a key that holds a reentrant lock's hash, say. Nothing was changed on
    /// the server.
    WrongKind {
        /// The lock or semaphore concerned.
        lock: Subject,
        /// What the key holds, such as `"a reentrant or fenced lock (a hash)"`.
        found: &'static str,
    },
    /// A forced unlock found data under the lock's name that has no lock's shape, or a
    /// lock's shape without the expiry every lock writer sets and no holder was named to
    /// prove it is one (see [`LockClient::inspect`](crate::LockClient::inspect)). Nothing
    /// was changed on the server.
    NotALock {
        /// The lock concerned.
        lock: Subject,
        /// What the key holds, as the server judged it.
        found: String,
    },
    /// This thread holds the read lock and asked for the write lock of the same read-write
    /// lock: the write lock waits for every reader to leave, this thread included, so it
    /// would wait for ever. Nothing was sent. Release the read holds first.
    Upgrade {
        /// The read-write lock concerned.
        lock: Subject,
    },
    /// This thread holds the non-reentrant lock (or the reentrant lock of the same name)
    /// and asked for it again: a non-reentrant lock is taken once by its holder, as
    /// Redisson's `RNonReentrantLock` refuses a second acquisition by its holder. Nothing
    /// was sent.
    Reentry {
        /// The lock concerned.
        lock: Subject,
    },
    /// The lock cannot work on this client, such as a fenced lock over several independent
    /// masters (Redlock). Nothing was sent.
    Unsupported {
        /// The lock or semaphore concerned.
        lock: Subject,
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
    /// A lock or semaphore name that cannot be used: empty or longer than
    /// [`crate::MAX_NAME_LEN`].
    InvalidName {
        /// The lock or semaphore, by its name as given (lossily decoded).
        lock: Subject,
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
        /// The lock or semaphore concerned.
        lock: Subject,
        /// The argument, named after the parameter.
        argument: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The connection URL cannot be used. Passwords are not repeated here.
    InvalidUrl {
        /// The URL with any user information removed.
        url: String,
        /// What is wrong with it, such as `"unknown scheme \"http\"; ..."`.
        reason: String,
    },
    /// Fewer nodes than a quorum (N/2 + 1 of the configured N) answered: the lock was not
    /// taken (and anything taken on the nodes that answered was given back).
    NoQuorum {
        /// The lock or semaphore concerned, when the call was about one.
        lock: Option<Subject>,
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
        /// The lock or semaphore concerned.
        lock: Subject,
        /// How long the acquisition took.
        elapsed: Duration,
        /// The lease asked for.
        lease: Duration,
    },
    /// A release reached a quorum of nodes, so the lock is released, but some nodes could not
    /// be told; their copies expire with their lease, unless the release, sent again in the
    /// background to those that could not be reached, gets there first.
    PartialRelease {
        /// The lock or semaphore concerned.
        lock: Subject,
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
        /// The lock or semaphore concerned.
        lock: Option<Subject>,
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
        /// The lock or semaphore concerned.
        lock: Subject,
        /// Whether the client was closed, rather than the handle's token cancelled.
        closed: bool,
    },
    /// A deadlock: the wait-for graph, followed from this waiter after the
    /// [`deadlock_timeout`](crate::LockClientBuilder::deadlock_timeout), led back to it.
    /// This call was chosen to end it (it began waiting last, closing the cycle, or the
    /// one that did has not ended it since this one's last look): it left its wait (and a
    /// fair lock's queue) and took nothing; the thread keeps every hold it had, and the
    /// others in the cycle go on once it gives one of them back.
    Deadlock {
        /// The lock this call waited for.
        lock: Subject,
        /// How long the call waited.
        waited: Duration,
        /// The cycle: the first edge is this call's wait; each next waiter holds the lock
        /// the one before waits for, and this thread holds the last one's.
        cycle: Box<[WaitEdge]>,
    },
    /// The watchdog thread for a held lock could not be started; the hold was given back.
    Watchdog {
        /// The lock or semaphore concerned.
        lock: Subject,
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
    /// The wait was ended to break a deadlock through this thread (see
    /// [`Error::Deadlock`]).
    pub fn is_deadlock(&self) -> bool {
        matches!(self, Error::Deadlock { .. })
    }

    /// The caller's deadline passed while the lock was busy.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout { .. })
    }

    /// A server did not reply within the response timeout.
    pub(crate) fn is_reply_timeout(&self) -> bool {
        match self {
            Error::Redis { cause, .. } => cause.as_redis().is_some_and(cause::is_reply_timeout),
            _ => false,
        }
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

    /// The command may or may not have taken effect: it was sent, or may have been, and no
    /// answer came (no reply within the response timeout, a connection that broke under
    /// it, a reply that could not be read); on several nodes, on any of them. False when
    /// Redis answered, even with a refusal (which changes nothing), and when nothing was
    /// sent (no connection could be had).
    ///
    /// A [resignation](crate::Leadership::resign) is sent again (its latch makes a resend
    /// answer as an earlier send that resigned would) until it answers or the leadership's
    /// validity ends; its error is this only when none of them was answered: it may have
    /// resigned, and if it did not, the lease ends the leadership by its
    /// [`valid_until`](crate::Leadership::valid_until) (the watchdog renews it no more). A
    /// [forced resignation](crate::Election::force_resign) is sent again in the same way,
    /// for as long as one call may take to connect and be answered: it may have ended the
    /// leadership, or not. For an acquisition, whatever the attempt may have taken was
    /// given back before the call returned (or is, in the background). The message says
    /// what the call leaves unknown where the call knows it.
    pub fn is_outcome_unknown(&self) -> bool {
        match self {
            Error::Redis { cause, .. } => unanswered(cause),
            Error::NoQuorum { failed, .. } => failed.iter().any(|f| f.error.is_outcome_unknown()),
            _ => false,
        }
    }

    /// This error, when its outcome is unknown ([`is_outcome_unknown`]), with `note` saying
    /// what that leaves unknown about the call, after what failed; any other error as it
    /// is.
    ///
    /// [`is_outcome_unknown`]: Self::is_outcome_unknown
    pub(crate) fn unsettled(self, note: &'static str) -> Error {
        match self {
            Error::Redis { lock, node, cause } if unanswered(&cause) => Error::Redis {
                lock,
                node,
                cause: cause.noted(note),
            },
            other => other,
        }
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

    /// A thread that holds a non-reentrant lock asked for it again.
    pub fn is_reentry(&self) -> bool {
        matches!(self, Error::Reentry { .. })
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

    /// A forced unlock found data, or what may be data, under the lock's name, and left it
    /// as it was.
    pub fn is_not_a_lock(&self) -> bool {
        match self {
            Error::NotALock { .. } => true,
            Error::NoQuorum { failed, .. } => failed.iter().any(|f| f.error.is_not_a_lock()),
            _ => false,
        }
    }

    /// The Redis user lacks a permission the locks need: found when the client was built, or
    /// refused by Redis (`NOPERM`) on a node.
    pub fn is_permission(&self) -> bool {
        match self {
            Error::Permission { .. } => true,
            Error::Redis { .. } => self.server_code() == Some("NOPERM"),
            Error::NoQuorum { failed, .. } => failed.iter().any(|f| f.error.is_permission()),
            _ => false,
        }
    }

    /// The server runs no scripts, and every lock is a Lua script: scripting is turned off
    /// there (`EVALSHA` or `SCRIPT` renamed away with `rename-command`), or no Lua engine is
    /// loaded (Valkey 9.1 and later keep Lua in a module an operator may leave out). Every
    /// call on that server fails so at once; waiting does not help. Found when a client is
    /// built, or on a node whose server changed since; on Redlock, on any node.
    /// [`LockClient::doctor`](crate::LockClient::doctor) reports it as the `scripting` check.
    pub fn is_scripting_disabled(&self) -> bool {
        match self {
            Error::Redis { cause, .. } => cause.is_no_scripts(),
            Error::NoQuorum { failed, .. } => {
                failed.iter().any(|f| f.error.is_scripting_disabled())
            }
            _ => false,
        }
    }

    /// Redis refused the credentials, or wants some (`NOAUTH`, `WRONGPASS`).
    pub fn is_auth(&self) -> bool {
        match self {
            Error::Redis { cause, .. } => cause.as_redis().is_some_and(cause::is_auth),
            Error::Pool { .. } => self.last_connect().is_some_and(Error::is_auth),
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
            Error::Redis { cause, .. } => {
                cause.as_redis().is_some_and(crate::base::tls::is_tls_error)
            }
            Error::Pool { .. } => self.last_connect().is_some_and(Error::is_tls),
            Error::NoQuorum { failed, .. } | Error::NoPrimary { failed, .. } => {
                failed.iter().any(|f| f.error.is_tls())
            }
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

    /// Redis could not be reached, the connection broke, or what answered at the address
    /// is no Redis server (an HTTP server, say); retrying later may succeed. On several
    /// nodes (Redlock, sentinels): when any node failed so, not when every node answered
    /// with a refusal (`NOPERM`, a key of another kind).
    pub fn is_connection(&self) -> bool {
        match self {
            Error::Pool { .. } => true,
            Error::Redis { cause, .. } => cause.as_redis().is_some_and(cause::is_connection),
            Error::NoQuorum { failed, .. } | Error::NoPrimary { failed, .. } => {
                failed.iter().any(|f| f.error.is_connection())
            }
            _ => false,
        }
    }

    /// The error code Redis replied with, such as `"NOPERM"`, `"WRONGTYPE"` or `"READONLY"`
    /// (the first word of its error reply), when this is a refusal by one Redis node.
    /// Match codes, not messages: the messages change between server versions.
    pub fn server_code(&self) -> Option<&str> {
        match self {
            Error::Redis { cause, .. } => cause.as_redis().and_then(RedisError::code),
            _ => None,
        }
    }

    /// The name of the lock or semaphore this error is about, if any.
    pub fn lock_name(&self) -> Option<&str> {
        self.subject().map(Subject::name)
    }

    /// The lock or semaphore this error is about, if any.
    pub fn subject(&self) -> Option<&Subject> {
        match self {
            Error::Redis { lock, .. }
            | Error::SlotMoving { lock, .. }
            | Error::Pool { lock, .. }
            | Error::NoQuorum { lock, .. }
            | Error::NotReplicated { lock, .. } => lock.as_ref(),
            Error::InvalidName { lock, .. } => Some(lock),
            Error::Timeout { lock, .. }
            | Error::NotHeld { lock }
            | Error::Lost { lock }
            | Error::WrongKind { lock, .. }
            | Error::NotALock { lock, .. }
            | Error::Upgrade { lock }
            | Error::Reentry { lock }
            | Error::Unsupported { lock, .. }
            | Error::InvalidArgument { lock, .. }
            | Error::ValidityExhausted { lock, .. }
            | Error::PartialRelease { lock, .. }
            | Error::Cancelled { lock, .. }
            | Error::Deadlock { lock, .. }
            | Error::Watchdog { lock, .. } => Some(lock),
            _ => None,
        }
    }

    pub(crate) fn with_lock(mut self, subject: &Subject) -> Self {
        if let Error::Redis { lock, .. }
        | Error::SlotMoving { lock, .. }
        | Error::Pool { lock, .. }
        | Error::NoQuorum { lock, .. }
        | Error::NotReplicated { lock, .. } = &mut self
        {
            *lock = Some(subject.clone());
        }
        self
    }

    /// Whether the command may have run on Redis before this error: anything but failing to
    /// get a connection at all, or one server that runs no scripts refusing a script (on
    /// several nodes, the others may have run it).
    pub(crate) fn may_have_run(&self) -> bool {
        match self {
            Error::Pool { .. } | Error::Reentry { .. } | Error::SlotMoving { .. } => false,
            Error::Redis { cause, .. } => !cause.is_no_scripts(),
            _ => true,
        }
    }

    /// Whether an attempt that ended in this error may have taken something on the server
    /// that no guard holds: its command may have run and its reply was lost, late or an
    /// error (on one node or on enough of several to leave no quorum), or replicas did not
    /// acknowledge what it took. Wider than [`is_outcome_unknown`](Self::is_outcome_unknown),
    /// to be safe: it counts a refusal too.
    pub(crate) fn outcome_unknown(&self) -> bool {
        match self {
            Error::Redis { .. } => self.may_have_run(),
            Error::NoQuorum { failed, .. } => failed.iter().any(|f| f.error.may_have_run()),
            Error::NotReplicated { .. } => true,
            _ => false,
        }
    }

    /// The cluster slot the call needs was being moved between primaries or had no primary
    /// until the call's bound: the call did not run, and may later ([`Error::SlotMoving`]).
    pub fn is_slot_moving(&self) -> bool {
        match self {
            Error::SlotMoving { .. } => true,
            Error::NoQuorum { failed, .. } => failed.iter().any(|f| f.error.is_slot_moving()),
            _ => false,
        }
    }

    /// Every pooled connection stayed busy for the whole wait for one, and no connect
    /// failed: the command did not run, and a call with time left waits on.
    pub(crate) fn is_pool_busy(&self) -> bool {
        matches!(self, Error::Pool { cause, .. } if cause.is_busy())
    }

    /// A failure that a later try may not meet: Redis could not be reached or did not
    /// answer, or the cluster slot was moving; not a refusal, which it would meet again.
    pub(crate) fn is_transient(&self) -> bool {
        self.is_connection() || self.is_slot_moving()
    }

    /// A cluster's answer that a command belongs elsewhere or later, as a shard returns it
    /// before the routing turns it into [`Error::SlotMoving`].
    pub(crate) fn is_redirect(&self) -> bool {
        use redis::{ErrorKind::Server, ServerErrorKind::*};
        (self.redis()).is_some_and(|source| {
            matches!(source.kind(), Server(Moved | Ask | TryAgain | ClusterDown))
        })
    }

    /// `err`, a cluster's answer that the command belongs elsewhere or later (see
    /// [`is_redirect`](Self::is_redirect)), given up on at `slot`.
    pub(crate) fn slot_moving(self, slot: u16) -> Error {
        match self {
            Error::Redis { lock, node, cause } => Error::SlotMoving {
                lock,
                node,
                slot,
                cause,
            },
            other => other,
        }
    }

    /// Redis is still loading its data (`LOADING`, after a start) and runs nothing until it
    /// is done.
    pub(crate) fn is_loading(&self) -> bool {
        use redis::{ErrorKind::Server, ServerErrorKind::BusyLoading};
        (self.redis()).is_some_and(|source| matches!(source.kind(), Server(BusyLoading)))
    }

    /// Redis said the key holds another type than the command works on.
    pub(crate) fn is_wrong_type(&self) -> bool {
        self.server_code() == Some("WRONGTYPE")
    }

    /// The connection died under the command (as after a Redis restart): worth one more try.
    pub(crate) fn is_dropped_connection(&self) -> bool {
        self.redis().is_some_and(RedisError::is_connection_dropped)
    }

    /// What the Redis client reported, for the crate's own decisions (redirects, codes).
    pub(crate) fn redis(&self) -> Option<&RedisError> {
        match self {
            Error::Redis { cause, .. } => cause.as_redis(),
            _ => None,
        }
    }

    /// The text after the error code of a refusal by Redis (`WRONGKIND hash` gives `hash`).
    pub(crate) fn server_detail(&self) -> Option<&str> {
        self.server_code()?;
        self.redis()?.detail()
    }

    /// An error reported by one node, such as `node` failed with `err`.
    pub(crate) fn redis_at(node: &str, err: RedisError) -> Error {
        Error::Redis {
            lock: None,
            node: node.to_owned(),
            cause: Cause::redis(err),
        }
    }

    /// `node` refused a script call with `err` and turned out to run no scripts at all.
    pub(crate) fn no_scripts_at(node: &str, err: RedisError) -> Error {
        Error::Redis {
            lock: None,
            node: node.to_owned(),
            cause: Cause::no_scripts(err),
        }
    }

    /// A pool of `node` gave no connection in time; `last` is why its last connect failed,
    /// if it did.
    pub(crate) fn pool_at(node: &str, last: Option<Arc<Error>>) -> Error {
        Error::Pool {
            lock: None,
            node: node.to_owned(),
            cause: Cause::pool(last.map(|err| err as Arc<dyn StdError + Send + Sync>)),
        }
    }

    /// Why the pool's last connect failed, for a [`Error::Pool`].
    fn last_connect(&self) -> Option<&Error> {
        match self {
            Error::Pool { cause, .. } => cause.as_connect()?.downcast_ref::<Error>(),
            _ => None,
        }
    }

    /// What happened, without the node (which a list of nodes' failures names): the words
    /// of [`Display`](fmt::Display) after it for a failure on one node, the whole message
    /// otherwise. The foreign message stays out: it is [`source`](Self::source_of).
    fn what(&self) -> String {
        match self {
            Error::Redis { cause, .. } => {
                let what = match cause.as_redis() {
                    Some(_) if cause.is_no_scripts() => NO_SCRIPTS.to_owned(),
                    Some(err) if cause::is_auth(err) => {
                        format!("{}{CREDENTIALS}", cause::what(err))
                    }
                    Some(err) => cause::what(err).to_owned(),
                    None => "failed".to_owned(),
                };
                match cause.note() {
                    Some(note) => format!("{what}; {note}"),
                    None => what,
                }
            }
            Error::Pool { .. } => match self.last_connect() {
                Some(last) => format!("no connection within the connect timeout: {}", last.what()),
                None => "no pooled connection became free within the connect timeout".to_owned(),
            },
            other => other.to_string(),
        }
    }

    /// The error below this one, through which the foreign message is read.
    fn source_of(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Error::Redis { cause, .. } | Error::SlotMoving { cause, .. } => {
                Some(cause::distinct(cause.as_redis()?))
            }
            Error::Pool { .. } => self.last_connect()?.source_of(),
            Error::Watchdog { source, .. } => Some(source),
            _ => None,
        }
    }

    /// What happened on a node of a list, followed by everything below it, each message
    /// once.
    pub(crate) fn detail(&self) -> String {
        format!("{}{}", self.what(), cause::chain(self.source_of()))
    }
}

impl fmt::Display for Error {
    /// The message; with `{:#}`, followed by every message below it, each once.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.message(f)?;
        if f.alternate() {
            f.write_str(&cause::chain(self.source_of()))?;
        }
        Ok(())
    }
}

impl Error {
    fn message(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let about = |lock: &Option<Subject>| match lock {
            Some(lock) => format!(" ({lock})"),
            None => String::new(),
        };
        match self {
            Error::Redis { lock, node, .. } | Error::Pool { lock, node, .. } => {
                write!(f, "redis {node}{}: {}", about(lock), self.what())
            }
            Error::SlotMoving {
                lock, node, slot, ..
            } => write!(
                f,
                "{node}{}: slot {slot} is being moved between primaries or has none for now; \
                 the call did not run",
                about(lock)
            ),
            Error::Timeout {
                lock,
                waited,
                held_by,
            } => {
                write!(f, "{lock} still busy after waiting {waited:?}")?;
                match held_by {
                    Some(held_by) => write!(f, ": {held_by}"),
                    None => Ok(()),
                }
            }
            Error::NotHeld { lock } if lock.noun == Noun::Semaphore => {
                write!(f, "{lock}: that permit is not held")
            }
            Error::NotHeld { lock } => write!(f, "{lock} is not held by this thread"),
            Error::Lost { lock } if lock.noun == Noun::Semaphore => {
                write!(f, "{lock}: a permit was lost while held: {GONE}")
            }
            Error::Lost { lock } if lock.noun == Noun::Election => {
                write!(f, "{lock}: this leadership was lost: {GONE}")
            }
            Error::Lost { lock } => write!(f, "{lock} was lost while held: {GONE}"),
            Error::WrongKind { lock, found } => {
                write!(f, "{lock} is of another kind: its key holds {found}")
            }
            Error::NotALock { lock, found } => {
                write!(f, "{lock} was left as it was: its key holds {found}")
            }
            Error::Upgrade { lock } => write!(
                f,
                "{lock}: this thread holds the read lock, and the write lock would wait for it for ever"
            ),
            Error::Reentry { lock } => write!(
                f,
                "{lock} is not reentrant, and this thread holds it already"
            ),
            Error::Unsupported { lock, reason } => {
                write!(f, "{lock} cannot work on this client: {reason}")
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
            Error::InvalidName { lock, reason } => {
                write!(
                    f,
                    "invalid {} name {}: {reason}",
                    lock.noun(),
                    lock.quoted()
                )
            }
            Error::InvalidConfig { setting, reason } => write!(f, "invalid {setting}: {reason}"),
            Error::InvalidArgument {
                lock,
                argument,
                reason,
            } => write!(f, "invalid {argument} for {lock}: {reason}"),
            Error::InvalidUrl { url, reason } => write!(f, "invalid redis URL {url:?}: {reason}"),
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
                "{lock} was granted too late: acquiring took {elapsed:?} of a {lease:?} lease"
            ),
            Error::PartialRelease {
                lock,
                released,
                of,
                failed,
            } => {
                write!(
                    f,
                    "{lock} released on {released} of {of} nodes; not reached: {}",
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
                write!(f, "waiting for {lock} was cancelled")
            }
            Error::Cancelled { lock, closed: true } => {
                write!(f, "{lock}: the client is closed")
            }
            Error::Watchdog { lock, .. } => {
                write!(f, "could not start the watchdog thread for {lock}")
            }
            Error::Deadlock {
                lock,
                waited,
                cycle,
            } => {
                write!(f, "deadlock: waiting {waited:?} for {lock}, ")?;
                for (at, edge) in cycle.iter().enumerate().skip(1) {
                    let (waiter, client) = (&edge.waiter, &edge.client);
                    write!(
                        f,
                        "held by {waiter} of {client:?}, which waits for {:?}, ",
                        edge.lock
                    )?;
                    if at + 1 == cycle.len() {
                        f.write_str("held by this thread; ")?;
                    }
                }
                f.write_str("this call left its wait")
            }
        }
    }
}

/// Whether the failure `cause` leaves the outcome of the command unknown: no answer came,
/// where a refusal or a server that runs no scripts changed nothing.
fn unanswered(cause: &Cause) -> bool {
    !cause.is_no_scripts() && cause.as_redis().is_some_and(|err| err.code().is_none())
}

/// How a hold or a permit was lost.
const GONE: &str = "it expired or was deleted from outside";

/// What a `Display` of a server that runs no scripts says.
const NO_SCRIPTS: &str = "the server runs no scripts, and every lock is a Lua script: \
     scripting is turned off there (EVALSHA or SCRIPT renamed) or no Lua engine is loaded";

/// What a `Display` of an authentication failure adds.
const CREDENTIALS: &str = " (credentials go in the URL: redis://user:password@host:port/; \
     a Sentinel primary's in LockClientBuilder::primary_credentials)";

/// `node (what happened: the messages below it)` for each node that failed. An error
/// with several causes has no `source()`: each node's is here, once.
fn causes(failed: &[NodeError]) -> String {
    let causes: Vec<_> = failed
        .iter()
        .map(|f| format!("{} ({})", f.node, f.error.detail()))
        .collect();
    causes.join(", ")
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source_of()
    }
}

/// The URL without its user information, fit for errors and logs.
/// A URL without `://` that holds an `@` loses all before it.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &url[..scheme], &url[at + 1..])
        }
        (None, Some(at)) => format!("***@{}", &url[at + 1..]),
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(node: &str) -> Error {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused by the test");
        Error::redis_at(node, RedisError::from(io))
    }

    fn failed(nodes: &[&str]) -> Vec<NodeError> {
        let failed = nodes.iter().map(|node| NodeError {
            node: node.to_string(),
            error: refused(node),
        });
        failed.collect()
    }

    /// Every message of the chain from `err`, after checking that none repeats the one
    /// below it.
    fn chain(err: &Error) -> String {
        let mut report = err.to_string();
        let mut parent = report.clone();
        let mut next = err.source();
        while let Some(source) = next {
            let message = source.to_string();
            assert!(!parent.contains(&message), "{message:?} in {parent:?}");
            report = format!("{report}: {message}");
            parent = message;
            next = source.source();
        }
        assert_eq!(format!("{err:#}"), report);
        report
    }

    #[test]
    fn errors_move_between_threads_as_reporters_need() {
        fn reportable<T: StdError + Send + Sync + 'static>() {}
        reportable::<Error>();
    }

    #[test]
    fn one_node_names_its_cause_once_and_its_node_once() {
        let err = refused("h:1").with_lock(&"l".into());
        assert!(err.is_connection());
        let report = chain(&err);
        assert_eq!(report.matches("refused by the test").count(), 1, "{report}");
        assert_eq!(report.matches("h:1").count(), 1, "{report}");
        assert_eq!(report.matches("\"l\"").count(), 1, "{report}");
    }

    #[test]
    fn a_pool_names_the_failure_of_its_last_connect_once() {
        let err = Error::pool_at("h:1", Some(Arc::new(refused("h:1"))));
        assert!(err.is_connection() && !err.is_auth());
        let report = chain(&err);
        assert_eq!(report.matches("refused by the test").count(), 1, "{report}");
        assert_eq!(report.matches("h:1").count(), 1, "{report}");
        let busy = Error::pool_at("h:1", None);
        assert!(busy.source().is_none() && busy.is_connection());
        chain(&busy);
    }

    #[test]
    fn an_unanswered_command_has_an_unknown_outcome_which_its_message_may_explain() {
        let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset by the test");
        let unanswered = Error::redis_at("h:1", RedisError::from(reset)).with_lock(&"l".into());
        assert!(unanswered.is_outcome_unknown());
        let plain = unanswered.to_string();
        let noted = unanswered.unsettled("the call may or may not have taken effect");
        assert!(noted.is_outcome_unknown());
        let report = chain(&noted);
        assert_eq!(
            noted.to_string(),
            format!("{plain}; the call may or may not have taken effect")
        );
        assert_eq!(report.matches("reset by the test").count(), 1, "{report}");

        use redis::{ErrorKind::Server, ServerErrorKind::ReadOnly};
        let refused = Error::redis_at("h:1", RedisError::from((Server(ReadOnly), "refused")));
        assert!(!refused.is_outcome_unknown(), "{refused}");
        let refused = refused.unsettled("the call may or may not have taken effect");
        assert!(!refused.to_string().contains("may or may not"), "{refused}");
        assert!(!Error::pool_at("h:1", None).is_outcome_unknown());
        let quorum = Error::NoQuorum {
            lock: None,
            needed: 2,
            of: 3,
            failed: failed(&["a:1"]),
        };
        assert!(quorum.is_outcome_unknown());
    }

    #[test]
    fn lists_of_nodes_name_each_node_and_its_cause_once() {
        let nodes = ["a:1", "b:2", "c:3"];
        let errors = [
            Error::NoQuorum {
                lock: Some("l".into()),
                needed: 2,
                of: 3,
                failed: failed(&nodes),
            },
            Error::NoPrimary {
                master: "m".into(),
                failed: failed(&nodes),
            },
            Error::PartialRelease {
                lock: "l".into(),
                released: 2,
                of: 5,
                failed: failed(&nodes),
            },
        ];
        for err in errors {
            assert!(err.source().is_none(), "{err}");
            let report = chain(&err);
            assert_eq!(report.matches("refused by the test").count(), 3, "{report}");
            for node in nodes {
                assert_eq!(report.matches(node).count(), 1, "{report}");
            }
        }
    }
}
