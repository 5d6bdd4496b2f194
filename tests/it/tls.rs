//! TLS (the `tls` feature): servers that speak only TLS, with certificates made for the test.
//! Every connection of a client, the subscriber's included, must get through, or fail with
//! an error that says TLS, promptly and without a panic.
#![cfg(feature = "tls")]

use crate::support;

use std::thread;
use std::time::Duration;

use redmutex::{Error, LockClient};
use support::tls::Certs;
use support::{SHORT_LEASE, Server, await_subscribers, channel, eventually};

const LONG: Duration = Duration::from_secs(60);
/// How long a woken waiter may take: far below `LONG`, and below the first poll of a waiter
/// whose retry pause is `LONG` (at least half of it).
const WAIT: Duration = Duration::from_secs(15);

/// Builds a client for `url` that trusts `ca`, with short timeouts: a refused handshake
/// must come back as an error, not as a hang.
fn build_with_ca(url: &str, ca: &[u8]) -> redmutex::Result<LockClient> {
    LockClient::builder(url)
        .connect_timeout(Duration::from_secs(5))
        .tls_root_ca(ca.to_vec())
        .build()
}

fn lock_and_unlock(client: &LockClient) {
    client.lock("l").lock().unwrap().unlock().unwrap();
}

#[test]
fn whole_lock_life_over_tls_waiting_woken_by_the_subscriber_then_renewed() {
    if !support::has_tls() {
        return;
    }
    let certs = Certs::generate();
    let server = Server::start_tls(&certs, false);
    let holder = server.builder().lease(LONG).build().unwrap().lock("l");
    // A waiter that polls only every LONG / 2 or more: in time, only a message wakes it.
    let waiter_client = server
        .builder_with_lease(SHORT_LEASE)
        .retry_base(LONG)
        .retry_cap(LONG)
        .build()
        .unwrap();
    let guard = holder.lock().unwrap();
    let (tx, rx) = crossbeam_channel::bounded(1);
    let lock = waiter_client.lock("l");
    let client = waiter_client.clone();
    let waiter = thread::spawn(move || {
        let guard = lock.lock().unwrap();
        tx.send(()).unwrap();
        // Held past several short leases: the watchdog renews over TLS.
        assert!(
            eventually(Duration::from_secs(30), || client.stats().renewals >= 4),
            "renewals: {}",
            client.stats().renewals
        );
        assert!(!guard.is_lost());
        assert_eq!(lock.hold_count().unwrap(), 1);
        guard.unlock()
    });
    // The subscriber connection, which the server only accepts over TLS, has subscribed.
    await_subscribers(&server, &channel("l"), 1);
    guard.unlock().unwrap();
    rx.recv_timeout(WAIT)
        .expect("woken by the unlock message, not by a poll");
    waiter.join().unwrap().unwrap();
    assert!(!holder.is_locked().unwrap(), "released");
    assert_eq!(waiter_client.stats().locks_lost, 0);
}

#[test]
fn a_custom_ca_is_trusted_and_other_cas_are_refused_with_a_tls_error() {
    if !support::has_tls() {
        return;
    }
    let certs = Certs::generate();
    let server = Server::start_tls(&certs, false);
    lock_and_unlock(&build_with_ca(&server.url(), &certs.ca).unwrap());

    // A CA that did not sign the server's certificate, and the public roots alone.
    let wrong = build_with_ca(&server.url(), &certs.other_ca).unwrap_err();
    assert!(wrong.is_tls(), "{wrong}");
    let public = LockClient::builder(&server.url())
        .connect_timeout(Duration::from_secs(5))
        .build()
        .unwrap_err();
    assert!(public.is_tls(), "{public}");
    // Certificates that are not PEM are refused before anything is sent.
    let garbage = LockClient::builder(&server.url())
        .tls_root_ca(b"not a certificate".to_vec())
        .build()
        .unwrap_err();
    assert!(garbage.is_invalid_input(), "{garbage}");
}

#[test]
fn mutual_tls_works_with_a_client_certificate_and_fails_without_one() {
    if !support::has_tls() {
        return;
    }
    let certs = Certs::generate();
    let server = Server::start_tls(&certs, true);
    let client = LockClient::builder(&server.url())
        .connect_timeout(Duration::from_secs(5))
        .tls_root_ca(certs.ca.clone())
        .tls_client_cert(certs.client_cert.clone(), certs.client_key.clone())
        .build()
        .unwrap();
    lock_and_unlock(&client);
    // The subscriber presents the certificate too: a waiter of this client subscribes
    // (counted by the server) and takes the lock once it is free.
    let holder = server.client().lock("l").lock().unwrap();
    let waiter = client.lock("l");
    let waiting = thread::spawn(move || waiter.try_lock_for(WAIT).map(|g| g.is_some()));
    await_subscribers(&server, &channel("l"), 1);
    holder.unlock().unwrap();
    assert!(waiting.join().unwrap().unwrap(), "the waiter never got in");

    let err = build_with_ca(&server.url(), &certs.ca).unwrap_err();
    assert!(matches!(err, Error::Redis { .. }), "{err:?}");
    // The server's alert (certificate required) says TLS; a busy server may close the
    // connection before the alert is read, which is a connection error.
    assert!(err.is_tls() || err.is_connection(), "{err}");
}

#[test]
fn the_insecure_fragment_skips_verification() {
    if !support::has_tls() {
        return;
    }
    let certs = Certs::generate();
    let server = Server::start_tls(&certs, false);
    let url = format!("{}#insecure", server.url());
    let client = LockClient::builder(&url)
        .connect_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    lock_and_unlock(&client);
}

#[test]
fn certificates_for_a_url_without_tls_are_refused() {
    let ca = Certs::generate().ca.clone();
    let err = LockClient::builder("redis://127.0.0.1:1/")
        .tls_root_ca(ca.clone())
        .build()
        .unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
    assert!(err.to_string().contains("rediss://"), "{err}");
    // Sentinels too: refused as settings before any sentinel is asked, not as sentinels
    // that all failed.
    let err = LockClient::sentinel(&["redis://127.0.0.1:1/"], "m")
        .tls_root_ca(ca)
        .build()
        .unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
    assert!(err.to_string().contains("rediss://"), "{err}");
    let err = LockClient::sentinel(&["rediss://127.0.0.1:1/"], "m")
        .tls_root_ca(b"not a certificate".to_vec())
        .build()
        .unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
}
