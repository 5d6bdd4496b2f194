//! Replica acknowledgements: with `min_replica_acks`, every acquisition waits for the
//! replicas (`WAIT`), and one that too few acknowledge is given back with a typed error.

use crate::support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redmutex::{Error, LockClient};
use support::history::History;
use support::{Deployment, MASTER, MakeLock, Options, Server, eventually};

/// A server that replicates `primary`, once its link is up.
fn replica_of(primary: &Server) -> Server {
    let replica = Server::start();
    let () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(primary.port())
        .query(&mut replica.conn())
        .unwrap();
    let linked = eventually(Duration::from_secs(30), || {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut primary.conn())
            .unwrap();
        info.contains("state=online")
    });
    assert!(linked, "the replica never came online");
    replica
}

fn acked_client(primary: &Server, replicas: u32, timeout: Duration) -> LockClient {
    primary
        .builder()
        .min_replica_acks(replicas, timeout)
        .build()
        .unwrap()
}

fn acknowledged<K: MakeLock>(primary: &Server, replica: &Server) {
    // As long as the client's response timeout allows: a busy machine can keep the
    // replica's acknowledgement for a second.
    let client = acked_client(primary, 1, Duration::from_secs(4));
    let lock = K::make(&client, &format!("acked-{}", K::NAME));
    let waits = primary.calls("wait");
    let guard = lock.lock().unwrap();
    assert_eq!(primary.calls("wait"), waits + 1, "{}: no WAIT", K::NAME);
    // WAIT returned: the replica has the key, whatever the replication lag.
    assert!(
        replica.exists(lock.name()),
        "{}: not on the replica",
        K::NAME
    );
    guard.unlock().unwrap();
    // Releases do not wait.
    assert_eq!(
        primary.calls("wait"),
        waits + 1,
        "{}: the release waited",
        K::NAME
    );
}

#[test]
fn acquisitions_wait_until_the_replicas_have_them() {
    let primary = Server::start();
    let replica = replica_of(&primary);
    acknowledged::<redmutex::Reentrant>(&primary, &replica);
    acknowledged::<redmutex::Fenced>(&primary, &replica);
    acknowledged::<redmutex::Token>(&primary, &replica);
}

fn refused<K: MakeLock>(primary: &Server, replicas: u32) {
    let client = acked_client(primary, replicas, Duration::from_millis(200));
    let lock = K::make(&client, &format!("unacked-{}", K::NAME));
    let err = lock
        .try_lock_for(Duration::from_secs(5))
        .expect_err("granted without acknowledgement");
    assert!(err.is_not_replicated(), "{}: {err}", K::NAME);
    assert!(
        matches!(&err, Error::NotReplicated { acked, needed, .. } if *acked < *needed),
        "{}: {err:?}",
        K::NAME
    );
    assert!(err.to_string().contains("replicas"), "{err}");
    assert!(!primary.exists(lock.name()), "{}: not given back", K::NAME);
}

#[test]
fn an_acquisition_too_few_replicas_acknowledge_is_given_back() {
    let primary = Server::start();
    let replica = replica_of(&primary);

    // More replicas required than there are.
    refused::<redmutex::Reentrant>(&primary, 2);
    refused::<redmutex::Token>(&primary, 2);

    // The one replica frozen: it cannot acknowledge.
    replica.pause();
    refused::<redmutex::Reentrant>(&primary, 1);
    refused::<redmutex::Fenced>(&primary, 1);
    refused::<redmutex::Token>(&primary, 1);
    replica.resume();

    // Nothing of the refused holds stayed behind, in Redis or in the client.
    let client = acked_client(&primary, 1, Duration::from_secs(4));
    let lock = client.lock("unacked-reentrant");
    let guard = lock.lock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 1);
    guard.unlock().unwrap();
}

#[test]
fn replica_ack_settings_are_checked() {
    for (replicas, timeout) in [
        (0, Duration::from_millis(100)),
        (65, Duration::from_millis(100)),
        (1, Duration::ZERO),
        (1, Duration::from_secs(2)),
    ] {
        let err = LockClient::builder("redis://127.0.0.1:1/")
            .response_timeout(Duration::from_secs(2))
            .min_replica_acks(replicas, timeout)
            .build()
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidConfig {
                    setting: "min_replica_acks",
                    ..
                }
            ),
            "{replicas} replicas, {timeout:?}: {err}"
        );
    }
}

/// The Jepsen counter on a Sentinel-managed primary that is killed (SIGKILL) halfway: four
/// threads increment a counter kept on another server, GET then SET, under the lock, until
/// the lock has worked through the failover. Returns the increments done, the counter and
/// the holders' windows.
fn counter_across_a_killed_primary(acks: bool) -> (u64, u64, History) {
    // Two replicas, so that the new primary still has one to acknowledge.
    let mut d = Deployment::start(Options {
        replicas: 2,
        ..Options::default()
    });
    let resource = Server::start();
    let urls = d.sentinel_urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let mut builder = LockClient::sentinel(&urls, MASTER)
        .lease(Duration::from_secs(5))
        .connect_timeout(Duration::from_millis(500))
        .response_timeout(Duration::from_millis(500));
    if acks {
        builder = builder.min_replica_acks(1, Duration::from_millis(400));
    }
    let client = builder.build().unwrap();
    let done = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let history = History::default();
    std::thread::scope(|scope| {
        for thread in 0..4 {
            let lock = client.lock("counter-lock");
            let mut redis = resource.conn();
            let (done, stop, history) = (&done, &stop, &history);
            scope.spawn(move || {
                let holder = format!("thread-{thread}");
                while !stop.load(Ordering::Relaxed) {
                    match lock.try_lock_for(Duration::from_secs(2)) {
                        Ok(Some(guard)) => {
                            let taken = Instant::now();
                            let value: Option<u64> =
                                redis::cmd("GET").arg("counter").query(&mut redis).unwrap();
                            let () = redis::cmd("SET")
                                .arg("counter")
                                .arg(value.unwrap_or(0) + 1)
                                .query(&mut redis)
                                .unwrap();
                            done.fetch_add(1, Ordering::Relaxed);
                            let valid_until = guard.valid_until();
                            history.record(&holder, taken, Instant::now(), valid_until);
                            // The primary may be gone: the release may fail.
                            let _ = guard.unlock();
                        }
                        Ok(None) => {}
                        // The primary is down and not yet replaced: try again shortly.
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            });
        }
        assert!(eventually(Duration::from_secs(60), || done
            .load(Ordering::Relaxed)
            >= 100));
        let old = d.servers[0].port();
        d.servers[0].stop();
        d.await_new_primary(old);
        let switched = done.load(Ordering::Relaxed);
        assert!(
            eventually(Duration::from_secs(120), || done.load(Ordering::Relaxed)
                >= switched + 100),
            "the lock did not work again after the failover"
        );
        stop.store(true, Ordering::Relaxed);
    });
    let counted: Option<u64> = redis::cmd("GET")
        .arg("counter")
        .query(&mut resource.conn())
        .unwrap();
    (done.into_inner(), counted.unwrap_or(0), history)
}

#[test]
fn a_counter_loses_no_update_across_a_killed_primary_with_acknowledgements() {
    let (done, counted, history) = counter_across_a_killed_primary(true);
    assert_eq!(
        counted, done,
        "updates lost although replicas acknowledged every lock"
    );
    assert_eq!(history.len() as u64, done);
    history.assert_exclusive();

    // The same run without acknowledgements: how many were lost, for the record. On
    // loopback, replication usually outruns the kill and nothing is lost.
    let (done, counted, _) = counter_across_a_killed_primary(false);
    eprintln!(
        "without replica acknowledgements: {} of {done} updates lost across the failover",
        done - counted.min(done)
    );
    assert!(
        counted <= done,
        "the counter counted {counted} of {done} increments"
    );
}
