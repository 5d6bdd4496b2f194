//! Sleeps between acquisition attempts: exponential, jittered, and never past a bound.

use std::time::Duration;

use rand::RngExt;

/// Exponential backoff with "equal jitter": each delay is drawn from `[d/2, d]` where `d`
/// doubles from `base` up to `cap`.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
    cap: Duration,
}

impl Backoff {
    pub fn new(base: Duration, cap: Duration) -> Self {
        Backoff { next: base, cap }
    }

    /// The next delay, cut to `bound` (the lock's remaining lease, the caller's deadline).
    pub fn next_delay(&mut self, bound: Option<Duration>) -> Duration {
        let full = self.next;
        self.next = (self.next * 2).min(self.cap);
        let jittered = rand::rng().random_range(full / 2..=full);
        bound.map_or(jittered, |bound| jittered.min(bound))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn doubles_up_to_the_cap_with_jitter_in_the_upper_half() {
        let mut backoff = Backoff::new(4 * MS, 32 * MS);
        for full in [4, 8, 16, 32, 32, 32] {
            let delay = backoff.next_delay(None);
            assert!(
                delay >= full * MS / 2 && delay <= full * MS,
                "{delay:?} vs {full} ms"
            );
        }
    }

    #[test]
    fn never_sleeps_past_the_bound() {
        let mut backoff = Backoff::new(100 * MS, 100 * MS);
        for _ in 0..100 {
            assert!(backoff.next_delay(Some(3 * MS)) <= 3 * MS);
        }
        assert_eq!(backoff.next_delay(Some(Duration::ZERO)), Duration::ZERO);
    }

    #[test]
    fn jitter_spreads_the_delays() {
        let mut delays: Vec<_> = (0..50)
            .map(|_| Backoff::new(100 * MS, 100 * MS).next_delay(None))
            .collect();
        delays.dedup();
        assert!(delays.len() > 1, "50 draws all equal: no jitter");
    }
}
