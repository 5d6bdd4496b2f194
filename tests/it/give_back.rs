//! What an attempt whose reply was lost may have taken goes back before the call returns,
//! for every kind: the lock machine undoes it through the kind's undo, within a response
//! timeout of its own, even when the pool has no idle connection left.
//!
//! The proxy lets the attempt's command reach Redis and silences its connection from then
//! on, so the command runs and its reply never comes. The pool has one connection, which
//! the timed-out attempt spoils: the give-back needs a fresh one, and new connections open
//! slowly. A check through another
//! client, right after the call returned, finds the lock free; with the default 30 s lease
//! nothing else could have freed it in that time.
//!
//! A release that could not reach Redis is sent again in the background once it can, for
//! the locks, the token lock and leased permits alike.

use crate::support;

use std::time::Duration;

use redis::Script;
use redmutex::LockClient;
use support::{Proxy, Server};

fn sha(script: &str) -> Vec<u8> {
    Script::new(script).get_hash().as_bytes().to_vec()
}

/// How long the proxy holds back each reply once the attempt's reply is lost: far below the
/// response timeout, far above the moment the old give-back waited for a connection.
const SLOW_CONNECT: Duration = Duration::from_millis(200);

/// A client through `proxy` with one pooled connection and a short response timeout.
fn client_through(proxy: &Proxy) -> LockClient {
    LockClient::builder(&proxy.url())
        .pool_size(1)
        .response_timeout(Duration::from_secs(1))
        .build()
        .unwrap()
}

/// Runs `attempt` on a client whose command containing `needle` runs on Redis without a
/// reply; the attempt must fail, and `free` (on a client of its own, straight to the
/// server) must then find the lock free at once.
fn a_lost_reply_leaves_nothing(
    kind: &str,
    needle: &[u8],
    prepare: impl Fn(&LockClient),
    attempt: impl Fn(&LockClient) -> redmutex::Result<bool>,
    free: impl Fn(&LockClient) -> bool,
) {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let client = client_through(&proxy);
    let direct = server.client();
    prepare(&direct);
    proxy.silence_after(needle);
    // New connections open slowly: the give-back cannot count on one becoming free at once.
    proxy.delay_replies(SLOW_CONNECT);
    let result = attempt(&client);
    assert!(
        result.is_err(),
        "{kind}: the reply was lost, yet {result:?}"
    );
    assert!(
        free(&direct),
        "{kind}: what the attempt took is still held after it returned an error"
    );
}

#[test]
fn a_lost_reentrant_attempt_leaves_nothing_held() {
    let acquire = sha(include_str!("../../src/kinds/reentrant/acquire.lua"));
    a_lost_reply_leaves_nothing(
        "reentrant",
        &acquire,
        |_| {},
        |client| client.lock("l").try_lock().map(|g| g.is_some()),
        |direct| direct.lock("l").try_lock().unwrap().is_some(),
    );
}

#[test]
fn a_lost_fenced_attempt_leaves_nothing_held() {
    let fenced = sha(include_str!("../../src/kinds/fenced/fenced_acquire.lua"));
    a_lost_reply_leaves_nothing(
        "fenced",
        &fenced,
        |_| {},
        |client| client.fenced_lock("l").try_lock().map(|g| g.is_some()),
        |direct| direct.fenced_lock("l").try_lock().unwrap().is_some(),
    );
}

#[test]
fn a_lost_fair_attempt_leaves_nothing_held() {
    let fair = sha(include_str!("../../src/kinds/fair/fair_acquire.lua"));
    a_lost_reply_leaves_nothing(
        "fair",
        &fair,
        |_| {},
        |client| client.fair_lock("l").try_lock().map(|g| g.is_some()),
        |direct| direct.fair_lock("l").try_lock().unwrap().is_some(),
    );
}

#[test]
fn a_lost_read_attempt_leaves_nothing_held() {
    let read = sha(include_str!("../../src/kinds/read_write/read_acquire.lua"));
    a_lost_reply_leaves_nothing(
        "read",
        &read,
        |_| {},
        |client| {
            let lock = client.read_write_lock("l");
            lock.read().try_lock().map(|g| g.is_some())
        },
        |direct| {
            let lock = direct.read_write_lock("l");
            lock.write().try_lock().unwrap().is_some()
        },
    );
}

#[test]
fn a_lost_write_attempt_leaves_nothing_held() {
    let write = sha(include_str!("../../src/kinds/read_write/write_acquire.lua"));
    a_lost_reply_leaves_nothing(
        "write",
        &write,
        |_| {},
        |client| {
            let lock = client.read_write_lock("l");
            lock.write().try_lock().map(|g| g.is_some())
        },
        |direct| {
            let lock = direct.read_write_lock("l");
            lock.write().try_lock().unwrap().is_some()
        },
    );
}

#[test]
fn a_lost_token_attempt_leaves_nothing_held() {
    // A token attempt whose SET goes unanswered asks again on another connection whether
    // the key holds its token: every command naming the key goes unanswered here, the
    // give-back's too, which still runs.
    let token = "token-whose-replies-are-lost";
    a_lost_reply_leaves_nothing(
        "token",
        token.as_bytes(),
        |_| {},
        |client| client.token_lock(token).try_lock().map(|g| g.is_some()),
        |direct| direct.token_lock(token).try_lock().unwrap().is_some(),
    );
}

#[test]
fn a_lost_semaphore_attempt_leaves_nothing_held() {
    let permit = sha(include_str!(
        "../../src/kinds/permits/semaphore_acquire.lua"
    ));
    a_lost_reply_leaves_nothing(
        "semaphore",
        &permit,
        |direct| assert!(direct.leased_semaphore("s").try_set_permits(1).unwrap()),
        |client| {
            client
                .leased_semaphore("s")
                .try_acquire()
                .map(|p| p.is_some())
        },
        |direct| {
            direct
                .leased_semaphore("s")
                .try_acquire()
                .unwrap()
                .is_some()
        },
    );
}

#[test]
fn a_lost_election_attempt_leaves_nothing_held() {
    let campaign = sha(concat!(
        include_str!("../../src/transport/scripts/shape.lua"),
        include_str!("../../src/kinds/election/election_acquire.lua")
    ));
    a_lost_reply_leaves_nothing(
        "election",
        &campaign,
        |_| {},
        |client| client.election("e").try_campaign().map(|l| l.is_some()),
        |direct| {
            let won = direct.election("e").try_campaign().unwrap();
            won.is_some() && direct.election("e").leader().unwrap().is_some()
        },
    );
}

/// A release that cannot reach Redis (every connection cut, new ones refused) fails, and
/// the client sends it again in the background once Redis is back: the lock is freed then,
/// not when its lease ends (ten minutes here, with no watchdog). So for the reentrant lock,
/// the write lock, the token lock and a leased permit; a counted permit is given back by
/// its acquisition's undo (see `counting_semaphore.rs`).
#[test]
fn a_release_that_could_not_reach_redis_is_sent_again_once_it_can() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let client = client_through(&proxy);
    let lease = Duration::from_secs(600);
    let lock = client.lock("unsent:reentrant");
    let write = client.read_write_lock("unsent:rw");
    let token = client.token_lock("unsent:token");
    let semaphore = client.leased_semaphore("unsent:permits");
    assert!(semaphore.try_set_permits(1).unwrap());
    let held = lock.lock_with_lease(lease).unwrap();
    let written = write.write().lock_with_lease(lease).unwrap();
    let tokened = token.lock_with_lease(lease).unwrap();
    let permit = semaphore.acquire_with_lease(lease).unwrap();

    proxy.cut_all_and_refuse();
    for (what, result) in [
        ("reentrant", held.unlock()),
        ("write", written.unlock()),
        ("token", tokened.unlock()),
        ("permit", permit.release()),
    ] {
        let err = result.expect_err(what);
        assert!(err.is_connection(), "{what}: {err:#}");
    }
    let direct = LockClient::open(&server.url()).unwrap();
    assert!(direct.lock("unsent:reentrant").is_locked().unwrap());
    proxy.resume();
    let freed = support::eventually(Duration::from_secs(60), || {
        !direct.lock("unsent:reentrant").is_locked().unwrap()
            && !direct
                .read_write_lock("unsent:rw")
                .write()
                .is_locked()
                .unwrap()
            && !direct.token_lock("unsent:token").is_locked().unwrap()
            && direct
                .leased_semaphore("unsent:permits")
                .available_permits()
                .unwrap()
                == 1
    });
    assert!(freed, "the releases were not sent again");
    // The thread takes its lock again as if nothing had happened.
    let again = lock.try_lock().unwrap().expect("free");
    assert_eq!(lock.hold_count().unwrap(), 1);
    again.unlock().unwrap();
}
