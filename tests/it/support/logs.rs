//! What the library logs, captured for the tests that look for a record: one logger for the
//! whole test process (the `log` facade takes one), installed by the first test that asks.

use std::sync::{Mutex, Once};

/// A log record: its level, target and message.
#[derive(Clone, Debug)]
pub struct Record {
    pub level: log::Level,
    pub target: String,
    pub message: String,
}

static RECORDS: Mutex<Vec<Record>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::Level::Debug
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            RECORDS.lock().unwrap().push(Record {
                level: record.level(),
                target: record.target().to_owned(),
                message: record.args().to_string(),
            });
        }
    }

    fn flush(&self) {}
}

/// Captures every record at debug level and above from now on.
pub fn capture() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        log::set_logger(&Capture).expect("no other logger in the test process");
        log::set_max_level(log::LevelFilter::Debug);
    });
}

/// The records captured so far that `keep` selects.
pub fn records(keep: impl Fn(&Record) -> bool) -> Vec<Record> {
    RECORDS
        .lock()
        .unwrap()
        .iter()
        .filter(|r| keep(r))
        .cloned()
        .collect()
}

/// The messages captured so far at `level` that contain `text`.
pub fn messages(level: log::Level, text: &str) -> Vec<String> {
    records(|r| r.level == level && r.message.contains(text))
        .into_iter()
        .map(|r| r.message)
        .collect()
}
