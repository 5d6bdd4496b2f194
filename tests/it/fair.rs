//! The fair lock: first come, first served across threads and processes, in Redisson's
//! `RFairLock` layout; a waiter that gives up leaves the queue, and one that crashed stops
//! holding it up once its place runs out.

use crate::support;

use std::time::Duration;

use redmutex::LockClient;
use support::{Proxy, Server, eventually, spawn_worker};

const URL_VAR: &str = "REDMUTEX_TEST_URL";
const WAITERS_VAR: &str = "REDMUTEX_TEST_WAITERS";
/// How long the worker's waiters keep their places without coming back, in milliseconds;
/// the client's default without it.
const QUEUE_WAIT_VAR: &str = "REDMUTEX_TEST_QUEUE_WAIT_MS";
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
    let mut builder = LockClient::builder(&url);
    if let Ok(ms) = std::env::var(QUEUE_WAIT_VAR) {
        builder = builder.fair_queue_wait(Duration::from_millis(ms.parse().unwrap()));
    }
    let client = builder.build().unwrap();
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

/// A waiter behind a crashed head of the queue, on a free lock: the next attempt of anyone,
/// which drops the dead head, tells it that its turn has come. Nobody else would: the
/// release went to the dead waiter while its place lasted, and the waiter's own next
/// attempt is minutes away.
#[test]
fn an_attempt_that_drops_a_dead_head_wakes_the_waiter_behind_it() {
    let server = Server::start();
    // Held for two minutes; its release wakes the head of the queue, and grants nothing.
    let holder = server.builder().direct_handoff(false).build().unwrap();
    let guard = holder.fair_lock(NAME).lock_with_lease(2 * NO_HANG).unwrap();
    // The head: a waiter in another process that keeps its place for 10 s after each
    // attempt, then killed.
    let mut crashed = spawn_worker(
        "fair::fair_worker",
        &[
            (URL_VAR, server.url()),
            (WAITERS_VAR, "0".into()),
            (QUEUE_WAIT_VAR, "10000".into()),
        ],
    );
    assert!(eventually(NO_HANG, || queued(&server) == 1));
    let dead: String = redis::cmd("LINDEX")
        .arg(QUEUE)
        .arg(0)
        .query(&mut server.conn())
        .unwrap();
    // Behind it, a waiter that would come back on its own only after a minute, and keeps
    // its place for ten.
    let client = server
        .builder()
        .retry_base(NO_HANG)
        .retry_cap(NO_HANG)
        .fair_queue_wait(NO_HANG * 10)
        .build()
        .unwrap();
    let lock = client.fair_lock(NAME);
    let (taken, got) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let guard = lock.try_lock_for(NO_HANG * 5).unwrap();
        let _ = taken.send(guard.map(|guard| guard.unlock()).is_some());
    });
    assert!(eventually(NO_HANG, || queued(&server) == 2
        && server.channels("redisson_lock__channel:{fair}:*") == 2));
    crashed.kill().unwrap();
    crashed.wait().unwrap();

    // The release wakes the dead head, whose place has not run out yet.
    guard.unlock().unwrap();
    let head: String = redis::cmd("LINDEX")
        .arg(QUEUE)
        .arg(0)
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(
        head, dead,
        "the release found the head's place run out already"
    );

    // Once the dead head's place has run out, a third waiter's attempt drops it, finds the
    // lock free for the waiter now at the head, and queues behind it.
    assert!(
        eventually(NO_HANG, || {
            let mut redis = server.conn();
            let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut redis).unwrap();
            let place: Option<f64> = redis::cmd("ZSCORE")
                .arg(ALIVE)
                .arg(&dead)
                .query(&mut redis)
                .unwrap();
            place.is_none_or(|place| place <= (secs * 1000 + micros / 1000) as f64)
        }),
        "the dead waiter's place never ran out"
    );
    let third = server.sleepy().fair_lock(NAME);
    let (third_taken, third_got) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let guard = third.try_lock_for(NO_HANG * 5).unwrap();
        let _ = third_taken.send(guard.map(|guard| guard.unlock()).is_some());
    });
    assert_eq!(
        got.recv_timeout(NO_HANG / 3),
        Ok(true),
        "the waiter behind the dead head was not told its turn had come"
    );
    assert_eq!(third_got.recv_timeout(NO_HANG), Ok(true), "then the third");
    assert_eq!(queued(&server), 0);
}

/// A waiter of ours killed while queued behind a hold that just runs out, with nobody
/// coming after: the record of our waiters runs out with the dead waiter's place, and is no
/// key left for ever.
#[test]
fn a_crashed_waiter_with_nobody_after_it_leaves_no_record_for_ever() {
    let server = Server::start();
    let lock = server.client().fair_lock(NAME);
    let guard = lock.try_lock_with_lease(Duration::from_secs(1)).unwrap();
    let mut crashed = spawn_worker(
        "fair::fair_worker",
        &[(URL_VAR, server.url()), (WAITERS_VAR, "0".into())],
    );
    assert!(eventually(NO_HANG, || queued(&server) == 1));
    assert!(server.exists(ALIVE));
    crashed.kill().unwrap();
    crashed.wait().unwrap();
    std::mem::forget(guard);
    assert!(
        eventually(NO_HANG, || !server.exists(ALIVE)),
        "the record of a dead waiter outlived its place"
    );
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

// Direct hand-off: a release grants the lock to the head of the queue when that waiter is
// one of ours with the hand-off on.

const GRANT_VAR: &str = "REDMUTEX_TEST_QUEUE_WAIT_MS";

/// The owner fields in the lock's hash, with their counts.
fn holders(server: &Server) -> Vec<(String, i64)> {
    support::hash(&mut server.conn(), NAME)
}

/// Whether the waiter `client`'s thread `thread_field` waits subscribed on its channel.
fn subscribed(server: &Server) -> usize {
    server.channels("redisson_lock__channel:{fair}:*")
}

/// Starts `lock`'s waiter and waits until it sleeps on its signal: its second attempt,
/// after its subscription was confirmed, has run.
fn waiting(server: &Server, lock: redmutex::Lock<redmutex::Fair>, wait: Duration) -> Waiter {
    let calls = server.calls("evalsha");
    let waiter = Waiter::start(lock, wait);
    support::await_calls(server, calls + 2);
    waiter
}

/// A waiter on a thread of its own: sends whether it took the lock (and its hold count
/// then), holds it until told, then unlocks.
struct Waiter {
    got: std::sync::mpsc::Receiver<Result<Option<u32>, redmutex::Error>>,
    release: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Waiter {
    fn start(lock: redmutex::Lock<redmutex::Fair>, wait: Duration) -> Waiter {
        let (tx, got) = std::sync::mpsc::channel();
        let (release, release_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || match lock.try_lock_for(wait) {
            Ok(Some(guard)) => {
                let _ = tx.send(Ok(Some(lock.hold_count().unwrap())));
                let _ = release_rx.recv();
                if let Err(err) = guard.unlock() {
                    panic!("unlock: {err}");
                }
            }
            other => {
                let _ = tx.send(other.map(|_| None));
            }
        });
        Waiter {
            got,
            release,
            thread,
        }
    }

    fn outcome(&self) -> Result<Option<u32>, redmutex::Error> {
        self.got.recv_timeout(NO_HANG).expect("the waiter ended")
    }

    fn unlock(self) {
        self.release.send(()).unwrap();
        self.thread.join().unwrap();
    }
}

#[test]
fn a_release_grants_the_lock_to_our_waiter_at_the_head() {
    let server = Server::start();
    let holder = server.client();
    let guard = holder.fair_lock(NAME).lock().unwrap();
    let client = server.client();
    let waiter = waiting(&server, client.fair_lock(NAME), NO_HANG);
    assert_eq!((queued(&server), subscribed(&server)), (1, 1));
    guard.unlock().unwrap();
    assert_eq!(waiter.outcome().unwrap(), Some(1), "one hold");
    assert_eq!(
        client.stats().grants_taken,
        1,
        "taken on the release's word"
    );
    let held = holders(&server);
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].1, 1);
    assert_eq!(queued(&server), 0);
    assert!(
        !server.exists(ALIVE),
        "the granted waiter was left in the queue"
    );
    // The waiter's watchdog confirms the grant with its own lease (30 s), beyond the grant
    // lease (its place: 5 s).
    assert!(eventually(NO_HANG, || {
        let ttl: i64 = redis::cmd("PTTL")
            .arg(NAME)
            .query(&mut server.conn())
            .unwrap();
        ttl > 10_000
    }));
    waiter.unlock();
    assert!(!server.exists(NAME));
}

#[test]
fn direct_handoff_alone_turns_grants_on_and_off_with_every_other_default() {
    let server = Server::start();
    let client = |on: bool| {
        LockClient::builder(&server.url())
            .direct_handoff(on)
            .build()
            .unwrap()
    };
    // (releasing client's setting, waiting client's setting, granted)
    for (releases, waits, granted) in [
        (true, true, true),
        (true, false, false),
        (false, true, false),
        (false, false, false),
    ] {
        let holder = client(releases);
        let guard = holder.fair_lock(NAME).lock().unwrap();
        let version = holders(&server)[0].0.as_bytes()[14];
        assert_eq!(version, if releases { b'8' } else { b'4' });
        let other = client(waits);
        let waiter = waiting(&server, other.fair_lock(NAME), NO_HANG);
        assert_eq!((queued(&server), subscribed(&server)), (1, 1));
        guard.unlock().unwrap();
        assert_eq!(waiter.outcome().unwrap(), Some(1));
        assert_eq!(
            other.stats().grants_taken,
            u64::from(granted),
            "releases {releases}, waits {waits}"
        );
        waiter.unlock();
        assert!(!server.exists(NAME));
        assert!(eventually(NO_HANG, || subscribed(&server) == 0));
    }
}

#[test]
fn a_waiter_that_missed_its_grant_message_finds_one_hold_not_two() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let holder = server.client();
    let guard = holder.fair_lock(NAME).lock().unwrap();
    // Its subscriptions reach the server but nothing comes back on them: the grant message
    // is published and never heard. Its attempts come back within a third of its place.
    proxy.silence_after(b"SUBSCRIBE");
    let client = LockClient::builder(&proxy.url())
        .connect_timeout(Duration::from_secs(5))
        .response_timeout(Duration::from_secs(5))
        .retry_base(Duration::from_secs(300))
        .retry_cap(Duration::from_secs(600))
        .fair_queue_wait(Duration::from_secs(3))
        .build()
        .unwrap();
    let lock = client.fair_lock(NAME);
    let waiter = Waiter::start(lock.clone(), NO_HANG);
    assert!(eventually(NO_HANG, || queued(&server) == 1));
    guard.unlock().unwrap();
    assert_eq!(waiter.outcome().unwrap(), Some(1), "one hold, not two");
    assert_eq!(client.stats().grants_taken, 0, "no message came");
    assert_eq!(holders(&server)[0].1, 1);
    waiter.unlock();
    assert!(!server.exists(NAME), "a hold was left behind");
}

#[test]
fn a_cancelled_waiter_passes_its_grant_on() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    // A grant lasts the smaller of the holder's lease and the waiter's place: an hour, far
    // beyond this test, so that only the cancelled waiter's give-up can pass it on.
    let hour = Duration::from_secs(3600);
    let holder = server.builder().lease(hour).build().unwrap();
    let guard = holder.fair_lock(NAME).lock().unwrap();
    let cancelled = LockClient::builder(&proxy.url())
        .connect_timeout(Duration::from_secs(5))
        .response_timeout(Duration::from_secs(5))
        .fair_queue_wait(hour)
        .build()
        .unwrap();
    let stop = redmutex::Cancel::new();
    let first = waiting(
        &server,
        cancelled.fair_lock(NAME).with_cancel(&stop),
        NO_HANG,
    );
    let next = server.client();
    let second = waiting(&server, next.fair_lock(NAME), NO_HANG);
    assert_eq!((queued(&server), subscribed(&server)), (2, 2));
    // The first waiter hears nothing while the release grants it the lock, and is
    // cancelled before the message reaches it.
    proxy.pause();
    guard.unlock().unwrap();
    assert_eq!(holders(&server)[0].1, 1, "granted");
    assert_eq!(queued(&server), 1);
    stop.cancel();
    proxy.resume();
    let err = first.outcome().unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    assert_eq!(
        second.outcome().unwrap(),
        Some(1),
        "the grant was not passed on"
    );
    assert_eq!(next.stats().grants_taken, 1, "passed on as a grant");
    assert_eq!(cancelled.stats().grants_taken, 0);
    second.unlock();
    first.thread.join().unwrap();
    assert!(!server.exists(NAME));
    assert_eq!(queued(&server), 0);
}

#[test]
fn a_waiter_whose_deadline_passed_as_it_was_granted_passes_the_grant_on() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let hour = Duration::from_secs(3600);
    let holder = server.builder().lease(hour).build().unwrap();
    let guard = holder.fair_lock(NAME).lock().unwrap();
    let late = LockClient::builder(&proxy.url())
        .connect_timeout(Duration::from_secs(5))
        .response_timeout(Duration::from_secs(8))
        .fair_queue_wait(hour)
        .build()
        .unwrap();
    let lock = late.fair_lock(NAME);
    assert!(
        lock.is_locked().unwrap(),
        "a pooled connection through the proxy"
    );
    // Its one attempt runs at once and its reply comes after its deadline: meanwhile the
    // release grants it the lock, which its give-up must then pass on.
    proxy.delay_replies(Duration::from_secs(5));
    let first = Waiter::start(lock, Duration::from_millis(500));
    assert!(eventually(NO_HANG, || queued(&server) == 1));
    // It would not come back on its own within the test: it takes the lock by the grant.
    let next = server.sleepy();
    let second = waiting(&server, next.fair_lock(NAME), NO_HANG);
    assert_eq!((queued(&server), subscribed(&server)), (2, 1));
    let given_back = server.calls("hdel");
    guard.unlock().unwrap();
    assert_eq!(queued(&server), 1, "the late waiter was not granted");
    assert_eq!(first.outcome().unwrap(), None);
    assert_eq!(
        second.outcome().unwrap(),
        Some(1),
        "the grant was not passed on"
    );
    assert_eq!(
        server.calls("hdel"),
        given_back + 1,
        "given back by the give-up"
    );
    assert_eq!(next.stats().grants_taken, 1);
    second.unlock();
    first.thread.join().unwrap();
    proxy.delay_replies(Duration::ZERO);
    assert!(!server.exists(NAME));
}

#[test]
fn a_crashed_granted_waiter_holds_the_lock_no_longer_than_its_place() {
    let server = Server::start();
    let guard = server.client().fair_lock(NAME).lock().unwrap();
    // A waiter in another process with a 1 s place, frozen once queued, then killed after
    // the grant: it never confirms.
    let mut crashed = spawn_worker(
        "fair::granted_worker",
        &[(URL_VAR, server.url()), (GRANT_VAR, "1000".into())],
    );
    assert!(eventually(NO_HANG, || queued(&server) == 1 && subscribed(&server) == 1));
    let pid = crashed.id().to_string();
    let frozen = std::process::Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap();
    assert!(frozen.success());
    let client = server.client();
    let next = Waiter::start(client.fair_lock(NAME), NO_HANG);
    assert!(eventually(NO_HANG, || queued(&server) == 2));
    let frozen_field: String = redis::cmd("LINDEX")
        .arg(QUEUE)
        .arg(0)
        .query(&mut server.conn())
        .unwrap();
    guard.unlock().unwrap();
    let held = holders(&server);
    assert_eq!(held, [(frozen_field, 1)], "granted to the frozen waiter");
    let ttl: i64 = redis::cmd("PTTL")
        .arg(NAME)
        .query(&mut server.conn())
        .unwrap();
    assert!(
        (1..=1000).contains(&ttl),
        "a grant lease of {ttl} ms: more than the waiter's place, or none"
    );
    crashed.kill().unwrap();
    crashed.wait().unwrap();
    // The grant lapses and the next waiter's attempt takes the lock.
    assert_eq!(next.outcome().unwrap(), Some(1));
    assert_eq!(client.stats().grants_taken, 0);
    next.unlock();
    assert_eq!(queued(&server), 0);
}

/// The waiter of the test above: waits for the lock with the place given, and holds it.
#[test]
#[ignore = "run as a child process by a_crashed_granted_waiter_holds_the_lock_no_longer_than_its_place"]
fn granted_worker() {
    let url = std::env::var(URL_VAR).expect("started by the parent test");
    let wait: u64 = std::env::var(GRANT_VAR).unwrap().parse().unwrap();
    let client = LockClient::builder(&url)
        .fair_queue_wait(Duration::from_millis(wait))
        .build()
        .unwrap();
    let _guard = client.fair_lock(NAME).lock().unwrap();
    std::thread::sleep(NO_HANG);
}

const CRASH_COUNTER: &str = "crash-sections";

/// Jepsen-style: threads increment a counter under the fair lock with direct hand-off on,
/// two of them on a client that never hears its messages (every grant to them is found by
/// an attempt), while a worker process with a short lease and place takes turns in the
/// same queue and is killed at some point of its loop (holding, granted and unconfirmed,
/// or waiting). The counter comes out exact and no two holders' windows overlap.
#[test]
fn grants_keep_holders_apart_through_lost_messages_and_a_killed_worker() {
    use support::history::History;
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    proxy.silence_after(b"SUBSCRIBE");
    let heard = server.client();
    let deaf = LockClient::builder(&proxy.url())
        .connect_timeout(Duration::from_secs(5))
        .response_timeout(Duration::from_millis(300))
        .retry_cap(Duration::from_millis(20))
        .build()
        .unwrap();
    let mut crashed = spawn_worker("fair::crashing_worker", &[(URL_VAR, server.url())]);
    let history = History::default();
    let sections = [(&heard, 60), (&heard, 60), (&deaf, 20), (&deaf, 20)];
    std::thread::scope(|scope| {
        for (thread, (client, rounds)) in sections.into_iter().enumerate() {
            let (history, lock, mut redis) = (&history, client.fair_lock(NAME), server.conn());
            scope.spawn(move || {
                for _ in 0..rounds {
                    let guard = lock.lock().unwrap();
                    let taken = std::time::Instant::now();
                    let value: Option<i64> =
                        redis::cmd("GET").arg("counter").query(&mut redis).unwrap();
                    let () = redis::cmd("SET")
                        .arg("counter")
                        .arg(value.unwrap_or(0) + 1)
                        .query(&mut redis)
                        .unwrap();
                    let valid_until = guard.valid_until();
                    history.record(
                        &format!("thread-{thread}"),
                        taken,
                        std::time::Instant::now(),
                        valid_until,
                    );
                    guard.unlock().unwrap();
                }
            });
        }
        // The worker is killed once it has taken the lock a few times, wherever it is.
        let mut redis = server.conn();
        assert!(eventually(NO_HANG, || {
            redis::cmd("GET")
                .arg(CRASH_COUNTER)
                .query::<Option<u64>>(&mut redis)
                .unwrap()
                .unwrap_or(0)
                >= 5
        }));
        crashed.kill().unwrap();
        crashed.wait().unwrap();
    });
    let total: i64 = redis::cmd("GET")
        .arg("counter")
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(total, 2 * 60 + 2 * 20);
    assert_eq!(history.len(), 160);
    history.assert_exclusive();
    assert!(
        heard.stats().grants_taken > 0,
        "no grant was taken on its message"
    );
}

/// The worker of the test above: takes turns in the fair lock's queue with a short lease
/// and place, counting its sections, until it is killed.
#[test]
#[ignore = "run as a child process by grants_keep_holders_apart_through_lost_messages_and_a_killed_worker"]
fn crashing_worker() {
    let url = std::env::var(URL_VAR).expect("started by the parent test");
    let client = LockClient::builder(&url)
        .lease(Duration::from_secs(1))
        .response_timeout(Duration::from_millis(200))
        .fair_queue_wait(Duration::from_secs(1))
        .build()
        .unwrap();
    let lock = client.fair_lock(NAME);
    let mut redis = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    loop {
        let guard = lock.lock().unwrap();
        let _: u64 = redis::cmd("INCR")
            .arg(CRASH_COUNTER)
            .query(&mut redis)
            .unwrap();
        guard.unlock().unwrap();
    }
}

/// A grant message naming a place other than the one the waiter's last busy attempt set
/// was sent before that attempt, and the attempt found the lock busy all the same: the
/// grant was undone since (expired, or deleted by force). Its late message is no hold.
#[test]
fn a_late_grant_message_from_before_the_last_attempt_is_no_hold() {
    let server = Server::start();
    let guard = server.client().fair_lock(NAME).lock().unwrap();
    let client = server.client();
    let waiter = waiting(&server, client.fair_lock(NAME), NO_HANG);
    let owner = holders(&server)[0].0.clone();
    let field: String = redis::cmd("LINDEX")
        .arg(QUEUE)
        .arg(0)
        .query(&mut server.conn())
        .unwrap();
    assert_ne!(field, owner);
    let place: u64 = redis::cmd("ZSCORE")
        .arg(ALIVE)
        .arg(&field)
        .query(&mut server.conn())
        .unwrap();
    let calls = server.calls("evalsha");
    let channel = format!("redisson_lock__channel:{{fair}}:{field}");
    let stale = format!("granted:30000:{}", place - 1);
    let heard: u64 = redis::cmd("PUBLISH")
        .arg(&channel)
        .arg(&stale)
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(heard, 1);
    // The waiter is woken, attempts, finds the lock busy and waits on.
    support::await_calls(&server, calls + 1);
    assert!(waiter.got.try_recv().is_err(), "the late grant was taken");
    assert_eq!(client.stats().grants_taken, 0);
    assert_eq!(holders(&server)[0].0, owner);
    guard.unlock().unwrap();
    assert_eq!(waiter.outcome().unwrap(), Some(1));
    assert_eq!(
        client.stats().grants_taken,
        1,
        "the real grant was not taken"
    );
    waiter.unlock();
}

/// A grant message names the lease the release gave the key, not the longest it could
/// have given: the waiter's validity (from its last busy attempt, at most that lease) then
/// holds whatever the server's clock did between that attempt and the release. The grant
/// is the waiter's place less the server's time at the release, so a clock stepped forward
/// in between shortens it; a validity bounded by the queue wait alone would outlast the key.
#[test]
fn a_grant_message_names_the_lease_the_key_was_given() {
    let server = Server::start();
    let guard = server.client().fair_lock(NAME).lock().unwrap();
    let client = server.client();
    let mut messages = server.conn();
    let mut pubsub = messages.as_pubsub();
    pubsub
        .psubscribe("redisson_lock__channel:{fair}:*")
        .unwrap();
    pubsub.set_read_timeout(Some(NO_HANG)).unwrap();
    let waiter = waiting(&server, client.fair_lock(NAME), NO_HANG);
    let field: String = redis::cmd("LINDEX")
        .arg(QUEUE)
        .arg(0)
        .query(&mut server.conn())
        .unwrap();
    let place: u64 = redis::cmd("ZSCORE")
        .arg(ALIVE)
        .arg(&field)
        .query(&mut server.conn())
        .unwrap();
    // The server's time before the release: the grant is at most the place less this.
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut server.conn()).unwrap();
    let before = secs * 1000 + micros / 1000;
    guard.unlock().unwrap();
    let message: String = pubsub.get_message().unwrap().get_payload().unwrap();
    let (lease, named) = message
        .strip_prefix("granted:")
        .and_then(|rest| rest.split_once(':'))
        .unwrap_or_else(|| panic!("not a grant: {message}"));
    assert_eq!(named.parse::<u64>().unwrap(), place, "{message}");
    let lease: u64 = lease.parse().unwrap();
    assert!(
        lease <= place - before,
        "{message}: more than the {} ms left of the place",
        place - before
    );
    assert_eq!(waiter.outcome().unwrap(), Some(1));
    assert_eq!(client.stats().grants_taken, 1);
    waiter.unlock();
}

/// 800 threads of one client, with every setting at its default, queue on one fair lock
/// with two minutes each; once the holder lets go, every one of them takes it once, and
/// none fails. Each attempt and release reads a few entries of the queue whatever its
/// length, so the eight pooled connections keep up.
#[test]
fn eight_hundred_waiters_each_take_the_lock_once() {
    const WAITERS: usize = 800;
    let server = Server::start();
    let client = LockClient::builder(&server.url()).build().unwrap();
    let name = "eight-hundred";
    let length = || -> usize {
        redis::cmd("LLEN")
            .arg("redisson_lock_queue:{eight-hundred}")
            .query(&mut server.conn())
            .unwrap()
    };
    let guard = client.fair_lock(name).lock().unwrap();
    let served = std::sync::Mutex::new(Vec::with_capacity(WAITERS));
    std::thread::scope(|scope| {
        for waiter in 0..WAITERS {
            let (client, served) = (&client, &served);
            scope.spawn(move || {
                let got = client
                    .fair_lock(name)
                    .try_lock_for(Duration::from_secs(120));
                let taken = got.map(|guard| guard.map(|guard| guard.unlock()));
                served.lock().unwrap().push((waiter, taken));
            });
        }
        assert!(
            eventually(NO_HANG, || length() == WAITERS),
            "{} of {WAITERS} queued",
            length()
        );
        guard.unlock().unwrap();
    });
    let served = served.into_inner().unwrap();
    let failed: Vec<_> = (served.iter())
        .filter(|(_, taken)| !matches!(taken, Ok(Some(Ok(())))))
        .collect();
    assert!(failed.is_empty(), "not served: {failed:?}");
    assert_eq!(served.len(), WAITERS);
}
