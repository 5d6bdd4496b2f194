//! A process forked from one that has a client must not act as the same owner: its calls
//! are refused with a typed error and leave the parent's holds alone.

mod support;

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
