//! The spin lock (Redisson's `RSpinLock` layout): the reentrant lock's hash without pub/sub.
//! Its waiters never subscribe and its releases never publish; they back off exponentially.

use crate::support;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redmutex::{Cancel, Lock, LockClient, Spin};
use support::{SHORT_LEASE, Server, channel, eventually, hash};

/// Longer than any test: only a release frees the lock in time.
const LONG: Duration = Duration::from_secs(60);

/// Starts `lock.try_lock_for(wait)` in a thread of its own; its answer, whether it got the
/// lock (released at once), comes on the receiver.
fn waiter(lock: Lock<Spin>, wait: Duration) -> mpsc::Receiver<bool> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let guard = lock.try_lock_for(wait).unwrap();
        let got = guard.is_some();
        if let Some(guard) = guard {
            guard.unlock().unwrap();
        }
        let _ = tx.send(got);
    });
    rx
}

/// Every pub/sub command the server ran (or refused) since it started.
fn pubsub_calls(server: &Server) -> u64 {
    [
        "subscribe",
        "ssubscribe",
        "psubscribe",
        "publish",
        "spublish",
    ]
    .iter()
    .map(|command| server.calls(command) + server.rejected_calls(command))
    .sum()
}

#[test]
fn a_spin_lock_is_reentrant_and_excludes_other_threads() {
    let server = Server::start();
    let client = server.client();
    let lock = client.spin_lock("spun");
    let first = lock.lock().unwrap();
    let second = lock.try_lock().unwrap().expect("re-entered at once");
    assert_eq!(lock.hold_count().unwrap(), 2);
    // The reentrant lock's hash: one field of this thread, counting both holds.
    let fields = hash(&mut server.conn(), "spun");
    assert_eq!(fields.len(), 1);
    assert!(fields[0].0.starts_with(client.id()), "{fields:?}");
    assert_eq!(fields[0].1, 2);

    let other = lock.clone();
    let busy = thread::spawn(move || other.try_lock().unwrap().is_none());
    assert!(busy.join().unwrap(), "another thread took a held spin lock");
    second.unlock().unwrap();
    assert!(lock.is_locked().unwrap(), "one hold is left");
    let other = client.spin_lock("spun");
    let busy = thread::spawn(move || other.try_lock().unwrap().is_none());
    assert!(busy.join().unwrap());
    first.unlock().unwrap();
    assert!(!server.exists("spun"));
    let other = client.spin_lock("spun");
    let free = thread::spawn(move || other.try_lock().unwrap().map(|g| g.unlock().unwrap()));
    assert!(
        free.join().unwrap().is_some(),
        "free after the last release"
    );
    assert_eq!(pubsub_calls(&server), 0);
}

#[test]
fn a_spin_lock_and_a_reentrant_lock_of_one_name_exclude_each_other() {
    let server = Server::start();
    let (a, b) = (server.client(), server.client());
    let spin = a.spin_lock("shared");
    let guard = spin.lock().unwrap();
    assert!(b.lock("shared").try_lock().unwrap().is_none());
    assert!(b.fenced_lock("shared").try_lock().unwrap().is_none());
    guard.unlock().unwrap();

    let guard = b.lock("shared").lock().unwrap();
    assert!(spin.try_lock().unwrap().is_none(), "spin took a held RLock");
    // Our spin waiter needs no message to take it after the release.
    let waiting = waiter(a.spin_lock("shared"), LONG);
    guard.unlock().unwrap();
    assert_eq!(waiting.recv_timeout(Duration::from_secs(10)), Ok(true));
}

#[test]
fn leases_expire_and_the_watchdog_renews() {
    let server = Server::start();
    let client = server.builder_with_lease(SHORT_LEASE).build().unwrap();
    let lock = client.spin_lock("leased");
    let guard = lock.lock_with_lease(Duration::from_millis(300)).unwrap();
    assert!(!guard.is_watched());
    let left = lock.remaining_lease().unwrap().expect("an expiry");
    assert!(left <= Duration::from_millis(300), "{left:?}");
    assert!(eventually(Duration::from_secs(10), || !server.exists("leased")));
    assert!(guard.unlock().unwrap_err().is_lost());

    let guard = lock.lock().unwrap();
    assert!(guard.is_watched());
    let renewals = client.stats().renewals;
    // Past two leases: only renewals keep it.
    assert!(eventually(Duration::from_secs(30), || client
        .stats()
        .renewals
        >= renewals + 3));
    assert!(!guard.is_lost());
    assert!(lock.is_locked().unwrap());
    guard.unlock().unwrap();
    assert!(!server.exists("leased"));
    assert_eq!(pubsub_calls(&server), 0);
}

#[test]
fn a_waiter_gets_the_lock_after_its_release_without_pubsub() {
    let server = Server::start();
    let holder = server.client();
    let guard = holder.spin_lock("l").lock_with_lease(LONG).unwrap();
    let base = server.calls("evalsha");
    let waiting = waiter(server.client().spin_lock("l"), LONG);
    // It spins: attempts keep coming, with no subscription.
    support::await_calls(&server, base + 4);
    assert_eq!(server.subscribers(&channel("l")), 0);
    assert_eq!(server.channels("*"), 0, "nothing subscribed at all");
    guard.unlock().unwrap();
    // The lease is 60 s; the back-off is 128 ms at most.
    assert_eq!(waiting.recv_timeout(Duration::from_secs(10)), Ok(true));
    assert_eq!(pubsub_calls(&server), 0, "no SUBSCRIBE or PUBLISH ran");
    // A forced unlock publishes nothing either.
    let _held = holder.spin_lock("l").lock().unwrap();
    assert!(holder.spin_lock("l").force_unlock().unwrap());
    assert_eq!(pubsub_calls(&server), 0);
}

#[test]
fn deadlines_and_cancels_end_a_spinning_wait() {
    let server = Server::start();
    let holder = server.client();
    let _guard = holder.spin_lock("l").lock_with_lease(LONG).unwrap();
    let client = server
        .builder()
        .max_wait(Duration::from_millis(300))
        .build()
        .unwrap();
    let lock = client.spin_lock("l");
    let started = Instant::now();
    assert!(lock.try_lock().unwrap().is_none());
    let wait = Duration::from_millis(400);
    let started_wait = Instant::now();
    assert!(lock.try_lock_for(wait).unwrap().is_none());
    let waited = started_wait.elapsed();
    // Not before its deadline, and within a response timeout (5 s here) of it.
    assert!(waited >= wait, "{waited:?}");
    assert!(waited < wait + Duration::from_secs(5), "{waited:?}");
    let err = lock.lock().unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert!(started.elapsed() >= Duration::from_millis(700));

    // A cancel ends a wait with no deadline, whatever the back-off.
    let slow = server
        .builder()
        .spin_backoff(Duration::from_secs(600), Duration::from_secs(600))
        .build()
        .unwrap();
    let cancel = Cancel::new();
    let lock = slow.spin_lock("l").with_cancel(&cancel);
    let base = server.calls("evalsha");
    let waiting = thread::spawn(move || lock.lock().map(drop));
    support::await_calls(&server, base + 1);
    cancel.cancel();
    let err = waiting.join().unwrap().unwrap_err();
    assert!(err.is_cancelled(), "{err}");
}

/// The most attempts a waiter whose sleeps double from `initial` to `max` (each at least
/// half of its step) can make in `waited`: the first, one after each sleep that fits, and
/// one at the deadline.
fn most_attempts(initial: Duration, max: Duration, waited: Duration) -> u64 {
    // Three besides one per sleep that fits: the first attempt, the one at the deadline,
    // and one more seen once on a busy machine (a pause cut short at the end of the wait).
    let (mut step, mut slept, mut attempts) = (initial, Duration::ZERO, 3);
    loop {
        slept += step / 2;
        if slept >= waited {
            return attempts;
        }
        attempts += 1;
        step = (step * 2).min(max);
    }
}

#[test]
fn the_back_off_doubles_from_its_first_step_up_to_its_cap() {
    let server = Server::start();
    let _guard = server
        .client()
        .spin_lock("l")
        .lock_with_lease(LONG)
        .unwrap();
    // Configured: a doubling from 10 ms to 2 s. Stuck at 10 ms it would make over 100
    // attempts in 1.5 s; starting at 2 s, two (the first and one at the deadline).
    let (initial, max) = (Duration::from_millis(10), Duration::from_secs(2));
    let client = server.builder().spin_backoff(initial, max).build().unwrap();
    let base = server.calls("evalsha");
    let started = Instant::now();
    assert!(
        (client
            .spin_lock("l")
            .try_lock_for(Duration::from_millis(1500)))
        .unwrap()
        .is_none()
    );
    let waited = started.elapsed();
    let attempts = server.calls("evalsha") - base;
    let most = most_attempts(initial, max, waited);
    assert!(
        attempts <= most,
        "{attempts} attempts in {waited:?}, at most {most}"
    );
    // Its first sleeps (10, 20, 40 ms at most) fit in 1.5 s many times over.
    assert!(attempts >= 4, "{attempts} attempts in {waited:?}");

    // The default: 1 ms doubling to 128 ms.
    let client = server.client();
    let base = server.calls("evalsha");
    let started = Instant::now();
    let wait = Duration::from_secs(1);
    assert!(client.spin_lock("l").try_lock_for(wait).unwrap().is_none());
    let waited = started.elapsed();
    let attempts = server.calls("evalsha") - base;
    let default = (Duration::from_millis(1), Duration::from_millis(128));
    let most = most_attempts(default.0, default.1, waited);
    assert!(
        attempts <= most,
        "{attempts} attempts in {waited:?}, at most {most}"
    );
    assert!(attempts >= 4, "{attempts} attempts in {waited:?}");
    assert_eq!(pubsub_calls(&server), 0);
}

#[test]
fn the_back_off_takes_its_whole_range_and_refuses_what_is_outside_it() {
    let server = Server::start();
    let ms = Duration::from_millis;
    let most = Duration::from_secs(600);
    for (initial, max) in [
        (Duration::from_micros(100), Duration::from_micros(100)),
        (Duration::from_micros(100), most),
        (most, most),
        (ms(1), ms(128)),
    ] {
        let client = server.builder().spin_backoff(initial, max).build();
        assert!(client.is_ok(), "{initial:?}..{max:?}: {:?}", client.err());
    }
    for (initial, max) in [
        (Duration::ZERO, ms(128)),
        (Duration::from_micros(99), ms(128)),
        (ms(10), ms(9)),
        (ms(1), most + Duration::from_nanos(1)),
        (most + ms(1), most + ms(1)),
    ] {
        let err = server
            .builder()
            .spin_backoff(initial, max)
            .build()
            .unwrap_err();
        assert!(
            matches!(
                err,
                redmutex::Error::InvalidConfig {
                    setting: "spin_backoff",
                    ..
                }
            ),
            "{initial:?}..{max:?}: {err}"
        );
    }
}

/// A user with the rights `docs/deploying.md` lists for a lock user, less every channel and
/// pub/sub command.
fn user_without_pubsub(server: &Server) -> String {
    let words = crate::acl::rules("ACL SETUSER locker on");
    let rules: Vec<&str> = (words.iter().map(String::as_str))
        .filter(|word| word.starts_with('~') || word.starts_with('+'))
        .filter(|word| !["+publish", "+subscribe", "+unsubscribe"].contains(word))
        .collect();
    assert!(rules.contains(&"+evalsha"), "{rules:?}");
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER")
        .arg("spinner")
        .arg("reset")
        .arg("on")
        .arg(">pass");
    for rule in rules {
        cmd.arg(rule);
    }
    let () = cmd.query(&mut server.conn()).unwrap();
    format!("redis://spinner:pass@127.0.0.1:{}/", server.port())
}

#[test]
fn a_user_without_pubsub_rights_uses_spin_locks() {
    let server = Server::start();
    let url = user_without_pubsub(&server);
    let builder = || {
        LockClient::builder(&url)
            .connect_timeout(Duration::from_secs(5))
            .response_timeout(response_timeout())
            .lease(SHORT_LEASE)
            .key_prefix("myapp:")
    };
    // Without pubsub(false), building asks for the channel rights.
    let err = builder().build().unwrap_err();
    assert!(err.is_permission(), "{err}");
    let holder = builder().pubsub(false).build().unwrap();
    let waiter_client = builder().pubsub(false).build().unwrap();

    let lock = holder.spin_lock("acl");
    let guard = lock.lock().unwrap();
    let renewals = holder.stats().renewals;
    let waiting = waiter(waiter_client.spin_lock("acl"), LONG);
    assert!(eventually(Duration::from_secs(30), || holder
        .stats()
        .renewals
        >= renewals + 2));
    assert!(!guard.is_lost());
    guard.unlock().unwrap();
    assert_eq!(waiting.recv_timeout(Duration::from_secs(10)), Ok(true));
    let _held = waiter_client.spin_lock("acl").lock().unwrap();
    assert!(lock.force_unlock().unwrap());
    assert!(!lock.is_locked().unwrap());
    assert_eq!(
        pubsub_calls(&server),
        0,
        "nothing tried to subscribe or publish"
    );
}

fn response_timeout() -> Duration {
    support::response_timeout_for(SHORT_LEASE)
}
