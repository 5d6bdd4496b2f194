//! How far a long scan has gone, on standard error while it runs: only on a terminal, only
//! once a scan has taken a second, and wiped before the listing is printed.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// The count of keys a scan went through, shown in place.
pub struct Progress {
    started: Instant,
    terminal: bool,
    shown: bool,
}

impl Progress {
    pub fn new() -> Progress {
        Progress {
            started: Instant::now(),
            terminal: std::io::stderr().is_terminal(),
            shown: false,
        }
    }

    /// Shows `seen` keys scanned so far, once the scan has taken a second.
    pub fn show(&mut self, seen: u64) {
        if self.terminal && self.started.elapsed() >= Duration::from_secs(1) {
            let _ = write!(std::io::stderr(), "\r{seen} keys scanned");
            self.shown = true;
        }
    }

    /// Wipes the count off the line.
    pub fn clear(&mut self) {
        if self.shown {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    }
}
