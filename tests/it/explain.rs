//! Waits explain themselves: a holder without expiry is logged once per wait, naming the
//! key, its type and that it never expires; a wait that gives up names what held it, in
//! `Error::Timeout` and in a debug line; a semaphore without permits says so.

use crate::support;

use std::time::Duration;

use redmutex::{Error, HeldBy};
use support::{Server, logs};

fn capture() {
    logs::capture();
}

/// The messages logged at `level` that contain `text`.
fn logged(level: log::Level, text: &str) -> Vec<String> {
    logs::messages(level, text)
}

#[test]
fn a_string_without_expiry_is_warned_about_once_per_wait() {
    capture();
    let server = Server::start();
    let () = redis::cmd("SET")
        .arg("app-data")
        .arg("42")
        .query(&mut server.conn())
        .unwrap();
    let client = server
        .builder()
        .retry_cap(Duration::from_millis(10))
        .build()
        .unwrap();
    let lock = client.lock("app-data");
    let base = server.calls("evalsha");
    let wait = Duration::from_millis(500);
    assert!(lock.try_lock_for(wait).unwrap().is_none());
    assert!(
        server.calls("evalsha") > base + 3,
        "the wait made several attempts"
    );
    let warnings = logged(log::Level::Warn, "\"app-data\"");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let warning = &warnings[0];
    assert!(
        warning.contains("a string") && warning.contains("no expiry"),
        "{warning}"
    );
    let gave_up = logged(log::Level::Debug, "gave up waiting for lock \"app-data\"");
    assert_eq!(gave_up.len(), 1, "{gave_up:?}");
    assert!(gave_up[0].contains("no expiry"), "{}", gave_up[0]);

    assert!(lock.try_lock_for(wait).unwrap().is_none());
    let warnings = logged(log::Level::Warn, "\"app-data\"");
    assert_eq!(warnings.len(), 2, "once per wait: {warnings:?}");

    // A try_lock does not wait, and asks nothing more.
    let base = server.calls("evalsha");
    assert!(lock.try_lock().unwrap().is_none());
    assert_eq!(server.calls("evalsha"), base + 1);
}

#[test]
fn a_timeout_names_the_holder_and_its_lease() {
    capture();
    let server = Server::start();
    let holder = server.client();
    let _held = holder.lock("held").lock().unwrap();
    let client = server
        .builder()
        .max_wait(Duration::from_millis(100))
        .build()
        .unwrap();
    let err = client.lock("held").lock().unwrap_err();
    let Error::Timeout {
        held_by: Some(held_by),
        ..
    } = &err
    else {
        panic!("no holder in {err:?}");
    };
    let HeldBy {
        key,
        holder: who,
        ttl,
        found,
        ..
    } = &**held_by;
    assert_eq!(key, "held");
    assert!(found.contains("hash"), "{found}");
    let who = who.as_deref().unwrap_or_default();
    assert!(who.starts_with(&format!("{}:", holder.id())), "{who}");
    assert!(ttl.is_some(), "a watched lock expires");
    assert!(err.to_string().contains(holder.id()), "{err}");
    assert!(
        logged(log::Level::Warn, "\"held\"").is_empty(),
        "a lock with an expiry is not warned about"
    );
}

#[test]
fn a_semaphore_without_permits_says_so_once_per_wait() {
    capture();
    let server = Server::start();
    let client = server
        .builder()
        .retry_cap(Duration::from_millis(10))
        .max_wait(Duration::from_millis(300))
        .build()
        .unwrap();
    let semaphore = client.leased_semaphore("unset");
    let err = semaphore.acquire().unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert!(err.to_string().contains("never set"), "{err}");
    let warnings = logged(log::Level::Warn, "\"unset\"");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("try_set_permits"), "{}", warnings[0]);
}
