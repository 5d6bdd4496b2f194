//! The fair lock, the read-write lock and the leased semaphore against a Redisson client
//! played from a raw connection: no Redisson port runs here, so each test runs the steps of
//! Redisson's scripts (3.52.0, as `docs/layouts.md` §4, §5 and §10 describe them; the
//! fair lock's are the same up to 4.7), written as Lua of our own in `support::redisson`,
//! which the model-based tests play the Java owner with too. Each side excludes
//! the other and wakes the other's waiters; Java and Rust waiters of a fair lock share one
//! first-come, first-served queue.

use crate::support;

use std::time::Duration;

use redmutex::LockClient;
use support::redisson::{
    FAIR_GIVE_UP, PERMIT_ACQUIRE, PERMIT_RELEASE, READ_ACQUIRE, WRITE_ACQUIRE, WRITE_UNLOCK, arg,
    epoch_ms, eval, fair_acquire, fair_unlock,
};
use support::{Server, eventually};

/// The Redisson client's owner id: `<client uuid>:<thread id>`.
const THEM: &str = "5d4a1b7e-0c3f-4b8e-9a21-6f0e2d3c4b5a:1";
/// A lease and a queue wait long enough that only a message can wake a waiter in time.
const LONG: Duration = Duration::from_secs(120);
const IN_TIME: Duration = Duration::from_secs(30);

/// A client of ours whose waiters sleep on the holder's lease and poll almost never.
fn sleepy(server: &Server) -> LockClient {
    server
        .builder()
        .retry_base(Duration::from_secs(300))
        .retry_cap(Duration::from_secs(600))
        .fair_queue_wait(Duration::from_secs(3600))
        .build()
        .unwrap()
}

/// A raw subscription, to see what wakes a Redisson waiter: SUBSCRIBE sent and confirmed
/// on a connection that then only reads.
fn listen(server: &Server, channel: &str) -> redis::Connection {
    let mut conn = server.conn();
    conn.send_packed_command(&redis::cmd("SUBSCRIBE").arg(channel).get_packed_command())
        .unwrap();
    conn.recv_response().unwrap();
    conn
}

/// A connection subscribed to the fair lock's channel of `owner`, where its turn is told.
fn listen_as(server: &Server, owner: &str) -> redis::Connection {
    listen(server, &format!("redisson_lock__channel:{{fair}}:{owner}"))
}

/// The payload of the next message on a connection from [`listen`].
fn next_message(conn: &mut redis::Connection) -> String {
    let (kind, _channel, payload): (String, String, String) =
        redis::from_redis_value(conn.recv_response().unwrap()).unwrap();
    assert_eq!(kind, "message");
    payload
}

// Fair lock, §4.
const FAIR_KEYS: [&str; 3] = [
    "fair",
    "redisson_lock_queue:{fair}",
    "redisson_lock_timeout:{fair}",
];

/// Where this crate records its own fair-lock waiters, beside Redisson's keys.
const OURS: &str = "redisson_lock_timeout:{fair}:redmutex_alive";

/// Redisson's default wait of a fair-lock waiter (`fairLockWaitTimeout`), in milliseconds.
const JAVA_WAIT: &str = "300000";

fn their_fair_acquire(server: &Server) -> Option<i64> {
    java_fair_acquire(server, THEM)
}

fn their_fair_unlock(server: &Server) -> Option<i64> {
    java_fair_unlock(server, THEM)
}

/// One attempt of the Java thread `owner` waiting with Redisson's default wait.
fn java_fair_acquire(server: &Server, owner: &str) -> Option<i64> {
    java_fair_try_lock(server, owner, JAVA_WAIT)
}

/// One attempt of the Java thread `owner` in a `tryLock` that waits `wait` milliseconds.
fn java_fair_try_lock(server: &Server, owner: &str, wait: &str) -> Option<i64> {
    eval(
        &mut server.conn(),
        &fair_acquire(),
        &FAIR_KEYS,
        &[arg(120000), arg(owner), arg(wait), arg(epoch_ms())],
    )
}

fn java_fair_unlock(server: &Server, owner: &str) -> Option<i64> {
    let keys = [
        FAIR_KEYS[0],
        FAIR_KEYS[1],
        FAIR_KEYS[2],
        "redisson_lock__channel:{fair}",
    ];
    eval(
        &mut server.conn(),
        &fair_unlock(),
        &keys,
        &[arg(0), arg(120000), arg(owner), arg(epoch_ms())],
    )
}

fn java_fair_give_up(server: &Server, owner: &str) {
    let () = eval(
        &mut server.conn(),
        FAIR_GIVE_UP,
        &FAIR_KEYS[1..],
        &[arg(owner), arg(JAVA_WAIT)],
    );
}

/// A Java thread of the Redisson client: `<client uuid>:<thread id>`.
fn java(thread: u32) -> String {
    format!("5d4a1b7e-0c3f-4b8e-9a21-6f0e2d3c4b5a:{}", 100 + thread)
}

fn fair_queue_len(server: &Server) -> usize {
    redis::cmd("LLEN")
        .arg(FAIR_KEYS[1])
        .query(&mut server.conn())
        .unwrap()
}

/// A waiter of ours on a thread of its own, with the default `fair_queue_wait` (5 s): it
/// takes the lock, says so, holds it until told to release it, and then says whether
/// the release went through.
struct OurWaiter {
    taken: std::sync::mpsc::Receiver<bool>,
    release: std::sync::mpsc::Sender<()>,
}

impl OurWaiter {
    fn start(server: &Server, wait: Duration) -> OurWaiter {
        Self::start_on(&server.client(), wait)
    }

    /// The same, on `client`.
    fn start_on(client: &LockClient, wait: Duration) -> OurWaiter {
        let lock = client.fair_lock("fair");
        let (taken_tx, taken) = std::sync::mpsc::channel();
        let (release, release_rx) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            let guard = lock.try_lock_for(wait).unwrap();
            let got = guard.is_some();
            let _ = taken_tx.send(got);
            if let Some(guard) = guard {
                let _ = release_rx.recv();
                let _ = taken_tx.send(guard.unlock().is_ok());
            }
        });
        OurWaiter { taken, release }
    }

    /// Waits until it took the lock (true) or gave up (false).
    fn outcome(&self) -> bool {
        self.taken.recv_timeout(IN_TIME).expect("the waiter ended")
    }

    fn unlock(&self) {
        self.release.send(()).unwrap();
        assert!(self.outcome(), "our release failed");
    }

    /// Releases, and checks that the release woke the Java waiter `next` on its channel.
    fn unlock_waking(&self, server: &Server, next: &str) {
        let mut listener = listen_as(server, next);
        self.unlock();
        assert_eq!(next_message(&mut listener), "0", "{next} was not woken");
    }
}

#[test]
fn fair_lock_each_side_excludes_and_wakes_the_other() {
    let server = Server::start();
    // Theirs first: our waiter queues, and their unlock wakes it on its own channel.
    assert_eq!(their_fair_acquire(&server), None);
    let ours = sleepy(&server).fair_lock("fair");
    let (taken, got) = std::sync::mpsc::channel();
    let waiter = ours.clone();
    std::thread::spawn(move || {
        let guard = waiter.try_lock_for(LONG).unwrap();
        let _ = taken.send(guard.map(|guard| guard.unlock()).is_some());
    });
    assert!(eventually(IN_TIME, || server
        .channels("redisson_lock__channel:{fair}:*")
        > 0));
    assert_eq!(their_fair_unlock(&server), Some(1));
    assert_eq!(
        got.recv_timeout(IN_TIME),
        Ok(true),
        "their unlock did not wake ours"
    );

    // Ours first: they queue behind us, and our release wakes them on theirs.
    let guard = ours.lock().unwrap();
    let mut listener = listen_as(&server, THEM);
    assert!(
        their_fair_acquire(&server).is_some(),
        "they got in beside us"
    );
    guard.unlock().unwrap();
    assert_eq!(next_message(&mut listener), "0");
    assert_eq!(their_fair_acquire(&server), None, "their turn did not come");
    assert_eq!(their_fair_unlock(&server), Some(1));
}

#[test]
fn fair_lock_java_waiters_ahead_of_ours_go_first_and_ours_keeps_its_place() {
    let server = Server::start();
    let (holder, first, second, behind) = (java(0), java(1), java(2), java(3));
    assert_eq!(java_fair_acquire(&server, &holder), None);
    assert!(java_fair_acquire(&server, &first).is_some());
    assert!(java_fair_acquire(&server, &second).is_some());
    let ours = OurWaiter::start(&server, LONG);
    assert!(eventually(IN_TIME, || fair_queue_len(&server) == 3));
    assert!(java_fair_acquire(&server, &behind).is_some());

    // The first Java waiter gives up, the second takes its turn and releases: each takes
    // its wait off the places behind it, ours among them.
    java_fair_give_up(&server, &first);
    assert_eq!(java_fair_unlock(&server, &holder), Some(1));
    assert!(
        java_fair_acquire(&server, &behind).is_some(),
        "the last Java waiter went before the second"
    );
    assert_eq!(java_fair_acquire(&server, &second), None, "not its turn");
    assert_eq!(java_fair_unlock(&server, &second), Some(1));
    assert!(
        java_fair_acquire(&server, &behind).is_some(),
        "the Java waiter behind ours went first"
    );
    assert!(ours.outcome(), "ours was not woken");
    assert!(java_fair_acquire(&server, &behind).is_some(), "beside ours");

    ours.unlock_waking(&server, &behind);
    assert_eq!(
        java_fair_acquire(&server, &behind),
        None,
        "its turn did not come"
    );
    assert_eq!(java_fair_unlock(&server, &behind), Some(1));
    assert_eq!(fair_queue_len(&server), 0);
}

#[test]
fn fair_lock_our_waiters_ahead_of_java_ones_go_first_across_both_sides_turns() {
    let server = Server::start();
    let (holder, first, last) = (java(0), java(1), java(2));
    assert_eq!(java_fair_acquire(&server, &holder), None);
    let ours_first = OurWaiter::start(&server, LONG);
    assert!(eventually(IN_TIME, || fair_queue_len(&server) == 1));
    assert!(java_fair_acquire(&server, &first).is_some());
    // One of ours gives up from the middle of the queue.
    let leaving = OurWaiter::start(&server, Duration::from_secs(15));
    assert!(eventually(IN_TIME, || fair_queue_len(&server) == 3));
    let ours_second = OurWaiter::start(&server, LONG);
    assert!(eventually(IN_TIME, || fair_queue_len(&server) == 4));
    assert!(java_fair_acquire(&server, &last).is_some());
    assert!(!leaving.outcome(), "the leaving waiter took the lock");
    assert_eq!(fair_queue_len(&server), 4);

    // The Java holder releases: our first waiter's turn, then the Java one's behind it.
    assert_eq!(java_fair_unlock(&server, &holder), Some(1));
    assert!(ours_first.outcome(), "our first waiter was not woken");
    assert!(java_fair_acquire(&server, &first).is_some(), "beside ours");
    ours_first.unlock_waking(&server, &first);
    assert!(
        java_fair_acquire(&server, &last).is_some(),
        "the last Java waiter went before the first"
    );
    // The Java acquisition takes its wait off every place behind it, ours among them.
    assert_eq!(
        java_fair_acquire(&server, &first),
        None,
        "its turn did not come"
    );
    assert_eq!(java_fair_unlock(&server, &first), Some(1));
    assert!(
        java_fair_acquire(&server, &last).is_some(),
        "the Java waiter behind ours went first"
    );
    assert!(ours_second.outcome(), "our second waiter was not woken");
    ours_second.unlock_waking(&server, &last);
    assert_eq!(
        java_fair_acquire(&server, &last),
        None,
        "its turn did not come"
    );
    assert_eq!(java_fair_unlock(&server, &last), Some(1));
    assert_eq!(fair_queue_len(&server), 0);
}

#[test]
fn fair_lock_java_waiters_with_a_wait_other_than_ours_keep_the_order() {
    let server = Server::start();
    let (holder, first, last) = (java(0), java(1), java(2));
    // Java threads in tryLock(20 s): each takes 20 s off the places behind it, four times
    // our waiter's own wait (5 s).
    let wait = "20000";
    assert_eq!(java_fair_try_lock(&server, &holder, wait), None);
    assert!(java_fair_try_lock(&server, &first, wait).is_some());
    let ours = OurWaiter::start(&server, LONG);
    assert!(eventually(IN_TIME, || fair_queue_len(&server) == 2));
    assert!(java_fair_try_lock(&server, &last, wait).is_some());

    assert_eq!(java_fair_unlock(&server, &holder), Some(1));
    assert_eq!(
        java_fair_try_lock(&server, &first, wait),
        None,
        "its turn did not come"
    );
    assert_eq!(java_fair_unlock(&server, &first), Some(1));
    assert!(
        java_fair_try_lock(&server, &last, wait).is_some(),
        "the Java waiter behind ours went first"
    );
    assert!(ours.outcome(), "ours was not woken");
    ours.unlock_waking(&server, &last);
    assert_eq!(
        java_fair_try_lock(&server, &last, wait),
        None,
        "its turn did not come"
    );
    assert_eq!(java_fair_unlock(&server, &last), Some(1));
    assert_eq!(fair_queue_len(&server), 0);
}

#[test]
fn fair_lock_a_java_waiter_behind_ours_keeps_its_place_however_long_ours_waits() {
    let server = Server::start();
    let (holder, theirs) = (java(0), java(1));
    // Java threads in lock() on a client whose fairLockWaitTimeout is 1 s: a place is 1 s
    // after the place of the waiter before it.
    let wait = "1000";
    assert_eq!(java_fair_try_lock(&server, &holder, wait), None);
    let first = OurWaiter::start(&server, LONG);
    assert!(eventually(IN_TIME, || fair_queue_len(&server) == 1));
    assert!(java_fair_try_lock(&server, &theirs, wait).is_some());
    let place: f64 = redis::cmd("ZSCORE")
        .arg(FAIR_KEYS[2])
        .arg(&theirs)
        .query(&mut server.conn())
        .unwrap();
    let second = OurWaiter::start(&server, LONG);
    assert!(eventually(IN_TIME, || fair_queue_len(&server) == 3));
    // Our first waiter waits on past the place the Java waiter was given when it queued.
    assert!(eventually(IN_TIME, || epoch_ms() as f64 > place + 500.0));

    assert_eq!(java_fair_unlock(&server, &holder), Some(1));
    assert!(first.outcome(), "our first waiter was not woken");
    assert!(
        java_fair_try_lock(&server, &theirs, wait).is_some(),
        "beside ours"
    );
    first.unlock_waking(&server, &theirs);
    assert_eq!(
        java_fair_try_lock(&server, &theirs, wait),
        None,
        "our second waiter went before the Java one"
    );
    assert_eq!(java_fair_unlock(&server, &theirs), Some(1));
    assert!(second.outcome(), "our second waiter was not woken");
    second.unlock();
    assert_eq!(fair_queue_len(&server), 0);
}

#[test]
fn fair_lock_a_crashed_waiter_of_ours_among_java_ones_loses_its_place_after_its_wait() {
    let server = Server::start();
    let (holder, first, second) = (java(0), java(1), java(2));
    assert_eq!(java_fair_acquire(&server, &holder), None);
    assert!(java_fair_acquire(&server, &first).is_some());
    // A waiter of ours queues behind the first Java waiter, with a place that reserves
    // that waiter's wait, and never comes back: its process crashed after one attempt.
    let crashed = crashed_waiter(&server, "0b7e3c1a-6d2f-4e8a-b5c9-1f2e3d4c5b6a:1", 1000);
    assert!(crashed.is_some(), "queued");
    assert!(java_fair_acquire(&server, &second).is_some());
    let ours = OurWaiter::start(&server, LONG);
    assert!(eventually(IN_TIME, || fair_queue_len(&server) == 4));

    // The first Java waiter takes its turn and gives it back: the crashed waiter is the
    // head, its place kept by the reserve, but our live waiter's attempts drop it once
    // its wait (1 s) has passed, and the second Java waiter, next in line, gets in.
    assert_eq!(java_fair_unlock(&server, &holder), Some(1));
    assert_eq!(
        java_fair_acquire(&server, &first),
        None,
        "its turn did not come"
    );
    assert_eq!(java_fair_unlock(&server, &first), Some(1));
    assert!(
        eventually(IN_TIME, || java_fair_acquire(&server, &second).is_none()),
        "the crashed waiter kept its place"
    );
    let mut listener = listen_as(&server, &ours_field(&server));
    assert_eq!(java_fair_unlock(&server, &second), Some(1));
    assert_eq!(next_message(&mut listener), "0");
    assert!(ours.outcome(), "ours was not woken");
    ours.unlock();
    assert_eq!(fair_queue_len(&server), 0);
}

/// One attempt of a waiter of ours (owner field `owner`, `fair_queue_wait` of `wait_ms`)
/// that never comes back: its process crashed after it. Our acquire script's reply: when
/// it queued, `(pttl, until)`, `until` being the server's time at which it loses its place
/// by this crate's rule.
fn crashed_waiter(server: &Server, owner: &str, wait_ms: u64) -> Option<(i64, i64)> {
    eval(
        &mut server.conn(),
        include_str!("../../src/kinds/fair/fair_acquire.lua"),
        &[FAIR_KEYS[0], FAIR_KEYS[1], FAIR_KEYS[2], OURS],
        &[arg(30000), arg(owner), arg(0), arg(wait_ms), arg(JAVA_WAIT)],
    )
}

/// The server's clock in milliseconds since the epoch, as the scripts read it (`TIME`).
fn server_ms(server: &Server) -> i64 {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query(&mut server.conn()).unwrap();
    secs * 1000 + micros / 1000
}

/// The place of `owner` in Redisson's sorted set: when Redisson's clients drop it.
fn redisson_place(server: &Server, owner: &str) -> Option<f64> {
    redis::cmd("ZSCORE")
        .arg(FAIR_KEYS[2])
        .arg(owner)
        .query(&mut server.conn())
        .unwrap()
}

/// Releases our `guard`, and checks that the release woke the Java waiter `next` on its
/// channel.
fn release_waking(server: &Server, guard: redmutex::LockGuard<redmutex::Fair>, next: &str) {
    let mut listener = listen_as(server, next);
    listener.set_read_timeout(Some(IN_TIME)).unwrap();
    guard.unlock().unwrap();
    let heard = listener.recv_response();
    let payload = heard.map(|message| {
        let (_, _, payload): (String, String, String) = redis::from_redis_value(message).unwrap();
        payload
    });
    assert_eq!(payload.ok().as_deref(), Some("0"), "{next} was not woken");
}

/// A waiter of ours with the hand-off on (a version-8 client id) that crashes while queued.
const CRASHED: &str = "0b7e3c1a-6d2f-8e8a-b5c9-1f2e3d4c5b6a:1";

#[test]
fn fair_lock_a_crashed_waiter_of_ours_behind_a_java_one_loses_its_place_after_its_wait() {
    let server = Server::start();
    let theirs = java(1);
    let guard = server.client().fair_lock("fair").lock().unwrap();
    assert!(java_fair_acquire(&server, &theirs).is_some());
    // Ours queues behind the Java waiter with a 1 s wait and never comes back. Its place
    // in Redisson's set keeps a reserve for what the Java waiter ahead may take off it.
    let (_, until) = crashed_waiter(&server, CRASHED, 1000).expect("queued");
    assert!(eventually(IN_TIME, || server_ms(&server) > until));

    // Our holder's release wakes the Java waiter, which takes its turn and takes its wait
    // off the places behind it: what is left of the crashed waiter's place is about the
    // holder's lease (30 s).
    release_waking(&server, guard, &theirs);
    assert_eq!(
        java_fair_acquire(&server, &theirs),
        None,
        "its turn did not come"
    );
    assert_eq!(java_fair_unlock(&server, &theirs), Some(1));
    let place = redisson_place(&server, CRASHED).expect("still queued by Redisson's rule");
    assert!(
        place > server_ms(&server) as f64,
        "its place in Redisson's set ran out already"
    );

    // The lock is free and the crashed waiter, dead by its own wait, heads the queue: our
    // next waiter drops it and takes the lock, long before that place runs out.
    assert!(!server.exists("fair"));
    assert_eq!(fair_queue_len(&server), 1);
    let next = OurWaiter::start(&server, LONG);
    let left = Duration::from_millis((place as i64 - server_ms(&server)).max(0) as u64);
    let taken = next.taken.recv_timeout(left + IN_TIME);
    assert_eq!(taken, Ok(true), "our next waiter did not get the free lock");
    assert!(
        (server_ms(&server) as f64) < place,
        "our next waiter got the lock only once the crashed waiter's place in Redisson's \
         set ran out, not once its own wait had"
    );
    next.unlock();
    assert_eq!(fair_queue_len(&server), 0);
}

#[test]
fn fair_lock_our_release_passes_over_a_crashed_waiter_of_ours_to_the_java_one_behind() {
    let server = Server::start();
    let (first, behind) = (java(1), java(2));
    let guard = server.client().fair_lock("fair").lock().unwrap();
    assert!(java_fair_acquire(&server, &first).is_some());
    let (_, until) = crashed_waiter(&server, CRASHED, 1000).expect("queued");
    assert!(java_fair_acquire(&server, &behind).is_some());
    // The first Java waiter gives up and takes its wait off the places behind it: the
    // crashed waiter heads the queue, its place in Redisson's set about our holder's
    // lease (30 s) away.
    java_fair_give_up(&server, &first);
    assert!(eventually(IN_TIME, || server_ms(&server) > until));
    let place = redisson_place(&server, CRASHED).expect("still queued by Redisson's rule");

    // Our release drops the crashed waiter, dead by its own wait, neither granting nor
    // waking it, and wakes the Java waiter behind, which gets in.
    release_waking(&server, guard, &behind);
    assert_eq!(
        java_fair_acquire(&server, &behind),
        None,
        "the crashed waiter kept its place"
    );
    assert!(
        (server_ms(&server) as f64) < place,
        "the crashed waiter was dropped only once its place in Redisson's set ran out"
    );
    assert_eq!(java_fair_unlock(&server, &behind), Some(1));
    assert_eq!(fair_queue_len(&server), 0);
}

/// The keys of the lock "fair" on the server, each with its PTTL (-1: no expiry).
fn fair_keys_left(server: &Server) -> Vec<(String, i64)> {
    let mut conn = server.conn();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*fair*").query(&mut conn).unwrap();
    keys.into_iter()
        .map(|key| {
            let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut conn).unwrap();
            (key, ttl)
        })
        .collect()
}

#[test]
fn fair_lock_a_crashed_waiter_of_ours_leaves_nothing_behind_for_ever() {
    let server = Server::start();
    let holder = java(0);
    assert_eq!(java_fair_acquire(&server, &holder), None);
    // Ours queues and never comes back, and no other waiter comes.
    let (_, until) = crashed_waiter(&server, CRASHED, 1000).expect("queued");
    assert!(server.exists(OURS));
    assert!(eventually(IN_TIME, || server_ms(&server) > until));
    // The Java holder's unlock drops the crashed waiter from Redisson's keys, which is all
    // Redisson's scripts know of; what this crate recorded of it must go by itself.
    assert_eq!(java_fair_unlock(&server, &holder), Some(1));
    assert_eq!(fair_queue_len(&server), 0);
    assert!(!server.exists(FAIR_KEYS[2]), "Redisson's place was kept");
    let lasting: Vec<_> = (fair_keys_left(&server).into_iter())
        .filter(|(_, ttl)| *ttl == -1)
        .collect();
    assert_eq!(lasting, [], "keys left without an expiry");
    assert!(
        eventually(IN_TIME, || fair_keys_left(&server).is_empty()),
        "left behind: {:?}",
        fair_keys_left(&server)
    );
}

/// The owner field of the one waiter of ours in the queue: the one with a time in our
/// sorted set.
fn ours_field(server: &Server) -> String {
    let ours: Vec<String> = redis::cmd("ZRANGE")
        .arg(OURS)
        .arg(0)
        .arg(-1)
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(ours.len(), 1, "{ours:?}");
    ours[0].clone()
}

// Read-write lock, §5.
fn their_read_acquire(server: &Server) -> Option<i64> {
    their_read_acquire_for(server, "120000")
}

/// Their read acquire with a lease of `lease_ms` milliseconds.
fn their_read_acquire_for(server: &Server, lease_ms: &str) -> Option<i64> {
    let prefix = format!("{{rw}}:{THEM}:rwlock_timeout");
    let writer = format!("{THEM}:write");
    eval(
        &mut server.conn(),
        READ_ACQUIRE,
        &["rw", &prefix],
        &[arg(lease_ms), arg(THEM), arg(writer)],
    )
}

#[test]
fn read_write_lock_each_side_excludes_and_wakes_the_other() {
    let server = Server::start();
    let writer = format!("{THEM}:write");
    // Their writer holds: our reader waits, and their write unlock ("1") wakes it.
    let taken: Option<i64> = eval(
        &mut server.conn(),
        WRITE_ACQUIRE,
        &["rw"],
        &[arg(120000), arg(&writer)],
    );
    assert_eq!(taken, None);
    let ours = sleepy(&server).read_write_lock("rw");
    let (tx, got) = std::sync::mpsc::channel();
    let reader = ours.read().clone();
    std::thread::spawn(move || {
        let guard = reader.try_lock_for(LONG).unwrap();
        let _ = tx.send(guard.map(|guard| guard.unlock()).is_some());
    });
    assert!(eventually(IN_TIME, || server
        .subscribers("redisson_rwlock:{rw}")
        > 0));
    let keys = ["rw", "redisson_rwlock:{rw}", "redisson_unlock_latch:{rw}:x"];
    let released: Option<i64> = eval(
        &mut server.conn(),
        WRITE_UNLOCK,
        &keys,
        &[arg(1), arg(120000), arg(&writer), arg("PUBLISH"), arg(1000)],
    );
    assert_eq!(released, Some(1));
    assert_eq!(
        got.recv_timeout(IN_TIME),
        Ok(true),
        "their unlock did not wake ours"
    );

    // Their reader shares with ours and keeps our writer out.
    let read = ours.read().lock().unwrap();
    assert_eq!(their_read_acquire(&server), None, "readers do not share");
    assert!(ours.write().try_lock().is_err_and(|err| err.is_upgrade()));
    drop(read);
    let other = sleepy(&server).read_write_lock("rw");
    assert!(
        other.write().try_lock().unwrap().is_none(),
        "our writer beside their reader"
    );
    let _: () = redis::cmd("DEL")
        .arg("rw")
        .query(&mut server.conn())
        .unwrap();

    // Our writer holds: their reader is refused until our release wakes it ("1").
    let write = ours.write().lock().unwrap();
    let mut listener = listen(&server, "redisson_rwlock:{rw}");
    assert!(
        their_read_acquire(&server).is_some(),
        "their reader beside our writer"
    );
    write.unlock().unwrap();
    assert_eq!(next_message(&mut listener), "1");
    assert_eq!(their_read_acquire(&server), None);
}

/// Their reader's lease key ran out while the hash lasts for ours: our release of the last
/// live read hold frees the lock and wakes their waiters, as their own read unlock does,
/// rather than leaving a writer to wait out the hash.
#[test]
fn read_write_lock_a_release_frees_a_lock_whose_other_readers_expired() {
    let server = Server::start();
    let ours = sleepy(&server).read_write_lock("rw");
    let read = ours.read().lock_with_lease(LONG).unwrap();
    assert_eq!(their_read_acquire_for(&server, "3000"), None);
    let their_lease = format!("{{rw}}:{THEM}:rwlock_timeout:1");
    assert!(server.exists(&their_lease));
    assert!(eventually(IN_TIME, || !server.exists(&their_lease)));
    let mut listener = listen(&server, "redisson_rwlock:{rw}");
    listener.set_read_timeout(Some(IN_TIME)).unwrap();
    read.unlock().unwrap();
    assert!(
        !server.exists("rw"),
        "the hash of an expired reader was kept"
    );
    assert_eq!(next_message(&mut listener), "0");
}

/// Our read release as their reader's lease runs out: like their own read unlock, it frees
/// the lock only when their lease key has no whole millisecond left (such a key lasts to
/// the end of that millisecond, then expires), and otherwise leaves the hash lasting as
/// long as the key; nothing extends the key, and nothing is left once its lease has ended.
#[test]
fn read_write_lock_a_read_release_as_their_read_lease_ends_frees_only_what_ended() {
    let server = Server::start();
    let ours = server.client().read_write_lock("rw");
    let their_lease = format!("{{rw}}:{THEM}:rwlock_timeout:1");
    let mut redis = server.conn();
    // Both expiries, the hash's first, read in one step.
    let both =
        redis::Script::new("return {redis.call('pttl', KEYS[1]), redis.call('pttl', KEYS[2])}");
    // Our release lands in the last millisecond of their lease, or one or two before.
    for left in (0..=2).cycle().take(30) {
        let read = ours.read().lock_with_lease(LONG).unwrap();
        assert_eq!(their_read_acquire_for(&server, "3"), None);
        while redis::cmd("PTTL")
            .arg(&their_lease)
            .query::<i64>(&mut redis)
            .unwrap()
            > left
        {}
        read.unlock().unwrap();
        let (hash, lease): (i64, i64) =
            both.key("rw").key(&their_lease).invoke(&mut redis).unwrap();
        if hash == -2 {
            assert!(lease <= 0, "freed with {lease} ms of their lease left");
        } else {
            assert!(
                hash >= lease,
                "the hash ({hash} ms) ends before their lease ({lease} ms)"
            );
        }
        std::thread::sleep(Duration::from_millis(5));
        assert!(
            !server.exists(&their_lease),
            "their lease key outlived its lease"
        );
        assert!(!server.exists("rw"), "the hash outlived every lease");
    }
}

// Permit-expirable semaphore, §10.
const SEMAPHORE_KEYS: [&str; 3] = ["pool", "{pool}:timeout", "redisson_sc:{pool}"];
/// Their permit's id: 16 bytes.
const THEIR_PERMIT: &str = "0123456789abcdef";

fn their_semaphore_acquire(server: &Server) -> Option<String> {
    let args = [
        arg(1),
        arg(epoch_ms() + 120_000),
        arg(epoch_ms()),
        arg(922_337_203_685_477u64),
        arg("PUBLISH"),
        arg(THEIR_PERMIT),
    ];
    eval(&mut server.conn(), PERMIT_ACQUIRE, &SEMAPHORE_KEYS, &args)
}

#[test]
fn semaphore_each_side_excludes_and_wakes_the_other() {
    let server = Server::start();
    let ours = sleepy(&server).leased_semaphore("pool");
    assert!(ours.try_set_permits(1).unwrap());
    // Theirs holds the one permit: our waiter waits, and their release wakes it.
    assert_eq!(their_semaphore_acquire(&server).as_deref(), Some("OK"));
    assert!(
        ours.try_acquire().unwrap().is_none(),
        "two holders of one permit"
    );
    let (tx, got) = std::sync::mpsc::channel();
    let waiter = ours.clone();
    std::thread::spawn(move || {
        let permit = waiter.try_acquire_for(LONG).unwrap();
        let _ = tx.send(permit.map(|permit| permit.release()).is_some());
    });
    assert!(eventually(IN_TIME, || server
        .subscribers("redisson_sc:{pool}")
        > 0));
    let keys = [SEMAPHORE_KEYS[0], SEMAPHORE_KEYS[2], SEMAPHORE_KEYS[1]];
    let released: i64 = eval(
        &mut server.conn(),
        PERMIT_RELEASE,
        &keys,
        &[arg(THEIR_PERMIT), arg(1), arg(epoch_ms()), arg("PUBLISH")],
    );
    assert_eq!(released, 1);
    assert_eq!(
        got.recv_timeout(IN_TIME),
        Ok(true),
        "their release did not wake ours"
    );

    // Ours holds it: theirs is refused until our release, whose message says one is free.
    let permit = ours.acquire().unwrap();
    let mut listener = listen(&server, "redisson_sc:{pool}");
    assert_ne!(their_semaphore_acquire(&server).as_deref(), Some("OK"));
    permit.release().unwrap();
    assert_eq!(next_message(&mut listener), "1");
    assert_eq!(their_semaphore_acquire(&server).as_deref(), Some("OK"));
    assert_eq!(ours.available_permits().unwrap(), 0);
}

// Direct hand-off beside Redisson's waiters: only ours are granted the lock, and a Java
// waiter is woken with Redisson's message and takes it itself, as before.

/// Starts our waiter on `client` and waits until it sleeps on its signal: its second
/// attempt, after its subscription was confirmed, has run.
fn our_sleeping_waiter(server: &Server, client: &LockClient) -> OurWaiter {
    let calls = server.calls("evalsha");
    let waiter = OurWaiter::start_on(client, LONG);
    support::await_calls(server, calls + 2);
    waiter
}

#[test]
fn fair_lock_a_java_waiter_behind_a_granted_one_of_ours_keeps_its_turn() {
    let server = Server::start();
    let guard = server.client().fair_lock("fair").lock().unwrap();
    let client = server.client();
    let ours = our_sleeping_waiter(&server, &client);
    let theirs = java(1);
    assert!(java_fair_acquire(&server, &theirs).is_some());
    assert_eq!(fair_queue_len(&server), 2);
    let mut listener = listen_as(&server, &theirs);

    guard.unlock().unwrap();
    assert!(ours.outcome(), "ours was not granted the lock");
    assert_eq!(client.stats().grants_taken, 1, "taken without an attempt");
    assert!(
        java_fair_acquire(&server, &theirs).is_some(),
        "the Java waiter got in beside ours"
    );
    assert_eq!(fair_queue_len(&server), 1, "the Java waiter lost its place");

    ours.unlock();
    assert_eq!(
        next_message(&mut listener),
        "0",
        "woken as Redisson wakes it"
    );
    assert_eq!(
        java_fair_acquire(&server, &theirs),
        None,
        "its turn did not come"
    );
    assert_eq!(java_fair_unlock(&server, &theirs), Some(1));
    assert_eq!(fair_queue_len(&server), 0);
}

#[test]
fn fair_lock_a_java_waiter_ahead_of_ours_is_woken_and_takes_the_lock_itself() {
    let server = Server::start();
    let guard = server.client().fair_lock("fair").lock().unwrap();
    let theirs = java(1);
    assert!(java_fair_acquire(&server, &theirs).is_some());
    let client = server.client();
    let ours = our_sleeping_waiter(&server, &client);
    assert_eq!(fair_queue_len(&server), 2);
    let mut listener = listen_as(&server, &theirs);

    guard.unlock().unwrap();
    assert_eq!(
        next_message(&mut listener),
        "0",
        "woken as Redisson wakes it"
    );
    assert!(
        !server.exists("fair"),
        "the lock was handed to the Java waiter"
    );
    assert_eq!(
        java_fair_acquire(&server, &theirs),
        None,
        "its turn did not come"
    );
    assert_eq!(java_fair_unlock(&server, &theirs), Some(1));
    assert!(ours.outcome(), "ours was not woken");
    assert_eq!(
        client.stats().grants_taken,
        0,
        "a Java release grants nothing"
    );
    ours.unlock();
    assert_eq!(fair_queue_len(&server), 0);
}
