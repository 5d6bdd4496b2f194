//! Cancelling waits: a `Cancel` token ends a blocked acquisition from another thread, waking
//! its sleep rather than waiting for the holder's lease (every kind's: the conformance list);
//! a cancelled fair waiter leaves the queue; closing the client ends all of its waits and
//! refuses new calls.

use crate::support;

use std::sync::mpsc;
use std::time::Duration;

use redmutex::{Cancel, Error, LockClient};
use support::{Proxy, Server, await_calls, await_subscribers, channel, eventually};

/// The holders' lease: a waiter not woken by the cancel would sleep until about this long
/// after the holder's last renewal, well past `PATIENCE`.
const HOLD: Duration = Duration::from_secs(120);
/// How long a cancelled waiter may take to return: generous, and far below `HOLD` * 2 / 3.
const PATIENCE: Duration = Duration::from_secs(40);

fn holder(server: &Server) -> LockClient {
    server.builder().lease(HOLD).build().unwrap()
}

/// Runs `wait` in a thread, waits until `ready`, cancels `cancel` and returns the error the
/// wait ended with.
fn cancel_wait(
    wait: impl FnOnce() -> redmutex::Result<bool> + Send + 'static,
    ready: impl Fn() -> bool,
    cancel: impl FnOnce(),
) -> Error {
    let (sender, receiver) = mpsc::channel();
    let thread = std::thread::spawn(move || sender.send(wait()).unwrap());
    assert!(eventually(PATIENCE, ready), "the waiter never waited");
    cancel();
    let result = receiver
        .recv_timeout(PATIENCE)
        .expect("the cancel did not end the wait");
    thread.join().unwrap();
    match result {
        Ok(acquired) => panic!("the wait ended without an error (acquired: {acquired})"),
        Err(err) => err,
    }
}

#[test]
fn a_cancel_wakes_a_waiter_asleep_on_a_held_lock() {
    let server = Server::start();
    let _held = holder(&server).lock("c").lock().unwrap();
    let stop = Cancel::new();
    let lock = server.client().lock("c").with_cancel(&stop);
    let base = server.calls("evalsha");
    let err = cancel_wait(
        move || lock.lock().map(|_| true),
        // Subscribed and attempted after that: asleep until an unlock or the lease's end.
        || {
            await_subscribers(&server, &channel("c"), 1);
            await_calls(&server, base + 2);
            true
        },
        || stop.cancel(),
    );
    assert!(err.is_cancelled() && !err.is_closed(), "{err}");
    assert!(matches!(&err, Error::Cancelled { lock, .. } if lock == "c"));
    assert!(stop.is_cancelled());
}

#[test]
fn a_cancelled_fair_waiter_leaves_the_queue() {
    let server = Server::start();
    let _held = holder(&server).fair_lock("f").lock().unwrap();
    let stop = Cancel::new();
    let lock = server.client().fair_lock("f").with_cancel(&stop);
    let queue = "redisson_lock_queue:{f}";
    let err = cancel_wait(
        move || lock.lock().map(|_| true),
        || server.exists(queue),
        || stop.cancel(),
    );
    assert!(err.is_cancelled(), "{err}");
    assert!(!server.exists(queue), "the waiter kept its place");
}

#[test]
fn an_attempt_in_flight_that_took_the_lock_returns_it() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let client = LockClient::builder(&proxy.url())
        .response_timeout(Duration::from_secs(9))
        .build()
        .unwrap();
    let stop = Cancel::new();
    let lock = client.lock("inflight").with_cancel(&stop);
    // The attempt reaches Redis at once; its reply comes late.
    proxy.delay_replies(Duration::from_secs(2));
    let (sender, receiver) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let taken = lock.lock().map(|guard| {
            let held = guard.lock().is_held_by_current_thread();
            drop(guard);
            held
        });
        sender.send(taken).unwrap();
    });
    assert!(eventually(PATIENCE, || server.exists("inflight")));
    stop.cancel();
    proxy.delay_replies(Duration::ZERO);
    let taken = receiver
        .recv_timeout(PATIENCE)
        .expect("the call never returned");
    waiter.join().unwrap();
    assert!(
        taken.unwrap().unwrap(),
        "the guard came back, and held the lock"
    );
    assert!(!server.exists("inflight"), "dropping it gave the lock back");
}

#[test]
fn a_call_on_a_cancelled_token_sends_nothing() {
    let server = Server::start();
    let stop = Cancel::new();
    stop.cancel();
    let lock = server.client().lock("free").with_cancel(&stop);
    let before = server.calls("evalsha");
    let err = lock.try_lock().unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    assert_eq!(server.calls("evalsha"), before, "an attempt was made");
    let other = server.client().lock("free").try_lock().unwrap();
    assert!(
        other.is_some(),
        "the token belongs to the handle it was given"
    );
}

#[test]
fn closing_the_client_ends_its_waits_and_refuses_new_calls() {
    let server = Server::start();
    let held = holder(&server);
    let _lock = held.lock("a").lock().unwrap();
    held.leased_semaphore("s").try_set_permits(1).unwrap();
    let _permit = held.leased_semaphore("s").acquire().unwrap();
    let client = server.client();
    let mine = client.lock("mine").lock().unwrap();

    let (sender, receiver) = mpsc::channel();
    let waiters = [
        std::thread::spawn({
            let (lock, sender) = (client.lock("a"), sender.clone());
            move || sender.send(lock.lock().map(drop)).unwrap()
        }),
        std::thread::spawn({
            let (semaphore, sender) = (client.leased_semaphore("s"), sender.clone());
            move || sender.send(semaphore.acquire().map(drop)).unwrap()
        }),
    ];
    assert!(eventually(PATIENCE, || server.subscribers(&channel("a"))
        >= 1
        && server.subscribers("redisson_sc:{s}") >= 1));
    client.clone().close();
    for _ in waiters.iter() {
        let err = receiver.recv_timeout(PATIENCE).expect("a wait went on");
        let err = err.unwrap_err();
        assert!(err.is_cancelled() && err.is_closed(), "{err}");
    }
    for waiter in waiters {
        waiter.join().unwrap();
    }
    assert!(client.is_closed());
    let before = server.calls("evalsha");
    assert!(client.lock("free").try_lock().unwrap_err().is_closed());
    assert!(
        client
            .leased_semaphore("s")
            .add_permits(1)
            .unwrap_err()
            .is_closed()
    );
    assert_eq!(
        server.calls("evalsha"),
        before,
        "a closed client sent a call"
    );
    mine.unlock()
        .expect("a hold taken before closing is still given back");
    assert!(!server.exists("mine"));
}
