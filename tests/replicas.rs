//! Replica acknowledgements: with `min_replica_acks`, every acquisition waits for the
//! replicas (`WAIT`), and one that too few acknowledge is given back with a typed error.

mod support;

use std::time::Duration;

use redmutex::{Error, LockClient};
use serial_test::serial;
use support::{MakeLock, Server, eventually};

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

fn exists(server: &Server, key: &str) -> bool {
    redis::cmd("EXISTS")
        .arg(key)
        .query(&mut server.conn())
        .unwrap()
}

fn acknowledged<K: MakeLock>(primary: &Server, replica: &Server) {
    let client = acked_client(primary, 1, Duration::from_secs(1));
    let lock = K::make(&client, &format!("acked-{}", K::NAME));
    let waits = primary.calls("wait");
    let guard = lock.lock().unwrap();
    assert_eq!(primary.calls("wait"), waits + 1, "{}: no WAIT", K::NAME);
    // WAIT returned: the replica has the key, whatever the replication lag.
    assert!(
        exists(replica, lock.name()),
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
#[serial]
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
    assert!(!exists(primary, lock.name()), "{}: not given back", K::NAME);
}

#[test]
#[serial]
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
    let client = acked_client(&primary, 1, Duration::from_secs(1));
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
