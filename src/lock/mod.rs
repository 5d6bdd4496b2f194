//! The generic lock machine, written once for every kind: the lock handle (and the
//! read-write lock's pair of them), the acquisition quartet with its deadlines, jittered
//! retries and pub/sub waiting, and the guards; and the count-down latch's handle, whose
//! wait shares the waiting state (`waiting`) with the acquisitions'; and the handles of the
//! other kinds, leader election's in its own folder (`election`). Uses `lease`, `kinds` and
//! everything below.

pub(crate) mod acquire;
pub(crate) mod count_down_latch;
pub(crate) mod counting_semaphore;
pub(crate) mod deadlock;
pub(crate) mod election;
pub(crate) mod guard;
pub(crate) mod handle;
pub(crate) mod hold_watch;
pub(crate) mod multi_lock;
pub(crate) mod read_write_lock;
pub(crate) mod semaphore;
pub(crate) mod waiting;
