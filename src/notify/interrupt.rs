//! Pauses deep inside a call that a cancel or the client's closing cuts short: the lock
//! machine names the tokens of the call on its thread, and a pause further down (a cluster
//! slot being migrated, a slot without a primary) ends as soon as one of them is cancelled.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use crate::notify::cancel::Cancel;
use crate::notify::hub::Signal;

thread_local! {
    /// The tokens of the call under way on this thread.
    static TOKENS: RefCell<Vec<Cancel>> = const { RefCell::new(Vec::new()) };
}

/// Runs `call` with every [`pause`] in it ended by a cancel of any of `tokens`.
pub(crate) fn with<R>(tokens: Vec<Cancel>, call: impl FnOnce() -> R) -> R {
    struct Restore(Vec<Cancel>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = std::mem::take(&mut self.0);
            TOKENS.with(|tokens| *tokens.borrow_mut() = outer);
        }
    }
    let outer = TOKENS.with(|current| current.replace(tokens));
    let _restore = Restore(outer);
    call()
}

/// Sleeps `duration`, or less when a token of the calling thread's call is cancelled;
/// whether one is.
pub(crate) fn pause(duration: Duration) -> bool {
    let tokens = TOKENS.with(|tokens| tokens.borrow().clone());
    if tokens.is_empty() {
        std::thread::sleep(duration);
        return false;
    }
    let signal = Arc::new(Signal::default());
    let _registered: Vec<_> = tokens.iter().map(|token| token.register(&signal)).collect();
    signal.wait(duration);
    tokens.iter().any(Cancel::is_cancelled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_cancel_ends_a_pause_of_its_call_only() {
        let token = Cancel::new();
        let cancel = token.clone();
        let started = Instant::now();
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            cancel.cancel();
        });
        assert!(with(vec![token.clone()], || pause(Duration::from_secs(60))));
        assert!(started.elapsed() < Duration::from_secs(60));
        canceller.join().unwrap();
        // Outside the call, the token is not this thread's any more.
        assert!(!pause(Duration::from_millis(1)));
    }
}
