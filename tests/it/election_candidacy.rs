//! What an election tells of its candidates: the value a leader publishes, the candidates
//! waiting to lead, and a candidate id under which a restarted process takes its own
//! leadership back. Across processes, on one server and on a cluster.

use crate::support;

use std::time::Duration;

use redmutex::{Candidate, LockClient};
use support::{Server, eventually};

const NAME: &str = "svc";
const LONG: Duration = Duration::from_secs(120);
const NO_HANG: Duration = Duration::from_secs(60);

const URL_VAR: &str = "REDMUTEX_TEST_CANDIDACY_URL";
const ID_VAR: &str = "REDMUTEX_TEST_CANDIDACY_ID";
const VALUE_VAR: &str = "REDMUTEX_TEST_CANDIDACY_VALUE";

/// A client whose leases and retry pauses are far beyond any test: only messages and
/// its own calls move it. `urls` is one server's URL, or a cluster's seeds joined by
/// commas.
fn patient(urls: &str, name: &str) -> LockClient {
    let builder = match urls.contains(',') {
        true => LockClient::cluster(&urls.split(',').collect::<Vec<_>>()),
        false => LockClient::builder(urls),
    };
    builder
        .client_name(name)
        .lease(LONG)
        .retry_base(Duration::from_secs(300))
        .retry_cap(Duration::from_secs(600))
        .build()
        .unwrap()
}

/// Campaigns in the election `NAME` as the candidate `ID_VAR` with the value `VALUE_VAR`,
/// and stays (leading or waiting) until killed.
#[test]
#[ignore = "run as a child process by the election tests"]
fn candidacy_worker() {
    let url = std::env::var(URL_VAR).expect("started by a parent test");
    let id = std::env::var(ID_VAR).unwrap();
    let value = std::env::var(VALUE_VAR).unwrap();
    let client = patient(&url, &format!("worker-{id}"));
    let election = client.election(NAME).as_candidate(id);
    let _leadership = election.campaign_with(value).unwrap();
    loop {
        std::thread::park();
    }
}

/// A candidacy worker process, killed when dropped.
struct Worker(std::process::Child);

impl Worker {
    fn start(url: &str, id: &str, value: &str) -> Worker {
        Worker(support::spawn_worker(
            "election_candidacy::candidacy_worker",
            &[
                (URL_VAR, url.to_owned()),
                (ID_VAR, id.to_owned()),
                (VALUE_VAR, value.to_owned()),
            ],
        ))
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn listed(candidates: &[Candidate]) -> Vec<(String, bool)> {
    (candidates.iter())
        .map(|c| (c.name().to_owned(), c.is_leader()))
        .collect()
}

/// The leader of another process publishes its address with its campaign; anyone reads
/// it with the leader, and it changes the value while it leads. A killed leader's process
/// restarted under the same candidate id leads again at once, with the same epoch, while
/// a candidate of another id waits; the waiting candidates are listed in the order they
/// came, across processes.
fn values_candidates_and_resumes_across_processes(url: &str, client: &LockClient) {
    let election = client.election(NAME);
    let first = Worker::start(url, "node-a", "10.0.0.1:80");
    assert!(eventually(NO_HANG, || election.leader().unwrap().is_some()));
    let leader = election.leader().unwrap().unwrap();
    assert_eq!(leader.name(), "worker-node-a");
    assert_eq!(leader.value(), Some("10.0.0.1:80"));
    assert_eq!(leader.candidate(), Some("node-a"));
    let epoch = leader.epoch();

    // A second process waits as node-b, then this one as itself.
    let _second = Worker::start(url, "node-b", "10.0.0.2:80");
    assert!(eventually(NO_HANG, || election.candidates().unwrap().len() == 2));
    let waiter = patient(url, "local").election(NAME);
    let local = std::thread::spawn(move || waiter.try_campaign_for(Duration::from_secs(5)));
    assert!(eventually(NO_HANG, || election.candidates().unwrap().len() == 3));
    let candidates = election.candidates().unwrap();
    assert_eq!(
        listed(&candidates),
        [
            ("worker-node-a".to_owned(), true),
            ("worker-node-b".to_owned(), false),
            ("local".to_owned(), false)
        ]
    );
    assert_eq!(candidates[0].id(), "node-a");
    assert_eq!(candidates[1].id(), "node-b");
    assert!(candidates[1].since() <= candidates[2].since());
    // A campaign that ends without leading is no longer listed.
    assert!(local.join().unwrap().unwrap().is_none());
    assert_eq!(election.candidates().unwrap().len(), 2);

    // node-a's process dies and comes back under its id before its lease runs out.
    drop(first);
    let resumed = patient(url, "worker-node-a")
        .election(NAME)
        .as_candidate("node-a");
    let leadership = resumed.try_campaign().unwrap().expect("its own leadership");
    assert_eq!(
        leadership.epoch(),
        epoch,
        "the same leadership, not a new one"
    );
    let leader = election.leader().unwrap().unwrap();
    assert_eq!(
        (leader.epoch(), leader.value()),
        (epoch, Some("10.0.0.1:80"))
    );
    leadership.proclaim("10.0.0.9:80").unwrap();
    assert_eq!(
        election.leader().unwrap().unwrap().value(),
        Some("10.0.0.9:80")
    );
    let other = patient(url, "other").election(NAME).as_candidate("node-c");
    assert!(other.try_campaign().unwrap().is_none(), "node-a leads");

    // Its resignation hands over to the candidate that waited: node-b.
    leadership.resign().unwrap();
    assert!(eventually(NO_HANG, || {
        (election.leader().unwrap()).is_some_and(|l| l.candidate() == Some("node-b"))
    }));
    let leader = election.leader().unwrap().unwrap();
    assert_eq!(leader.value(), Some("10.0.0.2:80"));
    assert!(leader.epoch() > epoch);
    assert_eq!(
        listed(&election.candidates().unwrap()),
        [("worker-node-b".to_owned(), true)]
    );
}

#[test]
fn a_leaders_value_the_candidates_and_a_resumed_leadership_across_processes() {
    let server = Server::start();
    values_candidates_and_resumes_across_processes(&server.url(), &server.client());
}

#[test]
fn on_a_cluster_values_candidates_and_resumes_work_alike() {
    let cluster = support::Cluster::start();
    let seeds = cluster.seeds().join(",");
    values_candidates_and_resumes_across_processes(&seeds, &cluster.client());
}

/// A leadership taken over under its own candidate id is lost to its former holder: its
/// resignation and its proclamations change nothing of the new one's.
#[test]
fn a_leadership_taken_over_by_its_id_is_lost_to_the_old_holder() {
    let server = Server::start();
    let old = patient(&server.url(), "old")
        .election(NAME)
        .as_candidate("same")
        .campaign_with("old")
        .unwrap();
    let new = patient(&server.url(), "new")
        .election(NAME)
        .as_candidate("same")
        .try_campaign()
        .unwrap()
        .expect("taken over");
    assert_eq!(new.epoch(), old.epoch());
    // Told by the take-over's message, long before its next renewal.
    assert!(old.watch().wait_lost(Duration::from_secs(10)), "{old:?}");
    assert!(old.proclaim("stale").unwrap_err().is_lost());
    assert!(old.resign().unwrap_err().is_lost());
    let leader = server.client().election(NAME).leader().unwrap().unwrap();
    // The same leadership: its name and value stay until the new holder proclaims.
    assert_eq!((leader.name(), leader.value()), ("old", Some("old")));
    new.resign().unwrap();
}

/// A leader replaced while it has not noticed yet (no pub/sub to tell it, its next renewal
/// a third of a long lease away) proclaims a value: the server refuses it, since the key
/// holds another leader's token, and observers keep the new leader's value.
#[test]
fn a_replaced_leader_that_has_not_noticed_cannot_proclaim_over_its_successor() {
    let server = Server::start();
    let deaf = LockClient::builder(&server.url())
        .client_name("old")
        .lease(LONG)
        .pubsub(false)
        .build()
        .unwrap();
    let old = deaf.election(NAME).campaign_with("old").unwrap();
    let other = patient(&server.url(), "new");
    assert!(other.election(NAME).force_resign().unwrap());
    let new = other.election(NAME).campaign_with("new").unwrap();
    assert!(new.epoch() > old.epoch());
    assert!(
        !old.is_lost(),
        "told already: the test needs a leader that has not noticed"
    );
    let err = old.proclaim("stale").unwrap_err();
    assert!(err.is_lost(), "{err:#}");
    let leader = server.client().election(NAME).leader().unwrap().unwrap();
    assert_eq!((leader.name(), leader.value()), ("new", Some("new")));
    new.resign().unwrap();
}

/// Without an id of its own, a second campaign of the same thread does not take over the
/// leadership it holds: it waits like any other candidate.
#[test]
fn without_a_chosen_id_nothing_is_taken_over() {
    let server = Server::start();
    let election = patient(&server.url(), "one").election(NAME);
    let leadership = election.campaign().unwrap();
    assert!(election.try_campaign().unwrap().is_none());
    let other = server.client().election(NAME);
    assert!(other.try_campaign().unwrap().is_none());
    leadership.resign().unwrap();
}

/// Bad ids and values are refused before anything is sent.
#[test]
fn bad_ids_and_values_are_refused_and_change_nothing() {
    let server = Server::start();
    let client = server.client();
    let election = client.election(NAME);
    let refused = |result: redmutex::Result<Option<redmutex::Leadership>>| {
        let err = result.unwrap_err();
        assert!(err.is_invalid_input(), "{err:?}");
    };
    refused(election.as_candidate("").try_campaign());
    refused(election.as_candidate("a\nb").try_campaign());
    refused(election.as_candidate("x".repeat(257)).try_campaign());
    refused(
        election
            .with_value("v".repeat(64 * 1024 + 1))
            .try_campaign(),
    );
    let keys: i64 = redis::cmd("DBSIZE").query(&mut server.conn()).unwrap();
    assert_eq!(keys, 0, "nothing written");

    let leadership = election.campaign_with("v".repeat(64 * 1024)).unwrap();
    let err = leadership.proclaim(&"v".repeat(64 * 1024 + 1)).unwrap_err();
    assert!(err.is_invalid_input(), "{err:?}");
    assert_eq!(
        election.leader().unwrap().unwrap().value().map(str::len),
        Some(64 * 1024)
    );
    leadership.resign().unwrap();
}

/// An observer is told a leader's value with its election, and each value it proclaims.
#[test]
fn an_observer_hears_the_leaders_value_and_each_proclamation() {
    let server = Server::start();
    let url = server.url();
    let mut observer = patient(&url, "watcher").election(NAME).observe();
    assert_eq!(next(&mut observer), redmutex::LeaderChange::Vacant);
    let leadership = patient(&url, "leader")
        .election(NAME)
        .campaign_with("10.0.0.1:80")
        .unwrap();
    let redmutex::LeaderChange::Elected(leader) = next(&mut observer) else {
        panic!("an election first")
    };
    assert_eq!(
        (leader.name(), leader.epoch(), leader.value()),
        ("leader", 1, Some("10.0.0.1:80"))
    );
    for value in ["10.0.0.2:80", "10.0.0.3:80"] {
        leadership.proclaim(value).unwrap();
        let redmutex::LeaderChange::Proclaimed(leader) = next(&mut observer) else {
            panic!("a proclamation")
        };
        assert_eq!((leader.epoch(), leader.value()), (1, Some(value)));
    }
    leadership.resign().unwrap();
    assert_eq!(next(&mut observer), redmutex::LeaderChange::Vacant);
}

fn next(observer: &mut redmutex::Observer) -> redmutex::LeaderChange {
    (observer.recv_timeout(NO_HANG).unwrap()).expect("a change within a minute")
}
