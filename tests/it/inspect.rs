//! Who holds what: `inspect` reads every kind while held, waited for and released, and
//! `locks` finds them with SCAN, skipping auxiliary keys; neither writes anything.

use crate::support;

use std::time::Duration;

use redmutex::{LockClient, LockKind};
use support::{Server, eventually, info};

const PATIENCE: Duration = Duration::from_secs(60);

/// Writes since the server started: any write by an inspection would move it.
fn changes(server: &Server) -> u64 {
    info(server, "persistence")
        .lines()
        .find_map(|line| line.strip_prefix("rdb_changes_since_last_save:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap()
}

fn client(server: &Server) -> LockClient {
    server.builder().key_prefix("app:").build().unwrap()
}

#[test]
fn every_kind_is_read_as_held_waited_for_and_released() {
    let server = Server::start();
    let (ours, theirs) = (client(&server), client(&server));
    let owner = |client: &LockClient| format!("{}:", client.id());

    let reentrant = ours.lock("reentrant");
    let outer = reentrant.lock().unwrap();
    let inner = reentrant.lock().unwrap();
    let fenced = ours.fenced_lock("fenced").lock().unwrap();
    let token = ours.token_lock("token").lock().unwrap();
    let fair = ours.fair_lock("fair").lock().unwrap();
    let rw = ours.read_write_lock("rw");
    let read = rw.read().lock().unwrap();
    let semaphore = ours.semaphore("permits");
    assert!(semaphore.try_set_permits(3).unwrap());
    let permit = semaphore.acquire().unwrap();

    // A waiter on the fair lock, queued behind us.
    let fair_waiter = theirs.fair_lock("fair");
    let waiting = std::thread::spawn(move || fair_waiter.try_lock_for(PATIENCE).unwrap().is_some());

    let info = ours.inspect("reentrant").unwrap();
    assert_eq!(info.kind, LockKind::Reentrant);
    assert_eq!(info.holders.len(), 1);
    assert!(info.holders[0].id.starts_with(&owner(&ours)));
    assert_eq!(info.holders[0].holds, 2);
    assert!(info.lease_left.unwrap() <= Duration::from_secs(30));
    assert_eq!(
        info.keys,
        ["app:reentrant", "redisson_lock__channel:{app:reentrant}"]
    );

    let info = ours.inspect("fenced").unwrap();
    assert_eq!(info.kind, LockKind::Fenced);
    assert_eq!(info.fence, Some(fenced.token()));

    let info = ours.inspect("token").unwrap();
    assert_eq!(info.kind, LockKind::Token);
    assert_eq!(info.holders[0].id, token.token());
    // A digest or an id has a token's shape too: a token lock is listed only with doubt.
    assert!(info.doubt.is_some(), "{info:?}");

    assert!(eventually(PATIENCE, || ours
        .inspect("fair")
        .unwrap()
        .queue
        .len()
        == 1));
    let info = ours.inspect("fair").unwrap();
    assert_eq!(info.kind, LockKind::Fair);
    assert!(info.queue[0].starts_with(&owner(&theirs)), "{info:?}");
    assert!(info.waiters.unwrap() >= 1);

    let info = ours.inspect("rw").unwrap();
    assert_eq!(info.kind, LockKind::ReadWrite);
    assert_eq!(info.holders[0].mode, Some("read"));

    let info = ours.inspect("permits").unwrap();
    assert_eq!(info.kind, LockKind::Semaphore);
    assert_eq!(info.available, Some(2));
    assert_eq!(info.holders[0].id, permit.id());
    assert!(info.holders[0].lease_left.is_some());

    let all = ours.locks("*").unwrap();
    let names: Vec<&str> = all.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["fair", "fenced", "permits", "reentrant", "rw"]);
    let scanned = ours.scan("*").unwrap();
    let names: Vec<&str> = scanned.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        names,
        ["fair", "fenced", "permits", "reentrant", "rw", "token"]
    );
    let some = ours.locks("f*").unwrap();
    assert_eq!(some.len(), 2);

    drop((inner, outer, fenced, token, fair, read));
    assert!(waiting.join().unwrap());
    permit.release().unwrap();
    let info = ours.inspect("reentrant").unwrap();
    assert_eq!(info.kind, LockKind::Free);
    assert!(info.holders.is_empty() && info.lease_left.is_none());
    let left: Vec<String> = ours
        .locks("*")
        .unwrap()
        .into_iter()
        .map(|l| l.name)
        .collect();
    // No lock is left; the fenced lock's counter is none, nor is the semaphore's count with
    // no permit held, which scan lists as what it is.
    assert!(left.is_empty(), "{left:?}");
    let scanned = ours.scan("*").unwrap();
    assert_eq!(scanned.len(), 1, "{scanned:?}");
    assert_eq!(scanned[0].name, "permits");
    assert!(matches!(scanned[0].kind, LockKind::NotALock(_)));
    assert!(ours.inspect("").unwrap_err().is_invalid_input());
}

#[test]
fn a_waiter_is_counted_by_its_subscription() {
    let server = Server::start();
    let (ours, theirs) = (client(&server), client(&server));
    let guard = ours.lock("busy").lock().unwrap();
    let rival = theirs.lock("busy");
    let waiter = std::thread::spawn(move || rival.try_lock_for(PATIENCE).unwrap().is_some());
    assert!(eventually(PATIENCE, || ours
        .inspect("busy")
        .unwrap()
        .waiters
        == Some(1)));
    guard.unlock().unwrap();
    assert!(waiter.join().unwrap());
}

#[test]
fn inspection_writes_nothing() {
    let server = Server::start();
    let ours = client(&server);
    // Explicit leases: no watchdog writes while the test looks.
    let lease = Duration::from_secs(600);
    let _held = (
        ours.lock("a").lock_with_lease(lease).unwrap(),
        ours.fenced_lock("b").lock_with_lease(lease).unwrap(),
        ours.token_lock("c").lock_with_lease(lease).unwrap(),
        ours.fair_lock("d").lock_with_lease(lease).unwrap(),
        ours.read_write_lock("e")
            .write()
            .lock_with_lease(lease)
            .unwrap(),
    );
    let semaphore = ours.semaphore("f");
    assert!(semaphore.try_set_permits(2).unwrap());
    let _permit = semaphore.acquire_with_lease(lease).unwrap();
    let before = changes(&server);
    assert_eq!(ours.locks("*").unwrap().len(), 5);
    assert_eq!(ours.scan("*").unwrap().len(), 6);
    for name in ["a", "b", "c", "d", "e", "f", "free"] {
        ours.inspect(name).unwrap();
    }
    assert_eq!(changes(&server), before);
}

/// One key under the prefix that cannot be looked at (a name longer than a lock's may
/// be): the listing goes on, and names it as unreadable.
#[test]
fn a_listing_goes_on_past_a_key_it_cannot_read_and_names_it() {
    let server = Server::start();
    let client = server.client();
    let guard = client.lock("readable").lock().unwrap();
    let long = support::plant_long_key(&server);
    let listed = client.locks("*").unwrap();
    assert!(
        listed.iter().any(|info| info.name == "readable"),
        "{listed:?}"
    );
    let unread: Vec<_> = (listed.iter())
        .filter(|info| matches!(info.kind, redmutex::LockKind::Unreadable(_)))
        .collect();
    assert_eq!(unread.len(), 1, "{listed:?}");
    assert_eq!(unread[0].name, long);
    drop(guard);

    // Under a prefix, a key that is the prefix itself names no lock: unreadable, the rest
    // listed.
    let prefixed = server.builder().key_prefix("app:").build().unwrap();
    let _guard = prefixed.lock("readable").lock().unwrap();
    let () = redis::cmd("SET")
        .arg("app:")
        .arg("1")
        .query(&mut server.conn())
        .unwrap();
    let listed = prefixed.locks("*").unwrap();
    let kinds: Vec<_> = listed
        .iter()
        .map(|info| (&info.name[..], &info.kind))
        .collect();
    assert_eq!(kinds.len(), 2, "{listed:?}");
    assert_eq!(kinds[1], ("readable", &redmutex::LockKind::Reentrant));
    assert!(
        matches!(kinds[0], ("", redmutex::LockKind::Unreadable(_))),
        "{listed:?}"
    );
}

/// A scan tells how far it has gone, page by page, up to every key that matched.
#[test]
fn a_scan_counts_the_keys_it_went_through() {
    let server = Server::start();
    let client = client(&server);
    let mut fill = redis::pipe();
    for i in 0..1200 {
        fill.cmd("SET").arg(format!("app:many:{i}")).arg(i).ignore();
    }
    fill.exec(&mut server.conn()).unwrap();
    let mut counts = Vec::new();
    let found = client
        .scan_counting("many:*", |seen| counts.push(seen))
        .unwrap();
    assert_eq!(found.len(), 1200);
    assert!(counts.len() > 1, "{counts:?}");
    assert!(counts.windows(2).all(|w| w[0] <= w[1]), "{counts:?}");
    assert_eq!(counts.last(), Some(&1200));
}
