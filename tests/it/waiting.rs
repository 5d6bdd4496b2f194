//! Waiting: one attempt for try_lock, deadlines kept, and the waiter gets the lock after a
//! release.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use support::{Server, await_calls, await_subscribers, channel};

#[test]
fn try_lock_on_a_busy_lock_makes_one_attempt_and_returns_none() {
    let server = Server::start();
    let _held = server.client().lock("busy").lock().unwrap();
    let lock = server.client().lock("busy");
    let before = server.calls("evalsha");
    assert!(lock.try_lock().unwrap().is_none());
    assert_eq!(server.calls("evalsha"), before + 1);
    let past = Instant::now() - Duration::from_millis(1);
    assert!(lock.try_lock_until(past).unwrap().is_none());
    assert_eq!(server.calls("evalsha"), before + 2);
}

#[test]
fn try_lock_for_waits_out_its_timeout() {
    let server = Server::start();
    let _held = server.client().lock("busy").lock().unwrap();
    let lock = server.client().lock("busy");
    let started = Instant::now();
    assert!(
        lock.try_lock_for(Duration::from_millis(200))
            .unwrap()
            .is_none()
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(200),
        "gave up after {waited:?}"
    );
    assert!(waited < Duration::from_secs(10), "overslept: {waited:?}");
}

#[test]
fn lock_past_max_wait_is_a_timeout_error_with_context() {
    let server = Server::start();
    let _held = server.client().lock("busy").lock().unwrap();
    let client = server
        .builder()
        .max_wait(Duration::from_millis(100))
        .build()
        .unwrap();
    let err = client.lock("busy").lock().unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert_eq!(err.lock_name(), Some("busy"));
    match err {
        redmutex::Error::Timeout { waited, .. } => assert!(waited >= Duration::from_millis(100)),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_waiter_gets_the_lock_after_the_holder_releases() {
    let server = Server::start();
    let long = Duration::from_secs(60);
    let holder = server
        .builder()
        .lease(long)
        .build()
        .unwrap()
        .lock("handoff");
    let waiter = server
        .builder()
        .lease(long)
        .build()
        .unwrap()
        .lock("handoff");
    let guard = holder.lock().unwrap();
    let base = server.calls("evalsha");
    let released = Arc::new(AtomicBool::new(false));

    let seen = released.clone();
    let thread = std::thread::spawn(move || {
        // Bounded well below the holder's 60 s lease: only the unlock message lets it in.
        let guard = waiter.try_lock_for(Duration::from_secs(30)).unwrap()?;
        let order_kept = seen.load(Ordering::SeqCst);
        guard.unlock().unwrap();
        Some(order_kept)
    });
    // The waiter is waiting once it has subscribed and made its attempt after that.
    await_subscribers(&server, &channel("handoff"), 1);
    await_calls(&server, base + 2);
    released.store(true, Ordering::SeqCst);
    guard.unlock().unwrap();
    let order_kept = thread.join().unwrap().expect("woken by the unlock");
    assert!(order_kept, "the waiter got the lock before the release");
}

#[test]
fn a_timeout_beyond_the_clock_is_an_invalid_argument() {
    let server = Server::start();
    let err = server
        .client()
        .lock("x")
        .try_lock_for(Duration::MAX)
        .unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
}
