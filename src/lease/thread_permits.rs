//! Which leased permits each thread of a client took and still holds: a deadlock check
//! writes its wait edges beside their semaphores too, and follows a semaphore's permits to
//! the threads that hold them.

use std::sync::Arc;

use parking_lot::Mutex;

/// The permits of one client, by the thread that took each.
#[derive(Default)]
pub(crate) struct ThreadPermits {
    held: Mutex<Vec<Entry>>,
}

struct Entry {
    thread: u64,
    key: Arc<[u8]>,
    id: String,
}

impl ThreadPermits {
    /// Records that `thread` took the permit `id` of the semaphore at `key`.
    pub fn add(&self, thread: u64, key: Arc<[u8]>, id: String) {
        self.held.lock().push(Entry { thread, key, id });
    }

    /// Forgets the permit `id` of the semaphore at `key`, given back (from any thread).
    pub fn remove(&self, key: &[u8], id: &str) {
        self.held
            .lock()
            .retain(|e| !(e.id == id && &e.key[..] == key));
    }

    /// The permits `thread` took and holds: each semaphore's key and the permit's id.
    pub fn held_by(&self, thread: u64) -> Vec<(Arc<[u8]>, String)> {
        let held = self.held.lock();
        let mine = held.iter().filter(|e| e.thread == thread);
        mine.map(|e| (e.key.clone(), e.id.clone())).collect()
    }
}
