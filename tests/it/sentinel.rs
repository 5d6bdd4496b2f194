//! Locks on a primary managed by Redis Sentinel: found through the sentinels, followed
//! across a `SENTINEL FAILOVER` and across a killed primary, never taken on a demoted one.
//!
//! Each test starts its own deployment (a primary, a replica, three sentinels with quorum
//! 2). Leases are long (10 min), so that no periodic renewal and no expiry can stand in for
//! what a failover must cause; every wait is on something the servers or the client show.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use parking_lot::Mutex;
use redmutex::{LockClient, LockClientBuilder, LockGuard};
use support::{
    Deployment, MASTER, Options, SHORT_LEASE, Server, StaleSentinel, await_subscribers, channel,
    eventually, hash, info, response_timeout_for, role,
};

const LONG: Duration = Duration::from_secs(600);
/// Generous bound for anything that must not hang.
const NO_HANG: Duration = Duration::from_secs(90);

fn builder(d: &Deployment, lease: Duration) -> LockClientBuilder {
    let urls = d.sentinel_urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let builder = LockClient::sentinel(&urls, MASTER)
        .connect_timeout(Duration::from_secs(5))
        .lease(lease)
        .response_timeout(response_timeout_for(lease).min(Duration::from_secs(5)));
    #[cfg(feature = "tls")]
    if let Some(certs) = d.certs() {
        return builder.tls_root_ca(certs.ca.clone());
    }
    builder
}

/// Lock scripts the server was sent since it started: EVALSHA and EVAL, run or refused.
fn script_calls(server: &Server) -> u64 {
    info(server, "commandstats")
        .lines()
        .filter(|line| line.starts_with("cmdstat_evalsha:") || line.starts_with("cmdstat_eval:"))
        .flat_map(|line| line.split([':', ',']))
        .filter_map(|field| {
            let (name, value) = field.split_once('=')?;
            matches!(name, "calls" | "rejected_calls").then(|| value.parse::<u64>().unwrap())
        })
        .sum()
}

/// Names of the locks reported lost, in order.
type Lost = Arc<Mutex<Vec<String>>>;

fn reporting(b: LockClientBuilder) -> (LockClientBuilder, Lost) {
    let lost = Lost::default();
    let seen = lost.clone();
    (
        b.on_lock_lost(move |l| seen.lock().push(l.name.clone())),
        lost,
    )
}

/// Two watched holds of `client` whose keys reached the replica `replica`; the key of the
/// second is then deleted there alone (the replica made writable for a moment), so that
/// it will not survive a failover.
fn holds_across_failover(client: &LockClient, replica: &Server) -> (LockGuard, LockGuard) {
    let kept = client.lock("kept").lock().unwrap();
    let doomed = client.lock("doomed").lock().unwrap();
    assert!(eventually(NO_HANG, || replica.exists("kept")
        && replica.exists("doomed")));
    let mut conn = replica.conn();
    for (command, args) in [
        ("CONFIG", &["SET", "replica-read-only", "no"][..]),
        ("DEL", &["doomed"][..]),
        ("CONFIG", &["SET", "replica-read-only", "yes"][..]),
    ] {
        redis::cmd(command)
            .arg(args)
            .query::<()>(&mut conn)
            .unwrap();
    }
    (kept, doomed)
}

/// Threads taking and giving back locks until stopped, over whatever happens meanwhile;
/// each sends how many times it got its lock when it ends.
struct Churn {
    stop: Arc<AtomicBool>,
    done: Receiver<u64>,
    threads: Vec<JoinHandle<()>>,
}

impl Churn {
    fn start(client: &LockClient, threads: usize) -> Churn {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, done) = crossbeam_channel::unbounded();
        let threads = (0..threads)
            .map(|i| {
                let (lock, stop, tx) =
                    (client.lock(format!("churn-{i}")), stop.clone(), tx.clone());
                std::thread::spawn(move || {
                    let mut taken = 0;
                    while !stop.load(Ordering::Relaxed) {
                        if let Ok(Some(guard)) = lock.try_lock_for(Duration::from_secs(1)) {
                            taken += 1;
                            let _ = guard.unlock();
                        }
                    }
                    tx.send(taken).unwrap();
                })
            })
            .collect();
        Churn {
            stop,
            done,
            threads,
        }
    }

    /// Stops the threads; fails if one does not end within the bound.
    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let mut taken = 0;
        for _ in &self.threads {
            taken += self
                .done
                .recv_timeout(NO_HANG)
                .expect("a churn thread hung");
        }
        for thread in self.threads {
            thread.join().expect("a churn thread panicked");
        }
        taken
    }
}

/// Waits until `client` takes a fresh lock, trying again after errors; fails past `bound`.
fn usable_within(client: &LockClient, bound: Duration) {
    let end = Instant::now() + bound;
    let lock = client.lock("probe");
    loop {
        match lock.try_lock_for(Duration::from_secs(1)) {
            Ok(Some(guard)) => return guard.unlock().unwrap(),
            result => assert!(Instant::now() < end, "locks unusable: {result:?}"),
        }
    }
}

/// What every failover test checks once the sentinels agree on `new` and the client was
/// told (`renewed` renewals seen): holds, waiters, and where locks are taken from now on.
fn check_after_failover(
    client: &LockClient,
    holder: LockGuard,
    waiter: JoinHandle<()>,
    waited: &Receiver<()>,
    d: &Deployment,
    new: usize,
    old: Option<&Server>,
) {
    let new = &d.servers[new];
    usable_within(client, NO_HANG);
    // The waiter's subscription moved to the new primary.
    await_subscribers(new, &channel("busy"), 1);
    let before = old.map(script_calls);
    // Every lock granted now is on the new primary.
    for i in 0..20 {
        let name = format!("after-{i}");
        let guard = client.lock(&name).lock().unwrap();
        assert!(
            new.exists(&name),
            "{name} granted but not on the new primary"
        );
        guard.unlock().unwrap();
    }
    // The waiter is woken by the unlock message on the new primary.
    assert!(waited.is_empty(), "the waiter got a lock still held");
    holder.unlock().unwrap();
    waited
        .recv_timeout(NO_HANG)
        .expect("the waiter was not woken");
    waiter.join().unwrap();
    if let (Some(old), Some(before)) = (old, before) {
        assert_eq!(
            script_calls(old),
            before,
            "a lock script reached the old primary after the client followed the switch"
        );
    }
}

#[test]
fn a_lock_through_sentinel_lives_its_whole_life() {
    let d = Deployment::start(Options::default());
    let primary = &d.servers[0];
    let client = builder(&d, SHORT_LEASE).build().unwrap();
    assert_eq!(client.nodes(), [MASTER]);

    let lock = client.lock("life");
    let guard = lock.lock().unwrap();
    assert_eq!(hash(&mut primary.conn(), "life").len(), 1);
    // Renewed by the watchdog on the primary.
    let renewals = client.stats().renewals;
    assert!(eventually(NO_HANG, || client.stats().renewals >= renewals + 2));
    assert!(!guard.is_lost());
    guard.unlock().unwrap();
    assert!(!primary.exists("life"));

    // A waiter is woken by the unlock message. With long leases and retries, neither a
    // renewal nor a retry of the waiter can run meanwhile, so every script is counted.
    let calm = builder(&d, LONG)
        .retry_base(LONG)
        .retry_cap(LONG)
        .build()
        .unwrap();
    let guard = calm.lock("life").lock().unwrap();
    let waiter = calm.lock("life");
    let (tx, woken) = crossbeam_channel::unbounded();
    let thread = std::thread::spawn(move || {
        waiter.lock().unwrap().unlock().unwrap();
        tx.send(()).unwrap();
    });
    await_subscribers(primary, &channel("life"), 1);
    let base = script_calls(primary);
    guard.unlock().unwrap();
    woken
        .recv_timeout(NO_HANG)
        .expect("the waiter was not woken");
    thread.join().unwrap();
    // Our unlock, then the waiter's one attempt and its unlock: woken, not polling.
    assert_eq!(script_calls(primary), base + 3);
    assert!(!primary.exists("life"));
    assert_eq!(client.stats().locks_lost + calm.stats().locks_lost, 0);
}

/// The common body of the failover tests: `fail` makes the primary go away (and returns the
/// old primary, if it is to be checked) and waits until the sentinels agree on a new one.
fn survives_failover(
    d: &mut Deployment,
    fail: impl FnOnce(&mut Deployment) -> (usize, Option<usize>),
) {
    let (b, lost) = reporting(builder(d, LONG));
    let client = b.build().unwrap();
    let other = builder(d, LONG).build().unwrap();
    let replica = &d.servers[1];
    let (kept, doomed) = holds_across_failover(&client, replica);
    // A lock held by another client, its key on the replica too, and a waiter for it.
    let holder = other.lock("busy").lock().unwrap();
    assert!(eventually(NO_HANG, || replica.exists("busy")));
    let (tx, waited) = crossbeam_channel::unbounded();
    let waiter = client.lock("busy");
    let waiter = std::thread::spawn(move || {
        waiter.lock().unwrap().unlock().unwrap();
        tx.send(()).unwrap();
    });
    await_subscribers(&d.servers[0], &channel("busy"), 1);
    let churn = Churn::start(&client, 2);
    let renewals = client.stats().renewals;

    let (new, old) = fail(d);

    // Told of the switch, the client renews every watched hold on the new primary at once.
    assert!(eventually(NO_HANG, || client.stats().renewals > renewals));
    assert!(eventually(NO_HANG, || lost
        .lock()
        .contains(&"doomed".to_owned())));
    assert!(doomed.is_lost());
    assert!(!kept.is_lost());
    assert_eq!(hash(&mut d.servers[new].conn(), "kept").len(), 1);
    churn.stop();

    check_after_failover(
        &client,
        holder,
        waiter,
        &waited,
        d,
        new,
        old.map(|i| &d.servers[i]),
    );
    kept.unlock().unwrap();
    assert!(doomed.unlock().unwrap_err().is_lost());
    // Reported once; a churning hold taken on the old primary just before the switch may
    // have been lost with it too, but nothing else.
    let lost = lost.lock();
    assert_eq!(lost.iter().filter(|name| *name == "doomed").count(), 1);
    assert!(
        lost.iter()
            .all(|name| name == "doomed" || name.starts_with("churn-")),
        "{lost:?}"
    );
}

#[test]
fn sentinel_failover_moves_every_lock_to_the_new_primary() {
    let mut d = Deployment::start(Options::default());
    survives_failover(&mut d, |d| {
        // The sentinel the client watches first goes away: it must watch another.
        d.sentinels.remove(0);
        (d.failover(), Some(0))
    });
}

/// Sentinels, primary and replica speaking TLS only: the client reaches the sentinels and,
/// through them, every primary over TLS, and follows a failover as over plain TCP.
#[test]
#[cfg(feature = "tls")]
fn sentinels_and_primaries_over_tls_follow_a_failover() {
    if !support::has_tls() {
        return;
    }
    let mut d = Deployment::start(Options {
        tls: Some(support::tls::Certs::generate()),
        ..Options::default()
    });
    assert!(d.sentinel_urls()[0].starts_with("rediss://"));
    survives_failover(&mut d, |d| (d.failover(), Some(0)));
}

#[test]
fn a_killed_primary_is_replaced_and_never_used_again() {
    let mut d = Deployment::start(Options::default());
    survives_failover(&mut d, |d| {
        let old = d.servers[0].port();
        d.servers[0].stop();
        let new = d.await_new_primary(old);
        // The old primary comes back empty, as a master, at its old address.
        d.servers[0].restart();
        (new, Some(0))
    });
}

#[test]
fn sentinels_and_primary_with_passwords() {
    let d = Deployment::start(Options {
        replicas: 0,
        sentinels: 1,
        quorum: 1,
        sentinel_password: Some("sentinel-pw-3141".into()),
        password: Some("primary-pw-2718".into()),
        ..Options::default()
    });
    let port = d.sentinels[0].port();
    let good = format!("redis://:sentinel-pw-3141@127.0.0.1:{port}/");
    let client = LockClient::sentinel(&[&good], MASTER)
        .primary_credentials("", "primary-pw-2718")
        .build()
        .unwrap();
    // The whole life, the subscriber logging in to the primary too.
    let guard = client.lock("pw").lock().unwrap();
    let waiter = client.lock("pw");
    let thread = std::thread::spawn(move || waiter.lock().unwrap().unlock().unwrap());
    await_subscribers(&d.servers[0], &channel("pw"), 1);
    guard.unlock().unwrap();
    thread.join().unwrap();

    for (url, secret) in [
        (
            format!("redis://:wrong-pw-1618@127.0.0.1:{port}/"),
            "wrong-pw-1618",
        ),
        (format!("redis://127.0.0.1:{port}/"), "sentinel-pw-3141"),
    ] {
        let err = LockClient::sentinel(&[&url], MASTER)
            .primary_credentials("", "primary-pw-2718")
            .build()
            .unwrap_err();
        let shown = format!("{err} {err:?}");
        assert!(err.is_auth(), "{shown}");
        assert!(shown.contains(&format!("127.0.0.1:{port}")), "{shown}");
        assert!(
            !shown.contains(secret) && !shown.contains("primary-pw-2718"),
            "{shown}"
        );
    }
    let err = LockClient::sentinel(&[&good], MASTER)
        .primary_credentials("", "wrong-pw-1414")
        .build()
        .unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(err.is_auth(), "{shown}");
    assert!(
        !shown.contains("wrong-pw-1414") && !shown.contains("sentinel-pw-3141"),
        "{shown}"
    );
    let builder = LockClient::sentinel(&[&good], MASTER).primary_credentials("u", "builder-pw");
    assert!(!format!("{builder:?}").contains("sentinel-pw-3141"));
    assert!(!format!("{builder:?}").contains("builder-pw"));

    let plain = LockClient::builder("redis://127.0.0.1:1/").primary_credentials("", "x");
    assert!(plain.build().unwrap_err().is_invalid_input());
}

#[test]
fn a_client_that_missed_the_switch_is_refused_by_the_old_primary_and_follows() {
    let mut d = Deployment::start(Options::default());
    // Pings far apart, and the sentinel the client watches frozen: nothing announces the
    // switch to the client.
    let client = builder(&d, LONG)
        .ping_interval(Duration::from_secs(600))
        .build()
        .unwrap();
    let lock = client.lock("ro");
    lock.lock().unwrap().unlock().unwrap(); // a pooled connection to the primary
    let frozen = d.sentinels.remove(0);
    frozen.pause();
    let new = d.failover();
    let (old, new) = (&d.servers[0], &d.servers[new]);
    // The old primary is demoted by hand at once. Sentinel would do it later, closing every
    // client connection as it does; this way the pooled one stays open.
    redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(new.port())
        .query::<()>(&mut old.conn())
        .unwrap();
    let (scripts, roles) = (script_calls(old), old.calls("role"));
    let end = Instant::now() + NO_HANG;
    loop {
        match lock.try_lock_for(Duration::from_secs(1)) {
            Ok(Some(guard)) => {
                assert!(new.exists("ro"), "granted, but not by the new primary");
                guard.unlock().unwrap();
                break;
            }
            result => assert!(Instant::now() < end, "never moved: {result:?}"),
        }
    }
    // What moved it: the script answered READONLY on the pooled connection or, had
    // Sentinel closed that first, a new connection's ROLE.
    assert!(
        script_calls(old) > scripts || old.calls("role") > roles,
        "the old primary was never asked, so it was not what moved the client"
    );
    drop(frozen);
}

#[test]
fn a_sentinel_that_missed_the_failover_never_moves_the_client_back() {
    let d = Deployment::start(Options::default());
    let old = &d.servers[0];
    // Named under the first configuration's epoch, 0, for ever.
    let stale = StaleSentinel::start(old.port(), 0);
    let mut urls = d.sentinel_urls();
    urls.push(stale.url());
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let client = LockClient::sentinel(&urls, MASTER)
        .connect_timeout(Duration::from_secs(5))
        .response_timeout(Duration::from_secs(2))
        .lease(LONG)
        .ping_interval(Duration::from_millis(100))
        .build()
        .unwrap();
    let held = client.lock("held").lock().unwrap();
    let new = &d.servers[d.failover()];
    // The client follows the real sentinels' announcement: the hold is renewed there.
    assert!(eventually(NO_HANG, || new.exists("held")));
    // The old primary answers as a master again, as it does until Sentinel reconfigures it.
    redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query::<()>(&mut old.conn())
        .unwrap();
    // Close the client's subscription on each real sentinel until it watches the stale one,
    // which it asks where the primary is before it pings there.
    let asked = stale.asked();
    assert!(
        eventually(NO_HANG, || {
            for sentinel in &d.sentinels {
                let _ = redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("TYPE")
                    .arg("pubsub")
                    .query::<i64>(&mut sentinel.conn());
            }
            stale.asked() > asked && stale.pinged() > 0
        }),
        "the client never watched the stale sentinel"
    );
    assert_eq!(role(old), "master", "reconfigured too soon to tell");
    let scripts = script_calls(old);
    let after = client.lock("after").lock().unwrap();
    assert!(new.exists("after"), "not taken on the new primary");
    assert!(!old.exists("after"), "taken on the demoted primary");
    after.unlock().unwrap();
    held.unlock().unwrap();
    assert_eq!(script_calls(old), scripts, "the demoted primary was used");
}

/// A waiter blocked reading its subscriber connection moves as soon as the sentinels
/// announce the new primary, not when the old one closes its connections or its next probe
/// (ten minutes away) finds out. The old primary here cannot be demoted (its `SLAVEOF` is
/// renamed away), so it never closes them: only the announcement can move the waiter, and
/// the release on the new primary wakes it.
#[test]
fn a_waiter_moves_when_the_switch_is_announced_not_when_the_old_primary_hangs_up() {
    let d = Deployment::start(Options {
        primary_args: [
            "--rename-command",
            "SLAVEOF",
            "",
            "--rename-command",
            "REPLICAOF",
            "",
        ]
        .map(String::from)
        .to_vec(),
        ..Options::default()
    });
    let holder = builder(&d, LONG).build().unwrap();
    let waiters = builder(&d, LONG)
        .ping_interval(Duration::from_secs(600))
        .build()
        .unwrap();
    let guard = holder.lock("announced").lock().unwrap();
    let rival = waiters.lock("announced");
    let waiter = std::thread::spawn(move || rival.try_lock_for(LONG).unwrap().is_some());
    let old = &d.servers[0];
    await_subscribers(old, &channel("announced"), 1);
    let new = &d.servers[d.failover()];
    assert!(
        eventually(NO_HANG, || new.subscribers(&channel("announced")) == 1),
        "the waiter subscribed on the new primary"
    );
    assert_eq!(role(old), "master", "the old primary was never demoted");
    guard.unlock().unwrap();
    assert!(
        waiter.join().unwrap(),
        "the release on the new primary woke the waiter"
    );
}

/// Every waiting call of a client that does nothing but wait, on a primary that is SIGKILLed
/// and replaced by its replica: the waiters subscribe on the new primary, and the releases
/// made there wake them (see `failover::every_waiting_call_follows`).
#[test]
fn every_waiting_call_on_a_killed_primary_follows_to_the_new_one() {
    let d = std::cell::RefCell::new(Deployment::start(Options::default()));
    // Subscribes nothing: what is subscribed below is the waiters'.
    let holder = builder(&d.borrow(), LONG).pubsub(false).build().unwrap();
    let waiters = builder(&d.borrow(), LONG).build().unwrap();
    let new = std::cell::Cell::new(0);
    let channels = |server: &Server, name: &str| server.any_channels(&format!("*{{{name}}}*"));
    crate::failover::every_waiting_call_follows(
        &holder,
        &waiters,
        |what| format!("killed:{what}"),
        |name| channels(&d.borrow().servers[0], name),
        || {
            let mut d = d.borrow_mut();
            crate::failover::replicated(&d.servers[0], &d.servers[1]);
            let old = d.servers[0].port();
            d.servers[0].stop();
            new.set(d.await_new_primary(old));
        },
        |name| channels(&d.borrow().servers[new.get()], name),
    );
}
