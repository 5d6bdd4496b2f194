//! A process forked from one that has a client must not act as the same owner: its calls
//! are refused with a typed error and leave the parent's holds alone.

use crate::support;

use redmutex::Error;
use support::Server;

#[test]
#[cfg(unix)]
fn fork_a_child_is_refused_and_the_parents_hold_is_left_alone() {
    let server = Server::start();
    let client = server.client();
    let lock = client.lock("forked");
    let guard = lock.lock().unwrap();

    // SAFETY: the child only calls into the client (which refuses before taking any lock
    // or touching any socket) and then leaves with `_exit`, running no destructors.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let refused = |result: redmutex::Result<()>| matches!(result, Err(Error::Forked { .. }));
        let mut code = 0;
        if !refused(lock.try_lock().map(drop)) {
            code |= 1;
        }
        if !refused(lock.hold_count().map(drop)) {
            code |= 2;
        }
        if !refused(guard.unlock()) {
            code |= 4;
        }
        if !refused(client.lock("other").lock().map(drop)) {
            code |= 8;
        }
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "the child did not exit: {status}");
    assert_eq!(
        libc::WEXITSTATUS(status),
        0,
        "bit set = a call the child was let make"
    );

    assert_eq!(
        lock.hold_count().unwrap(),
        1,
        "the parent still holds its lock"
    );
    let mut redis = server.conn();
    let other: bool = redis::cmd("EXISTS").arg("other").query(&mut redis).unwrap();
    assert!(!other, "the child took nothing");
    guard.unlock().unwrap();
}

/// Forks while the client's threads are busy: watchdogs renewing short leases, the
/// subscriber probing every 10 ms, another client's thread waiting. Each child drops its
/// guards and the client, as a return from `main` would, and must then be able to exit.
#[test]
#[cfg(unix)]
fn fork_a_child_that_drops_the_client_exits_every_time() {
    use std::time::{Duration, Instant};

    let server = Server::start();
    // Short enough that the watchdogs renew all through the forks, long enough that a busy
    // machine's pauses do not end a lease.
    let lease = Duration::from_millis(1500);
    let client = server
        .builder()
        .lease(lease)
        .response_timeout(Duration::from_millis(300))
        .ping_interval(Duration::from_millis(10))
        .build()
        .unwrap();
    let guards: Vec<_> = (0..8)
        .map(|i| client.lock(format!("renewed:{i}")).lock().unwrap())
        .collect();
    let token_guard = client.token_lock("renewed:token").lock().unwrap();
    // A wait of this client's, so that its subscriber runs, and a waiter of another client.
    let other = server.client();
    let busy = other.lock("busy");
    let held = busy.lock().unwrap();
    assert!(client.lock("busy").try_lock_for(lease).unwrap().is_none());
    let waiter = std::thread::spawn(move || other.lock("renewed:0").lock().map(drop));

    for round in 0..200 {
        // SAFETY: the child runs only this crate's destructors (which must not block) and
        // then leaves with `_exit`, running no other process-wide cleanup.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            drop(token_guard);
            drop(guards);
            drop(client);
            unsafe { libc::_exit(0) };
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut status = 0;
        let exited = loop {
            // SAFETY: polls the child forked above.
            match unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } {
                0 if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                0 => break false,
                done => break done == pid,
            }
        };
        if !exited {
            // SAFETY: the child forked above, hung.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            unsafe { libc::waitpid(pid, &mut status, 0) };
            panic!("round {round}: the child hung on its way out");
        }
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    }
    assert!(
        guards.iter().all(|guard| !guard.is_lost()),
        "{:?} {:?}",
        client.stats(),
        guards.iter().map(|g| g.health()).collect::<Vec<_>>()
    );
    assert!(!token_guard.is_lost());
    drop(held);
    drop((guards, token_guard));
    waiter.join().unwrap().unwrap();
}
