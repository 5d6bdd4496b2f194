//! Leader election: one leader at a time, epochs that only grow, who leads readable by
//! anyone, resignations that wake the next candidate at once, leaderships renewed by the
//! watchdog and lost when another leader took over, waits that a cancel ends.

use crate::support;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use redis::Script;
use redmutex::{Cancel, Health, LeaderChange, LockClient};
use support::{Proxy, SHORT_LEASE, Server, await_calls, await_subscribers, channel, eventually};

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
    assert_eq!(keys, ["candidate", "epoch", "name", "since", "token"]);
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

    // Another election, whose channel this client has not subscribed yet: subscribed, and
    // tried again since, the campaign is waiting.
    let _leader = patient(&server, "leader").election("f").campaign().unwrap();
    let election = client.election("f");
    let base = server.calls("evalsha");
    let waiter = std::thread::spawn(move || election.try_campaign_for(LONG).map(drop));
    await_subscribers(&server, &channel("f"), 1);
    await_calls(&server, base + 2);
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

#[test]
fn every_other_kind_refuses_an_election_s_key_and_leaves_it_alone() {
    let server = Server::start();
    let leadership = patient(&server, "leader")
        .election(NAME)
        .campaign()
        .unwrap();
    let dump = || -> Vec<u8> {
        redis::cmd("DUMP")
            .arg(NAME)
            .query(&mut server.conn())
            .unwrap()
    };
    let before = dump();
    let client = server.client();
    let refused = |what: &str, result: redmutex::Result<bool>| match result {
        Err(err) => assert!(
            err.is_wrong_kind() && err.to_string().contains("election"),
            "{what}: {err}"
        ),
        Ok(taken) => panic!("{what}: not refused ({taken})"),
    };
    refused("lock", client.lock(NAME).try_lock().map(|g| g.is_some()));
    refused(
        "fenced",
        client.fenced_lock(NAME).try_lock().map(|g| g.is_some()),
    );
    refused(
        "fair",
        client.fair_lock(NAME).try_lock().map(|g| g.is_some()),
    );
    let rw = client.read_write_lock(NAME);
    refused("read", rw.read().try_lock().map(|g| g.is_some()));
    refused("write", rw.write().try_lock().map(|g| g.is_some()));
    refused(
        "token",
        client.token_lock(NAME).try_lock().map(|g| g.is_some()),
    );
    refused(
        "semaphore",
        client
            .leased_semaphore(NAME)
            .try_acquire()
            .map(|p| p.is_some()),
    );
    refused("forced lock", client.lock(NAME).force_unlock());
    refused("forced fair", client.fair_lock(NAME).force_unlock());
    refused("forced read", rw.read().force_unlock());
    refused("forced write", rw.write().force_unlock());
    assert_eq!(dump(), before, "the election's key is as it was");
    assert!(!leadership.is_lost(), "still leading");
    leadership.resign().unwrap();
}

fn acquire(redis: &mut redis::Connection, token: &str) -> (i64, i64) {
    Script::new(concat!(
        include_str!("../../src/transport/scripts/shape.lua"),
        include_str!("../../src/kinds/election/election_acquire.lua")
    ))
    .key(NAME)
    .key(COUNTER)
    .key(RECORD)
    .key("redisson_lock_token:{e}:redmutex_candidates")
    .key("redisson_lock_timeout:{e}:redmutex_queue:redmutex_alive")
    .arg(token)
    .arg(30_000)
    .arg("candidate")
    .arg(100)
    .arg("redisson_lock__channel:{e}:leader")
    .arg("candidate-id")
    .arg(0)
    .arg("")
    .arg(0)
    .arg(30_000)
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

// The promises against processes that crash and pause: each candidate below is a worker
// process of this test binary, named `w<pid>` so that the test can find the leader's pid
// from `leader()` and signal it.

const URL_VAR: &str = "REDMUTEX_TEST_URL";
const LEASE_VAR: &str = "REDMUTEX_TEST_LEASE_MS";
const HOLD_VAR: &str = "REDMUTEX_TEST_HOLD_MS";
/// The election the worker processes campaign in.
const CHAOS: &str = "chaos";
/// Where workers send their leaderships' windows, and the leaderships they found lost.
const HISTORY: &str = "history";
const LOST: &str = "lost";

/// One candidate process: campaigns for ever; while it leads, sends the window in which
/// its leadership was valid every few milliseconds (a killed leader's last window stands),
/// and gives the leadership up after `HOLD_VAR` ms of such heartbeats (0: never), counted
/// in heartbeats, so that a leader paused in between goes on after it resumes. A
/// leadership it finds lost is sent to `LOST` as `<epoch>`.
#[test]
#[ignore = "run as a child process by the election tests"]
fn candidate_worker() {
    let url = std::env::var(URL_VAR).expect("started by a parent test");
    let lease = Duration::from_millis(std::env::var(LEASE_VAR).unwrap().parse().unwrap());
    let hold: u64 = std::env::var(HOLD_VAR).unwrap().parse().unwrap();
    let pid = std::process::id();
    let client = LockClient::builder(&url)
        .lease(lease)
        .response_timeout(support::response_timeout_for(lease))
        .client_name(&format!("w{pid}"))
        .build()
        .unwrap();
    let election = client.election(CHAOS);
    let mut redis = redis::Client::open(url).unwrap().get_connection().unwrap();
    loop {
        let Ok(leadership) = election.campaign() else {
            continue;
        };
        let taken = Instant::now();
        let holder = format!("w{pid}-{}", leadership.epoch());
        let beat = Duration::from_millis(20);
        let mut beats = 0;
        loop {
            let valid_until = leadership.valid_until();
            if leadership.is_lost() {
                break;
            }
            support::history::send(
                &mut redis,
                HISTORY,
                &holder,
                (taken, Instant::now(), valid_until),
            );
            beats += 1;
            if hold > 0 && beat * beats >= Duration::from_millis(hold) {
                break;
            }
            let _ = leadership.watch().wait_lost(beat);
        }
        if leadership.is_lost() {
            let _: () = redis::cmd("RPUSH")
                .arg(LOST)
                .arg(leadership.epoch())
                .query(&mut redis)
                .unwrap();
        }
        let _ = leadership.resign();
    }
}

/// A worker process, killed when dropped.
struct Candidate(std::process::Child);

impl Candidate {
    fn start(server: &Server, lease: Duration, hold: Duration) -> Candidate {
        Candidate(support::spawn_worker(
            "election::candidate_worker",
            &[
                (URL_VAR, server.url()),
                (LEASE_VAR, lease.as_millis().to_string()),
                (HOLD_VAR, hold.as_millis().to_string()),
            ],
        ))
    }

    fn name(&self) -> String {
        format!("w{}", self.0.id())
    }

    fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill")
            .arg(signal)
            .arg(self.0.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for Candidate {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until someone leads `election` with an epoch above `after`; who, and when that
/// was seen.
fn next_leader(election: &redmutex::Election, after: u64) -> (redmutex::Leader, Instant) {
    let mut found = None;
    assert!(
        eventually(NO_HANG, || {
            found = election.leader().unwrap().filter(|l| l.epoch() > after);
            found.is_some()
        }),
        "no leader after epoch {after}"
    );
    (found.unwrap(), Instant::now())
}

/// The leaderships' windows must not overlap, and sorted by their start their epochs must
/// grow.
fn check_history(server: &Server) -> usize {
    let history = support::history::received(&mut server.conn(), HISTORY);
    history.assert_exclusive();
    let mut windows = history.windows();
    windows.sort_by_key(|w| w.from);
    let epochs: Vec<u64> = windows
        .iter()
        .map(|w| w.holder.rsplit_once('-').unwrap().1.parse().unwrap())
        .collect();
    let mut leaders = epochs.clone();
    leaders.dedup();
    assert!(
        leaders.windows(2).all(|pair| pair[0] < pair[1]),
        "epochs out of order: {leaders:?}"
    );
    leaders.len()
}

#[test]
fn never_two_leaders_while_leaders_are_killed_and_paused_at_random() {
    use rand::RngExt;
    let server = Server::start();
    let lease = SHORT_LEASE;
    let hold = Duration::from_millis(300);
    let mut candidates: Vec<Candidate> = (0..4)
        .map(|_| Candidate::start(&server, lease, hold))
        .collect();
    let observer = server.client().election(CHAOS);
    let mut epoch = 0;
    let mut rng = rand::rng();
    // One kill and one pause for sure, in either order, then four of either.
    let first_kill = rng.random_range(0..2) == 0;
    for event in 0..6 {
        let kill = match event {
            0 => first_kill,
            1 => !first_kill,
            _ => rng.random_range(0..2) == 0,
        };
        let (leader, _) = next_leader(&observer, epoch);
        epoch = leader.epoch();
        let Some(at) = candidates.iter().position(|c| c.name() == leader.name()) else {
            continue;
        };
        if kill {
            candidates[at].signal("-KILL");
            candidates.remove(at);
            candidates.push(Candidate::start(&server, lease, hold));
        } else {
            candidates[at].signal("-STOP");
            // Paused past its lease: someone else leads before it comes back.
            let (next, _) = next_leader(&observer, epoch);
            epoch = next.epoch();
            candidates[at].signal("-CONT");
        }
    }
    // A few more hand-overs after the last resumed leader has come back.
    for _ in 0..3 {
        epoch = next_leader(&observer, epoch).0.epoch();
    }
    drop(candidates);
    let leaders = check_history(&server);
    assert!(leaders >= 6, "only {leaders} leaderships recorded");
}

#[test]
fn a_crashed_leader_is_followed_within_its_lease_and_a_second() {
    let server = Server::start();
    let lease = Duration::from_secs(2);
    let crashing = Candidate::start(&server, lease, Duration::ZERO);
    let observer = server.client().election(CHAOS);
    let (first, _) = next_leader(&observer, 0);
    assert_eq!(first.name(), crashing.name());
    let follower = server
        .builder_with_lease(lease)
        .client_name("follower")
        .build()
        .unwrap()
        .election(CHAOS);
    let (sender, receiver) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let leadership = follower.campaign().unwrap();
        sender.send((Instant::now(), leadership.epoch())).unwrap();
        leadership
    });
    await_subscribers(&server, &channel(CHAOS), 1);
    let killed = Instant::now();
    crashing.signal("-KILL");
    let (led, epoch) = receiver.recv_timeout(NO_HANG).expect("the follower leads");
    assert!(epoch > first.epoch());
    assert!(
        led - killed <= lease + Duration::from_secs(1),
        "the next leader came {:?} after the crash",
        led - killed
    );
    drop(waiter.join().unwrap());
}

#[test]
fn a_leader_paused_past_its_lease_learns_it_lost_with_a_lower_epoch() {
    let server = Server::start();
    let lease = SHORT_LEASE;
    let paused = Candidate::start(&server, lease, Duration::ZERO);
    let observer = server.client().election(CHAOS);
    let (first, _) = next_leader(&observer, 0);
    assert_eq!(first.name(), paused.name());
    paused.signal("-STOP");
    let next = server
        .builder_with_lease(lease)
        .client_name("next")
        .build()
        .unwrap()
        .election(CHAOS)
        .campaign()
        .unwrap();
    let taken = Instant::now();
    assert!(
        next.epoch() > first.epoch(),
        "the new leader's epoch is higher"
    );
    paused.signal("-CONT");
    let lost = || {
        redis::cmd("LRANGE")
            .arg(LOST)
            .arg(0)
            .arg(-1)
            .query::<Vec<u64>>(&mut server.conn())
            .unwrap()
    };
    assert!(
        eventually(NO_HANG, || lost() == [first.epoch()]),
        "the paused leader did not learn it lost: {:?}",
        lost()
    );
    // Its windows end before the new leader's begins.
    let history = support::history::received(&mut server.conn(), HISTORY);
    history.add(support::history::Window {
        holder: format!("next-{}", next.epoch()),
        from: support::history::nanos_at_least(taken),
        to: support::history::nanos_at_most(Instant::now().min(next.valid_until())),
    });
    history.assert_exclusive();
    // Still the leader (a renewal of its short lease may be late on a loaded machine).
    assert!(!next.is_lost(), "{:?}", next.health());
    next.resign().unwrap();
}

#[test]
fn a_sentinel_failover_during_an_election_keeps_one_leader_and_growing_epochs() {
    let d = support::Deployment::start(support::Options::default());
    let urls = d.sentinel_urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let client = |name: &str| {
        LockClient::sentinel(&urls, support::MASTER)
            .client_name(name)
            .min_replica_acks(1, Duration::from_secs(1))
            .build()
            .unwrap()
    };
    let (alpha, beta, bystander) = (client("alpha"), client("beta"), client("bystander"));
    let first = alpha.election(NAME).campaign().unwrap();
    let candidate = beta.election(NAME);
    let waiter = std::thread::spawn(move || candidate.campaign().unwrap());
    await_subscribers(&d.servers[0], &channel(NAME), 1);
    let new = d.failover();
    // The leadership reached the replica before the campaign returned, so the new primary
    // has it, and the watchdog renews it there.
    assert!(eventually(NO_HANG, || {
        d.servers[new].exists(NAME)
            && bystander
                .election(NAME)
                .leader()
                .ok()
                .flatten()
                .map(|l| l.epoch())
                == Some(1)
    }));
    assert!(!first.is_lost());
    let reached = eventually(NO_HANG, || {
        let attempt = alpha.election("probe").try_campaign();
        attempt.is_ok_and(|l| l.is_some())
    });
    assert!(reached, "the client never reached the new primary");
    first.resign().unwrap();
    let second = waiter.join().unwrap();
    assert_eq!(second.epoch(), 2, "the counter came through the failover");
    let leader = bystander.election(NAME).leader().unwrap().unwrap();
    assert_eq!((leader.name(), leader.epoch()), ("beta", 2));
    let stored: Option<String> = redis::cmd("HGET")
        .arg(NAME)
        .arg("name")
        .query(&mut d.servers[new].conn())
        .unwrap();
    assert_eq!(stored.as_deref(), Some("beta"), "on the new primary");
    second.resign().unwrap();
}

#[test]
fn on_a_cluster_the_elections_keys_share_one_slot() {
    let cluster = support::Cluster::start();
    let client = |name: &str| cluster.builder().client_name(name).build().unwrap();
    let (alpha, beta) = (client("alpha"), client("beta"));
    for name in ["cron", "{tenant-7}:cron"] {
        let first = alpha.election(name).campaign().unwrap();
        let owner = cluster.owner_of(name);
        let counter = format!("redisson_lock_token:{{{name}}}");
        let counter = if name.contains('{') {
            format!("redisson_lock_token:{name}")
        } else {
            counter
        };
        assert!(owner.exists(name) && owner.exists(&counter));
        assert!(owner.exists(&format!("{counter}:redmutex_leaders")));
        let mut observer = beta.election(name).observe();
        let seen = changes_until(&mut observer, |_| true);
        assert_eq!(elected(&seen), [("alpha".to_owned(), first.epoch())]);
        let candidate = beta.election(name);
        let waiter = std::thread::spawn(move || candidate.campaign().unwrap());
        assert!(beta.election(name).try_campaign().unwrap().is_none());
        let epoch = first.epoch();
        first.resign().unwrap();
        let second = waiter.join().unwrap();
        assert!(second.epoch() > epoch);
        let seen = changes_until(&mut observer, |change| {
            matches!(change, LeaderChange::Elected(_))
        });
        assert_eq!(elected(&seen), [("beta".to_owned(), second.epoch())]);
        let leader = alpha.election(name).leader().unwrap().unwrap();
        assert_eq!((leader.name(), leader.epoch()), ("beta", second.epoch()));
        second.resign().unwrap();
    }
}

/// The changes `observer` reports until `done` holds for the last one.
fn changes_until(
    observer: &mut redmutex::Observer,
    done: impl Fn(&LeaderChange) -> bool,
) -> Vec<LeaderChange> {
    let mut seen = Vec::new();
    loop {
        let change = observer
            .recv_timeout(NO_HANG)
            .unwrap()
            .unwrap_or_else(|| panic!("no change within {NO_HANG:?} after {seen:?}"));
        let last = done(&change);
        seen.push(change);
        if last {
            return seen;
        }
    }
}

fn elected(changes: &[LeaderChange]) -> Vec<(String, u64)> {
    changes
        .iter()
        .filter_map(|change| match change {
            LeaderChange::Elected(leader) => Some((leader.name().to_owned(), leader.epoch())),
            _ => None,
        })
        .collect()
}

#[test]
fn an_observer_sees_every_change_in_order_woken_by_messages() {
    let server = Server::start();
    // Leases far beyond the test: only the election's messages wake the observer in time.
    let mut observer = patient(&server, "observer").election(NAME).observe();
    assert_eq!(
        observer.recv_timeout(NO_HANG).unwrap(),
        Some(LeaderChange::Vacant)
    );
    let candidates: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|name| patient(&server, name).election(NAME))
        .collect();
    // Faster than the observer reads: it catches up from the record of leaders.
    let mut expected = Vec::new();
    for round in 0..12 {
        let candidate = &candidates[round % 3];
        let leadership = candidate.campaign().unwrap();
        expected.push((["a", "b", "c"][round % 3].to_owned(), leadership.epoch()));
        leadership.resign().unwrap();
    }
    let seen = changes_until(
        &mut observer,
        |change| matches!(change, LeaderChange::Elected(leader) if leader.epoch() == 12),
    );
    assert_eq!(elected(&seen), expected, "{seen:?}");
    let last = changes_until(&mut observer, |_| true);
    assert_eq!(last, [LeaderChange::Vacant], "the last resignation");

    // A leader as the observer starts is its first change; then the hand-over.
    let first = candidates[0].campaign().unwrap();
    let mut late = patient(&server, "late").election(NAME).observe();
    let now = late.recv_timeout(NO_HANG).unwrap().unwrap();
    assert_eq!(elected(&[now]), [("a".to_owned(), 13)]);
    assert_eq!(
        late.recv_timeout(Duration::ZERO).unwrap(),
        None,
        "no change"
    );
    let waiter = {
        let candidate = candidates[1].clone();
        std::thread::spawn(move || candidate.campaign().unwrap())
    };
    await_subscribers(&server, &channel(NAME), 1);
    first.resign().unwrap();
    let second = waiter.join().unwrap();
    let seen = changes_until(&mut late, |change| {
        matches!(change, LeaderChange::Elected(_))
    });
    assert_eq!(elected(&seen), [("b".to_owned(), second.epoch())]);
    drop(second);
}

#[test]
fn an_observer_notices_an_expired_leader_and_a_cancel_ends_it() {
    let server = Server::start();
    let stop = Cancel::new();
    let mut observer = server.client().election(NAME).with_cancel(&stop).observe();
    assert_eq!(
        observer.recv_timeout(NO_HANG).unwrap(),
        Some(LeaderChange::Vacant)
    );
    let leader = server
        .builder_with_lease(SHORT_LEASE)
        .client_name("expiring")
        .build()
        .unwrap();
    let leadership = leader.election(NAME).campaign().unwrap();
    let seen = changes_until(&mut observer, |_| true);
    assert_eq!(elected(&seen), [("expiring".to_owned(), 1)]);
    // Gone without a message, as when a leader's lease runs out.
    let _: () = redis::cmd("DEL")
        .arg(NAME)
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(
        changes_until(&mut observer, |_| true),
        [LeaderChange::Vacant]
    );
    drop(leadership);

    let thread = std::thread::spawn(move || observer.collect::<Vec<_>>());
    assert!(eventually(NO_HANG, || server
        .subscribers("redisson_lock__channel:{e}:leader")
        == 1));
    stop.cancel();
    let rest = thread.join().unwrap();
    assert!(rest.is_empty(), "{rest:?}");
}

#[test]
fn lead_runs_the_work_whenever_this_client_leads_until_stopped() {
    let server = Server::start();
    let stop = Cancel::new();
    let led = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    // Set before the key is deleted: the next leadership's work waits until it learns it
    // is lost, and says when it did.
    let patient = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (lost_tx, lost) = std::sync::mpsc::channel();
    let runners: Vec<_> = ["a", "b"]
        .iter()
        .map(|name| {
            let client = (server.builder_with_lease(Duration::from_secs(1)))
                .client_name(name)
                .build()
                .unwrap();
            let election = client.election(NAME).with_cancel(&stop);
            let (led, name) = (led.clone(), name.to_string());
            let (patient, lost_tx) = (patient.clone(), lost_tx.clone());
            std::thread::spawn(move || {
                election.lead(|leadership| {
                    assert_eq!(leadership.health(), Health::Held);
                    led.lock().push((name.clone(), leadership.epoch()));
                    // Until the leadership is lost, or a short while.
                    if !patient.swap(false, std::sync::atomic::Ordering::SeqCst) {
                        leadership.watch().wait_lost(Duration::from_millis(20));
                    } else if leadership.watch().wait_lost(NO_HANG) {
                        let _ = lost_tx.send(leadership.epoch());
                    }
                })
            })
        })
        .collect();
    assert!(eventually(NO_HANG, || led.lock().len() >= 6));
    // A leadership taken away: the work sees it lost, and the loop campaigns again.
    patient.store(true, std::sync::atomic::Ordering::SeqCst);
    // A leadership that began after the switch, whose work waits for its loss.
    let before = led.lock().len();
    assert!(eventually(NO_HANG, || led.lock().len() > before));
    let (_, epoch) = *led.lock().last().unwrap();
    let _: () = redis::cmd("DEL")
        .arg(NAME)
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(
        lost.recv_timeout(NO_HANG),
        Ok(epoch),
        "the loss went unseen"
    );
    let after = led.lock().len();
    assert!(eventually(NO_HANG, || led.lock().len() > after));
    stop.cancel();
    for runner in runners {
        runner.join().unwrap().unwrap();
    }
    let epochs: Vec<u64> = led.lock().iter().map(|(_, epoch)| *epoch).collect();
    assert!(
        epochs.windows(2).all(|pair| pair[0] < pair[1]),
        "{epochs:?}"
    );
    assert_eq!(server.client().election(NAME).leader().unwrap(), None);
}

/// Runs the operations tool against `url`; its standard output. The tool is built with the
/// `cli` feature only.
#[cfg(feature = "cli")]
fn tool(url: &str, args: &[&str]) -> String {
    let output = support::tool()
        .arg("--url")
        .arg(url)
        .args(args)
        .timeout(NO_HANG)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[cfg(feature = "cli")]
#[test]
fn the_operations_tool_shows_the_leader_its_epoch_lease_and_candidates() {
    let server = Server::start();
    let leadership = named(&server, "scheduler-1")
        .election(NAME)
        .campaign()
        .unwrap();
    let candidate = patient(&server, "scheduler-2").election(NAME);
    let waiter = std::thread::spawn(move || candidate.campaign().unwrap());
    await_subscribers(&server, &channel(NAME), 1);

    let info = server.client().inspect(NAME).unwrap();
    assert_eq!(info.kind, redmutex::LockKind::Election);
    assert_eq!(info.epoch, Some(1));
    assert_eq!(info.fence, Some(1), "the last epoch handed out");
    assert_eq!(info.waiters, Some(1), "one candidate waits");
    assert!(info.lease_left.is_some());
    let [holder] = &info.holders[..] else {
        panic!("{:?}", info.holders)
    };
    assert_eq!(holder.client.as_deref(), Some("scheduler-1"));

    let shown = tool(&server.url(), &["show", NAME]);
    assert!(shown.contains("kind:       election"), "{shown}");
    assert!(
        shown.contains("leader:     scheduler-1 (epoch 1)"),
        "{shown}"
    );
    assert!(shown.contains("candidates: 1 waiting"), "{shown}");
    assert!(
        shown.contains("candidate:  scheduler-1 leads (id "),
        "{shown}"
    );
    assert!(
        shown.contains("candidate:  scheduler-2 waits (id "),
        "{shown}"
    );
    let table = tool(&server.url(), &["locks"]);
    let row = table.lines().find(|line| line.starts_with("e ")).unwrap();
    assert!(
        row.contains("election") && row.contains("scheduler-1 (epoch 1)"),
        "{table}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&tool(&server.url(), &["--json", "show", NAME])).unwrap();
    assert_eq!(json["epoch"], 1);
    assert_eq!(json["holders"][0]["client"], "scheduler-1");
    assert_eq!(json["candidates"][0]["name"], "scheduler-1");
    assert_eq!(json["candidates"][0]["leader"], true);
    assert_eq!(json["candidates"][1]["name"], "scheduler-2");

    leadership.resign().unwrap();
    let second = waiter.join().unwrap();
    let info = server.client().inspect(NAME).unwrap();
    assert_eq!(info.epoch, Some(second.epoch()));
    assert_eq!(info.holders[0].client.as_deref(), Some("scheduler-2"));
    drop(second);
    assert_eq!(
        server.client().inspect(NAME).unwrap().kind,
        redmutex::LockKind::Free
    );
}

/// An operator's forced resignation ends a leadership as the leader's own would: with
/// leases far beyond the test, the waiting candidate and the observer are told at once by
/// its messages. With nobody leading it changes nothing.
#[test]
fn a_forced_resignation_wakes_the_candidates_and_the_observers() {
    let server = Server::start();
    let admin = patient(&server, "admin").election(NAME);
    assert!(!admin.force_resign().unwrap(), "nobody leads");
    let stuck = patient(&server, "stuck").election(NAME).campaign().unwrap();
    let mut observer = patient(&server, "observer").election(NAME).observe();
    let now = changes_until(&mut observer, |_| true);
    assert_eq!(elected(&now), [("stuck".to_owned(), 1)]);
    let candidate = patient(&server, "next").election(NAME);
    let base = server.calls("evalsha");
    let waiter = std::thread::spawn(move || candidate.campaign().map(|next| next.epoch()));
    // Subscribed, and attempted once more after that: asleep until a message.
    await_subscribers(&server, &channel(NAME), 1);
    await_calls(&server, base + 2);
    assert!(admin.force_resign().unwrap());
    assert_eq!(waiter.join().unwrap().unwrap(), 2);
    let seen = changes_until(
        &mut observer,
        |change| matches!(change, LeaderChange::Elected(leader) if leader.epoch() == 2),
    );
    assert_eq!(elected(&seen), [("next".to_owned(), 2)], "{seen:?}");
    // The removed leader finds it lost; its resignation ends nobody else's.
    assert!(stuck.resign().unwrap_err().is_lost());
}

/// A leader replaced before its watchdog noticed (its key deleted, another elected) and
/// resigning at once: the resignation's script finds another leader's token, deletes
/// nothing, and the old leader is told it had lost.
#[test]
fn a_leader_replaced_unnoticed_resigns_nothing_of_its_successor() {
    let server = Server::start();
    let ousted = patient(&server, "ousted")
        .election(NAME)
        .campaign()
        .unwrap();
    let _: () = redis::cmd("DEL")
        .arg(NAME)
        .query(&mut server.conn())
        .unwrap();
    let next = named(&server, "next").election(NAME).campaign().unwrap();
    let before = fields(&server);
    let err = ousted.resign().unwrap_err();
    assert!(err.is_lost(), "{err}");
    assert_eq!(fields(&server), before, "the successor's key is untouched");
    let now = server.client().election(NAME).leader().unwrap().unwrap();
    assert_eq!((now.name(), now.epoch()), ("next", next.epoch()));
}

/// An observer of a vacant election that would read again only after a lease far beyond
/// the test, already waiting, hears a campaign that nobody resigns from the campaign's own
/// message.
#[test]
fn a_patient_observer_hears_a_campaign_that_nobody_resigns() {
    let server = Server::start();
    let mut observer = patient(&server, "observer").election(NAME).observe();
    assert_eq!(
        observer.recv_timeout(NO_HANG).unwrap(),
        Some(LeaderChange::Vacant)
    );
    await_subscribers(&server, &format!("{}:leader", channel(NAME)), 1);
    let base = server.calls("evalsha");
    // No deadline: its next read of its own comes after a lease (LONG), past NO_HANG.
    let (heard, hearing) = mpsc::channel();
    std::thread::spawn(move || heard.send(observer.recv().unwrap()));
    // Its read before it waits.
    await_calls(&server, base + 1);
    let leadership = patient(&server, "leader")
        .election(NAME)
        .campaign()
        .unwrap();
    let heard = (hearing.recv_timeout(NO_HANG)).expect("the observer heard the campaign");
    assert_eq!(
        elected(&[heard]),
        [("leader".to_owned(), leadership.epoch())]
    );
}

/// An election named like another kind's key refuses it at every call, forced
/// resignation included, and leaves it as it was: a semaphore's permits, a lock's hash, a
/// hash of application data with a `token` field.
#[test]
fn every_call_refuses_another_kinds_key_and_force_resign_deletes_no_data() {
    let server = Server::start();
    let client = server.client();
    let semaphore = client.leased_semaphore("permits");
    assert!(semaphore.try_set_permits(3).unwrap());
    let _held = client.lock("locked").lock().unwrap();
    let _: () = redis::cmd("HSET")
        .arg("session")
        .arg("token")
        .arg("0123456789abcdef0123456789abcdef")
        .arg("user")
        .arg("bob")
        .query(&mut server.conn())
        .unwrap();
    for name in ["permits", "locked", "session"] {
        let before: Vec<u8> = redis::cmd("DUMP")
            .arg(name)
            .query(&mut server.conn())
            .unwrap();
        let election = client.election(name);
        let err = election.try_campaign().map(drop).unwrap_err();
        assert!(err.is_wrong_kind(), "{name}: {err}");
        let err = election.leader().unwrap_err();
        assert!(err.is_wrong_kind(), "{name}: {err}");
        let err = election.force_resign().unwrap_err();
        assert!(err.is_wrong_kind(), "{name}: {err}");
        let err = (election.force_resign_held_by("0123456789abcdef0123456789abcdef")).unwrap_err();
        assert!(err.is_wrong_kind(), "{name}: {err}");
        let after: Vec<u8> = redis::cmd("DUMP")
            .arg(name)
            .query(&mut server.conn())
            .unwrap();
        assert_eq!(before, after, "{name} changed");
    }
}

/// A forced resignation naming a leader that no longer leads leaves its successor alone;
/// naming the one that leads ends it. Epochs past a million are still an election's.
#[test]
fn a_forced_resignation_of_a_named_leader_spares_its_successor() {
    let server = Server::start();
    let _: () = redis::cmd("SET")
        .arg(COUNTER)
        .arg(2_000_000)
        .query(&mut server.conn())
        .unwrap();
    let first = named(&server, "first").election(NAME).campaign().unwrap();
    let token = server.client().inspect(NAME).unwrap().holders[0].id.clone();
    assert_eq!(
        server.client().inspect(NAME).unwrap().kind,
        redmutex::LockKind::Election
    );
    first.resign().unwrap();
    let second = named(&server, "second").election(NAME).campaign().unwrap();
    let election = server.client().election(NAME);
    assert!(!election.force_resign_held_by(&token).unwrap());
    let now = election.leader().unwrap().unwrap();
    assert_eq!((now.name(), now.epoch()), ("second", second.epoch()));
    let token = server.client().inspect(NAME).unwrap().holders[0].id.clone();
    assert!(election.force_resign_held_by(&token).unwrap());
    assert!(election.leader().unwrap().is_none());
}

/// A Redis restarted without persistence hands out epochs from 1 again, with an empty
/// record of leaders. An observer that reported higher epochs tells that the epochs went
/// backwards, by the counter below the last epoch it reported or by a leader at that epoch
/// that is not the one it reported, warns, and reports the leaders since.
#[test]
fn an_observer_reports_the_leaders_after_redis_lost_its_data() {
    support::logs::capture();
    let mut server = Server::start();
    let election = "lost-data";
    let mut observer = server.client().election(election).observe();
    assert_eq!(
        observer.recv_timeout(NO_HANG).unwrap(),
        Some(LeaderChange::Vacant)
    );
    for name in ["a", "b", "c"] {
        named(&server, name)
            .election(election)
            .campaign()
            .unwrap()
            .resign()
            .unwrap();
    }
    let seen = changes_until(&mut observer, |change| *change == LeaderChange::Vacant);
    let before = [("a", 1), ("b", 2), ("c", 3)].map(|(name, epoch)| (name.to_owned(), epoch));
    assert_eq!(elected(&seen), before, "{seen:?}");

    // Restarted empty: the counter is below the epochs reported.
    server.restart();
    let first = named(&server, "first")
        .election(election)
        .campaign()
        .unwrap();
    assert_eq!(first.epoch(), 1);
    let seen = changes_until(&mut observer, |change| {
        matches!(change, LeaderChange::Elected(_))
    });
    assert_eq!(elected(&seen), [("first".to_owned(), 1)], "{seen:?}");

    // Restarted empty again, and a leader at the epoch reported last that is another.
    server.restart();
    let again = named(&server, "again")
        .election(election)
        .campaign()
        .unwrap();
    assert_eq!(again.epoch(), 1);
    let seen = changes_until(&mut observer, |change| {
        matches!(change, LeaderChange::Elected(_))
    });
    assert_eq!(elected(&seen), [("again".to_owned(), 1)], "{seen:?}");
    let warnings = support::logs::messages(log::Level::Warn, "went backwards");
    let warnings = warnings
        .iter()
        .filter(|m| m.contains("\"lost-data\""))
        .count();
    assert_eq!(warnings, 2, "one warning for each loss");

    // From then on, every leader as usual.
    again.resign().unwrap();
    let next = named(&server, "next")
        .election(election)
        .campaign()
        .unwrap();
    let seen = changes_until(
        &mut observer,
        |change| matches!(change, LeaderChange::Elected(leader) if leader.epoch() == 2),
    );
    assert_eq!(elected(&seen), [("next".to_owned(), 2)], "{seen:?}");
    drop((first, next));
}

/// Redis out of reach for a while (every connection through the proxy closed, new ones
/// refused) does not end the loop over an observer of `docs/kinds.md` ("Leader election"):
/// it reads again until Redis answers, then reports the leader elected meanwhile, whose
/// message it could not hear. A `recv_timeout` that gets no read through returns the error.
#[test]
fn an_observer_rides_out_redis_out_of_reach_and_reports_what_changed_meanwhile() {
    support::logs::capture();
    let server = Server::start();
    let proxy = support::Proxy::start(server.port());
    let client = LockClient::builder(&proxy.url())
        .connect_timeout(Duration::from_secs(1))
        .response_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let election = "outage";
    let stop = Cancel::new();
    let observer = client.election(election).with_cancel(&stop).observe();
    let (sender, changes) = mpsc::channel();
    let looping = std::thread::spawn(move || -> redmutex::Result<()> {
        for change in observer {
            sender.send(change?).unwrap();
        }
        Ok(())
    });
    assert_eq!(changes.recv_timeout(NO_HANG), Ok(LeaderChange::Vacant));

    proxy.cut_all_and_refuse();
    // While nobody leads it reads again within a second or so, and finds Redis out of reach.
    let warnings = || support::logs::messages(log::Level::Warn, "observing election \"outage\"");
    assert!(eventually(NO_HANG, || {
        !warnings().is_empty() || looping.is_finished()
    }));
    let err = (client.election(election).observe())
        .recv_timeout(Duration::from_secs(2))
        .unwrap_err();
    assert!(err.is_connection(), "{err:#}");
    let leadership = named(&server, "meanwhile")
        .election(election)
        .campaign()
        .unwrap();
    if looping.is_finished() {
        panic!("the loop ended: {:?}", looping.join());
    }
    proxy.resume();
    let seen = changes
        .recv_timeout(NO_HANG)
        .expect("the change made meanwhile");
    assert_eq!(elected(&[seen]), [("meanwhile".to_owned(), 1)]);
    assert_eq!(
        warnings().len(),
        2,
        "one warning for each observer's outage"
    );

    stop.cancel();
    looping.join().unwrap().unwrap();
    drop(leadership);
}

/// While nobody leads, an observer reads again within about a second, far below the
/// client's lease: a leader whose message was lost (here, written by commands that announce
/// nothing, as `election_acquire.lua` writes its key and counter) is reported soon, before
/// its lease of 10 s runs out and before the observer's wait of 15 s ends.
#[test]
fn a_vacant_observer_soon_finds_a_leader_that_announced_nothing() {
    let server = Server::start();
    let client = (server.builder())
        .lease(Duration::from_secs(60))
        .build()
        .unwrap();
    let mut observer = client.election(NAME).observe();
    assert_eq!(
        observer.recv_timeout(NO_HANG).unwrap(),
        Some(LeaderChange::Vacant)
    );
    await_subscribers(&server, &format!("{}:leader", channel(NAME)), 1);
    let base = server.calls("evalsha");
    let (heard, hearing) = mpsc::channel();
    std::thread::spawn(move || heard.send(observer.recv_timeout(Duration::from_secs(15))));
    // Its read before it waits.
    await_calls(&server, base + 1);
    let () = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg(COUNTER)
        .ignore()
        .cmd("HSET")
        .arg(NAME)
        .arg("token")
        .arg("0123456789abcdef0123456789abcdef")
        .arg("epoch")
        .arg(1)
        .arg("name")
        .arg("silent")
        .ignore()
        .cmd("PEXPIRE")
        .arg(NAME)
        .arg(10_000)
        .ignore()
        .query(&mut server.conn())
        .unwrap();
    let heard = hearing.recv_timeout(NO_HANG).unwrap().unwrap();
    let heard = heard.expect("the leader, while it led");
    assert_eq!(elected(&[heard]), [("silent".to_owned(), 1)]);
}

/// What the proxy finds a resignation by (a forced one's too): its script's SHA1.
fn resign_sha() -> Vec<u8> {
    let script = include_str!("../../src/kinds/election/election_resign.lua");
    Script::new(script).get_hash().as_bytes().to_vec()
}

/// A client named `name` through `proxy`, with a response timeout far below how late a
/// late reply comes.
fn through(proxy: &Proxy, name: &str) -> LockClient {
    LockClient::builder(&proxy.url())
        .client_name(name)
        .response_timeout(Duration::from_millis(500))
        .build()
        .unwrap()
}

/// Far past the response timeout of `through`'s clients.
const LATE: Duration = Duration::from_secs(2);

/// A resignation whose reply does not come in time had resigned: sent again, its latch
/// answers that it did, and the call says so. The next candidate leads.
#[test]
fn a_resignation_whose_reply_was_lost_is_sent_again_and_reports_it_resigned() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let client = through(&proxy, "leader");
    let leadership = client.election(NAME).campaign().unwrap();
    proxy.delay_reply_to(&resign_sha(), LATE);
    let resigned = leadership.resign();
    assert!(proxy.trap_sprung(), "the resignation's reply was held back");
    resigned.unwrap();
    assert!(!server.exists(NAME));
    let next = named(&server, "next")
        .election(NAME)
        .try_campaign()
        .unwrap();
    assert_eq!(
        next.map(|next| next.epoch()),
        Some(2),
        "the next candidate leads"
    );
    assert_eq!(client.stats().locks_lost, 0);
}

/// A resignation never answered, however often it is sent, until the leadership's
/// validity has ended: the error says that its outcome is unknown, and the lease ends the
/// leadership by then if the resignation did not. Here its first send had resigned.
#[test]
fn a_resignation_never_answered_reports_an_unknown_outcome_once_its_validity_ends() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let client = LockClient::builder(&proxy.url())
        .client_name("leader")
        .lease(SHORT_LEASE)
        .response_timeout(support::response_timeout_for(SHORT_LEASE))
        .build()
        .unwrap();
    let leadership = client.election(NAME).campaign().unwrap();
    proxy.silence_after(&resign_sha());
    // A renewal on its way may move it later still.
    let valid_until = leadership.valid_until();
    let err = leadership.resign().unwrap_err();
    assert!(
        Instant::now() >= valid_until,
        "gave up {:?} before the validity ended: {err}",
        valid_until - Instant::now()
    );
    assert!(err.is_outcome_unknown() && !err.is_lost(), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("the resignation may or may not have taken effect"),
        "{message}"
    );
    assert!(!server.exists(NAME), "the first send resigned");
}

/// A forced resignation whose reply does not come in time is sent again, and says that it
/// ended the leadership; one never answered says that its outcome is unknown.
#[test]
fn a_forced_resignation_whose_reply_was_lost_is_sent_again() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let admin = through(&proxy, "admin").election(NAME);
    let stuck = patient(&server, "stuck").election(NAME).campaign().unwrap();
    proxy.delay_reply_to(&resign_sha(), LATE);
    let forced = admin.force_resign();
    assert!(proxy.trap_sprung(), "the resignation's reply was held back");
    assert!(forced.unwrap(), "it ended a leadership");
    assert!(!server.exists(NAME));
    drop(stuck);

    let _next = patient(&server, "next").election(NAME).campaign().unwrap();
    proxy.silence_after(&resign_sha());
    let err = admin.force_resign().unwrap_err();
    assert!(err.is_outcome_unknown(), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("the forced resignation may or may not have taken effect"),
        "{message}"
    );
    assert!(!server.exists(NAME), "its first send ended the leadership");
}
