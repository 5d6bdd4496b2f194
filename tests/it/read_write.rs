//! The read-write lock: many readers or one writer, across threads and processes, in
//! Redisson's `RReadWriteLock` layout; reentrant on both sides, a writer may read, a reader
//! asking to write is refused at once; a writer's release wakes every waiting reader.

use crate::support;

use std::time::{Duration, Instant};

use redmutex::LockClient;
use support::{SHORT_LEASE, Server, eventually, get_int, incr, spawn_worker};

const URL_VAR: &str = "REDMUTEX_TEST_URL";
const NAME: &str = "rw";
const LONG: Duration = Duration::from_secs(60);
const NO_HANG: Duration = Duration::from_secs(60);

#[test]
fn readers_in_four_processes_overlap_and_no_writer_overlaps_anyone() {
    let server = Server::start();
    let workers: Vec<_> = (0..4)
        .map(|_| spawn_worker("read_write::read_write_worker", &[(URL_VAR, server.url())]))
        .collect();
    for mut worker in workers {
        assert!(worker.wait().unwrap().success(), "a worker saw an overlap");
    }
    let mut redis = server.conn();
    assert!(
        get_int(&mut redis, "overlaps") > 0,
        "readers never overlapped"
    );
    assert_eq!(get_int(&mut redis, "writes"), 4 * 5);
    assert!(!server.exists(NAME));
}

/// Four threads of one process: each reads 20 times; the first also writes every fourth
/// round. Counters of the current readers and writers, kept beside the lock, are checked on
/// every entry.
#[test]
#[ignore = "run as a child process by readers_in_four_processes_overlap_and_no_writer_overlaps_anyone"]
fn read_write_worker() {
    let url = std::env::var(URL_VAR).expect("started by the parent test");
    let client = LockClient::open(&url).unwrap();
    std::thread::scope(|scope| {
        for thread in 0..4 {
            let (client, url) = (&client, &url);
            scope.spawn(move || {
                let mut redis = redis::Client::open(url.as_str())
                    .unwrap()
                    .get_connection()
                    .unwrap();
                let lock = client.read_write_lock(NAME);
                for round in 0..20 {
                    if thread == 0 && round % 4 == 0 {
                        let guard = lock.write().lock().unwrap();
                        assert_eq!(incr(&mut redis, "writers", 1), 1, "two writers");
                        assert_eq!(get_int(&mut redis, "readers"), 0, "a writer among readers");
                        std::thread::sleep(Duration::from_millis(5));
                        incr(&mut redis, "writes", 1);
                        incr(&mut redis, "writers", -1);
                        guard.unlock().unwrap();
                    }
                    let guard = lock.read().lock().unwrap();
                    let readers = incr(&mut redis, "readers", 1);
                    assert_eq!(
                        get_int(&mut redis, "writers"),
                        0,
                        "a reader beside a writer"
                    );
                    if readers > 1 {
                        incr(&mut redis, "overlaps", 1);
                    }
                    std::thread::sleep(Duration::from_millis(5));
                    incr(&mut redis, "readers", -1);
                    guard.unlock().unwrap();
                }
            });
        }
    });
}

#[test]
fn both_sides_are_reentrant_and_a_writer_may_read() {
    let server = Server::start();
    let client = server.client();
    let other = server.client().read_write_lock(NAME);
    let lock = client.read_write_lock(NAME);

    let first = lock.read().lock().unwrap();
    let second = lock.read().lock().unwrap();
    assert_eq!(lock.read().hold_count().unwrap(), 2);
    assert!(other.read().try_lock().unwrap().is_some(), "readers share");
    assert!(
        other.write().try_lock().unwrap().is_none(),
        "a writer among readers"
    );
    drop((first, second));
    assert!(!server.exists(NAME));

    let write = lock.write().lock().unwrap();
    let again = lock.write().lock().unwrap();
    assert_eq!(lock.write().hold_count().unwrap(), 2);
    let read = lock.read().lock().unwrap();
    assert!(
        other.read().try_lock().unwrap().is_none(),
        "a reader beside a writer"
    );
    drop((again, write));
    // Only this thread's read hold is left: others may read, nobody may write.
    assert!(other.read().try_lock().unwrap().is_some());
    assert!(other.write().try_lock().unwrap().is_none());
    read.unlock().unwrap();
    assert!(!server.exists(NAME));
}

#[test]
fn a_reader_asking_to_write_is_refused_at_once() {
    let server = Server::start();
    let lock = server.client().read_write_lock(NAME);
    let read = lock.read().lock().unwrap();
    let scripts = server.calls("evalsha");
    let err = lock.write().lock().unwrap_err();
    assert!(err.is_upgrade(), "{err}");
    let named = format!("read-write lock {NAME:?}:");
    assert!(err.to_string().starts_with(&named), "{err}");
    assert_eq!(server.calls("evalsha"), scripts, "something was sent");
    read.unlock().unwrap();
    lock.write().lock().unwrap().unlock().unwrap();
}

/// Waiters that only a message can wake in time: long leases, and a retry cap beyond the
/// test.
fn sleepy(server: &Server) -> LockClient {
    server
        .builder()
        .lease(LONG)
        .retry_cap(Duration::from_secs(600))
        .build()
        .unwrap()
}

#[test]
fn a_writers_release_wakes_every_waiting_reader_and_the_last_reader_a_writer() {
    let server = Server::start();
    let writer = sleepy(&server).read_write_lock(NAME);
    let guard = writer.write().lock().unwrap();
    // One client for the three readers: one message reaches them through one subscriber.
    let readers = sleepy(&server);
    // Counted from here: building a client runs a script of its own.
    let scripts = server.calls("evalsha");
    std::thread::scope(|scope| {
        for i in 0..3 {
            let lock = readers.read_write_lock(NAME);
            let server = &server;
            scope.spawn(move || {
                let guard = lock.read().try_lock_for(NO_HANG).unwrap().expect("woken");
                let mut redis = server.conn();
                incr(&mut redis, "readers", 1);
                // Held until all three hold at once: only a release that woke them all
                // lets that happen well within the writer's lease, which the others would
                // otherwise sleep on.
                let together = eventually(LONG / 3, || get_int(&mut redis, "readers") == 3);
                assert!(together, "the readers were not woken together");
                guard.unlock().unwrap();
            });
            // The first reader subscribed, then tried once more and found the lock
            // written; each later one found the channel subscribed and tried once.
            assert!(eventually(NO_HANG, || server.calls("evalsha") >= scripts + 2 + i));
        }
        assert_eq!(server.subscribers("redisson_rwlock:{rw}"), 1);
        guard.unlock().unwrap();
    });

    let reader = sleepy(&server).read_write_lock(NAME);
    let read = reader.read().lock().unwrap();
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| {
            let lock = sleepy(&server).read_write_lock(NAME);
            let guard = lock.write().try_lock_for(NO_HANG).unwrap();
            guard.map(|guard| guard.unlock().unwrap()).is_some()
        });
        assert!(eventually(NO_HANG, || server
            .subscribers("redisson_rwlock:{rw}")
            >= 1));
        read.unlock().unwrap();
        assert!(waiting.join().unwrap(), "the writer was not woken");
    });
}

#[test]
fn the_watchdog_renews_read_holds() {
    let server = Server::start();
    let client = server.builder_with_lease(SHORT_LEASE).build().unwrap();
    let lock = client.read_write_lock(NAME);
    let read = lock.read().lock().unwrap();
    let again = lock.read().lock().unwrap();
    let writer = server.client().read_write_lock(NAME);
    let renewed = eventually(NO_HANG, || {
        assert!(
            writer.write().try_lock().unwrap().is_none(),
            "written while read"
        );
        client.stats().renewals >= 6
    });
    assert!(renewed, "{:?}", client.stats());
    assert!(!read.is_lost() && !again.is_lost());
    drop((again, read));
    assert!(!server.exists(NAME));
    assert_eq!(client.stats().locks_lost, 0);
}

#[test]
fn a_key_of_another_kind_is_refused_on_both_sides() {
    let server = Server::start();
    let client = server.client();
    let plain = client.lock("plain").lock().unwrap();
    let rw = server.client().read_write_lock("plain");
    assert!(rw.read().try_lock().unwrap_err().is_wrong_kind());
    assert!(rw.write().try_lock().unwrap_err().is_wrong_kind());
    drop(plain);

    let read = client.read_write_lock(NAME).read().lock().unwrap();
    let err = server.client().lock(NAME).try_lock().unwrap_err();
    assert!(err.is_wrong_kind(), "{err}");
    assert!(
        server
            .client()
            .fair_lock(NAME)
            .try_lock()
            .unwrap_err()
            .is_wrong_kind()
    );
    drop(read);
    assert!(!server.exists(NAME));
}

/// A forced unlock of a written lock wakes every waiter, readers and a writer, on the
/// read-write lock's channel: without a message they would sleep on the writer's lease.
#[test]
fn a_forced_unlock_wakes_every_waiter() {
    let server = Server::start();
    let holder = sleepy(&server).read_write_lock(NAME);
    // A lease far beyond the test, which the waiters would otherwise sleep on.
    let guard = (holder.write())
        .lock_with_lease(Duration::from_secs(600))
        .unwrap();
    let waiters = sleepy(&server);
    std::thread::scope(|scope| {
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let lock = waiters.read_write_lock(NAME);
                let server = &server;
                scope.spawn(move || {
                    let guard = lock.read().try_lock_for(NO_HANG).unwrap();
                    incr(&mut server.conn(), "woken", 1);
                    guard.is_some()
                })
            })
            .collect();
        assert!(eventually(NO_HANG, || waiters
            .inspect(NAME)
            .unwrap()
            .waiters
            == Some(1)));
        let breaker = server.client().read_write_lock(NAME);
        assert!(breaker.write().force_unlock().unwrap());
        // Long before the waiters' own deadline, which a wait without a message would reach.
        let mut redis = server.conn();
        assert!(
            eventually(NO_HANG / 3, || get_int(&mut redis, "woken") == 2),
            "the readers were not woken by the forced unlock"
        );
        for reader in readers {
            assert!(reader.join().unwrap(), "a reader was not woken");
        }
    });
    assert!(guard.unlock().unwrap_err().is_lost());
}

/// Each side's forced unlock deletes the lock only in its own mode, as Redisson's read and
/// write `forceUnlock` do: breaking the readers never deletes a writer's hold, nor the other
/// way round.
#[test]
fn each_side_force_unlocks_only_its_own_mode() {
    let server = Server::start();
    let client = server.client();
    let lock = client.read_write_lock(NAME);
    let breaker = server.client().read_write_lock(NAME);

    let writing = lock.write().lock().unwrap();
    assert!(
        !breaker.read().force_unlock().unwrap(),
        "a written lock is not the readers'"
    );
    assert!(server.exists(NAME));
    assert_eq!(writing.health(), redmutex::Health::Held);
    writing.unlock().unwrap();

    let reading = lock.read().lock().unwrap();
    assert!(
        !breaker.write().force_unlock().unwrap(),
        "a read lock is not the writer's"
    );
    assert!(server.exists(NAME));
    assert!(breaker.read().force_unlock().unwrap());
    assert!(!server.exists(NAME));
    assert!(reading.unlock().unwrap_err().is_lost());

    let writing = lock.write().lock().unwrap();
    assert!(breaker.write().force_unlock().unwrap());
    assert!(!server.exists(NAME));
    assert!(writing.unlock().unwrap_err().is_lost());
}

/// Whether the read-write lock's key, as the server has it now, lasts at least until
/// `valid_until`: a guard may never be valid past its key's expiry. A key without expiry
/// lasts; a key that is gone lasted until now at most.
fn key_lasts_until(server: &Server, valid_until: Instant) -> bool {
    let pttl: i64 = redis::cmd("PTTL")
        .arg(NAME)
        .query(&mut server.conn())
        .unwrap();
    let after = Instant::now();
    match pttl {
        -1 => true,
        -2 => valid_until <= after,
        // PTTL rounds down: the key lasts less than a millisecond more.
        left => valid_until <= after + Duration::from_millis(left as u64 + 1),
    }
}

/// A short explicit lease for one read hold, long enough for a busy machine to take the
/// holds around it.
const SHORT: Duration = Duration::from_secs(3);

/// Releasing one of two read holds extends nothing in Redis: the hold that is left keeps
/// its own lease key, and once the other reader leaves, the hash lasts no longer than that
/// key. The guard left must not say it holds the lock after a writer got in.
#[test]
fn a_partial_read_release_leaves_the_other_holds_validity_as_redis_has_it() {
    let server = Server::start();
    let lock = server.client().read_write_lock(NAME);
    let other = server.client().read_write_lock(NAME);
    let first = lock.read().lock_with_lease(SHORT).unwrap();
    let second = lock.read().lock_with_lease(LONG).unwrap();
    let theirs = other.read().lock_with_lease(LONG).unwrap();
    second.unlock().unwrap();
    // The first hold's own lease key was set when it was taken, and nothing extended it.
    assert!(
        first.valid_until() <= Instant::now() + SHORT,
        "a partial release moved the validity past the hold's own lease"
    );
    assert!(key_lasts_until(&server, first.valid_until()));

    // The other reader leaves: the hash now lasts as long as the first hold's lease key.
    theirs.unlock().unwrap();
    assert!(key_lasts_until(&server, first.valid_until()));
    let writer = server.client().read_write_lock(NAME);
    let mut written = None;
    assert!(eventually(NO_HANG, || {
        written = writer.write().try_lock().unwrap();
        written.is_some()
    }));
    assert!(
        first.valid_until() <= Instant::now(),
        "a writer got in while a read guard was valid"
    );
    assert_ne!(first.health(), redmutex::Health::Held);
    assert!(first.unlock().unwrap_err().is_lost());
    written.unwrap().unlock().unwrap();
}

/// A writer that also reads keeps the hash alive for its read lease: neither the write
/// side's renewal, nor its re-entry, nor a release that leaves write holds may cut the
/// hash below the read hold's lease, or another writer gets in beside the reader.
#[test]
fn the_write_side_never_cuts_its_own_read_lease() {
    let server = Server::start();
    // A short watchdog lease: the write side renews every half second.
    let client = server.builder_with_lease(SHORT_LEASE).build().unwrap();
    let lock = client.read_write_lock(NAME);
    let write = lock.write().lock().unwrap();
    let read = lock.read().lock_with_lease(LONG).unwrap();
    let renewals = client.stats().renewals;
    assert!(eventually(NO_HANG, || client.stats().renewals >= renewals + 2));
    assert!(
        key_lasts_until(&server, read.valid_until()),
        "the write side's renewal cut the read lease"
    );
    // A re-entry and a release with write holds left, both with a short explicit lease.
    let again = lock.write().lock_with_lease(SHORT).unwrap();
    assert!(
        key_lasts_until(&server, read.valid_until()),
        "the write side's re-entry cut the read lease"
    );
    let third = lock.write().lock_with_lease(SHORT).unwrap();
    third.unlock().unwrap();
    assert!(
        key_lasts_until(&server, read.valid_until()),
        "a write release leaving holds cut the read lease"
    );
    drop((again, write));
    assert!(key_lasts_until(&server, read.valid_until()));

    // Past every write lease: the read hold is still the lock's, for its own lease.
    std::thread::sleep(SHORT + SHORT_LEASE);
    let writer = server.client().read_write_lock(NAME);
    let written = writer.write().try_lock().unwrap();
    assert_eq!(read.health(), redmutex::Health::Held);
    assert!(written.is_none(), "a writer got in beside a held reader");
    assert!(key_lasts_until(&server, read.valid_until()));
    read.unlock().unwrap();
    assert!(!server.exists(NAME));
}

/// When the leases of every reader left have run out, a read release deletes the lock and
/// wakes a waiting writer, as Redisson's does, instead of leaving the hash to its TTL.
#[test]
fn a_read_release_frees_a_lock_whose_other_readers_expired() {
    let server = Server::start();
    let expired = server.client().read_write_lock(NAME);
    let leaving = sleepy(&server).read_write_lock(NAME);
    // The hash lasts as long as the longest read lease: far beyond the test.
    let long = leaving.read().lock_with_lease(LONG * 10).unwrap();
    let short = expired.read().lock_with_lease(SHORT).unwrap();
    let mut redis = server.conn();
    let timeouts = |redis: &mut redis::Connection| -> usize {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("{rw}:*:rwlock_timeout:*")
            .query(redis)
            .unwrap();
        keys.len()
    };
    assert_eq!(timeouts(&mut redis), 2);
    // The short hold's lease key expires.
    assert!(eventually(NO_HANG, || timeouts(&mut redis) == 1));
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| {
            let lock = sleepy(&server).read_write_lock(NAME);
            let guard = lock.write().try_lock_for(NO_HANG).unwrap();
            guard.map(|guard| guard.unlock().unwrap()).is_some()
        });
        assert!(eventually(NO_HANG, || server
            .subscribers("redisson_rwlock:{rw}")
            >= 1));
        long.unlock().unwrap();
        // Deleted, or taken since by the writer it woke.
        let mode: Option<String> = redis::cmd("HGET")
            .arg(NAME)
            .arg("mode")
            .query(&mut redis)
            .unwrap();
        assert_ne!(
            mode.as_deref(),
            Some("read"),
            "a hash of expired readers was kept"
        );
        assert!(waiting.join().unwrap(), "the waiting writer was not woken");
    });
    assert!(short.unlock().unwrap_err().is_lost());
}

/// A thread's read holds whose leases ran out are gone once a release of another of its
/// holds frees the lock: that release reports them lost at once.
#[test]
fn a_read_release_that_frees_the_lock_reports_the_expired_holds_left_lost() {
    let server = Server::start();
    let client = server.client();
    let lock = client.read_write_lock(NAME);
    let first = lock.read().lock_with_lease(SHORT).unwrap();
    let second = lock.read().lock_with_lease(LONG).unwrap();
    let mut redis = server.conn();
    let first_lease_key = |redis: &mut redis::Connection| -> bool {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("{rw}:*:rwlock_timeout:1")
            .query(redis)
            .unwrap();
        !keys.is_empty()
    };
    assert!(first_lease_key(&mut redis));
    assert!(eventually(NO_HANG, || !first_lease_key(&mut redis)));
    second.unlock().unwrap();
    assert!(
        !server.exists(NAME),
        "a hash of expired read holds was kept"
    );
    assert!(first.is_lost());
    assert_eq!(client.stats().locks_lost, 1);
    assert!(first.unlock().unwrap_err().is_lost());
}

/// The read-write scripts check what the user may run before their first write: a refused
/// acquire or release leaves the lock as it was, not half changed.
#[test]
fn a_refused_script_leaves_the_read_write_lock_as_it_was() {
    let server = Server::start();
    let mut admin = server.conn();
    let mut rights = |rules: &[&str]| {
        let mut cmd = redis::cmd("ACL");
        cmd.arg("SETUSER").arg("narrow").arg("on").arg(">secret");
        cmd.arg("~*").arg("&*").arg("+@all").arg(rules);
        let () = cmd.query(&mut admin).unwrap();
    };
    let url = format!("redis://narrow:secret@127.0.0.1:{}/", server.port());

    // Rights taken away once the client is built, which checks them.
    rights(&[]);
    let narrow = LockClient::builder(&url).build().unwrap();
    // HSETNX allowed, HSET not: the first hold's mode must not be written alone.
    rights(&["-hset"]);
    let lock = narrow.read_write_lock(NAME);
    assert!(lock.read().try_lock().is_err());
    assert!(!server.exists(NAME), "a refused read acquire left a hash");

    // PEXPIRE allowed on the latch only: a release that must reset the hash's expiry is
    // refused whole, and the hold stays.
    rights(&["+hset"]);
    let read = lock.read().lock_with_lease(LONG).unwrap();
    let theirs = server.client().read_write_lock(NAME);
    let other = theirs.read().lock_with_lease(LONG).unwrap();
    rights(&["-pexpire", "(~redisson_unlock_latch:* +pexpire)"]);
    assert!(read.unlock().is_err());
    let fields: i64 = redis::cmd("HLEN")
        .arg(NAME)
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(
        fields, 3,
        "a refused read release gave the hold back halfway"
    );
    other.unlock().unwrap();
    let () = redis::cmd("DEL")
        .arg(NAME)
        .query(&mut server.conn())
        .unwrap();

    // HDEL allowed, HSET not: a writer that also reads may not drop its write hold and
    // leave the hash marked written by nobody.
    rights(&["+pexpire"]);
    let write = lock.write().lock_with_lease(LONG).unwrap();
    let read = lock.read().lock_with_lease(LONG).unwrap();
    rights(&["-hset"]);
    assert!(write.unlock().is_err());
    let fields: i64 = redis::cmd("HLEN")
        .arg(NAME)
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(
        fields, 3,
        "a refused write release gave the hold back halfway"
    );
    drop(read);
}

/// A read re-entry that finds its holds gone (broken by a forced unlock) and takes the lock
/// afresh gives back all it wrote, its read lease keys included: none is left to expire.
#[test]
fn a_reentry_that_finds_its_read_holds_gone_leaves_no_lease_key() {
    let server = Server::start();
    let client = server.client();
    let lock = client.read_write_lock(NAME);
    let first = lock.read().lock().unwrap();
    assert!(lock.read().force_unlock().unwrap());
    let err = lock.read().lock().map(drop).unwrap_err();
    assert!(err.is_lost(), "{err}");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*rwlock_timeout*")
        .query(&mut server.conn())
        .unwrap();
    assert!(keys.is_empty(), "lease keys left behind: {keys:?}");
    assert!(!server.exists(NAME));
    assert!(first.unlock().unwrap_err().is_lost());
}

/// A read hold whose lease key was deleted (evicted, or by an operator) is lost at the next
/// renewal, which does not put it back: another reader's release would no longer count it.
#[test]
fn a_read_hold_whose_lease_key_is_gone_is_lost_at_the_next_renewal() {
    let server = Server::start();
    let client = server.builder_with_lease(SHORT_LEASE).build().unwrap();
    let guard = client.read_write_lock(NAME).read().lock().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("{rw}:*:rwlock_timeout:1")
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let _: () = redis::cmd("DEL")
        .arg(&keys[0])
        .query(&mut server.conn())
        .unwrap();
    assert!(
        guard.watch().wait_lost(NO_HANG),
        "the renewal found it gone"
    );
    assert!(!server.exists(&keys[0]), "not put back");
}

/// A read attempt held up on its way until after its give-back ran takes a read hold that
/// no guard holds. Under the owner's own write hold, the hash outlives that hold's lease
/// key: the write release then sets the hash's expiry to the read leases left, so the
/// stray hold ends with its own lease, not with the write side's.
#[test]
fn a_read_hold_taken_after_its_give_back_ends_with_its_own_lease() {
    let server = Server::start();
    let proxy = support::Proxy::start(server.port());
    let client = LockClient::builder(&proxy.url())
        .response_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let lock = client.read_write_lock(NAME);
    // Watched: its renewals keep the hash for 30 s.
    let write = lock.write().lock().unwrap();
    proxy.delay_request_to(b"rwlock_timeout:1", Duration::from_secs(2));
    let err = lock.read().try_lock_with_lease(SHORT).unwrap_err();
    assert!(err.is_connection() || err.is_timeout(), "{err:#}");
    let mut redis = server.conn();
    let lease_keys = |redis: &mut redis::Connection| -> usize {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("{rw}:*:rwlock_timeout:*")
            .query(redis)
            .unwrap();
        keys.len()
    };
    assert!(
        eventually(NO_HANG, || lease_keys(&mut redis) == 1),
        "the held-up attempt never landed"
    );
    write.unlock().unwrap();
    let left: i64 = redis::cmd("PTTL").arg(NAME).query(&mut redis).unwrap();
    assert!(
        left <= SHORT.as_millis() as i64,
        "the stray read hold lasts {left} ms, as long as the write lease"
    );
}
