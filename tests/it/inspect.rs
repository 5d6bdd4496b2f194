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
    let semaphore = ours.leased_semaphore("permits");
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
    assert_eq!(info.kind, LockKind::LeasedSemaphore);
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

/// A semaphore without leases and a count-down latch are bare numbers: each is read as its
/// kind, with its count and the clients waiting, once a client waits on its channel, and
/// as no lock (a counter, for all its shape tells) while nobody does.
#[test]
fn a_counting_semaphore_and_a_latch_are_read_with_their_counts_and_waiters() {
    let server = Server::start();
    let (ours, theirs) = (client(&server), client(&server));
    let pool = ours.counting_semaphore("pool");
    assert!(pool.try_set_permits(2).unwrap());
    let held = pool.acquire_many(2).unwrap();
    // More taken away than there are: the count goes below zero.
    assert_eq!(pool.reduce_permits(1).unwrap(), -1);
    let latch = ours.count_down_latch("ready");
    assert!(latch.try_set_count(2).unwrap());
    for name in ["pool", "ready"] {
        let info = ours.inspect(name).unwrap();
        assert!(matches!(info.kind, LockKind::NotALock(_)), "{info:?}");
        assert_eq!(info.waiters, Some(0));
    }
    assert!(ours.locks("*").unwrap().is_empty());

    let wanted = theirs.counting_semaphore("pool");
    let taker = std::thread::spawn(move || {
        let permit = wanted.try_acquire_for(PATIENCE).unwrap();
        permit.map(|permit| permit.release().unwrap()).is_some()
    });
    let waited = theirs.count_down_latch("ready");
    let waiter = std::thread::spawn(move || waited.wait_for(PATIENCE).unwrap());
    let kind_of = |name: &str| ours.inspect(name).unwrap().kind;
    assert!(eventually(PATIENCE, || kind_of("pool") == LockKind::CountingSemaphore));
    assert!(eventually(PATIENCE, || kind_of("ready") == LockKind::CountDownLatch));

    let info = ours.inspect("pool").unwrap();
    assert_eq!(
        info.available,
        Some(0),
        "below zero, none is left: {info:?}"
    );
    assert_eq!(info.waiters, Some(1), "{info:?}");
    assert!(info.holders.is_empty() && info.doubt.is_none(), "{info:?}");
    assert_eq!(info.count, None);
    assert_eq!(info.keys, ["app:pool", "redisson_sc:{app:pool}"]);
    let info = ours.inspect("ready").unwrap();
    assert_eq!(info.count, Some(2), "{info:?}");
    assert_eq!(info.waiters, Some(1), "{info:?}");
    assert!(info.holders.is_empty() && info.doubt.is_none(), "{info:?}");
    assert_eq!(
        info.keys,
        ["app:ready", "redisson_countdownlatch__channel__{app:ready}"]
    );
    assert_eq!(latch.count_down().unwrap(), 1);
    assert_eq!(ours.inspect("ready").unwrap().count, Some(1));

    // Listed as locks, each with its own count.
    let listed = ours.locks("*").unwrap();
    let found: Vec<_> = (listed.iter())
        .map(|info| (&info.name[..], &info.kind, info.available, info.count))
        .collect();
    assert_eq!(
        found,
        [
            ("pool", &LockKind::CountingSemaphore, Some(0), None),
            ("ready", &LockKind::CountDownLatch, None, Some(1)),
        ]
    );

    // Released and opened: the waiters go their ways, and the open latch is free.
    drop(held);
    assert!(taker.join().unwrap());
    assert_eq!(latch.count_down().unwrap(), 0);
    assert!(waiter.join().unwrap());
    assert_eq!(kind_of("ready"), LockKind::Free);
    assert_eq!(pool.available_permits().unwrap(), 1);
}

/// An election's candidates are read with it: its leader first, then those waiting, in the
/// order they came (a first-come-first-served election's queue).
#[test]
fn an_election_is_read_with_its_candidates_in_order() {
    let server = Server::start();
    let named = |name: &str| {
        (server.builder().key_prefix("app:").client_name(name))
            .build()
            .unwrap()
    };
    let clients = [named("alpha"), named("bravo"), named("charlie")];
    let leadership = clients[0]
        .election("cron")
        .first_come_first_served()
        .campaign()
        .unwrap();
    let names = |info: &redmutex::LockInfo| -> Vec<(String, bool)> {
        (info.candidates.as_ref().unwrap().iter())
            .map(|c| (c.name().to_owned(), c.is_leader()))
            .collect()
    };
    let mut campaigns = Vec::new();
    for (at, client) in clients.iter().enumerate().skip(1) {
        let election = client.election("cron").first_come_first_served();
        campaigns.push(std::thread::spawn(move || {
            election.try_campaign_for(PATIENCE).unwrap().is_some()
        }));
        // The next comes only once this one is listed.
        assert!(eventually(PATIENCE, || names(
            &clients[0].inspect("cron").unwrap()
        )
        .len()
            == at + 1));
    }
    let info = clients[0].inspect("cron").unwrap();
    assert_eq!(info.kind, LockKind::Election);
    assert_eq!(
        names(&info),
        [
            ("alpha".to_owned(), true),
            ("bravo".to_owned(), false),
            ("charlie".to_owned(), false)
        ]
    );
    // A listing reads no candidates.
    let listed = clients[0].locks("cron").unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(listed[0].candidates.is_none());
    // Other kinds have none.
    assert!(clients[0].inspect("free").unwrap().candidates.is_none());

    leadership.resign().unwrap();
    for campaign in campaigns {
        assert!(campaign.join().unwrap());
    }
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
    let semaphore = ours.leased_semaphore("f");
    assert!(semaphore.try_set_permits(2).unwrap());
    let _permit = semaphore.acquire_with_lease(lease).unwrap();
    // A counting semaphore and a latch, each with a waiter (whose looks write nothing).
    let pool = ours.counting_semaphore("g");
    assert!(pool.try_set_permits(1).unwrap());
    let taken = pool.acquire().unwrap();
    let latch = ours.count_down_latch("h");
    assert!(latch.try_set_count(1).unwrap());
    let theirs = client(&server);
    let (wanted, waited) = (theirs.counting_semaphore("g"), theirs.count_down_latch("h"));
    let taker = std::thread::spawn(move || wanted.try_acquire_for(PATIENCE).unwrap().is_some());
    let waiter = std::thread::spawn(move || waited.wait_for(PATIENCE).unwrap());
    // An election with a waiting candidate. Neither writes again within the test: the
    // leader's lease is renewed after a third of it, and the candidate tries again only
    // when woken or after its retry cap.
    let slow = || {
        (server.builder().key_prefix("app:").lease(lease))
            .retry_base(lease)
            .retry_cap(lease)
            .build()
            .unwrap()
    };
    let (leader, rival) = (slow(), slow());
    let leading = leader.election("i").campaign().unwrap();
    let candidate = rival.election("i");
    let campaign = std::thread::spawn(move || {
        (candidate.try_campaign_for(PATIENCE).unwrap()).map(|led| led.resign().unwrap())
    });
    let listed = |info: redmutex::LockInfo| info.candidates.map_or(0, |all| all.len());
    assert!(eventually(PATIENCE, || listed(ours.inspect("i").unwrap()) == 2));
    assert!(eventually(PATIENCE, || ours.locks("*").unwrap().len() == 8));

    // The waiting candidate refreshes its listing now and then, in the background: a round
    // of looks that met such a write is looked at again. Looks that write fail every round.
    let quiet = eventually(PATIENCE, || {
        let before = changes(&server);
        assert_eq!(ours.locks("*").unwrap().len(), 8);
        assert_eq!(ours.scan("*").unwrap().len(), 9);
        for name in ["a", "b", "c", "d", "e", "f", "g", "h", "i", "free"] {
            ours.inspect(name).unwrap();
        }
        changes(&server) == before
    });
    assert!(quiet, "every round of looks changed the server");

    leading.resign().unwrap();
    assert!(campaign.join().unwrap().is_some());
    drop(taken);
    assert!(taker.join().unwrap());
    latch.count_down().unwrap();
    assert!(waiter.join().unwrap());
}

/// A key whose name no lock can have (longer than `MAX_NAME_LEN` after the prefix, or the
/// prefix itself) is no lock: `locks` leaves it out, `scan` lists it as no lock, saying
/// why, and the listing has nothing unreadable.
#[test]
fn a_key_no_lock_can_be_named_is_no_lock() {
    let server = Server::start();
    let plain = server.client();
    let guard = plain.lock("readable").lock().unwrap();
    let long = support::plant_long_key(&server);
    let listed = plain.locks("*").unwrap();
    let names: Vec<&str> = listed.iter().map(|info| info.name.as_str()).collect();
    assert_eq!(names, ["readable"], "{listed:?}");
    let scanned = plain.scan("*").unwrap();
    assert_eq!(scanned.len(), 2, "{scanned:?}");
    let entry = (scanned.iter().find(|info| info.name == long)).unwrap();
    match &entry.kind {
        LockKind::NotALock(why) => assert!(why.contains("1024"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(!entry.is_lock());
    drop(guard);

    // Under a prefix, a key that is the prefix itself names no lock either.
    let prefixed = client(&server);
    let _guard = prefixed.lock("readable").lock().unwrap();
    let () = redis::cmd("SET")
        .arg("app:")
        .arg("1")
        .query(&mut server.conn())
        .unwrap();
    let names: Vec<String> = (prefixed.locks("*").unwrap().into_iter())
        .map(|info| info.name)
        .collect();
    assert_eq!(names, ["readable"]);
    let scanned = prefixed.scan("*").unwrap();
    let kinds: Vec<_> = (scanned.iter())
        .map(|info| (&info.name[..], &info.kind))
        .collect();
    assert_eq!(kinds.len(), 2, "{scanned:?}");
    assert_eq!(kinds[1], ("readable", &LockKind::Reentrant));
    assert!(
        matches!(kinds[0], ("", LockKind::NotALock(_))),
        "{scanned:?}"
    );
}

/// One key under the prefix that cannot be looked at (the user may not read it): the
/// listing goes on, and names it as unreadable.
#[test]
fn a_listing_goes_on_past_a_key_it_cannot_read_and_names_it() {
    let server = Server::start();
    let _guard = server.client().lock("readable").lock().unwrap();
    let () = redis::cmd("SET")
        .arg("secret")
        .arg("1")
        .query(&mut server.conn())
        .unwrap();
    let narrow = LockClient::builder(&support::narrow_user(&server))
        .build()
        .unwrap();
    let listed = narrow.locks("*").unwrap();
    assert!(
        listed.iter().any(|info| info.name == "readable"),
        "{listed:?}"
    );
    let unread: Vec<_> = (listed.iter())
        .filter(|info| matches!(info.kind, LockKind::Unreadable(_)))
        .collect();
    assert_eq!(unread.len(), 1, "{listed:?}");
    assert_eq!(unread[0].name, "secret");
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
