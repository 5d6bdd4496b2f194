//! A history of exclusive holds, checked the Jepsen way: each holder records the window in
//! which its guard said it held the lock, all on this process's monotonic clock, and no
//! two windows of different holders may overlap.
//!
//! A window runs from the moment the acquisition returned (later than the hold really
//! began, so a window is never longer than the hold) to the earlier of the moment its
//! release was called and the guard's `valid_until()` read just before that. A counter that
//! comes out right can hide two holders that happened not to collide; overlapping windows
//! cannot hide.
//!
//! ```ignore
//! let history = History::default();
//! let taken = Instant::now();          // right after the acquisition returned
//! // ... work under the lock ...
//! history.record("owner-1", taken, Instant::now(), guard.valid_until());
//! guard.unlock()?;
//! history.assert_exclusive();
//! ```

use std::time::Instant;

use parking_lot::Mutex;

/// One holder's window: from `from` to `to`, on this process's monotonic clock.
#[derive(Clone, Debug)]
pub struct Window {
    /// Who held it. Windows of one holder may overlap (a reentrant lock's holds).
    pub holder: String,
    pub from: Instant,
    pub to: Instant,
}

/// The recorded windows of one lock; shareable between threads by reference.
#[derive(Default)]
pub struct History {
    windows: Mutex<Vec<Window>>,
}

impl History {
    /// Records `holder`'s window: from `taken` (when the acquisition returned) to the
    /// earlier of `released` (when its release was called, or when the hold was known to
    /// end otherwise) and `valid_until` (the guard's, read just before). A window that
    /// ends before it begins (validity gone already) records nothing.
    pub fn record(&self, holder: &str, taken: Instant, released: Instant, valid_until: Instant) {
        let to = released.min(valid_until);
        if to > taken {
            self.windows.lock().push(Window {
                holder: holder.to_owned(),
                from: taken,
                to,
            });
        }
    }

    /// The first two windows of different holders that overlap, if any.
    pub fn overlap(&self) -> Option<(Window, Window)> {
        let mut windows = self.windows.lock().clone();
        windows.sort_by_key(|w| w.from);
        // Sorted by start: a window overlaps an earlier one iff it starts before the latest
        // end so far among the other holders' windows.
        let mut open: Vec<&Window> = Vec::new();
        for window in &windows {
            open.retain(|earlier| earlier.to > window.from);
            if let Some(earlier) = open.iter().find(|e| e.holder != window.holder) {
                return Some(((*earlier).clone(), window.clone()));
            }
            open.push(window);
        }
        None
    }

    /// Panics, naming both, if two windows of different holders overlap.
    pub fn assert_exclusive(&self) {
        if let Some((a, b)) = self.overlap() {
            panic!(
                "two exclusive holders at once: {:?} and {:?}, overlapping for {:?}",
                a.holder,
                b.holder,
                a.to.min(b.to) - b.from
            );
        }
    }
}
