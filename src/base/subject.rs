//! What an error is about: a lock, a read-write lock, a semaphore or an election, by its
//! name.

use std::fmt;

/// The most bytes of a name that messages print.
const SHOWN: usize = 64;

/// What an error is about: a lock, a read-write lock, a semaphore or an election, by its
/// name. Prints as the kind of thing and its quoted name, such as `semaphore
/// "db-connections"` (a name longer than 64 bytes printed cut there, marked `…`), and
/// compares equal to its whole name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    pub(crate) noun: Noun,
    pub(crate) name: String,
}

/// What kind of thing a [`Subject`] is, as its errors name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Noun {
    Lock,
    ReadWriteLock,
    Semaphore,
    Election,
    MultiLock,
    CountDownLatch,
}

impl Subject {
    pub(crate) fn new(noun: Noun, name: String) -> Self {
        Subject { noun, name }
    }

    /// Its whole name, as given, with any sequence of bytes that is not UTF-8 replaced by
    /// U+FFFD (`String::from_utf8_lossy`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name as messages print it: quoted, and when longer than [`SHOWN`] bytes, cut
    /// there (at a character boundary) and marked `…`.
    pub(crate) fn quoted(&self) -> String {
        let cut = (0..=SHOWN.min(self.name.len()))
            .rev()
            .find(|&at| self.name.is_char_boundary(at))
            .unwrap_or(0);
        match cut < self.name.len() {
            true => format!("{:?}…", &self.name[..cut]),
            false => format!("{:?}", self.name),
        }
    }

    /// What it is: `"lock"`, `"read-write lock"`, `"semaphore"`, `"election"`,
    /// `"count-down latch"` or `"multi-lock"` (named by its members' names, joined by
    /// `", "`).
    pub fn noun(&self) -> &'static str {
        match self.noun {
            Noun::Lock => "lock",
            Noun::ReadWriteLock => "read-write lock",
            Noun::Semaphore => "semaphore",
            Noun::Election => "election",
            Noun::MultiLock => "multi-lock",
            Noun::CountDownLatch => "count-down latch",
        }
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.noun(), self.quoted())
    }
}

/// A lock of that name.
impl From<&str> for Subject {
    fn from(name: &str) -> Self {
        Subject::new(Noun::Lock, name.to_owned())
    }
}

/// A lock of that name.
impl From<String> for Subject {
    fn from(name: String) -> Self {
        Subject::new(Noun::Lock, name)
    }
}

impl PartialEq<str> for Subject {
    fn eq(&self, name: &str) -> bool {
        self.name == name
    }
}

impl PartialEq<&str> for Subject {
    fn eq(&self, name: &&str) -> bool {
        self.name == *name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_name_is_whole_and_printed_cut_at_a_character() {
        let short = Subject::new(Noun::Lock, "orders:42".into());
        assert_eq!(short.to_string(), "lock \"orders:42\"");
        let exact = Subject::new(Noun::Semaphore, "s".repeat(SHOWN));
        assert_eq!(exact.to_string(), format!("semaphore {:?}", exact.name()));
        // 63 ASCII bytes, then a 2-byte character across the 64th: cut before it.
        let name = format!("{}é{}", "a".repeat(SHOWN - 1), "b".repeat(100));
        let long = Subject::new(Noun::Lock, name.clone());
        assert_eq!(long.name(), name);
        assert_eq!(long, *name);
        assert_eq!(
            long.to_string(),
            format!("lock {:?}…", "a".repeat(SHOWN - 1))
        );
    }
}
