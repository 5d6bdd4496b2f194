//! An owner slot: which of a thread's holds on a lock one holding counts. The lock machine
//! keys its table of thread-owned holds by it, and a give-back of such a hold names it.

use std::sync::Arc;

/// A lock key, the owning thread's number, and which of its fields the holds count.
pub(crate) type HoldId = (Arc<[u8]>, u64, Mode);

/// Which of an owner's fields in a lock's hash a holding counts: its one field, or, in a
/// read-write lock, its reader field or its writer field (two holdings of one thread).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    Only,
    Read,
    Write,
}
