//! A leader's own view of its leadership: removed by a forced resignation, or replaced
//! after its key was deleted, it learns so from the election's announcement within a round
//! trip, long before its next renewal; and the listener of its election handle hears each
//! leadership begin and end once.

use crate::support;

use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};
use std::time::Duration;

use redmutex::{Cancel, Health, LeadershipEvent, LockClient};
use support::{Server, eventually};

const NAME: &str = "e";
const NO_HANG: Duration = Duration::from_secs(60);
/// How soon a leader removed from its election must learn it: half the renew interval of
/// the default 30 s lease, so that its next renewal comes too late.
const PROMPTLY: Duration = Duration::from_secs(5);

fn named(server: &Server, name: &str) -> LockClient {
    server.builder().client_name(name).build().unwrap()
}

/// An event as the listener heard it, with the thread and its name.
type Heard = (LeadershipEvent, ThreadId, Option<String>);

/// The election `name` of `client`, with a listener that sends what it hears.
fn listened(client: &LockClient) -> (redmutex::Election, Receiver<Heard>) {
    let (sender, heard) = mpsc::channel();
    let election = client.election(NAME).with_listener(move |event| {
        let thread = thread::current();
        let _ = sender.send((*event, thread.id(), thread.name().map(str::to_owned)));
    });
    (election, heard)
}

fn leading(epoch: u64) -> LeadershipEvent {
    LeadershipEvent::Leading { epoch }
}

fn not_leading(epoch: u64, lost: bool) -> LeadershipEvent {
    LeadershipEvent::NotLeading { epoch, lost }
}

/// A leader forced out by an operator while a candidate takes its place: with the default
/// lease its next renewal is ten seconds away, but the forced resignation's message has it
/// learn its loss at once, before it could act as a second leader for long.
#[test]
fn a_leader_forced_out_learns_it_within_a_round_trip() {
    let server = Server::start();
    let ousted = named(&server, "ousted").election(NAME).campaign().unwrap();
    let watch = ousted.watch();
    assert!(server.client().election(NAME).force_resign().unwrap());
    let next = named(&server, "next").election(NAME).campaign().unwrap();
    assert!(watch.wait_lost(PROMPTLY), "still leading: {:?}", ousted);
    assert_eq!(ousted.health(), Health::Lost);
    assert!(ousted.is_lost());
    assert!(ousted.epoch() < next.epoch());
    assert!(ousted.resign().unwrap_err().is_lost());
    let now = server.client().election(NAME).leader().unwrap().unwrap();
    assert_eq!((now.name(), now.epoch()), ("next", next.epoch()));
}

/// A leader whose key an operator deleted: nothing is announced at the delete, but the
/// next candidate's election is, and the replaced leader learns its loss from it.
#[test]
fn a_leader_whose_key_was_deleted_learns_it_when_its_successor_is_elected() {
    let server = Server::start();
    let ousted = named(&server, "ousted").election(NAME).campaign().unwrap();
    let watch = ousted.watch();
    let _: () = redis::cmd("DEL")
        .arg(NAME)
        .query(&mut server.conn())
        .unwrap();
    let next = named(&server, "next").election(NAME).campaign().unwrap();
    assert!(watch.wait_lost(PROMPTLY), "still leading: {:?}", ousted);
    assert_eq!(ousted.health(), Health::Lost);
    assert!(ousted.epoch() < next.epoch());
    assert!(ousted.resign().unwrap_err().is_lost());
    let now = server.client().election(NAME).leader().unwrap().unwrap();
    assert_eq!((now.name(), now.epoch()), ("next", next.epoch()));
}

/// The same on a cluster, where the announcement goes on the sharded channel of the
/// election's slot.
#[test]
fn on_a_cluster_a_leader_forced_out_learns_it_within_a_round_trip() {
    let cluster = support::Cluster::start();
    let client = |name: &str| cluster.builder().client_name(name).build().unwrap();
    let (election, heard) = listened(&client("ousted"));
    let ousted = election.campaign().unwrap();
    assert_eq!(heard.try_recv().unwrap().0, leading(ousted.epoch()));
    let watch = ousted.watch();
    assert!(cluster.client().election(NAME).force_resign().unwrap());
    let next = client("next").election(NAME).campaign().unwrap();
    assert!(watch.wait_lost(PROMPTLY), "still leading: {:?}", ousted);
    assert_eq!(ousted.health(), Health::Lost);
    assert!(ousted.epoch() < next.epoch());
    let (event, _, _) = heard.recv_timeout(PROMPTLY).expect("told of the loss");
    assert_eq!(event, not_leading(ousted.epoch(), true));
}

/// An operator's `redmutex unlock` of an election, from a process of its own, removes the
/// leader it showed; the leader's listener is told within a round trip.
#[cfg(feature = "cli")]
#[test]
fn the_listener_of_a_leader_removed_by_the_tool_is_told_at_once() {
    let server = Server::start();
    let (election, heard) = listened(&named(&server, "listened"));
    let ousted = election.campaign().unwrap();
    assert_eq!(heard.try_recv().unwrap().0, leading(ousted.epoch()));
    let output = support::tool()
        .args(["--url", &server.url(), "unlock", NAME, "--force", "--yes"])
        .timeout(NO_HANG)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let (event, _, _) = heard.recv_timeout(PROMPTLY).expect("told of the loss");
    assert_eq!(event, not_leading(ousted.epoch(), true));
    assert!(ousted.is_lost());
}

/// The listener hears each leadership its handle's campaigns win begin, on the thread that
/// won it before the campaign returns, and end once, on the thread that resigned or dropped
/// it before that returns; handles made from it share it, others do not.
#[test]
fn a_listener_hears_each_leadership_begin_and_end_once() {
    let server = Server::start();
    let client = named(&server, "listened");
    let (election, heard) = listened(&client);
    let here = thread::current().id();
    let next = || heard.try_recv().map(|(event, thread, _)| (event, thread));

    let first = election.campaign().unwrap();
    assert_eq!(next(), Ok((leading(first.epoch()), here)));
    first.resign().unwrap();
    assert_eq!(next(), Ok((not_leading(1, false), here)));

    let cancel = Cancel::new();
    let second = (election.with_cancel(&cancel))
        .try_campaign_for(NO_HANG)
        .unwrap()
        .unwrap();
    assert_eq!(next(), Ok((leading(2), here)));
    drop(second);
    assert_eq!(next(), Ok((not_leading(2, false), here)));

    let elsewhere = election.clone();
    let third = thread::spawn(move || elsewhere.try_campaign().unwrap().unwrap())
        .join()
        .unwrap();
    let (event, thread, _) = heard.try_recv().unwrap();
    assert_eq!(event, leading(3));
    assert_ne!(thread, here, "told on the thread that won");
    thread::spawn(move || third.resign().unwrap())
        .join()
        .unwrap();
    assert_eq!(heard.try_recv().unwrap().0, not_leading(3, false));

    let unheard = client.election(NAME).campaign().unwrap();
    unheard.resign().unwrap();
    assert!(heard.try_recv().is_err(), "another handle has no listener");
}

/// A leadership forced out by another client is told lost, once, by the watchdog, within
/// a round trip of the announcement; its resignation afterwards tells nothing more. One
/// whose key was deleted unannounced is told lost by the resignation that finds it so.
#[test]
fn a_listener_hears_a_leadership_lost() {
    let server = Server::start();
    let (election, heard) = listened(&named(&server, "listened"));
    let ousted = election.campaign().unwrap();
    assert_eq!(heard.try_recv().unwrap().0, leading(ousted.epoch()));
    assert!(server.client().election(NAME).force_resign().unwrap());
    let (event, _, thread) = heard.recv_timeout(PROMPTLY).expect("told of the loss");
    assert_eq!(event, not_leading(ousted.epoch(), true));
    assert_eq!(thread.as_deref(), Some("redmutex-watchdog"));
    assert!(ousted.resign().unwrap_err().is_lost());
    assert!(heard.try_recv().is_err(), "told once");

    let replaced = election.campaign().unwrap();
    assert_eq!(heard.try_recv().unwrap().0, leading(replaced.epoch()));
    let _: () = redis::cmd("DEL")
        .arg(NAME)
        .query(&mut server.conn())
        .unwrap();
    assert!(replaced.resign().unwrap_err().is_lost());
    let (event, _, _) = heard.recv_timeout(NO_HANG).expect("told of the loss");
    assert_eq!(event, not_leading(2, true));
    assert!(heard.try_recv().is_err(), "told once");
}

/// `lead` tells the listener of every leadership it runs the work with, each begun before
/// the work and ended after it.
#[test]
fn a_listener_hears_every_leadership_of_lead() {
    let server = Server::start();
    let (election, heard) = listened(&named(&server, "selector"));
    let stop = Cancel::new();
    let election = election.with_cancel(&stop);
    let worked = Arc::new(Mutex::new(Vec::new()));
    let runner = {
        let worked = worked.clone();
        thread::spawn(move || {
            election.lead(|leadership| worked.lock().unwrap().push(leadership.epoch()))
        })
    };
    assert!(eventually(NO_HANG, || worked.lock().unwrap().len() >= 3));
    stop.cancel();
    runner.join().unwrap().unwrap();
    let worked = worked.lock().unwrap().clone();
    let events: Vec<LeadershipEvent> = heard.try_iter().map(|(event, _, _)| event).collect();
    let expected: Vec<LeadershipEvent> = (worked.iter())
        .flat_map(|&epoch| [leading(epoch), not_leading(epoch, false)])
        .collect();
    assert_eq!(events, expected);
}

/// A listener that panics at every event is logged and disturbs nothing: campaigns return
/// their leaderships, and the watchdog thread that found one lost goes on finding the next
/// one lost as promptly.
#[test]
fn a_panicking_listener_disturbs_nothing() {
    support::logs::capture();
    let server = Server::start();
    let client = named(&server, "panicky");
    let election = client
        .election(NAME)
        .with_listener(|event| panic!("listener of {event:?}"));
    let admin = server.client().election(NAME);
    for _ in 0..2 {
        let ousted = election.campaign().unwrap();
        assert!(admin.force_resign().unwrap());
        assert!(ousted.watch().wait_lost(PROMPTLY), "still leading");
        assert!(ousted.resign().unwrap_err().is_lost());
    }
    let leadership = election.campaign().unwrap();
    leadership.resign().unwrap();
    assert!(eventually(NO_HANG, || {
        support::logs::messages(log::Level::Error, "leadership listener of").len() >= 6
    }));
}
