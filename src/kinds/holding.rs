//! One holding of a lock, shared by its guards, its watchdog and its releases: whether it
//! was lost and until when it surely lasts.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::base::health::Health;
use crate::topology::quorum::validity_end;

/// What is run once when a holding is reported lost (see [`Holding::on_lost`]).
pub(crate) type LostHook = Box<dyn FnOnce() + Send>;

/// One uninterrupted holding of a lock: from the first hold to the last release, or until it
/// is found lost. Guards keep it to tell whether they still belong.
pub(crate) struct Holding {
    lost: AtomicBool,
    /// The last renewal did not get through.
    uncertain: AtomicBool,
    valid_until: Mutex<Instant>,
    /// Held by the watchdog for a renewal round and by a release while it runs, so that a
    /// late renewal cannot put back a hold that the release just deleted.
    round: Mutex<()>,
    /// Taken to mark the loss, so that it is marked once.
    lost_wait: Mutex<()>,
    /// The waits of [`wait_lost`] on this holding, woken when it is marked lost.
    waits: Mutex<Vec<Weak<Wait>>>,
    /// Taken by the first report of the loss.
    lost_hook: Mutex<Option<LostHook>>,
}

impl Holding {
    pub fn new(valid_until: Instant) -> Self {
        Holding {
            lost: AtomicBool::new(false),
            uncertain: AtomicBool::new(false),
            valid_until: Mutex::new(valid_until),
            round: Mutex::new(()),
            lost_wait: Mutex::new(()),
            waits: Mutex::new(Vec::new()),
            lost_hook: Mutex::new(None),
        }
    }

    /// Whether the holding is lost: found gone, or its validity has run out by this
    /// process's clock, whatever a renewal on its way may still bring (a reply after the
    /// validity extends nothing).
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire) || Instant::now() >= self.valid_until()
    }

    /// Where the holding stands: lost (as [`is_lost`](Self::is_lost) says), uncertain (the
    /// last renewal did not get through), or held.
    pub fn health(&self) -> Health {
        if self.is_lost() {
            Health::Lost
        } else if self.uncertain.load(Ordering::Acquire) {
            Health::Uncertain
        } else {
            Health::Held
        }
    }

    /// The health last told to the callback: as [`health`](Self::health), except that a
    /// validity run out without a loss marked is still uncertain, since the loss is told
    /// when it is marked.
    pub fn told_health(&self) -> Health {
        if self.lost.load(Ordering::Acquire) {
            Health::Lost
        } else if self.uncertain.load(Ordering::Acquire) || Instant::now() >= self.valid_until() {
            Health::Uncertain
        } else {
            Health::Held
        }
    }

    /// Records whether the last renewal got through; returns what the health was before,
    /// when this changed it.
    pub fn set_uncertain(&self, uncertain: bool) -> Option<Health> {
        let before = self.told_health();
        self.uncertain.store(uncertain, Ordering::Release);
        let after = self.told_health();
        (before != after).then_some(before)
    }

    /// Marks the holding lost, waking [`wait_lost`]; true the first time,
    /// which runs `first` before the mark (a loss is counted before anyone can see it). A
    /// concurrent marker waits until `first` ran.
    pub fn mark_lost(&self, first: impl FnOnce()) -> bool {
        let marked = self.lost_wait.lock();
        if self.lost.load(Ordering::Acquire) {
            return false;
        }
        first();
        self.lost.store(true, Ordering::Release);
        drop(marked);
        self.wake_watchers();
        true
    }

    /// Has `hook` run once by whoever reports the holding lost, on that thread, after the
    /// client's callbacks; gives it back when the holding is marked lost already.
    pub fn on_lost(&self, hook: LostHook) -> Result<(), LostHook> {
        let mut kept = self.lost_hook.lock();
        // Marked before the lock is taken to take the hook: seen here, or the hook is kept
        // before it is looked for.
        if self.lost.load(Ordering::Acquire) {
            return Err(hook);
        }
        *kept = Some(hook);
        Ok(())
    }

    /// The hook of [`on_lost`](Self::on_lost), taken: for the one that marked the loss.
    pub fn take_lost_hook(&self) -> Option<LostHook> {
        self.lost_hook.lock().take()
    }

    /// Wakes the waits of [`wait_lost`] on this holding, to look again at the loss and
    /// their `done`.
    pub fn wake_watchers(&self) {
        let mut waits = self.waits.lock();
        waits.retain(|wait| match wait.upgrade() {
            Some(wait) => {
                // Under its lock, so that a wait between its check and its sleep is not missed.
                let _sleeping = wait.lock.lock();
                wait.cond.notify_all();
                true
            }
            None => false,
        });
    }

    /// Until when the lock is surely held, as of the last acquisition or renewal.
    pub fn valid_until(&self) -> Instant {
        *self.valid_until.lock()
    }

    /// Sets the validity to `until`, unless it has run out already: a holding lost by the
    /// clock stays lost.
    pub fn set_valid_until(&self, until: Instant) {
        let mut valid_until = self.valid_until.lock();
        if Instant::now() < *valid_until {
            *valid_until = until;
        }
    }

    /// Lowers the validity to `until` if that is sooner.
    pub fn shorten_to(&self, until: Instant) {
        let mut valid_until = self.valid_until.lock();
        *valid_until = (*valid_until).min(until);
    }

    /// Runs `f` with no renewal or release of this holding running at the same time.
    pub fn exclusively<T>(&self, f: impl FnOnce() -> T) -> T {
        let _round = self.round.lock();
        f()
    }

    /// Runs `round`, which sets the lease to `lease`, exclusively; where it reports that a
    /// quorum took the new lease before the validity ran out, the validity moves to match
    /// before any other round can run, so that a round that finished earlier cannot
    /// overwrite it with its own.
    pub fn lease_round<T>(&self, lease: Duration, round: impl FnOnce() -> (T, bool)) -> T {
        let _round = self.round.lock();
        let sent = Instant::now();
        let (result, taken) = round();
        if taken && !self.lost.load(Ordering::Acquire) {
            self.set_valid_until(validity_end(sent, lease).unwrap_or(sent));
        }
        result
    }
}

/// One wait of [`wait_lost`], woken by any of the holdings it waits on.
#[derive(Default)]
struct Wait {
    lock: Mutex<()>,
    cond: Condvar,
}

/// Waits until one of `holdings` is lost (marked so, or its validity ran out) or `done`
/// (checked again on every [`Holding::wake_watchers`]), at most `timeout`; whether one was
/// lost. Without holdings, nothing can be lost: `false` at once.
pub(crate) fn wait_lost(
    holdings: &[Arc<Holding>],
    timeout: Duration,
    done: impl Fn() -> bool,
) -> bool {
    let lost = || holdings.iter().any(|holding| holding.is_lost());
    let wait = Arc::new(Wait::default());
    for holding in holdings {
        let mut waits = holding.waits.lock();
        // The waits that ended since are dropped here, or at the next wake.
        waits.retain(|wait| wait.strong_count() > 0);
        waits.push(Arc::downgrade(&wait));
    }
    let deadline = Instant::now().checked_add(timeout);
    let mut sleeping = wait.lock.lock();
    while !lost() && !done() {
        let Some(soonest) = holdings.iter().map(|holding| holding.valid_until()).min() else {
            break;
        };
        // Woken when a validity ends, to look again: a renewal may have moved it.
        let until = deadline.map_or(soonest, |deadline| deadline.min(soonest));
        let timed_out = wait.cond.wait_until(&mut sleeping, until).timed_out();
        if timed_out && deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            break;
        }
    }
    drop(sleeping);
    lost()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn wait_lost_is_woken_by_the_loss_and_times_out_without_one() {
        let holding = Arc::new(Holding::new(Instant::now() + Duration::from_secs(100)));
        assert!(
            !wait_lost(
                std::slice::from_ref(&holding),
                Duration::from_millis(1),
                || false
            ),
            "not lost yet"
        );
        let marker = holding.clone();
        let thread = std::thread::spawn(move || marker.mark_lost(|| {}));
        // A bound far beyond any scheduling delay: only the loss ends this wait in time.
        assert!(wait_lost(
            std::slice::from_ref(&holding),
            Duration::from_secs(3600),
            || false
        ));
        assert!(thread.join().unwrap());
        assert!(
            wait_lost(&[holding], Duration::ZERO, || false),
            "stays lost"
        );
    }

    #[test]
    fn a_wait_on_several_holdings_is_woken_by_the_loss_of_any() {
        let far = Instant::now() + Duration::from_secs(100);
        let holdings = [Arc::new(Holding::new(far)), Arc::new(Holding::new(far))];
        let second = holdings[1].clone();
        let thread = std::thread::spawn(move || second.mark_lost(|| {}));
        // A bound far beyond any scheduling delay: only the second's loss ends it in time.
        assert!(wait_lost(&holdings, Duration::from_secs(3600), || false));
        assert!(thread.join().unwrap());
        assert!(!holdings[0].is_lost());
        assert_eq!(
            holdings[0].waits.lock().len(),
            1,
            "its wait is kept until the next"
        );
        assert!(!wait_lost(&holdings[..1], Duration::ZERO, || false));
        assert_eq!(holdings[0].waits.lock().len(), 1, "ended waits are dropped");
        assert!(!wait_lost(&[], Duration::from_secs(3600), || false));
    }

    #[test]
    fn a_lease_round_moves_the_validity_only_when_the_lease_was_taken() {
        let start = Instant::now() + Duration::from_secs(100);
        let holding = Holding::new(start);
        holding.lease_round(Duration::from_secs(5), || ((), false));
        assert_eq!(holding.valid_until(), start, "refused: left as it was");
        let before = Instant::now();
        holding.lease_round(Duration::from_secs(5), || ((), true));
        let until = holding.valid_until();
        assert!(until < start, "a shorter lease shortens the validity");
        assert!(
            until > before + Duration::from_secs(4),
            "less the drift only"
        );
        assert!(until <= Instant::now() + Duration::from_secs(5));
    }

    #[test]
    fn a_holding_is_lost_when_its_validity_ends_and_nothing_revives_it() {
        let holding = Arc::new(Holding::new(Instant::now() + Duration::from_millis(20)));
        assert!(!holding.is_lost());
        assert_eq!(holding.health(), Health::Held);
        // Woken by the end of the validity alone: nothing marks the loss.
        assert!(wait_lost(
            std::slice::from_ref(&holding),
            Duration::from_secs(3600),
            || false
        ));
        assert!(holding.is_lost());
        assert_eq!(holding.health(), Health::Lost);
        assert_eq!(holding.told_health(), Health::Uncertain, "not told yet");
        let later = Instant::now() + Duration::from_secs(100);
        holding.set_valid_until(later);
        holding.lease_round(Duration::from_secs(100), || ((), true));
        assert!(
            holding.valid_until() < later,
            "a renewal after the validity extends nothing"
        );
        assert!(holding.is_lost());
    }
}
