//! A candidate's own listener on an election: told when one of its campaigns wins, and once
//! when the leadership won ends.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::base::error::Subject;
use crate::base::health::Health;
use crate::kinds::holding::Holding;

/// What the listener of an [`Election`](crate::Election) handle
/// ([`with_listener`](crate::Election::with_listener)) is told about the leaderships its
/// campaigns win: each one's start, then, exactly once, its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeadershipEvent {
    /// A campaign won: this client leads with `epoch`. Told on the thread whose call won,
    /// before that call returns the [`Leadership`](crate::Leadership).
    Leading {
        /// The leadership's [epoch](crate::Leadership::epoch).
        epoch: u64,
    },
    /// The leadership of `epoch` ended.
    ///
    /// With `lost: false`, this client gave it up: it was
    /// [resigned](crate::Leadership::resign) or dropped (whether or not Redis could be
    /// told); told on the thread that resigned or dropped it.
    ///
    /// With `lost: true`, it was found lost: its key held another leader or nothing (a
    /// [forced resignation](crate::Election::force_resign), a key deleted, a lease that ran
    /// out), or renewals failed until its validity ended. Told on the client's watchdog
    /// thread when the watchdog found it (at once when its removal was announced), or on
    /// the thread whose resignation found it.
    NotLeading {
        /// The leadership's [epoch](crate::Leadership::epoch).
        epoch: u64,
        /// Whether it was found lost rather than given up.
        lost: bool,
    },
}

/// An election handle's listener.
pub(crate) type Listener = Arc<dyn Fn(&LeadershipEvent) + Send + Sync>;

/// Tells a listener of one leadership: its start when made, and its end once, by the first
/// report of its loss or, failing that, when dropped after the resignation.
pub(crate) struct Telling {
    end: Arc<End>,
    holding: Arc<Holding>,
}

/// The end of one leadership, to be told once.
struct End {
    listener: Listener,
    election: Subject,
    epoch: u64,
    told: AtomicBool,
}

impl Telling {
    /// Tells `listener` that the leadership `epoch` of `election`, held as `holding`, has
    /// begun, and has its loss told when it is reported.
    pub fn start(
        listener: &Listener,
        election: &Subject,
        epoch: u64,
        holding: &Arc<Holding>,
    ) -> Self {
        let end = Arc::new(End {
            listener: listener.clone(),
            election: election.clone(),
            epoch,
            told: AtomicBool::new(false),
        });
        end.tell(LeadershipEvent::Leading { epoch });
        let lost = end.clone();
        if holding.on_lost(Box::new(move || lost.ended(true))).is_err() {
            end.ended(true);
        }
        Telling {
            end,
            holding: holding.clone(),
        }
    }
}

impl Drop for Telling {
    /// The leadership was given up, unless it was found lost: a loss marked and not told
    /// yet (its finder is still on its way to the hook) is told as one here.
    fn drop(&mut self) {
        self.end.ended(self.holding.told_health() == Health::Lost);
    }
}

impl End {
    /// Tells the end, the first time.
    fn ended(&self, lost: bool) {
        if !self.told.swap(true, Ordering::AcqRel) {
            let epoch = self.epoch;
            self.tell(LeadershipEvent::NotLeading { epoch, lost });
        }
    }

    /// Calls the listener; a panic is caught and logged, so that it takes down neither
    /// the watchdog's thread nor a release.
    fn tell(&self, event: LeadershipEvent) {
        let listener = &self.listener;
        if std::panic::catch_unwind(AssertUnwindSafe(|| listener(&event))).is_err() {
            log::error!(
                "the leadership listener of {} panicked on {event:?}",
                self.election
            );
        }
    }
}
