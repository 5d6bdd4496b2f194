//! The read-write lock's handle: its two sides, each a lock handle of its own.

use crate::kinds::read_write::{Read, Write};
use crate::lease::target::Target;
use crate::lock::handle::Lock;
use crate::notify::cancel::Cancel;

/// A read-write lock: [`read`](Self::read) and [`write`](Self::write) give its two sides,
/// each a [`Lock`] with the whole acquisition quartet. Made by
/// [`LockClient::read_write_lock`](crate::LockClient::read_write_lock).
///
/// Many threads, of any processes, may hold the read lock at once, or one thread the write
/// lock. Both sides are reentrant; the writer may also take the read lock (and keeps it
/// after releasing the write lock); a reader asking for the write lock gets
/// [`Error::Upgrade`](crate::Error::Upgrade) at once, since it would wait for itself. A
/// writer's release wakes every waiter; the last reader's wakes one. Read holds are renewed
/// by the watchdog like any other. Redisson's `RReadWriteLock` layout, so Java services
/// share it.
///
/// ```no_run
/// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
/// let prices = client.read_write_lock("prices");
/// {
///     let _reading = prices.read().lock()?; // with other readers
/// }
/// let _writing = prices.write().lock()?; // alone
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    read: Lock<Read>,
    write: Lock<Write>,
}

impl ReadWriteLock {
    pub(crate) fn new(target: Target) -> Self {
        ReadWriteLock {
            read: Lock::new(target.clone()),
            write: Lock::new(target),
        }
    }

    /// This lock, with both sides' blocking acquisitions cancellable by `cancel` (see
    /// [`Lock::with_cancel`]).
    pub fn with_cancel(&self, cancel: &Cancel) -> Self {
        ReadWriteLock {
            read: self.read.with_cancel(cancel),
            write: self.write.with_cancel(cancel),
        }
    }

    /// The read side: shared with other readers, excluded by a writer.
    pub fn read(&self) -> &Lock<Read> {
        &self.read
    }

    /// The write side: excludes readers and other writers.
    pub fn write(&self) -> &Lock<Write> {
        &self.write
    }
}
