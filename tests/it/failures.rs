//! Redis down, restarted or frozen, and bad input: typed errors, no hang, nothing written.

use crate::support;

use std::time::{Duration, Instant};

use redmutex::{Error, LockClient, MAX_NAME_LEN};
use support::Server;

#[test]
fn building_with_redis_down_fails_promptly_with_a_typed_error() {
    let mut server = Server::start();
    server.stop();
    let started = Instant::now();
    let err = server
        .builder()
        .connect_timeout(Duration::from_millis(300))
        .build()
        .unwrap_err();
    assert!(err.is_connection(), "{err}");
    assert!(std::error::Error::source(&err).is_some());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "hung for {:?}",
        started.elapsed()
    );
}

#[test]
fn building_against_a_frozen_redis_fails_instead_of_hanging() {
    let server = Server::start();
    server.pause();
    let started = Instant::now();
    let result = server
        .builder()
        .connect_timeout(Duration::from_millis(300))
        .response_timeout(Duration::from_millis(300))
        .build();
    server.resume();
    let err = result.unwrap_err();
    assert!(err.is_connection(), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "hung for {:?}",
        started.elapsed()
    );
}

#[test]
fn a_client_idle_through_a_restart_works_on_its_next_call() {
    let mut server = Server::start();
    let client = server.builder().pool_size(4).build().unwrap();
    let lock = client.lock("restart");
    // Fill the pool with connections that the restart will kill.
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| assert!(!lock.is_locked().unwrap()));
        }
    });
    server.restart();
    let guard = lock.lock().unwrap();
    assert!(lock.is_locked().unwrap());
    guard.unlock().unwrap();
}

#[test]
fn dropping_a_guard_while_redis_is_frozen_returns() {
    let server = Server::start();
    let client = server
        .builder()
        .connect_timeout(Duration::from_millis(200))
        .response_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let guard = client.lock("frozen").lock().unwrap();
    server.pause();
    drop(guard); // bounded by the timeouts; a failure is logged
    let err = client.lock("frozen").is_locked().unwrap_err();
    server.resume();
    assert!(err.is_connection(), "{err}");
    assert_eq!(err.lock_name(), Some("frozen"));
}

#[test]
fn bad_input_is_a_typed_error_and_writes_nothing() {
    let server = Server::start();
    let client = server.client();
    let scripts_before = server.calls("evalsha");

    for name in [Vec::new(), vec![b'x'; MAX_NAME_LEN + 1]] {
        let lock = client.lock(&name);
        for err in [
            lock.lock().map(drop).unwrap_err(),
            lock.try_lock().map(drop).unwrap_err(),
            lock.is_locked().map(drop).unwrap_err(),
            lock.hold_count().map(drop).unwrap_err(),
            lock.force_unlock().map(drop).unwrap_err(),
        ] {
            assert!(matches!(err, Error::InvalidName { .. }), "{err}");
            assert!(err.is_invalid_input());
        }
    }

    let lock = client.lock("fine");
    for lease in [
        Duration::ZERO,
        Duration::from_millis(9),
        redmutex::MAX_LEASE * 2,
    ] {
        let err = lock.lock_with_lease(lease).map(drop).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidArgument {
                    argument: "lease",
                    ..
                }
            ),
            "{err}"
        );
        let err = lock.try_lock_with_lease(lease).map(drop).unwrap_err();
        assert!(err.is_invalid_input(), "{err}");
    }

    let url = server.url();
    let second = Duration::from_secs(1);
    let bad_builds = [
        ("pool_size", LockClient::builder(&url).pool_size(0)),
        ("pool_size", LockClient::builder(&url).pool_size(1_000_000)),
        (
            "connect_timeout",
            LockClient::builder(&url).connect_timeout(Duration::ZERO),
        ),
        (
            "response_timeout",
            LockClient::builder(&url).response_timeout(Duration::ZERO),
        ),
        ("lease", LockClient::builder(&url).lease(Duration::ZERO)),
        ("lease", LockClient::builder(&url).lease(Duration::MAX)),
        (
            "renew_interval",
            LockClient::builder(&url)
                .lease(second)
                .renew_interval(second)
                .response_timeout(Duration::from_millis(100)),
        ),
        (
            "renew_interval",
            LockClient::builder(&url).renew_interval(Duration::ZERO),
        ),
        (
            "retry_base",
            LockClient::builder(&url).retry_base(Duration::ZERO),
        ),
        (
            "retry_cap",
            LockClient::builder(&url)
                .retry_base(second)
                .retry_cap(Duration::from_millis(1)),
        ),
        (
            "key_prefix",
            LockClient::builder(&url).key_prefix(vec![b'p'; 10_000]),
        ),
        (
            "watchdog_stack_size",
            LockClient::builder(&url).watchdog_stack_size(1),
        ),
    ];
    for (setting, builder) in bad_builds {
        match builder.build() {
            Err(Error::InvalidConfig { setting: named, .. }) => assert_eq!(named, setting),
            other => panic!("{setting}: expected InvalidConfig, got {other:?}"),
        }
    }
    for url in [
        "",
        "not a url",
        "http://127.0.0.1/",
        "redis://:secret@127.0.0.1:notaport/",
    ] {
        let err = LockClient::open(url).unwrap_err();
        assert!(matches!(err, Error::InvalidUrl { .. }), "{url:?}: {err}");
        assert!(
            !err.to_string().contains("secret"),
            "password repeated: {err}"
        );
    }

    let keys: i64 = redis::cmd("DBSIZE").query(&mut server.conn()).unwrap();
    assert_eq!(keys, 0);
    assert_eq!(
        server.calls("evalsha"),
        scripts_before,
        "a script ran on bad input"
    );

    let any_bytes = client.lock(vec![0xff; MAX_NAME_LEN]);
    assert!(
        any_bytes.try_lock().unwrap().is_some(),
        "any bytes up to the limit make a name"
    );
}
