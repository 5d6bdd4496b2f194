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

/// A timeout whose end the clock cannot hold (`Duration::MAX`) sets no deadline, as in
/// `lock_api`: every `try_*_for` of every kind takes a free lock at once.
#[test]
fn a_timeout_beyond_the_clock_takes_a_free_lock_of_every_kind() {
    let server = Server::start();
    let client = server.client();
    let (forever, lease) = (Duration::MAX, Duration::from_secs(30));
    let lock = client.lock("reentrant");
    lock.try_lock_for(forever)
        .unwrap()
        .expect("free")
        .unlock()
        .unwrap();
    (lock.try_lock_with_lease_for(forever, lease).unwrap())
        .expect("free")
        .unlock()
        .unwrap();
    let fenced = client.fenced_lock("fenced");
    fenced
        .try_lock_for(forever)
        .unwrap()
        .expect("free")
        .unlock()
        .unwrap();
    let fair = client.fair_lock("fair");
    fair.try_lock_for(forever)
        .unwrap()
        .expect("free")
        .unlock()
        .unwrap();
    let read_write = client.read_write_lock("read-write");
    (read_write.read().try_lock_for(forever).unwrap())
        .expect("free")
        .unlock()
        .unwrap();
    (read_write.write().try_lock_for(forever).unwrap())
        .expect("free")
        .unlock()
        .unwrap();
    let token = client.token_lock("token");
    token
        .try_lock_for(forever)
        .unwrap()
        .expect("free")
        .unlock()
        .unwrap();
    let semaphore = client.leased_semaphore("semaphore");
    semaphore.try_set_permits(1).unwrap();
    (semaphore.try_acquire_for(forever).unwrap())
        .expect("free")
        .release()
        .unwrap();
    let election = client.election("election");
    (election.try_campaign_for(forever).unwrap())
        .expect("nobody leads")
        .resign()
        .unwrap();
}

/// The same on a lock another client holds: the call waits, without a deadline, until
/// the holder releases it from another thread.
#[test]
fn a_timeout_beyond_the_clock_waits_until_the_holder_releases() {
    let server = Server::start();
    let holder = server.client().lock("held");
    let waiter = server.client().lock("held");
    let released = Arc::new(AtomicBool::new(false));
    let (held_tx, held) = std::sync::mpsc::channel();
    let (release, release_rx) = std::sync::mpsc::channel::<()>();

    let set = released.clone();
    let holding = std::thread::spawn(move || {
        let guard = holder.lock().unwrap();
        held_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        set.store(true, Ordering::SeqCst);
        guard.unlock()
    });
    held.recv().unwrap();
    let base = server.calls("evalsha");
    let waiting = std::thread::spawn(move || {
        let guard = waiter.try_lock_for(Duration::MAX).unwrap()?;
        let order_kept = released.load(Ordering::SeqCst);
        guard.unlock().unwrap();
        Some(order_kept)
    });
    // The waiter is waiting once it has subscribed and made its attempt after that.
    await_subscribers(&server, &channel("held"), 1);
    await_calls(&server, base + 2);
    release.send(()).unwrap();
    holding.join().unwrap().unwrap();
    let order_kept = waiting.join().unwrap().expect("woken by the release");
    assert!(order_kept, "the waiter got the lock before the release");
}

/// Every pooled connection (one) busy with another thread's call for longer than the
/// connect timeout: a call with time left waits for the connection within its deadline,
/// instead of failing as the pool's wait for a connection ends; a call with no time left
/// still says the pool is busy.
#[test]
fn a_call_with_time_left_waits_out_a_busy_pool() {
    let server = Server::start();
    let proxy = support::Proxy::start(server.port());
    let client = redmutex::LockClient::builder(&proxy.url())
        .pool_size(1)
        .connect_timeout(Duration::from_millis(300))
        .response_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    // The one connection is open and the scripts loaded: only the replies will be slow.
    drop(client.lock("warm").lock().unwrap());
    proxy.delay_replies(Duration::from_secs(2));
    let before = server.calls("evalsha");
    let slow = std::thread::spawn({
        let lock = client.lock("slow");
        move || lock.lock().map(drop)
    });
    // The slow call holds the connection until its reply comes.
    await_calls(&server, before + 1);
    let err = client.lock("other").try_lock().map(drop).unwrap_err();
    assert!(err.is_connection(), "no time left: {err}");
    let taken = client.lock("other").try_lock_for(Duration::from_secs(60));
    proxy.delay_replies(Duration::ZERO);
    assert!(matches!(taken, Ok(Some(_))), "{taken:?}");
    slow.join().unwrap().unwrap();
}
