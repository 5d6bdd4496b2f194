//! Pooled connections: every one opened with the connect timeout and given read and write
//! timeouts, none tested with a PING on checkout, each opened to wherever the node's
//! topology says its server is now, and retired once that moves. Why the last connect
//! failed is kept for the error of a checkout that then times out; the pool's own reports
//! of it go to the debug log, since the callers get it anyway.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use redis::{Connection, ConnectionLike, ErrorKind, ServerErrorKind};

use crate::base::cause;
use crate::base::error::Error;
use crate::topology::endpoint;
use crate::topology::server::Topology;

/// A pooled connection that remembers whether an I/O error left it unusable, and the
/// topology's generation it was opened in.
pub(crate) struct Conn {
    pub inner: Connection,
    broken: bool,
    pub generation: u64,
}

impl Conn {
    /// Runs `f`, marking the connection broken when it fails at the I/O level (a reply that
    /// timed out may still arrive later, so such a connection is never reused) or is
    /// answered `READONLY` (its server was demoted to a replica).
    pub fn run<T>(
        &mut self,
        f: impl FnOnce(&mut Connection) -> redis::RedisResult<T>,
    ) -> redis::RedisResult<T> {
        let result = f(&mut self.inner);
        if let Err(err) = &result {
            self.broken |= err.is_io_error()
                || err.is_unrecoverable_error()
                || err.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly);
        }
        result
    }

    /// Makes sure the connection is not used again.
    pub fn retire(&mut self) {
        self.broken = true;
    }
}

/// Opens connections for `r2d2`.
pub(crate) struct Manager {
    /// The node, as `host:port`, for errors.
    pub node: String,
    pub topology: Arc<Topology>,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
    /// How the node's attempts to open a connection went, shared by the node.
    pub opens: Arc<Opens>,
    /// Why the pool's last attempt to open a connection failed, until one succeeds.
    pub last_failure: LastFailure,
    /// The connections' name in `CLIENT LIST` (see `Config::connection_name`).
    pub name: String,
}

impl Manager {
    pub fn open(&self) -> Result<Conn, Error> {
        let opened = self.try_open();
        self.opens.record(opened.is_ok());
        if opened.is_ok() {
            *self.last_failure.lock() = None;
        }
        opened
    }

    /// Why the last attempt to open a connection failed, if it did.
    pub fn last_failure(&self) -> Option<Arc<Error>> {
        match self.opens.unreachable() {
            true => self.last_failure.lock().clone(),
            false => None,
        }
    }

    fn try_open(&self) -> Result<Conn, Error> {
        let endpoint = self.topology.endpoint()?;
        let failed = |err| Error::redis_at(&self.node, err);
        let mut inner = endpoint::connect_named(
            &endpoint.client,
            self.connect_timeout,
            self.response_timeout,
            Some(&self.name),
        )
        .map_err(failed)?;
        (self.topology.verify(&mut inner, endpoint.generation))
            .map_err(|err| failed(cause::while_connecting(err)))?;
        Ok(Conn {
            inner,
            broken: false,
            generation: endpoint.generation,
        })
    }
}

impl r2d2::ManageConnection for Manager {
    type Connection = Conn;
    type Error = Error;

    fn connect(&self) -> Result<Conn, Error> {
        self.open()
    }

    /// Only used if checkout testing is turned on, which this crate never does.
    fn is_valid(&self, conn: &mut Conn) -> Result<(), Error> {
        conn.run(|c| redis::cmd("PING").query(c))
            .map_err(|err| Error::redis_at(&self.node, err))
    }

    fn has_broken(&self, conn: &mut Conn) -> bool {
        conn.broken || !conn.inner.is_open() || conn.generation != self.topology.generation()
    }
}

/// How a node's attempts to open a connection went.
#[derive(Default)]
pub(crate) struct Opens {
    last_failed: AtomicBool,
    failed: AtomicU64,
}

impl Opens {
    fn record(&self, opened: bool) {
        self.last_failed.store(!opened, Ordering::Relaxed);
        if !opened {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether the last attempt failed; the next successful one clears it.
    pub fn unreachable(&self) -> bool {
        self.last_failed.load(Ordering::Relaxed)
    }

    /// How many attempts have failed so far.
    pub fn failures(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}

/// Why the pool's last attempt to open a connection failed, shared by the node.
pub(crate) type LastFailure = Arc<Mutex<Option<Arc<Error>>>>;

/// Receives the pool's reports of failed connects: keeps the last for the error of a
/// checkout that times out (which returns it to its caller), and logs it at debug level only,
/// since a pool reconnecting in the background would otherwise log the same failure at
/// error level many times a second.
#[derive(Debug)]
pub(crate) struct KeepFailures(pub LastFailure);

impl r2d2::HandleError<Error> for KeepFailures {
    fn handle_error(&self, error: Error) {
        log::debug!("opening a pooled connection failed: {error:#}");
        *self.0.lock() = Some(Arc::new(error));
    }
}
