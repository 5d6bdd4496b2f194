//! Real Redisson (3.52.0 and 4.7.0) and this crate on one reentrant lock (Redisson's
//! `RLock`, `RFencedLock` and `RSpinLock` share its hash), both ways.

use crate::support;

use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use redmutex::{Kind, Lock, LockClient, LockKind};
use serde_json::{Value, json};
use support::java::{Jvm, Redisson};
use support::toolchain::{Toolchain, skip_without};
use support::{Server, await_subscribers, channel, eventually, hash};

/// Makes our handle of the lock kind Redisson calls by the name beside it.
type Make<K> = fn(&LockClient, &str) -> Lock<K>;

/// Runs `case` for each version, on the reentrant lock (Redisson `RLock`) and on the
/// fenced lock (`RFencedLock`).
macro_rules! each_version_and_kind {
    ($case:ident) => {
        for version in Redisson::ALL {
            $case(version, "lock", |client: &LockClient, name: &str| {
                client.lock(name)
            });
            $case(version, "fenced", |client: &LockClient, name: &str| {
                client.fenced_lock(name)
            });
        }
    };
}

#[test]
fn java_s_release_wakes_our_waiter_and_ours_wakes_java_s() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    fn case<K: Kind>(version: Redisson, kind: &str, make: Make<K>) {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let a = java.thread("a");
        let ours = server.sleepy();

        a.ok("lock", kind, "shared", Value::Null);
        let waiter = wait_for_lock(make(&ours, "shared"));
        await_subscribers(&server, &channel("shared"), 1);
        a.ok("unlock", kind, "shared", Value::Null);
        // Java's lease was 30 s and our waiter would try again after 30 s.
        let woken = waiter.recv_timeout(Duration::from_secs(10));
        assert!(
            matches!(woken, Ok(Ok(()))),
            "Redisson {version:?} {kind}: our waiter was not woken: {woken:?}"
        );

        // Our subscription to the first name lingers: the second half takes another, so
        // that the subscriber awaited is Java's.
        let guard = make(&ours, "shared-again").lock().unwrap();
        let pending = a.send("tryLock", kind, "shared-again", json!({"wait": 20_000}));
        await_subscribers(&server, &channel("shared-again"), 1);
        guard.unlock().unwrap();
        // Our lease is 30 s: Redisson, not woken, would wait for it.
        let taken = pending.wait_for(Duration::from_secs(10));
        assert_eq!(
            taken,
            Some(Ok(json!(true))),
            "Redisson {version:?} {kind} was not woken by our release"
        );
        assert_eq!(
            a.ok("holdCount", kind, "shared-again", Value::Null),
            json!(1)
        );
        a.ok("unlock", kind, "shared-again", Value::Null);
    }
    each_version_and_kind!(case);
}

/// Takes `lock` on a thread of its own and releases it at once; what that did comes
/// through the receiver.
fn wait_for_lock<K: Kind>(lock: Lock<K>) -> Receiver<redmutex::Result<()>> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(lock.lock().and_then(|guard| guard.unlock()));
    });
    receiver
}

/// The lock's hash: owner field -> hold count.
fn fields(server: &Server, key: &str) -> Vec<(String, i64)> {
    hash(&mut server.conn(), key)
}

fn pttl(server: &Server, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query(&mut server.conn())
        .unwrap()
}

/// The fencing counter beside the lock, if any.
fn counter(server: &Server, name: &str) -> Option<u64> {
    redis::cmd("GET")
        .arg(format!("redisson_lock_token:{{{name}}}"))
        .query(&mut server.conn())
        .unwrap()
}

/// The one holder our inspection shows, with its count.
fn holder(ours: &LockClient, name: &str) -> (String, u64) {
    let info = ours.inspect(name).unwrap();
    assert_eq!(info.holders.len(), 1, "{info:?}");
    (info.holders[0].id.clone(), info.holders[0].holds)
}

/// Scripts the server has run, by EVAL or EVALSHA.
fn scripts_run(server: &Server) -> u64 {
    server.calls("eval") + server.calls("evalsha")
}

/// Whether a lease read as `first_left` ms before `first`, read again later as `left` ms
/// (negative: no key) after `at`, was renewed in between: without a renewal it could not
/// have more left than `first_left` less the time passed. 100 ms is the margin for
/// rounding; a renewal a third of the way into a lease gains a third of it.
fn renewed(first: Instant, first_left: i64, at: Instant, left: i64) -> bool {
    let passed = at.duration_since(first).as_millis() as i64;
    left > 0 && left > first_left - passed + 100
}

const SHORT: Duration = support::SHORT_LEASE;

#[test]
fn hold_counts_agree_from_both_sides() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    fn case<K: Kind>(version: Redisson, kind: &str, make: Make<K>) {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let (a, b) = (java.thread("a"), java.thread("b"));
        let ours = server.client();
        let lock = make(&ours, "counted");

        a.ok("lock", kind, "counted", Value::Null);
        a.ok("lock", kind, "counted", Value::Null);
        assert_eq!(
            holder(&ours, "counted"),
            (a.owner(), 2),
            "{version:?} {kind}"
        );
        assert!(a.owner().starts_with(&format!("{}:", java.uuid)));
        let shape = match kind {
            "fenced" => LockKind::Fenced,
            _ => LockKind::Reentrant,
        };
        assert_eq!(ours.inspect("counted").unwrap().kind, shape);
        assert_eq!(a.ok("holdCount", kind, "counted", Value::Null), json!(2));
        assert_eq!(b.ok("holdCount", kind, "counted", Value::Null), json!(0));
        assert_eq!(b.ok("heldByMe", kind, "counted", Value::Null), json!(false));
        assert!(lock.try_lock().unwrap().is_none());
        a.ok("unlock", kind, "counted", Value::Null);
        assert_eq!(holder(&ours, "counted"), (a.owner(), 1));
        a.ok("unlock", kind, "counted", Value::Null);
        assert!(!server.exists("counted"));

        let first = lock.lock().unwrap();
        let second = lock.lock().unwrap();
        let held = fields(&server, "counted");
        assert_eq!(held.len(), 1, "{held:?}");
        assert!(
            held[0].0.starts_with(&format!("{}:", ours.id())),
            "{held:?}"
        );
        assert_eq!(held[0].1, 2, "{version:?} {kind}: {held:?}");
        assert_eq!(a.ok("isLocked", kind, "counted", Value::Null), json!(true));
        assert_eq!(a.ok("holdCount", kind, "counted", Value::Null), json!(0));
        let refused = a.ok("tryLock", kind, "counted", json!({"wait": 0}));
        assert_eq!(refused, json!(false), "Redisson {version:?} {kind}");
        let ttl = a.ok("ttl", kind, "counted", Value::Null).as_i64().unwrap();
        assert!(
            0 < ttl && ttl <= 30_000,
            "Redisson {version:?} saw ttl {ttl}"
        );
        second.unlock().unwrap();
        assert_eq!(fields(&server, "counted")[0].1, 1);
        assert_eq!(a.ok("isLocked", kind, "counted", Value::Null), json!(true));
        first.unlock().unwrap();
        assert_eq!(a.ok("isLocked", kind, "counted", Value::Null), json!(false));
    }
    each_version_and_kind!(case);
}

#[test]
fn java_s_watchdog_renewal_is_seen_by_our_inspection() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    fn case<K: Kind>(version: Redisson, kind: &str, _: Make<K>) {
        let server = Server::start();
        // Renewed every second: a JVM stalled for up to 2 s on a busy machine keeps it.
        let watchdog = Duration::from_secs(3);
        let java = Jvm::shared(version).connect(&server.url(), Some(watchdog));
        let a = java.thread("a");
        let ours = server.client();

        a.ok("lock", kind, "renewed", Value::Null);
        let first_left = pttl(&server, "renewed");
        let first = Instant::now();
        assert!(0 < first_left && first_left <= 3000, "{first_left}");
        let mut last = None;
        let seen = eventually(Duration::from_secs(10), || {
            let at = Instant::now();
            last = ours.inspect("renewed").unwrap().lease_left;
            last.is_some_and(|left| renewed(first, first_left, at, left.as_millis() as i64))
        });
        assert!(
            seen,
            "Redisson {version:?} {kind}: no renewal seen; {first_left} ms left at first, \
             then {last:?}"
        );
        assert_eq!(holder(&ours, "renewed"), (a.owner(), 1));
        a.ok("unlock", kind, "renewed", Value::Null);
    }
    each_version_and_kind!(case);
}

#[test]
fn our_watchdog_renewal_is_seen_by_java_s_remaining_ttl() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    fn case<K: Kind>(version: Redisson, kind: &str, make: Make<K>) {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let a = java.thread("a");
        let ours = server.builder_with_lease(SHORT).build().unwrap();
        let guard = make(&ours, "renewed").lock().unwrap();

        let ttl = || a.ok("ttl", kind, "renewed", Value::Null).as_i64().unwrap();
        let first_left = ttl();
        let first = Instant::now();
        assert!(0 < first_left && first_left <= 1500, "{first_left}");
        let mut last = first_left;
        let seen = eventually(Duration::from_secs(10), || {
            let at = Instant::now();
            last = ttl();
            renewed(first, first_left, at, last)
        });
        assert!(
            seen,
            "Redisson {version:?} {kind} saw no renewal of ours: {first_left} ms left at \
             first, then {last}"
        );
        guard.unlock().unwrap();
    }
    each_version_and_kind!(case);
}

#[test]
fn each_side_s_hold_and_lease_excludes_the_other() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    fn case<K: Kind>(version: Redisson, kind: &str, make: Make<K>) {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let (a, b) = (java.thread("a"), java.thread("b"));
        let ours = server.client();
        let lock = make(&ours, "leased");

        // Java's lease is the key's; a refused attempt of ours takes no token.
        a.ok("lock", kind, "leased", json!({"lease": 2000}));
        let left = pttl(&server, "leased");
        assert!(
            0 < left && left <= 2000,
            "Redisson {version:?} {kind}: PTTL {left}"
        );
        let tokens = counter(&server, "leased");
        assert!(lock.try_lock().unwrap().is_none());
        assert!(lock.try_lock_with_lease(SHORT).unwrap().is_none());
        assert_eq!(counter(&server, "leased"), tokens);
        assert_eq!(holder(&ours, "leased"), (a.owner(), 1));
        a.ok("unlock", kind, "leased", Value::Null);

        let guard = lock.lock_with_lease(Duration::from_secs(2)).unwrap();
        let ttl = b.ok("ttl", kind, "leased", Value::Null).as_i64().unwrap();
        assert!(
            0 < ttl && ttl <= 2000,
            "Redisson {version:?} {kind}: ttl {ttl}"
        );
        let tokens = counter(&server, "leased");
        let refused = b.ok("tryLock", kind, "leased", json!({"wait": 0}));
        assert_eq!(refused, json!(false), "Redisson {version:?} {kind}");
        assert_eq!(counter(&server, "leased"), tokens);
        guard.unlock().unwrap();

        // A Java lease that lapses (nothing is published then) lets our waiter in.
        a.ok("lock", kind, "leased", json!({"lease": 500}));
        let guard = lock.try_lock_for(Duration::from_secs(10)).unwrap();
        assert!(
            guard.is_some(),
            "Redisson {version:?} {kind}: lease did not lapse"
        );
    }
    each_version_and_kind!(case);
}

#[test]
fn fencing_tokens_increase_across_java_and_ours() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    for version in Redisson::ALL {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let a = java.thread("a");
        let ours = server.client();
        let lock = ours.fenced_lock("fenced");
        let java_token = || {
            let token = a.ok("lockToken", "fenced", "fenced", Value::Null);
            token.as_u64().unwrap()
        };

        let mut tokens = vec![java_token()];
        a.ok("unlock", "fenced", "fenced", Value::Null);
        let first = lock.lock().unwrap();
        let again = lock.lock().unwrap();
        tokens.extend([first.token(), again.token()]);
        drop((again, first));
        tokens.extend([java_token(), java_token()]);
        assert_eq!(
            a.ok("token", "fenced", "fenced", Value::Null),
            json!(tokens[4])
        );
        a.ok("unlock", "fenced", "fenced", Value::Null);
        a.ok("unlock", "fenced", "fenced", Value::Null);
        let last = lock.lock().unwrap();
        tokens.push(last.token());

        assert!(
            tokens.windows(2).all(|pair| pair[0] < pair[1]),
            "Redisson {version:?}: tokens {tokens:?}"
        );
        assert_eq!(counter(&server, "fenced"), Some(tokens[5]));
        assert_eq!(ours.inspect("fenced").unwrap().fence, Some(tokens[5]));
        assert_eq!(
            a.ok("token", "fenced", "fenced", Value::Null),
            json!(tokens[5])
        );
        last.unlock().unwrap();
    }
}

#[test]
fn a_forced_unlock_from_either_side_wakes_the_other_s_waiter() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    fn case<K: Kind>(version: Redisson, kind: &str, make: Make<K>) {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let (a, b) = (java.thread("a"), java.thread("b"));
        let ours = server.sleepy();

        // Java's hold has a 30 s lease and our waiter tries again after 30 s.
        a.ok("lock", kind, "forced", Value::Null);
        let waiter = wait_for_lock(make(&ours, "forced"));
        await_subscribers(&server, &channel("forced"), 1);
        assert_eq!(
            b.ok("forceUnlock", kind, "forced", Value::Null),
            json!(true)
        );
        let woken = waiter.recv_timeout(Duration::from_secs(10));
        assert!(
            matches!(woken, Ok(Ok(()))),
            "Redisson {version:?} {kind}: our waiter was not woken: {woken:?}"
        );

        // Our hold has a 30 s lease, renewed; Java waits for up to 20 s. Another name, as
        // our subscription to the first lingers.
        let lock = make(&ours, "forced-again");
        let guard = lock.lock().unwrap();
        let waiting = a.send("tryLock", kind, "forced-again", json!({"wait": 20_000}));
        await_subscribers(&server, &channel("forced-again"), 1);
        assert_eq!(ours.inspect("forced-again").unwrap().waiters, Some(1));
        assert!(lock.force_unlock().unwrap());
        assert_eq!(
            waiting.wait_for(Duration::from_secs(10)),
            Some(Ok(json!(true))),
            "Redisson {version:?} {kind} was not woken by our forced unlock"
        );
        assert!(guard.unlock().unwrap_err().is_lost());
        assert_eq!(holder(&ours, "forced-again"), (a.owner(), 1));
        a.ok("unlock", kind, "forced-again", Value::Null);
    }
    each_version_and_kind!(case);
}

#[test]
fn java_s_spin_lock_and_ours_exclude_each_other() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    for version in Redisson::ALL {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let (a, b) = (java.thread("a"), java.thread("b"));
        let ours = server.client();
        let lock = ours.lock("spun");

        a.ok("lock", "spin", "spun", Value::Null);
        assert!(lock.try_lock().unwrap().is_none(), "Redisson {version:?}");
        assert_eq!(holder(&ours, "spun"), (a.owner(), 1));
        a.ok("unlock", "spin", "spun", Value::Null);
        assert!(!server.exists("spun"));

        let guard = lock.lock().unwrap();
        let refused = b.ok("tryLock", "spin", "spun", json!({"wait": 0}));
        assert_eq!(refused, json!(false), "Redisson {version:?}");
        let before = scripts_run(&server);
        let spinning = b.send("tryLock", "spin", "spun", json!({"wait": 20_000}));
        // Two refused attempts: it spins.
        assert!(eventually(Duration::from_secs(10), || scripts_run(&server)
            >= before + 2));
        assert_eq!(
            spinning.is_done(),
            None,
            "Redisson {version:?} took a held lock"
        );
        guard.unlock().unwrap();
        // Spin waiters back off to 128 ms between attempts; no message is needed.
        assert_eq!(
            spinning.wait_for(Duration::from_secs(10)),
            Some(Ok(json!(true))),
            "Redisson {version:?} did not take the lock we released"
        );
        assert_eq!(holder(&ours, "spun"), (b.owner(), 1));
        assert!(lock.try_lock().unwrap().is_none());
        b.ok("unlock", "spin", "spun", Value::Null);
    }
}

#[test]
fn an_unlock_by_a_non_holder_leaves_the_holder_alone() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    fn case<K: Kind>(version: Redisson, kind: &str, make: Make<K>) {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let (a, b) = (java.thread("a"), java.thread("b"));
        let ours = server.client();
        let lock = make(&ours, "owned");

        let guard = lock.lock().unwrap();
        let ours_before = fields(&server, "owned");
        let refused = a.call("unlock", kind, "owned", Value::Null).unwrap_err();
        assert!(
            refused.starts_with("IllegalMonitorStateException"),
            "Redisson {version:?} {kind}: {refused}"
        );
        assert_eq!(fields(&server, "owned"), ours_before);
        assert!(!guard.is_lost());
        let our_field = ours_before[0].0.clone();

        // Our hold forced out, Java takes the lock: our release finds it lost.
        assert_eq!(b.ok("forceUnlock", kind, "owned", Value::Null), json!(true));
        a.ok("lock", kind, "owned", Value::Null);
        let err = guard.unlock().unwrap_err();
        assert!(err.is_lost(), "{version:?} {kind}: {err:?}");
        assert!(!lock.force_unlock_held_by(&our_field).unwrap());
        assert_eq!(fields(&server, "owned"), vec![(a.owner(), 1)]);
        assert_eq!(a.ok("holdCount", kind, "owned", Value::Null), json!(1));
        a.ok("unlock", kind, "owned", Value::Null);
        assert!(!server.exists("owned"));
    }
    each_version_and_kind!(case);
}
