//! What every call on one lock works on: the client's shared state and the lock's names.

use std::sync::{Arc, Weak};
use std::time::Instant;

use redis::Cmd;

use crate::base::config::{Config, MAX_NAME_LEN};
use crate::base::error::{Error, Noun, Result, Subject};
use crate::kinds::call::Call;
use crate::kinds::holding::Holding;
use crate::kinds::slot::HoldId;
use crate::kinds::undo::Undo;
use crate::layout::names;
use crate::lease::shared::Shared;
use crate::notify::cancel::Cancel;
use crate::transport::node::Nodes;

/// One lock of one client.
#[derive(Clone)]
pub struct Target {
    pub(crate) shared: Arc<Shared>,
    name: Arc<Name>,
}

/// A [`Target`] that does not keep its client alive, for the client's own threads.
pub(crate) struct WeakTarget {
    shared: Weak<Shared>,
    name: Arc<Name>,
}

impl WeakTarget {
    /// The target, while its client lives.
    pub fn upgrade(&self) -> Option<Target> {
        Some(Target {
            shared: self.shared.upgrade()?,
            name: self.name.clone(),
        })
    }
}

/// A lock's name and the Redis names made of it.
struct Name {
    /// What it is, and the whole name lossily decoded.
    subject: Subject,
    key: Arc<[u8]>,
    /// The unlock channel, named by Redisson's rule (see `layout`).
    channel: Vec<u8>,
    invalid: Option<&'static str>,
}

/// Why a name longer than [`MAX_NAME_LEN`] is refused, with the number.
const TOO_LONG: &str = "longer than 1024 bytes (MAX_NAME_LEN)";
const _: () = assert!(MAX_NAME_LEN == 1024, "TOO_LONG names the limit");

impl Target {
    pub(crate) fn new(shared: Arc<Shared>, name: &[u8], noun: Noun) -> Self {
        let invalid = if name.is_empty() {
            Some("empty")
        } else if name.len() > MAX_NAME_LEN {
            Some(TOO_LONG)
        } else {
            None
        };
        let key: Arc<[u8]> = [&shared.config().key_prefix[..], name].concat().into();
        let subject = Subject::new(noun, String::from_utf8_lossy(name).into_owned());
        Self::at(shared, key, subject, invalid)
    }

    /// The lock at `key`, a name made of this one's key (in its cluster slot), of the same
    /// client: named by its key in errors, logs and callbacks, and refused wherever this
    /// one's name is.
    pub(crate) fn beside(&self, key: Vec<u8>) -> Self {
        let subject = Subject::new(Noun::Lock, String::from_utf8_lossy(&key).into_owned());
        Self::at(self.shared.clone(), key.into(), subject, self.name.invalid)
    }

    fn at(
        shared: Arc<Shared>,
        key: Arc<[u8]>,
        subject: Subject,
        invalid: Option<&'static str>,
    ) -> Self {
        let invalid = invalid.or_else(|| {
            let split = shared.nodes().routes_by_slot() && !names::one_slot(&key);
            split.then_some(
                "its braces make no hash tag, so its keys would fall in different cluster slots",
            )
        });
        let channel = names::channel(&key);
        Target {
            shared,
            name: Arc::new(Name {
                subject,
                key,
                channel,
                invalid,
            }),
        }
    }

    /// This target, without keeping its client alive.
    pub(crate) fn downgrade(&self) -> WeakTarget {
        WeakTarget {
            shared: Arc::downgrade(&self.shared),
            name: self.name.clone(),
        }
    }

    /// The lock's whole name, lossily decoded (see [`Subject::name`]).
    pub(crate) fn name(&self) -> &str {
        self.name.subject.name()
    }

    /// The lock or semaphore, for errors and logs.
    pub(crate) fn subject(&self) -> &Subject {
        &self.name.subject
    }

    /// The key, or the error for a name that cannot be one.
    pub(crate) fn key(&self) -> Result<&[u8]> {
        match self.name.invalid {
            None => Ok(&self.name.key),
            Some(reason) => Err(Error::InvalidName {
                lock: self.subject().clone(),
                reason,
            }),
        }
    }

    /// The key, shared, for tables and renewals; only valid names reach where it is used.
    pub(crate) fn shared_key(&self) -> Arc<[u8]> {
        self.name.key.clone()
    }

    pub(crate) fn channel(&self) -> &[u8] {
        &self.name.channel
    }

    /// The key, checked, in a client allowed to act in this process: the start of every
    /// call that goes to Redis.
    pub(crate) fn begin(&self) -> Result<&[u8]> {
        let key = self.key()?;
        self.shared.check_process()?;
        Ok(key)
    }

    /// [`begin`](Self::begin) for a call that starts something new (an acquisition, a
    /// change of a semaphore's permits, a forced unlock, a question): refused on a closed
    /// client. Releases, give-ups and renewals of what is held use `begin`.
    pub(crate) fn open(&self) -> Result<&[u8]> {
        let key = self.begin()?;
        self.shared.check_open(self.subject())?;
        Ok(key)
    }

    /// [`Error::Cancelled`] once the client is closed or `cancel` (a handle's token) is
    /// cancelled.
    pub(crate) fn check_cancelled(&self, cancel: Option<&Cancel>) -> Result<()> {
        let closed = self.shared.closing().is_cancelled();
        if closed || cancel.is_some_and(Cancel::is_cancelled) {
            return Err(Error::Cancelled {
                lock: self.subject().clone(),
                closed,
            });
        }
        Ok(())
    }

    /// Reports `holding` lost, found so by a call on this lock, and returns the error for it.
    pub(crate) fn found_lost(&self, holding: &Holding) -> Error {
        self.shared.report_lost(self.subject(), holding, None);
        self.lost()
    }

    /// Gives back what `undo` undoes, at once within a round of its own and, where Redis
    /// cannot be reached, again in the background (see `give_back`).
    pub(crate) fn give_back(&self, undo: Undo) {
        self.shared.give_back(self.subject(), undo);
    }

    /// A release `cmd` that failed on some nodes in a way a later try may not (Redis
    /// unreachable or silent, a cluster slot moving): sent again in the background while
    /// the hold it ends may be alive, so that the lock is freed as soon as Redis can be
    /// reached, not when the lease ends. `slot` names a thread-owned hold, whose owner's
    /// next attempt or release makes it moot.
    pub(crate) fn release_later(&self, cmd: Cmd, holding: &Holding, slot: Option<HoldId>) {
        let lasts = holding
            .valid_until()
            .saturating_duration_since(Instant::now());
        if lasts.is_zero() {
            return;
        }
        log::info!(
            "{}: a release did not get through; it is sent again in the background for {lasts:?}",
            self.subject()
        );
        let undo = Undo {
            cmd,
            lasts,
            slot,
            leaves_until: None,
        };
        self.shared.give_back_later(self.subject(), undo);
    }
}

impl Call for Target {
    fn subject(&self) -> &Subject {
        Target::subject(self)
    }

    fn key(&self) -> Result<&[u8]> {
        Target::key(self)
    }

    fn shared_key(&self) -> Arc<[u8]> {
        Target::shared_key(self)
    }

    fn channel(&self) -> &[u8] {
        Target::channel(self)
    }

    fn begin(&self) -> Result<&[u8]> {
        Target::begin(self)
    }

    fn open(&self) -> Result<&[u8]> {
        Target::open(self)
    }

    fn nodes(&self) -> &Nodes {
        self.shared.nodes()
    }

    fn config(&self) -> &Config {
        self.shared.config()
    }

    fn client_id(&self) -> &str {
        self.shared.id()
    }

    fn closing(&self) -> bool {
        self.shared.closing().is_cancelled()
    }

    fn holds(&self, slot: &HoldId) -> (u32, bool) {
        self.shared.holds().state(slot)
    }

    fn supersede(&self, slot: &HoldId) {
        self.shared.give_backs().supersede(slot);
    }

    fn lose(&self, slot: &HoldId) {
        if let Some(stale) = self.shared.holds().remove(slot) {
            self.shared.report_lost(self.subject(), &stale, None);
        }
    }

    fn found_lost(&self, holding: &Holding) -> Error {
        Target::found_lost(self, holding)
    }

    fn give_back(&self, undo: Undo) {
        Target::give_back(self, undo);
    }

    fn give_back_all(&self, undos: Vec<(&Subject, Undo)>) {
        self.shared.give_back_all(undos);
    }

    fn give_back_later(&self, undo: Undo) {
        self.shared.give_back_later(self.subject(), undo);
    }
}
