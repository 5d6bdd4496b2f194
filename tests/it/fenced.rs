//! The fenced lock: every acquisition, across threads and processes, takes a token greater
//! than all before it, from Redisson's counter beside the lock; Redlock refuses it.

use crate::support;

use std::time::Duration;

use redmutex::LockClient;
use support::{Server, spawn_worker};

const URL_VAR: &str = "REDMUTEX_TEST_URL";
const ROUNDS: usize = 500;
const THREADS: usize = 4;

/// Takes the lock `ROUNDS` times on each of `THREADS` threads; under the lock, appends the
/// guard's token to the list `tokens`, so the list is in acquisition order.
fn take_tokens(url: &str) {
    let client = LockClient::open(url).unwrap();
    std::thread::scope(|scope| {
        for _ in 0..THREADS {
            let lock = client.fenced_lock("fenced");
            let mut redis = redis::Client::open(url).unwrap().get_connection().unwrap();
            scope.spawn(move || {
                for _ in 0..ROUNDS {
                    let guard = lock.lock().unwrap();
                    let _: () = redis::cmd("RPUSH")
                        .arg("tokens")
                        .arg(guard.token())
                        .query(&mut redis)
                        .unwrap();
                    guard.unlock().unwrap();
                }
            });
        }
    });
}

#[test]
fn tokens_grow_in_acquisition_order_across_threads_and_processes() {
    let server = Server::start();
    let workers: Vec<_> = (0..2)
        .map(|_| spawn_worker("fenced::token_worker", &[(URL_VAR, server.url())]))
        .collect();
    for mut worker in workers {
        assert!(worker.wait().unwrap().success());
    }
    let tokens: Vec<u64> = redis::cmd("LRANGE")
        .arg("tokens")
        .arg(0)
        .arg(-1)
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(tokens.len(), 2 * THREADS * ROUNDS);
    for pair in tokens.windows(2) {
        assert!(
            pair[0] < pair[1],
            "token {} came after {}",
            pair[1],
            pair[0]
        );
    }
    // Redisson's layout: the counter beside the lock holds the last token issued.
    let last: u64 = redis::cmd("GET")
        .arg("redisson_lock_token:{fenced}")
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(Some(&last), tokens.last());
}

/// One process of `tokens_grow_in_acquisition_order_across_threads_and_processes`.
#[test]
#[ignore = "run as a child process by tokens_grow_in_acquisition_order_across_threads_and_processes"]
fn token_worker() {
    take_tokens(&std::env::var(URL_VAR).expect("started by the parent test"));
}

#[test]
fn re_entries_take_tokens_too_and_a_new_client_continues_the_count() {
    let server = Server::start();
    let lock = server.client().fenced_lock("nested");
    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    assert!(inner.token() > outer.token());
    assert_eq!(lock.hold_count().unwrap(), 2, "a fenced lock is reentrant");
    let last = inner.token();
    drop(inner);
    drop(outer);
    let guard = server.client().fenced_lock("nested").lock().unwrap();
    assert!(guard.token() > last);
}

#[test]
fn redlock_refuses_a_fenced_lock() {
    let servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls: Vec<String> = servers.iter().map(Server::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let client = LockClient::redlock(&urls).build().unwrap();
    let lock = client.fenced_lock("fenced");
    let err = lock.try_lock().map(drop).unwrap_err();
    assert!(err.is_unsupported(), "{err}");
    let err = lock
        .try_lock_for(Duration::from_millis(10))
        .map(drop)
        .unwrap_err();
    assert!(err.is_unsupported(), "{err}");
    for server in &servers {
        let keys: i64 = redis::cmd("DBSIZE").query(&mut server.conn()).unwrap();
        assert_eq!(keys, 0, "nothing written");
    }
}
