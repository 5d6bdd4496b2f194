//! The leased semaphore: never more holders than permits, across threads and processes, in
//! Redisson's `RPermitExpirableSemaphore` layout; a crashed holder's permits come back when
//! their leases end; a release of k permits wakes k waiters; bad input changes nothing.

use crate::support;

use std::time::Duration;

use redmutex::{Cancel, Error, LeasedPermit, LockClient};
use support::{Server, eventually, get_int, incr, spawn_worker};

const URL_VAR: &str = "REDMUTEX_TEST_URL";
const NAME: &str = "pool";
const HELD: &str = "{pool}:timeout";
const NO_HANG: Duration = Duration::from_secs(60);

#[test]
fn three_permits_never_have_four_holders_across_four_processes() {
    let server = Server::start();
    let semaphore = server.client().leased_semaphore(NAME);
    assert!(semaphore.try_set_permits(3).unwrap());
    assert!(!semaphore.try_set_permits(5).unwrap(), "set twice");
    let workers: Vec<_> = (0..4)
        .map(|_| spawn_worker("semaphore::semaphore_worker", &[(URL_VAR, server.url())]))
        .collect();
    for mut worker in workers {
        assert!(
            worker.wait().unwrap().success(),
            "a worker saw four holders"
        );
    }
    let mut redis = server.conn();
    assert!(
        get_int(&mut redis, "crowded") > 0,
        "never more than one holder"
    );
    assert_eq!(semaphore.available_permits().unwrap(), 3);
    assert!(!server.exists(HELD), "held permits left behind");
}

/// Four threads of one process, each taking a permit 15 times; a count of the current
/// holders, kept beside the semaphore, is checked on every entry.
#[test]
#[ignore = "run as a child process by three_permits_never_have_four_holders_across_four_processes"]
fn semaphore_worker() {
    let url = std::env::var(URL_VAR).expect("started by the parent test");
    let client = LockClient::open(&url).unwrap();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            let (client, url) = (&client, &url);
            scope.spawn(move || {
                let mut redis = redis::Client::open(url.as_str())
                    .unwrap()
                    .get_connection()
                    .unwrap();
                let semaphore = client.leased_semaphore(NAME);
                for _ in 0..15 {
                    let permit = semaphore.acquire().unwrap();
                    let holders = incr(&mut redis, "holders", 1);
                    assert!(holders <= 3, "{holders} holders of 3 permits");
                    if holders > 1 {
                        incr(&mut redis, "crowded", 1);
                    }
                    std::thread::sleep(Duration::from_millis(5));
                    incr(&mut redis, "holders", -1);
                    permit.release().unwrap();
                }
            });
        }
    });
}

#[test]
fn one_permit_excludes_like_a_lock() {
    let server = Server::start();
    let client = server.client();
    client.leased_semaphore(NAME).try_set_permits(1).unwrap();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            let (semaphore, mut redis) = (client.leased_semaphore(NAME), server.conn());
            scope.spawn(move || {
                for _ in 0..50 {
                    let permit = semaphore.acquire().unwrap();
                    let value = get_int(&mut redis, "counter");
                    std::thread::yield_now();
                    let _: () = redis::cmd("SET")
                        .arg("counter")
                        .arg(value + 1)
                        .query(&mut redis)
                        .unwrap();
                    permit.release().unwrap();
                }
            });
        }
    });
    assert_eq!(get_int(&mut server.conn(), "counter"), 4 * 50);
}

#[test]
fn a_killed_holders_permits_come_back_when_their_leases_end() {
    let server = Server::start();
    let semaphore = server.client().leased_semaphore(NAME);
    semaphore.try_set_permits(1).unwrap();
    let mut holder = spawn_worker("semaphore::permit_holder", &[(URL_VAR, server.url())]);
    assert!(eventually(NO_HANG, || server.exists("taken")));
    holder.kill().unwrap();
    holder.wait().unwrap();
    let permit = semaphore.try_acquire_for(NO_HANG).unwrap();
    assert!(
        permit.is_some(),
        "the killed holder's permit never came back"
    );
}

/// Holds the one permit, renewed by the watchdog with a 1 s lease, until killed.
#[test]
#[ignore = "run as a child process by a_killed_holders_permits_come_back_when_their_leases_end"]
fn permit_holder() {
    let url = std::env::var(URL_VAR).expect("started by the parent test");
    let client = LockClient::builder(&url)
        .lease(Duration::from_secs(1))
        .build()
        .unwrap();
    let _permit = client.leased_semaphore(NAME).acquire().unwrap();
    let mut redis = redis::Client::open(url).unwrap().get_connection().unwrap();
    let _: () = redis::cmd("SET")
        .arg("taken")
        .arg(1)
        .query(&mut redis)
        .unwrap();
    loop {
        std::thread::park();
    }
}

#[test]
fn releasing_three_permits_wakes_three_waiters_of_one_client() {
    let server = Server::start();
    // Only a message wakes these waiters in time: their first pause is minutes long.
    let waiters = server
        .builder()
        .retry_base(Duration::from_secs(300))
        .retry_cap(Duration::from_secs(600))
        .build()
        .unwrap();
    let semaphore = waiters.leased_semaphore(NAME);
    semaphore.try_set_permits(1).unwrap();
    let first = semaphore.acquire().unwrap();
    let scripts = server.calls("evalsha");
    let (taken, got) = std::sync::mpsc::channel();
    for i in 0..3 {
        let (semaphore, taken) = (semaphore.clone(), taken.clone());
        std::thread::spawn(move || {
            let permit = semaphore.try_acquire_for(4 * NO_HANG).unwrap();
            let _ = taken.send(permit.is_some());
            // Held to the end of the test, so that no release wakes the others.
            std::thread::park_timeout(4 * NO_HANG);
        });
        // The first waiter tried, subscribed, and tried again; each later one found the
        // channel subscribed and tried once.
        assert!(eventually(NO_HANG, || server.calls("evalsha") >= scripts + 2 + i));
    }
    semaphore.add_permits(2).unwrap();
    first.release().unwrap();
    for _ in 0..3 {
        // Far within the waiters' first pause, which only a message cuts short.
        assert_eq!(
            got.recv_timeout(NO_HANG / 3),
            Ok(true),
            "a waiter was not woken"
        );
    }
}

/// Permits whose leases ran out come back only when an acquisition finds them, and that
/// acquisition publishes how many are available: a waiter told at its last attempt that
/// the first lease ends in an hour, and whose first pause is minutes long, gets one of
/// them on that message alone, as Redisson's waiters, which rely on it, do.
#[test]
fn permits_that_came_back_from_ended_leases_wake_a_waiter() {
    let server = Server::start();
    let semaphore = server.client().leased_semaphore(NAME);
    assert!(semaphore.try_set_permits(2).unwrap());
    let hour = Duration::from_secs(3600);
    let held = [
        semaphore.acquire_with_lease(hour).unwrap(),
        semaphore.acquire_with_lease(hour).unwrap(),
    ];
    let waiters = server
        .builder()
        .retry_base(Duration::from_secs(300))
        .retry_cap(Duration::from_secs(600))
        .build()
        .unwrap();
    let waiter = waiters.leased_semaphore(NAME);
    let scripts = server.calls("evalsha");
    let (taken, got) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let permit = waiter.try_acquire_for(4 * NO_HANG).unwrap();
        let _ = taken.send(permit.map(LeasedPermit::release).is_some());
    });
    // It tried, subscribed, tried again, and sleeps.
    assert!(eventually(NO_HANG, || server.calls("evalsha") >= scripts + 2));
    assert_eq!(server.subscribers(CHANNEL), 1);

    // Both leases end at once, which nothing publishes.
    for permit in &held {
        permit.extend(redmutex::MIN_LEASE).unwrap();
    }
    assert!(eventually(NO_HANG, || ended_leases(&server) == 2));
    let mut listener = server.conn();
    let subscribe = redis::cmd("SUBSCRIBE").arg(CHANNEL).get_packed_command();
    listener.send_packed_command(&subscribe).unwrap();
    listener.recv_response().unwrap();
    listener.set_read_timeout(Some(NO_HANG)).unwrap();

    // Another client's acquisition takes both back, takes one, and says two came back.
    let other = server.client().leased_semaphore(NAME);
    let _kept = other.try_acquire().unwrap().expect("a permit came back");
    assert_eq!(
        got.recv_timeout(NO_HANG),
        Ok(true),
        "the waiter was not woken"
    );
    let heard = listener.recv_response().map(|message| {
        let (_, _, payload): (String, String, String) = redis::from_redis_value(message).unwrap();
        payload
    });
    assert_eq!(
        heard.ok().as_deref(),
        Some("2"),
        "nothing said that permits came back"
    );
    for permit in held {
        assert!(permit.release().unwrap_err().is_lost());
    }
}

const CHANNEL: &str = "redisson_sc:{pool}";

/// How many held permits' leases have ended by the server's clock.
fn ended_leases(server: &Server) -> u64 {
    let mut redis = server.conn();
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut redis).unwrap();
    redis::cmd("ZCOUNT")
        .arg(HELD)
        .arg("-inf")
        .arg(secs * 1000 + micros / 1000)
        .query(&mut redis)
        .unwrap()
}

#[test]
fn a_permit_is_sent_between_threads_and_released_by_id() {
    let server = Server::start();
    let client = server.client();
    let semaphore = client.leased_semaphore(NAME);
    semaphore.try_set_permits(2).unwrap();
    let permit = semaphore
        .acquire_with_lease(Duration::from_secs(30))
        .unwrap();
    let id = permit.id();
    assert_eq!(id.len(), 32);
    let released = std::thread::spawn(move || permit.release()).join().unwrap();
    released.unwrap();

    let other = semaphore.acquire().unwrap();
    semaphore.release(&other.id()).unwrap();
    let err = semaphore.release(&other.id()).unwrap_err();
    assert!(err.is_not_held(), "released twice: {err}");
    assert!(other.release().unwrap_err().is_lost());
    assert_eq!(semaphore.available_permits().unwrap(), 2);
}

#[test]
fn bad_input_and_keys_of_another_kind_change_nothing() {
    let server = Server::start();
    let semaphore = server.client().leased_semaphore(NAME);
    for bad in [0, 1 << 41] {
        assert!(
            semaphore
                .try_set_permits(bad)
                .unwrap_err()
                .is_invalid_input()
        );
        assert!(semaphore.add_permits(bad).unwrap_err().is_invalid_input());
    }
    for id in ["", "xyz", "0123456789abcdef0123456789abcdeg"] {
        let err = semaphore.release(id).unwrap_err();
        assert!(
            matches!(err, Error::InvalidArgument { .. }),
            "{id:?}: {err}"
        );
    }
    let unknown = "0123456789abcdef0123456789abcdef";
    assert!(semaphore.release(unknown).unwrap_err().is_not_held());
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.conn())
        .unwrap();
    assert!(keys.is_empty(), "{keys:?}");

    let _held = server.client().lock(NAME).lock().unwrap();
    assert!(semaphore.try_acquire().unwrap_err().is_wrong_kind());
    assert!(semaphore.try_set_permits(1).unwrap_err().is_wrong_kind());
    assert!(semaphore.add_permits(1).unwrap_err().is_wrong_kind());
    assert!(semaphore.available_permits().unwrap_err().is_wrong_kind());
    assert!(!server.exists(HELD));
}

/// A permit id is taken only in the shape ids are shown in, 32 lowercase hex digits:
/// integer parsing alone read `"+000…01"` as the permit 1 and gave that permit back.
#[test]
fn a_permit_id_in_any_other_shape_is_refused_and_gives_back_nothing() {
    let server = Server::start();
    let semaphore = server.client().leased_semaphore(NAME);
    semaphore.try_set_permits(2).unwrap();
    let one = format!("{:032x}", 1);
    // The permit 1 taken for an hour, as an acquisition leaves it.
    let take = redis::Script::new(
        "local t = redis.call('time')
         redis.call('decr', KEYS[1])
         redis.call('zadd', KEYS[2], tonumber(t[1]) * 1000 + 3600000, ARGV[1])",
    );
    let mut redis = server.conn();
    let () = (take.key(NAME).key(HELD).arg(stored_id(&one)))
        .invoke(&mut redis)
        .unwrap();
    let before = semaphore_state(&mut redis);
    for bad in [
        format!("+{}", &one[1..]),
        format!(" {}", &one[1..]),
        format!("{}\n", &one[1..]),
        "0123456789ABCDEF0123456789ABCDEF".to_owned(),
    ] {
        let err = semaphore.release(&bad).unwrap_err();
        assert!(
            matches!(err, Error::InvalidArgument { .. }),
            "{bad:?}: {err}"
        );
        assert_eq!(semaphore_state(&mut redis), before, "after {bad:?}");
    }
    semaphore.release(&one).unwrap();
    assert_eq!(semaphore.available_permits().unwrap(), 2);
}

/// The leased forms with a timeout or a deadline, named as the locks' are
/// (`try_lock_with_lease_for`), keep the lease they are given.
#[test]
fn timed_acquisitions_with_a_lease_keep_their_lease() {
    let server = Server::start();
    let semaphore = server.client().leased_semaphore(NAME);
    semaphore.try_set_permits(1).unwrap();
    // Shorter than the watchdog lease (30 s), so that the validity tells them apart.
    let (wait, lease) = (Duration::from_secs(10), Duration::from_secs(5));
    let deadline = std::time::Instant::now() + NO_HANG;
    let takes: [&dyn Fn() -> redmutex::Result<Option<LeasedPermit>>; 2] = [
        &|| semaphore.try_acquire_with_lease_for(wait, lease),
        &|| semaphore.try_acquire_with_lease_until(deadline, lease),
    ];
    for take in takes {
        let permit = take().unwrap().expect("a permit is free");
        let left = permit.valid_until() - std::time::Instant::now();
        assert!(left <= lease, "a fixed lease of {lease:?}, {left:?} left");
        assert!(
            semaphore.try_acquire().unwrap().is_none(),
            "one permit only"
        );
        permit.release().unwrap();
    }
}

#[test]
fn a_semaphore_on_redlock_is_unsupported() {
    let servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls: Vec<String> = servers.iter().map(Server::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let client = LockClient::redlock(&urls).build().unwrap();
    let err = client.leased_semaphore(NAME).try_acquire().unwrap_err();
    assert!(err.is_unsupported(), "{err}");
}

/// A busy semaphore whose only held permit's lease ends a millisecond after the attempt
/// runs: the attempt waits (or, when the lease has ended by then, takes that permit back),
/// and every permit it returns is in the server's set of held permits. The busy reply
/// ("1 ms until a lease ends") once shared its encoding with "taken".
#[test]
fn a_lease_ending_a_millisecond_later_never_yields_a_permit_that_is_not_held() {
    let server = Server::start();
    let semaphore = server.client().leased_semaphore(NAME);
    let mut redis = server.conn();
    // All permits taken by someone else, whose lease ends 1 ms after now on the server.
    let busy = redis::Script::new(
        "local t = redis.call('time')
         local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
         redis.call('set', KEYS[1], 0)
         redis.call('del', KEYS[2])
         redis.call('zadd', KEYS[2], now + 1, 'someone-elses-id')
         return now",
    );
    for _ in 0..100 {
        let _: i64 = busy.key(NAME).key(HELD).invoke(&mut redis).unwrap();
        if let Some(permit) = semaphore.try_acquire().unwrap() {
            let id: Vec<u8> = (0..16)
                .map(|i| u8::from_str_radix(&permit.id()[2 * i..2 * i + 2], 16).unwrap())
                .collect();
            let score: Option<f64> = redis::cmd("ZSCORE")
                .arg(HELD)
                .arg(id)
                .query(&mut redis)
                .unwrap();
            assert!(
                score.is_some(),
                "returned permit {} is not held",
                permit.id()
            );
            permit.release().unwrap();
        }
    }
}

/// Everything the semaphore keeps: the keys, the permits available, the held permits with
/// when their leases end.
type SemaphoreState = (Vec<String>, String, Vec<(Vec<u8>, u64)>);

fn semaphore_state(redis: &mut redis::Connection) -> SemaphoreState {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(redis).unwrap();
    keys.sort();
    let available = redis::cmd("GET").arg(NAME).query(redis).unwrap();
    let mut zrange = redis::cmd("ZRANGE");
    zrange.arg(HELD).arg(0).arg(-1).arg("WITHSCORES");
    let held = zrange.query(redis).unwrap();
    (keys, available, held)
}

/// The permit id as stored in the sorted set of held permits: 16 bytes.
fn stored_id(id: &str) -> Vec<u8> {
    (0..16)
        .map(|i| u8::from_str_radix(&id[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

#[test]
fn set_permits_sets_what_is_available_whatever_it_was_and_wakes_waiters() {
    let server = Server::start();
    let client = server.client();
    let semaphore = client.leased_semaphore(NAME);
    assert_eq!(semaphore.set_permits(3).unwrap(), 0, "none before");
    let held = semaphore.acquire().unwrap();
    assert_eq!(semaphore.set_permits(5).unwrap(), 2);
    assert_eq!(semaphore.available_permits().unwrap(), 5);
    held.release().unwrap();
    assert_eq!(
        semaphore.available_permits().unwrap(),
        6,
        "a held permit comes back on top"
    );

    // A waiter on a semaphore without permits is woken by the message, not its pause.
    let other = server.client().leased_semaphore("empty");
    let waiters = server
        .builder()
        .retry_base(Duration::from_secs(300))
        .retry_cap(Duration::from_secs(600))
        .build()
        .unwrap();
    let waiter = waiters.leased_semaphore("empty");
    let thread = std::thread::spawn(move || waiter.try_acquire_for(4 * NO_HANG).unwrap());
    assert!(eventually(NO_HANG, || server
        .subscribers("redisson_sc:{empty}")
        > 0));
    other.set_permits(1).unwrap();
    let (sent, got) = std::sync::mpsc::channel();
    std::thread::spawn(move || sent.send(thread.join().unwrap().is_some()));
    assert_eq!(
        got.recv_timeout(NO_HANG),
        Ok(true),
        "the waiter was not woken"
    );
}

#[test]
fn reduce_and_drain_take_what_is_available_and_never_go_below_zero() {
    let server = Server::start();
    let semaphore = server.client().leased_semaphore(NAME);
    assert_eq!(semaphore.reduce_permits(2).unwrap(), 0);
    assert!(
        !server.exists(NAME),
        "a semaphore without permits is left alone"
    );
    semaphore.try_set_permits(3).unwrap();
    let held = semaphore.acquire().unwrap();
    assert_eq!(semaphore.reduce_permits(1).unwrap(), 1, "what is left");
    assert_eq!(semaphore.available_permits().unwrap(), 1);
    assert_eq!(semaphore.reduce_permits(5).unwrap(), 0, "below zero");
    assert_eq!(semaphore.add_permits(2).unwrap(), 2);
    assert_eq!(
        semaphore.drain_permits().unwrap(),
        2,
        "not what was available"
    );
    assert_eq!(semaphore.available_permits().unwrap(), 0);
    assert!(semaphore.try_acquire().unwrap().is_none());
    assert!(!held.is_lost(), "a held permit is left alone");
    held.release().unwrap();
    assert_eq!(semaphore.available_permits().unwrap(), 1);

    // A held permit whose lease ran out comes back first, and is taken away with the rest.
    let expired = semaphore
        .acquire_with_lease(Duration::from_secs(60))
        .unwrap();
    let () = redis::cmd("ZADD")
        .arg(HELD)
        .arg("XX")
        .arg(1)
        .arg(stored_id(&expired.id()))
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(semaphore.drain_permits().unwrap(), 1);
    assert_eq!(semaphore.available_permits().unwrap(), 0);
}

#[test]
fn delete_removes_the_semaphore_and_its_held_permits_fail_to_release() {
    let server = Server::start();
    let semaphore = server.client().leased_semaphore(NAME);
    semaphore.try_set_permits(2).unwrap();
    let by_guard = semaphore.acquire().unwrap();
    let by_id = semaphore
        .acquire_with_lease(Duration::from_secs(60))
        .unwrap();
    assert!(semaphore.delete().unwrap());
    assert!(!server.exists(NAME) && !server.exists(HELD));
    assert!(!semaphore.delete().unwrap(), "nothing left to delete");
    assert!(by_guard.release().unwrap_err().is_lost());
    assert!(semaphore.release(&by_id.id()).unwrap_err().is_not_held());
    assert!(by_id.extend(Duration::from_secs(5)).unwrap_err().is_lost());

    let _lock = server.client().lock(NAME).lock().unwrap();
    assert!(semaphore.delete().unwrap_err().is_wrong_kind());
    assert!(server.exists(NAME), "another kind's key is left alone");
}

#[test]
fn extend_moves_a_held_permits_lease_and_a_run_out_one_is_lost() {
    let server = Server::start();
    let semaphore = server.client().leased_semaphore(NAME);
    semaphore.try_set_permits(1).unwrap();
    let permit = semaphore
        .acquire_with_lease(Duration::from_secs(2))
        .unwrap();
    let before = permit.valid_until();
    permit.extend(Duration::from_secs(60)).unwrap();
    assert!(permit.valid_until() > before + Duration::from_secs(30));
    let ends: f64 = redis::cmd("ZSCORE")
        .arg(HELD)
        .arg(stored_id(&permit.id()))
        .query(&mut server.conn())
        .unwrap();
    let now: (u64, u64) = redis::cmd("TIME").query(&mut server.conn()).unwrap();
    assert!(
        ends > (now.0 * 1000) as f64 + 30_000.0,
        "the stored lease moved"
    );
    assert!(
        permit
            .extend(Duration::ZERO)
            .unwrap_err()
            .is_invalid_input()
    );

    // Its lease ran out: someone else may have it by now.
    let () = redis::cmd("ZADD")
        .arg(HELD)
        .arg("XX")
        .arg(1)
        .arg(stored_id(&permit.id()))
        .query(&mut server.conn())
        .unwrap();
    assert!(
        permit
            .extend(Duration::from_secs(60))
            .unwrap_err()
            .is_lost()
    );
    assert!(permit.is_lost());
}

#[test]
fn operator_calls_refuse_bad_input_and_missing_rights_writing_nothing() {
    let server = Server::start();
    let semaphore = server.client().leased_semaphore(NAME);
    for bad in [0, (1 << 40) + 1] {
        assert!(semaphore.set_permits(bad).unwrap_err().is_invalid_input());
        assert!(
            semaphore
                .reduce_permits(bad)
                .unwrap_err()
                .is_invalid_input()
        );
    }
    assert!(!server.exists(NAME), "bad input wrote something");

    semaphore.try_set_permits(2).unwrap();
    let () = redis::cmd("ACL")
        .arg(&["SETUSER", "narrow", "on", ">pw", "~*", "&*", "+@all"][..])
        .arg(&["-zremrangebyscore", "-decrby"][..])
        .query(&mut server.conn())
        .unwrap();
    let narrow = LockClient::builder(&format!("redis://narrow:pw@127.0.0.1:{}/", server.port()))
        .build()
        .unwrap()
        .leased_semaphore(NAME);
    assert!(narrow.set_permits(5).unwrap_err().is_permission());
    assert!(narrow.reduce_permits(1).unwrap_err().is_permission());
    assert_eq!(semaphore.available_permits().unwrap(), 2, "a refusal wrote");
}

/// `err` names the semaphore `pool` as a semaphore, and no lock.
fn about_the_semaphore(what: &str, err: &Error) {
    let text = err.to_string();
    assert!(text.contains("semaphore \"pool\""), "{what}: {text}");
    assert!(!text.contains("lock \""), "{what}: {text}");
    let subject = err
        .subject()
        .unwrap_or_else(|| panic!("{what}: no subject: {text}"));
    assert_eq!(subject.noun(), "semaphore", "{what}");
    assert_eq!(err.lock_name(), Some(NAME), "{what}");
}

#[test]
fn every_error_about_a_semaphore_calls_it_a_semaphore() {
    let server = Server::start();
    let client = LockClient::builder(&server.url())
        .max_wait(Duration::from_millis(50))
        .build()
        .unwrap();
    let semaphore = client.leased_semaphore(NAME);
    semaphore.try_set_permits(1).unwrap();
    let held = semaphore.acquire().unwrap();
    let err = semaphore.acquire().unwrap_err();
    assert!(err.is_timeout(), "{err}");
    about_the_semaphore("timeout", &err);

    let unknown = "0123456789abcdef0123456789abcdef";
    let err = semaphore.release(unknown).unwrap_err();
    assert!(err.is_not_held(), "{err}");
    about_the_semaphore("not held", &err);
    assert!(err.to_string().contains("permit"), "{err}");

    for err in [
        semaphore.add_permits(0).unwrap_err(),
        semaphore.release("xyz").unwrap_err(),
        held.extend(Duration::ZERO).unwrap_err(),
    ] {
        assert!(err.is_invalid_input(), "{err}");
        about_the_semaphore("bad input", &err);
    }

    let stop = Cancel::new();
    stop.cancel();
    let err = semaphore.with_cancel(&stop).acquire().unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    about_the_semaphore("cancelled", &err);

    assert!(semaphore.delete().unwrap());
    let err = held.release().unwrap_err();
    assert!(err.is_lost(), "{err}");
    about_the_semaphore("lost", &err);

    let lock = client.lock(NAME).lock().unwrap();
    let err = semaphore.try_acquire().unwrap_err();
    assert!(err.is_wrong_kind(), "{err}");
    assert!(err.to_string().starts_with("semaphore \"pool\""), "{err}");
    lock.unlock().unwrap();

    let () = redis::cmd("ACL")
        .arg(&["SETUSER", "default", "-evalsha"][..])
        .query(&mut server.conn())
        .unwrap();
    let err = semaphore.available_permits().unwrap_err();
    assert!(err.is_permission(), "{err}");
    about_the_semaphore("refused", &err);

    let err = client.leased_semaphore("").available_permits().unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
    assert!(
        err.to_string().starts_with("invalid semaphore name"),
        "{err}"
    );

    client.close();
    let err = semaphore.try_acquire().unwrap_err();
    assert!(err.is_closed(), "{err}");
    about_the_semaphore("closed", &err);
}
