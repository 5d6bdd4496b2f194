//! Defaults that work together: every lease the builder accepts builds and holds with every
//! other setting left at its default, and a setting the user chose is still checked as given.

use crate::support;

use std::io::Write;
use std::time::{Duration, Instant};

use redmutex::{Error, LockClient};
use support::Server;

/// Each lease is taken with no other setting, held past three leases (so only renewals can
/// have kept it) while a rival with every default finds it busy, then released. The default
/// lease, 30 s, is held until its first renewal only, which must have moved its expiry.
#[test]
fn every_lease_builds_and_holds_with_the_other_settings_left_alone() {
    let server = Server::start();
    let leases = [50, 300, 1_000, 2_000, 5_000].map(|ms| (Duration::from_millis(ms), 3));
    let default = (Duration::from_secs(30), 0);
    std::thread::scope(|scope| {
        for (lease, held) in leases.into_iter().chain([default]) {
            let server = &server;
            scope.spawn(move || hold_past_leases(server, lease, held));
        }
    });
}

/// Holds a lock with `lease` past `leases` leases and past three renewals to each of them
/// (at least one).
fn hold_past_leases(server: &Server, lease: Duration, leases: u32) {
    let name = format!("defaults:{}", lease.as_millis());
    let client = LockClient::builder(&server.url())
        .lease(lease)
        .build()
        .unwrap_or_else(|err| panic!("lease {lease:?} alone does not build: {err}"));
    let rival = LockClient::open(&server.url()).unwrap().lock(&name);
    let lock = client.lock(&name);
    let guard = lock.lock().unwrap();
    let taken = Instant::now();
    let renewals = u64::from(3 * leases).max(1);
    while taken.elapsed() <= leases * lease || client.stats().renewals < renewals {
        if guard.is_lost() || rival.try_lock().unwrap().is_some() {
            // A watchdog held up for longer than the lease (a short one, on a busy
            // machine) lets it lapse; the guard must have known before anyone got in. A
            // lease of a second or more never lapses here: its watchdog must renew it.
            assert!(
                lease < Duration::from_secs(1),
                "lease {lease:?}: lost, or a rival got in"
            );
            assert!(
                guard.valid_until() <= Instant::now(),
                "lease {lease:?}: lost, or a rival got in, while the guard was valid"
            );
            let _ = writeln!(
                std::io::stderr(),
                "lease {lease:?}: lapsed, the watchdog held up longer than the lease"
            );
            return;
        }
        std::thread::sleep(lease.min(Duration::from_secs(1)) / 10);
    }
    // What the acquisition alone would have left, at most: a renewal left more.
    let unrenewed = lease.saturating_sub(taken.elapsed());
    let left: i64 = redis::cmd("PTTL")
        .arg(&name)
        .query(&mut server.conn())
        .unwrap();
    if left < 0 && lease < Duration::from_secs(1) {
        // A short lease may lapse after the loop as within it: the guard must know.
        assert!(
            guard.valid_until() <= Instant::now(),
            "lease {lease:?}: the key is gone while the guard is valid"
        );
        return;
    }
    assert!(
        u128::try_from(left).unwrap_or(0) > unrenewed.as_millis(),
        "lease {lease:?}: {left} ms left, as if never renewed"
    );
    assert!(!guard.is_lost(), "lease {lease:?}: lost while held");
    guard
        .unlock()
        .unwrap_or_else(|err| panic!("lease {lease:?}: release failed: {err}"));
    assert!(!server.exists(&name), "lease {lease:?}: key left behind");
    assert_eq!(client.stats().locks_lost, 0, "lease {lease:?}");
}

/// Every renew interval the builder accepts with the default lease (1 ms to half of 30 s)
/// builds, and renews a held lock, with the response timeout and the rest left alone;
/// above half the lease it is refused.
#[test]
fn a_renew_interval_alone_builds_and_renews_across_its_range() {
    let server = Server::start();
    for millis in [1, 10, 300, 2_000, 9_999, 15_000] {
        let interval = Duration::from_millis(millis);
        let client = LockClient::builder(&server.url())
            .renew_interval(interval)
            .build()
            .unwrap_or_else(|err| panic!("renew interval {interval:?} alone: {err}"));
        let guard = client.lock("renewed").lock().unwrap();
        assert!(
            support::eventually(interval + Duration::from_secs(10), || client
                .stats()
                .renewals
                > 0),
            "renew interval {interval:?}: never renewed"
        );
        guard.unlock().unwrap();
    }
    let err = LockClient::builder(&server.url())
        .renew_interval(Duration::from_millis(15_001))
        .build()
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidConfig {
                setting: "renew_interval",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_response_timeout_set_by_the_user_is_checked_as_given() {
    let server = Server::start();
    let err = LockClient::builder(&server.url())
        .lease(Duration::from_secs(5))
        .response_timeout(Duration::from_secs(2))
        .build()
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidConfig {
                setting: "response_timeout",
                ..
            }
        ),
        "{err}"
    );
    LockClient::builder(&server.url())
        .lease(Duration::from_secs(5))
        .response_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
}

#[test]
fn a_fair_queue_wait_alone_works_across_its_range() {
    let server = Server::start();
    let holder = LockClient::open(&server.url()).unwrap().fair_lock("queued");
    for wait in [
        Duration::from_millis(100),
        Duration::from_secs(5),
        redmutex::MAX_LEASE,
    ] {
        let client = LockClient::builder(&server.url())
            .fair_queue_wait(wait)
            .build()
            .unwrap_or_else(|err| panic!("fair queue wait {wait:?} alone: {err}"));
        let lock = client.fair_lock("queued");
        let guard = holder.lock().unwrap();
        // Queued behind the holder, then gone from the queue when it gives up.
        let waited = lock.try_lock_for(Duration::from_millis(300)).unwrap();
        assert!(waited.is_none(), "{wait:?}: taken while held");
        let queued: usize = redis::cmd("LLEN")
            .arg("redisson_lock_queue:{queued}")
            .query(&mut server.conn())
            .unwrap();
        assert_eq!(queued, 0, "{wait:?}: left its place behind");
        drop(guard);
        let taken = lock.try_lock().unwrap();
        assert!(taken.is_some(), "{wait:?}: not taken once free");
    }
}

/// A client name alone, across what is accepted: one character to 64, any printable ASCII
/// without spaces; the rest is refused before anything is sent, naming the setting.
#[test]
fn a_client_name_alone_works_across_its_range() {
    let server = Server::start();
    let longest = "n".repeat(64);
    for name in [
        "a",
        "billing-7",
        "web-3/41722",
        "~!#$%^&*()[]{}<>|\\:;'\",.?`",
        &longest,
    ] {
        let client = LockClient::builder(&server.url())
            .client_name(name)
            .build()
            .unwrap_or_else(|err| panic!("client name {name:?} alone: {err}"));
        let _held = client.lock("named").lock().unwrap();
        let info = client.inspect("named").unwrap();
        assert_eq!(info.holders[0].client.as_deref(), Some(name));
    }
    let too_long = "n".repeat(65);
    for name in [
        "",
        "two words",
        "tab\there",
        "line\nbreak",
        "naïve",
        &too_long,
    ] {
        let err = LockClient::builder(&server.url())
            .client_name(name)
            .build()
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidConfig {
                    setting: "client_name",
                    ..
                }
            ),
            "{name:?}: {err}"
        );
    }
}

/// A short lease has a short response timeout (11 ms for 50 ms): a client built on a busy
/// machine, whose first check's reply comes later than that, is built all the same, the
/// checks tried again within the connect timeout.
#[test]
fn a_short_lease_builds_when_a_check_s_reply_is_late() {
    let server = Server::start();
    let proxy = support::Proxy::start(server.port());
    // Loads the scripts, so that each check of the next build is one EVALSHA.
    LockClient::open(&proxy.url()).unwrap();
    let base = server.calls("evalsha");
    proxy.delay_replies(Duration::from_millis(40));
    let url = proxy.url();
    let built = std::thread::spawn(move || {
        LockClient::builder(&url)
            .lease(Duration::from_millis(50))
            .build()
            .map(drop)
    });
    // A second check was sent: the first one's reply came too late.
    let retried = support::eventually(Duration::from_secs(10), || {
        server.calls("evalsha") >= base + 2 || built.is_finished()
    });
    proxy.delay_replies(Duration::ZERO);
    let built = built.join().unwrap();
    assert!(retried && server.calls("evalsha") >= base + 2, "{built:?}");
    built.unwrap();
}

/// `pubsub(false)` alone: a waiter of every kind is served by its retries, with nothing
/// subscribed on the server while it waits (behind a holder of kind `H`).
#[test]
fn a_client_without_pubsub_alone_waits_for_every_kind() {
    use support::MakeLock;
    fn body<K: MakeLock, H: MakeLock>(server: &Server) {
        let name = format!("no-pubsub-{}", K::NAME);
        let holder = server.client();
        let waiter = LockClient::builder(&server.url())
            .pubsub(false)
            .build()
            .unwrap_or_else(|err| panic!("pubsub(false) alone: {err}"));
        let guard = H::make(&holder, &name).lock().unwrap();
        let lock = K::make(&waiter, &name);
        let (done, taken) = std::sync::mpsc::channel();
        let attempts = server.calls("evalsha") + server.calls("set");
        std::thread::spawn(move || {
            let got = lock.try_lock_for(Duration::from_secs(60));
            let _ = done.send(got.map(|guard| guard.map(|guard| guard.unlock().is_ok())));
        });
        // It has tried twice (the second after a pause), and subscribed to nothing.
        assert!(
            support::eventually(Duration::from_secs(20), || {
                server.calls("evalsha") + server.calls("set") >= attempts + 2
            }),
            "{}: the waiter made no second attempt",
            K::NAME
        );
        assert_eq!(server.channels("*"), 0, "{}: subscribed", K::NAME);
        drop(guard);
        let got = taken.recv_timeout(Duration::from_secs(20));
        assert!(
            matches!(got, Ok(Ok(Some(true)))),
            "{}: not served once free: {got:?}",
            K::NAME
        );
    }
    let server = Server::start();
    use redmutex::Write as Writer;
    use redmutex::{Fair, Fenced, NonReentrant, NonReentrantFair, Read, Reentrant, Spin, Token};
    body::<Reentrant, Reentrant>(&server);
    body::<Fenced, Fenced>(&server);
    body::<Fair, Fair>(&server);
    body::<NonReentrant, NonReentrant>(&server);
    body::<NonReentrantFair, NonReentrantFair>(&server);
    body::<Spin, Spin>(&server);
    body::<Read, Writer>(&server);
    body::<Writer, Read>(&server);
    body::<Token, Token>(&server);
}

/// A deadlock timeout alone, across what is accepted (10 ms to 600 s, or none): each builds,
/// takes and waits; at the short end a cycle of two such clients is found and one is told;
/// out of range is refused naming the setting.
#[test]
fn a_deadlock_timeout_alone_works_across_its_range() {
    let server = Server::start();
    let with = |timeout: Option<Duration>| {
        LockClient::builder(&server.url())
            .deadlock_timeout(timeout)
            .build()
            .unwrap_or_else(|err| panic!("deadlock timeout {timeout:?} alone: {err}"))
    };
    for timeout in [
        None,
        Some(Duration::from_millis(10)),
        Some(Duration::from_secs(1)),
        Some(Duration::from_secs(600)),
    ] {
        let (one, two) = (with(timeout), with(timeout));
        let name = format!("dl:{timeout:?}");
        let held = one.lock(&name).lock().unwrap();
        let waited = two
            .lock(&name)
            .try_lock_for(Duration::from_millis(50))
            .unwrap();
        assert!(waited.is_none(), "{timeout:?}: taken while held");
        drop(held);
        assert!(two.lock(&name).try_lock().unwrap().is_some(), "{timeout:?}");
    }
    // At the short end, a cycle of two: the later waiter is told.
    let (one, two) = (
        with(Some(Duration::from_millis(10))),
        with(Some(Duration::from_millis(10))),
    );
    let waiting = || crate::deadlock::waiting_beside(&server, "dl:a");
    let err = crate::deadlock::cycle_of_two((&one, &two), ("dl:a", "dl:b"), &waiting);
    assert!(err.is_deadlock(), "{err:#}");
    for bad in [
        Duration::ZERO,
        Duration::from_millis(9),
        Duration::from_secs(601),
    ] {
        let built = LockClient::builder(&server.url())
            .deadlock_timeout(Some(bad))
            .build();
        match built {
            Err(Error::InvalidConfig { setting, .. }) => assert_eq!(setting, "deadlock_timeout"),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
}
