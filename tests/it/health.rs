//! A hold's health: uncertain while its renewals fail and it is still valid, held again when
//! one gets through, lost when it is found gone or its validity ends; the callback hears each
//! change of a watched hold once.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redmutex::{Health, LockClient};
use support::{Proxy, SHORT_LEASE, Server, eventually, response_timeout_for};

const PATIENCE: Duration = Duration::from_secs(60);

type Changes = Arc<Mutex<Vec<(Health, Health)>>>;

fn client_at(url: &str, lease: Duration, changes: &Changes) -> LockClient {
    let changes = changes.clone();
    LockClient::builder(url)
        .lease(lease)
        .response_timeout(response_timeout_for(lease))
        .on_health_change(move |change| changes.lock().unwrap().push((change.from, change.to)))
        .build()
        .unwrap()
}

#[test]
fn a_hold_is_uncertain_while_renewals_fail_and_held_again_when_one_gets_through() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let changes = Changes::default();
    // Long enough that the validity outlasts a failed renewal and the retry after it.
    let client = client_at(&proxy.url(), Duration::from_secs(9), &changes);
    let guard = client.lock("health").lock().unwrap();
    assert_eq!(guard.health(), Health::Held);
    proxy.pause();
    assert!(
        eventually(PATIENCE, || guard.health() == Health::Uncertain),
        "a renewal that times out makes the hold uncertain"
    );
    proxy.resume();
    assert!(
        eventually(PATIENCE, || guard.health() != Health::Uncertain),
        "the next renewal decides"
    );
    assert_eq!(
        guard.health(),
        Health::Held,
        "{:?}",
        changes.lock().unwrap()
    );
    assert_eq!(
        *changes.lock().unwrap(),
        [
            (Health::Held, Health::Uncertain),
            (Health::Uncertain, Health::Held)
        ]
    );
    guard.unlock().unwrap();
    assert_eq!(client.stats().locks_lost, 0);
}

#[test]
fn a_hold_found_gone_is_lost_and_so_is_an_unrenewed_lease_past_its_validity() {
    let server = Server::start();
    let changes = Changes::default();
    let client = client_at(&server.url(), SHORT_LEASE, &changes);
    let guard = client.lock("gone").lock().unwrap();
    let () = redis::cmd("DEL")
        .arg("gone")
        .query(&mut server.conn())
        .unwrap();
    assert!(eventually(PATIENCE, || guard.health() == Health::Lost));
    // Held to lost; a renewal that a busy machine keeps past its response timeout may make
    // the hold uncertain on the way, and one that gets through held again.
    let seen = changes.lock().unwrap().clone();
    let chained = seen.windows(2).all(|pair| pair[0].1 == pair[1].0);
    let lost_at_the_end = (seen.iter()).position(|change| change.1 == Health::Lost);
    assert!(
        seen.first().is_some_and(|first| first.0 == Health::Held)
            && chained
            && lost_at_the_end == Some(seen.len() - 1),
        "{seen:?}"
    );
    assert!(guard.unlock().unwrap_err().is_lost());

    // An explicit lease is not renewed: past its validity it is lost, by the clock alone.
    let leased = client
        .lock("leased")
        .lock_with_lease(Duration::from_secs(1))
        .unwrap();
    let (health, lost) = (leased.health(), leased.is_lost());
    // Only while the validity lasts is it held (a busy machine may take longer to look).
    if Instant::now() < leased.valid_until() {
        assert_eq!((health, lost), (Health::Held, false));
    }
    assert!(eventually(PATIENCE, || leased.health() == Health::Lost));
    assert!(leased.is_lost(), "lost with the validity gone");
    assert!(Instant::now() >= leased.valid_until());
    assert_eq!(
        changes.lock().unwrap().len(),
        seen.len(),
        "unwatched holds tell no callback"
    );
}

/// A loss is counted before anything tells of it: whoever learns that a hold was lost (its
/// guard, a watch, the health callback) finds it in the client's stats and in the metrics.
#[test]
fn a_loss_is_counted_before_it_is_told() {
    let server = Server::start();
    // The client, for the callback to read its stats; emptied at the end.
    let client_slot: Arc<Mutex<Option<LockClient>>> = Arc::default();
    let counted: Arc<Mutex<Vec<u64>>> = Arc::default();
    let (slot, seen) = (client_slot.clone(), counted.clone());
    let client = LockClient::builder(&server.url())
        .lease(SHORT_LEASE)
        .response_timeout(response_timeout_for(SHORT_LEASE))
        .on_health_change(move |change| {
            if change.to == Health::Lost {
                let lost = (slot.lock().unwrap().as_ref()).map(|c| c.stats().locks_lost);
                seen.lock()
                    .unwrap()
                    .push(lost.expect("set before the lock is taken"));
            }
        })
        .build()
        .unwrap();
    *client_slot.lock().unwrap() = Some(client.clone());
    let guard = client.lock("counted").lock().unwrap();
    let () = redis::cmd("DEL")
        .arg("counted")
        .query(&mut server.conn())
        .unwrap();
    assert!(eventually(PATIENCE, || !counted.lock().unwrap().is_empty()));
    assert!(guard.unlock().unwrap_err().is_lost());
    assert_eq!(*counted.lock().unwrap(), [1], "told once, counted by then");
    client_slot.lock().unwrap().take();
}
