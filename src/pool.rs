//! Pooled connections: every one opened with the connect timeout and given read and write
//! timeouts, none tested with a PING on checkout.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::{Client, Connection, ConnectionLike, RedisError};

/// A pooled connection that remembers whether an I/O error left it unusable.
pub(crate) struct Conn {
    pub inner: Connection,
    broken: bool,
}

impl Conn {
    /// Runs `f`, marking the connection broken when it fails at the I/O level (a reply that
    /// timed out may still arrive later, so such a connection is never reused).
    pub fn run<T>(
        &mut self,
        f: impl FnOnce(&mut Connection) -> redis::RedisResult<T>,
    ) -> redis::RedisResult<T> {
        let result = f(&mut self.inner);
        if let Err(err) = &result {
            self.broken |= err.is_io_error() || err.is_unrecoverable_error();
        }
        result
    }
}

/// Opens connections for `r2d2`.
pub(crate) struct Manager {
    pub client: Client,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
    /// Whether the last attempt to open a connection failed, shared by the node.
    pub unreachable: Arc<AtomicBool>,
}

impl Manager {
    pub fn open(&self) -> Result<Conn, RedisError> {
        let opened = self.try_open();
        self.unreachable.store(opened.is_err(), Ordering::Relaxed);
        opened
    }

    fn try_open(&self) -> Result<Conn, RedisError> {
        let inner = self
            .client
            .get_connection_with_timeout(self.connect_timeout)?;
        inner.set_read_timeout(Some(self.response_timeout))?;
        inner.set_write_timeout(Some(self.response_timeout))?;
        Ok(Conn {
            inner,
            broken: false,
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
        conn.broken || !conn.inner.is_open()
    }
}
