//! Pooled connections: every one opened with the connect timeout and given read and write
//! timeouts, none tested with a PING on checkout, each opened to wherever the node's
//! topology says its server is now, and retired once that moves.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::{Connection, ConnectionLike, ErrorKind, RedisError, ServerErrorKind};

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
    pub topology: Arc<Topology>,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
    /// Whether the last attempt to open a connection failed, shared by the node.
    pub unreachable: Arc<AtomicBool>,
    /// The connections' name in `CLIENT LIST` (see `Config::connection_name`).
    pub name: String,
}

impl Manager {
    pub fn open(&self) -> Result<Conn, RedisError> {
        let opened = self.try_open();
        self.unreachable.store(opened.is_err(), Ordering::Relaxed);
        opened
    }

    fn try_open(&self) -> Result<Conn, RedisError> {
        let endpoint = self
            .topology
            .endpoint()
            .map_err(|err| RedisError::from(std::io::Error::other(err.to_string())))?;
        let mut inner = endpoint::connect(
            &endpoint.client,
            self.connect_timeout,
            self.response_timeout,
        )?;
        self.topology.verify(&mut inner, endpoint.generation)?;
        // Only a label, for the operations tool: a user who may not name connections locks
        // as well.
        let named = redis::cmd("CLIENT")
            .arg("SETNAME")
            .arg(&self.name)
            .exec(&mut inner);
        match named {
            Err(err) if err.is_io_error() || err.is_timeout() => return Err(err),
            Err(err) => log::debug!("naming a connection {:?} refused: {err}", self.name),
            Ok(()) => {}
        }
        Ok(Conn {
            inner,
            broken: false,
            generation: endpoint.generation,
        })
    }
}

impl r2d2::ManageConnection for Manager {
    type Connection = Conn;
    type Error = RedisError;

    fn connect(&self) -> Result<Conn, RedisError> {
        self.open()
    }

    /// Only used if checkout testing is turned on, which this crate never does.
    fn is_valid(&self, conn: &mut Conn) -> Result<(), RedisError> {
        conn.run(|c| redis::cmd("PING").query(c))
    }

    fn has_broken(&self, conn: &mut Conn) -> bool {
        conn.broken || !conn.inner.is_open() || conn.generation != self.topology.generation()
    }
}
