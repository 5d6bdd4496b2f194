//! What an error is about: a lock, a read-write lock, a semaphore or an election, by its
//! name.

use std::fmt;

/// What an error is about: a lock, a read-write lock, a semaphore or an election, by its
/// name. Prints as the kind of thing and its quoted name, such as `semaphore
/// "db-connections"`, and compares equal to its name.
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
}

impl Subject {
    pub(crate) fn new(noun: Noun, name: String) -> Self {
        Subject { noun, name }
    }

    /// Its name (lossily decoded, cut to 64 bytes).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What it is: `"lock"`, `"read-write lock"`, `"semaphore"` or `"election"`.
    pub fn noun(&self) -> &'static str {
        match self.noun {
            Noun::Lock => "lock",
            Noun::ReadWriteLock => "read-write lock",
            Noun::Semaphore => "semaphore",
            Noun::Election => "election",
        }
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?}", self.noun(), self.name)
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
