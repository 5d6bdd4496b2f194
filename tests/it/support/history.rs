//! A history of exclusive holds, checked the Jepsen way: each holder records the window in
//! which its guard said it held the lock, all on the machine's monotonic clock, and no two
//! windows of different holders may overlap.
//!
//! A window runs from the moment the acquisition returned (later than the hold really
//! began, so a window is never longer than the hold) to the earlier of the moment its
//! release was called and the guard's `valid_until()` read just before that. A counter that
//! comes out right can hide two holders that happened not to collide; overlapping windows
//! cannot hide.
//!
//! Windows are kept as nanoseconds of `CLOCK_MONOTONIC`, the clock `Instant` reads on
//! Linux, which every process of the machine shares: a worker process sends its windows
//! as text ([`Window::to_line`]) and the parent checks them with its own.
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

/// One holder's window: from `from` to `to`, in nanoseconds of the monotonic clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// Who held it. Windows of one holder may overlap (a reentrant lock's holds).
    pub holder: String,
    pub from: u64,
    pub to: u64,
}

impl Window {
    /// The window as one line of text: `holder from to` (the holder without spaces).
    pub fn to_line(&self) -> String {
        format!("{} {} {}", self.holder, self.from, self.to)
    }

    /// The window of a line written by [`to_line`](Self::to_line).
    pub fn from_line(line: &str) -> Option<Window> {
        let mut parts = line.split(' ');
        let holder = parts.next()?.to_owned();
        let from = parts.next()?.parse().ok()?;
        let to = parts.next()?.parse().ok()?;
        Some(Window { holder, from, to })
    }
}

/// The monotonic clock now, in nanoseconds; the same clock in every process.
pub fn now_nanos() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given and nothing else.
    let done = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    assert_eq!(done, 0, "clock_gettime(CLOCK_MONOTONIC) failed");
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// `at` on the monotonic clock, in nanoseconds, never earlier than it was: for a window's
/// start. Both clocks are the same one, read one after the other; reading `Instant` first
/// means that a thread paused between the two readings moves the result later.
pub fn nanos_at_least(at: Instant) -> u64 {
    let now = Instant::now();
    shift(now_nanos(), now, at)
}

/// `at` on the monotonic clock, in nanoseconds, never later than it was: for a window's
/// end. Reading the clock first means that a pause between the two readings moves the
/// result earlier. So a window is never longer than the hold, and a pause cannot make two
/// windows overlap.
pub fn nanos_at_most(at: Instant) -> u64 {
    let clock = now_nanos();
    shift(clock, Instant::now(), at)
}

/// `clock`, read at about `now`, moved to `at`.
fn shift(clock: u64, now: Instant, at: Instant) -> u64 {
    if at >= now {
        clock + (at - now).as_nanos() as u64
    } else {
        clock.saturating_sub((now - at).as_nanos() as u64)
    }
}

/// Sends `holder`'s window, as [`History::record`] takes it, to the list `list` on a
/// server, for a process that checks the windows of several.
pub fn send(
    redis: &mut redis::Connection,
    list: &str,
    holder: &str,
    (taken, released, valid_until): (Instant, Instant, Instant),
) {
    let window = Window {
        holder: holder.to_owned(),
        from: nanos_at_least(taken),
        to: nanos_at_most(released.min(valid_until)),
    };
    let _: () = redis::cmd("RPUSH")
        .arg(list)
        .arg(window.to_line())
        .query(redis)
        .unwrap();
}

/// The windows sent to the list `list` with [`send`].
pub fn received(redis: &mut redis::Connection, list: &str) -> History {
    let lines: Vec<String> = redis::cmd("LRANGE")
        .arg(list)
        .arg(0)
        .arg(-1)
        .query(redis)
        .unwrap();
    let history = History::default();
    for line in lines {
        history.add(Window::from_line(&line).expect("a window"));
    }
    history
}

/// The recorded windows of one lock; shareable between threads by reference.
#[derive(Default)]
pub struct History {
    windows: Mutex<Vec<Window>>,
    /// Every hold recorded, with or without a window left after the conversion.
    holds: std::sync::atomic::AtomicUsize,
}

impl History {
    /// Records `holder`'s window: from `taken` (when the acquisition returned) to the
    /// earlier of `released` (when its release was called, or when the hold was known to
    /// end otherwise) and `valid_until` (the guard's, read just before). A window that
    /// ends before it begins (validity gone already) records nothing.
    pub fn record(&self, holder: &str, taken: Instant, released: Instant, valid_until: Instant) {
        let window = Window {
            holder: holder.to_owned(),
            from: nanos_at_least(taken),
            to: nanos_at_most(released.min(valid_until)),
        };
        self.add(window);
    }

    /// Records a window already on the monotonic clock, such as one a worker process sent.
    pub fn add(&self, window: Window) {
        self.holds
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if window.to > window.from {
            self.windows.lock().push(window);
        }
    }

    /// The windows recorded, in the order they came.
    pub fn windows(&self) -> Vec<Window> {
        self.windows.lock().clone()
    }

    /// How many holds were recorded. A hold shorter than the clock conversion's margin (a
    /// thread paused between its two clock readings) leaves no window, and is counted.
    pub fn len(&self) -> usize {
        self.holds.load(std::sync::atomic::Ordering::Relaxed)
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
                "two exclusive holders at once: {:?} and {:?}, overlapping for {} ns",
                a.holder,
                b.holder,
                a.to.min(b.to) - b.from
            );
        }
    }
}
