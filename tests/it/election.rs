//! Leader election: one leader at a time, epochs that only grow, who leads readable by
//! anyone, resignations that wake the next candidate at once, leaderships renewed by the
//! watchdog and lost when another leader took over, waits that a cancel ends.

use crate::support;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use redis::Script;
use redmutex::{Cancel, Health, LockClient};
use support::{SHORT_LEASE, Server, await_calls, await_subscribers, channel, eventually};

const NAME: &str = "e";
const COUNTER: &str = "redisson_lock_token:{e}";
const RECORD: &str = "redisson_lock_token:{e}:redmutex_leaders";
/// Long enough that no test waits for it to pass; far below it, only a message or a
/// cancel ends a wait.
const LONG: Duration = Duration::from_secs(120);
const NO_HANG: Duration = Duration::from_secs(60);

fn named(server: &Server, name: &str) -> LockClient {
    server.builder().client_name(name).build().unwrap()
}

/// A client whose waits only a message ends in time: its leases and retry pauses are far
/// beyond any test.
fn patient(server: &Server, name: &str) -> LockClient {
    server
        .builder()
        .client_name(name)
        .lease(LONG)
        .retry_base(Duration::from_secs(300))
        .retry_cap(Duration::from_secs(600))
        .build()
        .unwrap()
}

fn fields(server: &Server) -> Vec<(String, String)> {
    let mut fields: Vec<(String, String)> = redis::cmd("HGETALL")
        .arg(NAME)
        .query(&mut server.conn())
        .unwrap();
    fields.sort();
    fields
}

#[test]
fn one_candidate_leads_anyone_sees_who_and_epochs_grow() {
    let server = Server::start();
    let alpha = named(&server, "alpha").election(NAME);
    let beta = named(&server, "beta").election(NAME);
    let bystander = server.client().election(NAME);
    assert_eq!(bystander.leader().unwrap(), None, "nobody leads yet");

    let first = alpha.campaign().unwrap();
    assert_eq!(first.epoch(), 1);
    assert_eq!(first.election(), NAME);
    assert_eq!(first.health(), Health::Held);
    let leader = bystander.leader().unwrap().expect("alpha leads");
    assert_eq!((leader.name(), leader.epoch()), ("alpha", 1));
    let stored = fields(&server);
    let keys: Vec<&str> = stored.iter().map(|(field, _)| field.as_str()).collect();
    assert_eq!(keys, ["epoch", "name", "token"]);
    assert!(bystander.remaining_lease().unwrap().is_some());

    assert!(beta.try_campaign().unwrap().is_none(), "alpha leads");
    assert!(
        beta.try_campaign_for(Duration::from_millis(200))
            .unwrap()
            .is_none()
    );
    first.resign().unwrap();
    assert_eq!(bystander.leader().unwrap(), None, "alpha resigned");

    let second = beta.campaign().unwrap();
    assert_eq!(second.epoch(), 2, "the next leader's epoch is greater");
    let leader = bystander.leader().unwrap().unwrap();
    assert_eq!((leader.name(), leader.epoch()), ("beta", 2));
    drop(second);
    assert_eq!(bystander.leader().unwrap(), None, "dropping resigns");
    assert!(!server.exists(NAME));
    assert_eq!(support::get_int(&mut server.conn(), COUNTER), 2);
    let record: Vec<String> = redis::cmd("LRANGE")
        .arg(RECORD)
        .arg(0)
        .arg(-1)
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(record, ["1 alpha", "2 beta"]);
}

#[test]
fn a_resignation_wakes_the_next_candidate_within_a_second() {
    let server = Server::start();
    let leader = patient(&server, "leader")
        .election(NAME)
        .campaign()
        .unwrap();
    let candidate = patient(&server, "candidate").election(NAME);
    let base = server.calls("evalsha");
    let (sender, receiver) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let leadership = candidate.campaign().unwrap();
        sender.send((Instant::now(), leadership.epoch())).unwrap();
        leadership.resign().unwrap();
    });
    // Subscribed, and attempted once more after that: asleep until a message or the end
    // of the leader's lease, which is far away.
    await_subscribers(&server, &channel(NAME), 1);
    await_calls(&server, base + 2);
    let resigned = Instant::now();
    leader.resign().unwrap();
    let (led, epoch) = receiver.recv_timeout(NO_HANG).expect("the candidate leads");
    waiter.join().unwrap();
    assert_eq!(epoch, 2);
    assert!(
        led - resigned < Duration::from_secs(1),
        "the candidate led {:?} after the resignation",
        led - resigned
    );
}

#[test]
fn the_watchdog_renews_a_leadership_that_a_paused_renewal_would_lose() {
    let server = Server::start();
    let client = server
        .builder_with_lease(SHORT_LEASE)
        .client_name("renewed")
        .build()
        .unwrap();
    let leadership = client.election(NAME).campaign().unwrap();
    let rival = named(&server, "rival").election(NAME);
    // Three leases: without renewals the key would have expired twice over.
    let until = Instant::now() + SHORT_LEASE * 3;
    while Instant::now() < until {
        assert!(rival.try_campaign().unwrap().is_none(), "two leaders");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!leadership.is_lost());
    assert!(client.stats().renewals >= 2, "{:?}", client.stats());
    assert_eq!(rival.leader().unwrap().unwrap().name(), "renewed");
    leadership.resign().unwrap();
}

#[test]
fn a_leadership_taken_over_is_lost_at_the_next_renewal_and_resigns_nothing() {
    let server = Server::start();
    let client = server
        .builder_with_lease(SHORT_LEASE)
        .client_name("ousted")
        .build()
        .unwrap();
    let ousted = client.election(NAME).campaign().unwrap();
    let watch = ousted.watch();
    // Another leader in its place, as after the lease ran out during a pause.
    let _: () = redis::cmd("DEL")
        .arg(NAME)
        .query(&mut server.conn())
        .unwrap();
    let next = named(&server, "next").election(NAME).campaign().unwrap();
    assert!(watch.wait_lost(NO_HANG), "the renewal found it gone");
    assert_eq!(ousted.health(), Health::Lost);
    assert!(ousted.epoch() < next.epoch());
    let err = ousted.resign().unwrap_err();
    assert!(err.is_lost(), "{err}");
    let leader = next.election().to_owned();
    assert_eq!(leader, NAME);
    let now = server.client().election(NAME).leader().unwrap().unwrap();
    assert_eq!(
        (now.name(), now.epoch()),
        ("next", next.epoch()),
        "untouched"
    );
}

#[test]
fn a_leadership_may_resign_on_another_thread() {
    let server = Server::start();
    let election = named(&server, "mover").election(NAME);
    let leadership = election.campaign().unwrap();
    std::thread::spawn(move || leadership.resign())
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(election.leader().unwrap(), None);
}

#[test]
fn a_cancel_or_a_close_ends_a_campaign() {
    let server = Server::start();
    let _leader = patient(&server, "leader")
        .election(NAME)
        .campaign()
        .unwrap();
    let client = patient(&server, "candidate");
    let stop = Cancel::new();
    let election = client.election(NAME).with_cancel(&stop);
    let base = server.calls("evalsha");
    let waiter = std::thread::spawn(move || election.campaign().map(drop));
    await_subscribers(&server, &channel(NAME), 1);
    await_calls(&server, base + 2);
    stop.cancel();
    let err = waiter.join().unwrap().unwrap_err();
    assert!(err.is_cancelled() && !err.is_closed(), "{err}");
    assert!(err.to_string().contains("election \"e\""), "{err}");

    let election = client.election(NAME);
    let waiter = std::thread::spawn(move || election.try_campaign_for(LONG).map(drop));
    assert!(eventually(NO_HANG, || server.subscribers(&channel(NAME)) == 1));
    client.close();
    let err = waiter.join().unwrap().unwrap_err();
    assert!(err.is_closed(), "{err}");
    let err = client.election(NAME).leader().unwrap_err();
    assert!(err.is_closed(), "{err}");
}

#[test]
fn redlock_refuses_an_election_and_writes_nothing() {
    let servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls: Vec<String> = servers.iter().map(Server::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let client = LockClient::redlock(&urls).build().unwrap();
    let election = client.election(NAME);
    let err = election.try_campaign().map(drop).unwrap_err();
    assert!(err.is_unsupported(), "{err}");
    let err = election.campaign().map(drop).unwrap_err();
    assert!(err.is_unsupported(), "{err}");
    let err = election.leader().unwrap_err();
    assert!(err.is_unsupported(), "{err}");
    for server in &servers {
        let keys: i64 = redis::cmd("DBSIZE").query(&mut server.conn()).unwrap();
        assert_eq!(keys, 0, "nothing written");
    }
}

#[test]
fn a_key_of_another_kind_is_refused_and_left_alone() {
    let server = Server::start();
    let client = server.client();
    let _held = client.lock(NAME).lock().unwrap();
    let err = client.election(NAME).try_campaign().map(drop).unwrap_err();
    assert!(err.is_wrong_kind(), "{err}");
    let err = client.election(NAME).leader().unwrap_err();
    assert!(err.is_wrong_kind(), "{err}");
    let _: () = redis::cmd("RPUSH")
        .arg("list")
        .arg("x")
        .query(&mut server.conn())
        .unwrap();
    let err = client
        .election("list")
        .try_campaign()
        .map(drop)
        .unwrap_err();
    assert!(err.is_wrong_kind(), "{err}");
    assert!(!server.exists(COUNTER), "no epoch drawn");
}

fn acquire(redis: &mut redis::Connection, token: &str) -> (i64, i64) {
    Script::new(include_str!(
        "../../src/transport/scripts/election_acquire.lua"
    ))
    .key(NAME)
    .key(COUNTER)
    .key(RECORD)
    .key("redisson_lock__channel:{e}:leader")
    .arg(token)
    .arg(30_000)
    .arg("candidate")
    .arg(100)
    .invoke(redis)
    .unwrap()
}

#[test]
fn an_attempt_sent_again_after_a_lost_reply_leads_once_with_one_epoch() {
    let server = Server::start();
    let mut redis = server.conn();
    let token = "0123456789abcdef0123456789abcdef";
    assert_eq!(acquire(&mut redis, token), (1, 1));
    assert_eq!(acquire(&mut redis, token), (1, 1), "the same attempt again");
    assert_eq!(support::get_int(&mut redis, COUNTER), 1);
    let (status, pttl) = acquire(&mut redis, "fedcba9876543210fedcba9876543210");
    assert_eq!(status, 0, "another attempt finds it taken");
    assert!(pttl > 0 && pttl <= 30_000);
}
