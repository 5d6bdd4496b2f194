//! The fair lock: first come, first served across threads and processes, in Redisson's
//! `RFairLock` layout; a waiter that gives up leaves the queue, and one that crashed stops
//! holding it up once its place runs out.

use crate::support;

use std::time::Duration;

use redmutex::LockClient;
use support::{Proxy, Server, eventually, spawn_worker};

const URL_VAR: &str = "REDMUTEX_TEST_URL";
const WAITERS_VAR: &str = "REDMUTEX_TEST_WAITERS";
const NAME: &str = "fair";
const QUEUE: &str = "redisson_lock_queue:{fair}";
const TIMEOUTS: &str = "redisson_lock_timeout:{fair}";
const ALIVE: &str = "redisson_lock_timeout:{fair}:redmutex_alive";
const NO_HANG: Duration = Duration::from_secs(60);

fn queued(server: &Server) -> usize {
    redis::cmd("LLEN")
        .arg(QUEUE)
        .query(&mut server.conn())
        .unwrap()
}

#[test]
fn eight_waiters_in_four_processes_take_the_lock_in_the_order_they_came() {
    let server = Server::start();
    let holder = server.client().fair_lock(NAME);
    let guard = holder.lock().unwrap();
    // Waiter k queues once k waiters are queued: 0 and 4 in the first process, 1 and 5 in
    // the second, and so on, so that the order crosses processes at every step.
    let workers: Vec<_> = (0..4)
        .map(|p| {
            let waiters = format!("{},{}", p, p + 4);
            spawn_worker(
                "fair::fair_worker",
                &[(URL_VAR, server.url()), (WAITERS_VAR, waiters)],
            )
        })
        .collect();
    assert!(
        eventually(NO_HANG, || queued(&server) == 8),
        "queued: {}",
        queued(&server)
    );
    guard.unlock().unwrap();
    for mut worker in workers {
        assert!(worker.wait().unwrap().success());
    }
    let order: Vec<usize> = redis::cmd("LRANGE")
        .arg("order")
        .arg(0)
        .arg(-1)
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(order, (0..8).collect::<Vec<_>>());
    assert_eq!(queued(&server), 0);
    assert!(!server.exists(TIMEOUTS), "places left behind");
    assert!(!server.exists(ALIVE), "waiters left behind");
}

/// The waiters of one process of the test above.
#[test]
#[ignore = "run as a child process by eight_waiters_in_four_processes_take_the_lock_in_the_order_they_came"]
fn fair_worker() {
    let url = std::env::var(URL_VAR).expect("started by the parent test");
    let waiters: Vec<usize> = std::env::var(WAITERS_VAR)
        .unwrap()
        .split(',')
        .map(|k| k.parse().unwrap())
        .collect();
    let client = LockClient::open(&url).unwrap();
    std::thread::scope(|scope| {
        for k in waiters {
            let (client, url) = (&client, &url);
            scope.spawn(move || {
                let mut redis = redis::Client::open(url.as_str())
                    .unwrap()
                    .get_connection()
                    .unwrap();
                let queued = |redis: &mut redis::Connection| {
                    redis::cmd("LLEN").arg(QUEUE).query::<usize>(redis).unwrap()
                };
                assert!(eventually(NO_HANG, || queued(&mut redis) == k));
                let guard = client.fair_lock(NAME).lock().unwrap();
                let _: () = redis::cmd("RPUSH")
                    .arg("order")
                    .arg(k)
                    .query(&mut redis)
                    .unwrap();
                guard.unlock().unwrap();
            });
        }
    });
}

#[test]
fn a_waiter_that_gives_up_leaves_the_queue_at_once() {
    let server = Server::start();
    let guard = server.client().fair_lock(NAME).lock().unwrap();
    let waiter = server.client().fair_lock(NAME);
    assert!(waiter.try_lock().unwrap().is_none());
    assert_eq!(queued(&server), 0, "a try left its place behind");
    let taken = waiter.try_lock_for(Duration::from_millis(300)).unwrap();
    assert!(taken.is_none());
    assert_eq!(queued(&server), 0, "a waiter left its place behind");
    assert!(!server.exists(TIMEOUTS));
    assert!(!server.exists(ALIVE));
    drop(guard);
    assert!(waiter.try_lock().unwrap().is_some());
}

#[test]
fn force_unlock_wakes_the_head_of_the_queue() {
    let server = Server::start();
    let _held = server.client().fair_lock(NAME).lock().unwrap();
    // Retries and a place far beyond the test: only a message wakes this waiter in time.
    let client = server
        .builder()
        .retry_base(Duration::from_secs(300))
        .retry_cap(Duration::from_secs(600))
        .fair_queue_wait(Duration::from_secs(3600))
        .build()
        .unwrap();
    let waiter = client.fair_lock(NAME);
    let (taken, got) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let guard = waiter.try_lock_for(NO_HANG * 10).unwrap();
        let _ = taken.send(guard.map(|guard| guard.unlock()).is_some());
    });
    assert!(eventually(NO_HANG, || queued(&server) == 1
        && server.channels("redisson_lock__channel:{fair}:*") == 1));
    assert!(server.client().fair_lock(NAME).force_unlock().unwrap());
    assert_eq!(
        got.recv_timeout(NO_HANG),
        Ok(true),
        "the head was not woken"
    );
    assert_eq!(queued(&server), 0);
}

#[test]
fn a_reentry_that_finds_its_hold_lost_leaves_the_queue() {
    let server = Server::start();
    let lock = server.client().fair_lock(NAME);
    let _lost = lock.lock().unwrap();
    // The hold vanishes and another owner takes the lock: the re-entry's script finds it
    // busy and queues this thread, then the re-entry reports the loss.
    let _: () = redis::cmd("DEL")
        .arg(NAME)
        .query(&mut server.conn())
        .unwrap();
    let _other = server.client().fair_lock(NAME).lock().unwrap();
    let err = lock.lock().unwrap_err();
    assert!(err.is_lost(), "{err}");
    assert_eq!(queued(&server), 0, "the failed re-entry kept its place");
    assert!(!server.exists(TIMEOUTS));
}

#[test]
fn a_waiter_whose_reply_was_lost_leaves_the_queue() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let _held = server.client().fair_lock(NAME).lock().unwrap();
    let client = LockClient::builder(&proxy.url())
        .connect_timeout(Duration::from_secs(10))
        .response_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let waiter = client.fair_lock(NAME);
    assert!(waiter.is_locked().unwrap(), "through the proxy");
    // The attempt runs, queues the waiter, and its reply comes after the response timeout:
    // the call fails, and the waiter must not stay in the queue.
    proxy.delay_replies(Duration::from_secs(2));
    let err = waiter.try_lock_for(NO_HANG).unwrap_err();
    assert!(err.is_timeout() || err.is_connection(), "{err}");
    proxy.delay_replies(Duration::ZERO);
    assert!(
        eventually(Duration::from_secs(20), || queued(&server) == 0),
        "the failed waiter kept its place: {}",
        queued(&server)
    );
}

#[test]
fn a_crashed_waiter_holds_the_queue_up_until_its_place_runs_out() {
    let server = Server::start();
    let wait = Duration::from_secs(1);
    let guard = server.client().fair_lock(NAME).lock().unwrap();
    // A waiter in another process, queued first, then killed.
    let mut crashed = spawn_worker(
        "fair::fair_worker",
        &[(URL_VAR, server.url()), (WAITERS_VAR, "0".into())],
    );
    assert!(eventually(NO_HANG, || queued(&server) == 1));
    let client = server.builder().fair_queue_wait(wait).build().unwrap();
    let (taken, got) = std::sync::mpsc::channel();
    let lock = client.fair_lock(NAME);
    std::thread::spawn(move || {
        let guard = lock.try_lock_for(NO_HANG * 2).unwrap();
        let _ = taken.send(guard.map(|guard| guard.unlock()).is_some());
    });
    assert!(eventually(NO_HANG, || queued(&server) == 2));
    crashed.kill().unwrap();
    crashed.wait().unwrap();
    guard.unlock().unwrap();
    // The dead head is woken by the release and never answers: the next waiter gets in once
    // the dead one's place runs out (its process waited with the default 5 s).
    assert_eq!(got.recv_timeout(NO_HANG), Ok(true));
    assert_eq!(queued(&server), 0);
}

#[test]
fn a_fair_lock_is_reentrant_and_shares_its_key_with_the_reentrant_lock() {
    let server = Server::start();
    let client = server.client();
    let fair = client.fair_lock(NAME);
    let outer = fair.lock().unwrap();
    let inner = fair.lock().unwrap();
    assert_eq!(fair.hold_count().unwrap(), 2);
    // The same hash: a plain lock of another client on the name is busy.
    assert!(server.client().lock(NAME).try_lock().unwrap().is_none());
    drop(inner);
    drop(outer);
    assert!(!server.exists(NAME));
}

#[test]
fn a_fair_lock_on_redlock_is_unsupported() {
    let servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls: Vec<String> = servers.iter().map(Server::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let client = LockClient::redlock(&urls).build().unwrap();
    let err = client.fair_lock(NAME).try_lock().unwrap_err();
    assert!(err.is_unsupported(), "{err}");
    assert!(servers.iter().all(|server| !server.exists(QUEUE)));
}
