//! First-come-first-served elections: candidates queue on a fair lock beside the election
//! and lead in the order they came, in one process or several; a candidate that retries
//! fast overtakes none that waits; one that gives up, however, leaves the queue.

use crate::support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use redmutex::{Cancel, Election, LockClient};
use support::{Server, eventually, spawn_worker};

const NAME: &str = "fcfs";
/// The fair lock whose holder campaigns: the head of the queue.
const TURN: &str = "{fcfs}:redmutex_queue";
/// The candidates queued behind it.
const QUEUE: &str = "redisson_lock_queue:{fcfs}:redmutex_queue";
const TIMEOUTS: &str = "redisson_lock_timeout:{fcfs}:redmutex_queue";
const ALIVE: &str = "redisson_lock_timeout:{fcfs}:redmutex_queue:redmutex_alive";
/// The candidates listed while they wait.
const LISTED: &str = "redisson_lock_token:{fcfs}:redmutex_candidates";
const URL_VAR: &str = "REDMUTEX_TEST_URL";
const NAME_VAR: &str = "REDMUTEX_TEST_NAME";
const WAIT_VAR: &str = "REDMUTEX_TEST_QUEUE_WAIT";
const ORDER: &str = "order";
/// Far beyond any test: a place in the queue that lasts this long, left behind, would hold
/// every later candidate up past the test's end.
const LONG: Duration = Duration::from_secs(3600);
const NO_HANG: Duration = Duration::from_secs(60);

fn fcfs(client: &LockClient) -> Election {
    client.election(NAME).first_come_first_served()
}

fn named(server: &Server, name: &str) -> LockClient {
    server.builder().client_name(name).build().unwrap()
}

/// A client whose queued candidates keep their places far beyond the test unless they
/// leave.
fn lingering(server: &Server) -> LockClient {
    server.builder().fair_queue_wait(LONG).build().unwrap()
}

fn queued(server: &Server) -> usize {
    redis::cmd("LLEN")
        .arg(QUEUE)
        .query(&mut server.conn())
        .unwrap()
}

/// Waits until `n` candidates queue behind the head.
fn await_queued(server: &Server, n: usize) {
    assert!(
        eventually(NO_HANG, || queued(server) == n),
        "expected {n} queued, saw {}",
        queued(server)
    );
}

/// Waits until a candidate holds the head of the queue.
fn await_head(server: &Server) {
    assert!(
        eventually(NO_HANG, || server.exists(TURN)),
        "nobody at the head"
    );
}

fn assert_queue_empty(server: &Server) {
    assert_eq!(queued(server), 0, "candidates left in the queue");
    for key in [TURN, TIMEOUTS, ALIVE, LISTED] {
        assert!(!server.exists(key), "{key} left behind");
    }
}

/// A first-come-first-served candidate campaigning on a thread of its own: it tells `led`
/// its name and epoch when it leads, and resigns when told to.
struct Candidate {
    resign: mpsc::Sender<()>,
    thread: JoinHandle<()>,
}

impl Candidate {
    fn start(server: &Server, name: &str, led: &mpsc::Sender<(String, u64)>) -> Candidate {
        Candidate::of(fcfs(&named(server, name)), name, led)
    }

    /// A candidate of `election` named `name`.
    fn of(election: Election, name: &str, led: &mpsc::Sender<(String, u64)>) -> Candidate {
        let (name, led) = (name.to_owned(), led.clone());
        let (resign, resigned) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let leadership = election.campaign().unwrap();
            led.send((name, leadership.epoch())).unwrap();
            resigned.recv().unwrap();
            leadership.resign().unwrap();
        });
        Candidate { resign, thread }
    }

    fn resign(self) {
        self.resign.send(()).unwrap();
        self.thread.join().unwrap();
    }
}

fn next(led: &mpsc::Receiver<(String, u64)>) -> (String, u64) {
    led.recv_timeout(NO_HANG).expect("someone leads")
}

#[test]
fn candidates_lead_in_the_order_they_came() {
    let server = Server::start();
    let leader = fcfs(&named(&server, "leader")).campaign().unwrap();
    assert_eq!(leader.epoch(), 1);
    assert!(!server.exists(TURN), "a leader gives its turn up");
    let (led_by, led) = mpsc::channel();
    let a = Candidate::start(&server, "a", &led_by);
    await_head(&server);
    let b = Candidate::start(&server, "b", &led_by);
    await_queued(&server, 1);
    let c = Candidate::start(&server, "c", &led_by);
    await_queued(&server, 2);
    // Listed: the leader, the head (it campaigns), then those queued, in their order.
    let election = server.client().election(NAME);
    let listed = || -> Vec<(String, bool)> {
        (election.candidates().unwrap().iter())
            .map(|c| (c.name().to_owned(), c.is_leader()))
            .collect()
    };
    let all = ["leader", "a", "b", "c"].map(|name| (name.to_owned(), name == "leader"));
    assert!(eventually(NO_HANG, || listed() == all), "{:?}", listed());

    leader.resign().unwrap();
    assert_eq!(next(&led), ("a".into(), 2));
    let rest = [("a".to_owned(), true), ("b".to_owned(), false)];
    assert!(
        eventually(NO_HANG, || listed()[..2] == rest),
        "{:?}",
        listed()
    );
    a.resign();
    assert_eq!(next(&led), ("b".into(), 3));
    b.resign();
    assert_eq!(next(&led), ("c".into(), 4));
    c.resign();
    assert_queue_empty(&server);
    assert_eq!(server.client().election(NAME).leader().unwrap(), None);
}

#[test]
fn a_candidate_that_retries_fast_overtakes_none_that_waits() {
    let server = Server::start();
    let leader = named(&server, "leader").election(NAME).campaign().unwrap();
    let (led_by, led) = mpsc::channel();
    let waiting = Candidate::start(&server, "waiting", &led_by);
    await_head(&server);
    let tries = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let retrying = {
        let election = fcfs(&named(&server, "retrying"));
        let (tries, stop, led_by) = (tries.clone(), stop.clone(), led_by.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Some(leadership) = election.try_campaign().unwrap() {
                    led_by
                        .send(("retrying".into(), leadership.epoch()))
                        .unwrap();
                    return;
                }
                tries.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    // The fast candidate is well into its loop when the leader resigns.
    assert!(eventually(NO_HANG, || tries.load(Ordering::Relaxed) >= 20));
    leader.resign().unwrap();
    assert_eq!(next(&led), ("waiting".into(), 2));
    stop.store(true, Ordering::Relaxed);
    retrying.join().unwrap();
    waiting.resign();
    assert!(led.try_recv().is_err(), "the fast candidate led meanwhile");
    assert_queue_empty(&server);
}

#[test]
fn a_candidate_that_gives_up_leaves_the_queue_however_it_ends() {
    let server = Server::start();
    let leader = fcfs(&named(&server, "leader")).campaign().unwrap();

    // At the head, cancelled later.
    let head_stop = Cancel::new();
    let head = fcfs(&lingering(&server)).with_cancel(&head_stop);
    let head = std::thread::spawn(move || head.campaign().map(drop));
    await_head(&server);
    // Queued with a deadline far away, cancelled later.
    let queued_stop = Cancel::new();
    let cancelled = fcfs(&lingering(&server)).with_cancel(&queued_stop);
    let cancelled = std::thread::spawn(move || cancelled.try_campaign_for(LONG).map(drop));
    await_queued(&server, 1);
    // Queued, and its client closed later.
    let closing = lingering(&server);
    let closed = fcfs(&closing);
    let closed = std::thread::spawn(move || closed.campaign().map(drop));
    await_queued(&server, 2);

    // Its deadline passes in the queue.
    let late = fcfs(&lingering(&server));
    let timed_out = late.try_campaign_for(Duration::from_millis(300)).unwrap();
    assert!(timed_out.is_none());
    assert_eq!(queued(&server), 2, "the timed-out candidate kept its place");
    // Its client's max_wait passes in the queue: a timeout naming the election.
    let bounded = server
        .builder()
        .fair_queue_wait(LONG)
        .max_wait(Duration::from_millis(300))
        .build()
        .unwrap();
    let err = fcfs(&bounded).campaign().unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert!(err.to_string().contains("election \"fcfs\""), "{err}");
    assert_eq!(
        queued(&server),
        2,
        "the candidate out of max_wait kept its place"
    );
    // A try finds the queue busy and leaves it.
    assert!(late.try_campaign().unwrap().is_none());
    assert_eq!(queued(&server), 2, "a try kept its place");

    queued_stop.cancel();
    let err = cancelled.join().unwrap().unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    assert_eq!(queued(&server), 1, "the cancelled candidate kept its place");
    closing.close();
    let err = closed.join().unwrap().unwrap_err();
    assert!(err.is_closed(), "{err}");
    assert_eq!(
        queued(&server),
        0,
        "the closed client's candidate kept its place"
    );
    head_stop.cancel();
    let err = head.join().unwrap().unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    assert!(!server.exists(TURN), "the cancelled head kept its turn");

    // At the head, its deadline passes in the campaign: the turn goes back.
    let head = fcfs(&lingering(&server));
    let timed_out = head.try_campaign_for(Duration::from_millis(300)).unwrap();
    assert!(timed_out.is_none(), "the leader still leads");
    assert_queue_empty(&server);

    // Nothing left behind holds up the next candidate.
    leader.resign().unwrap();
    let next = fcfs(&server.client()).try_campaign().unwrap();
    assert_eq!(next.expect("the queue is empty").epoch(), 2);
    assert_queue_empty(&server);
}

#[test]
fn a_campaign_refused_by_the_election_gives_its_turn_back() {
    let server = Server::start();
    let () = redis::cmd("RPUSH")
        .arg(NAME)
        .arg("data")
        .query(&mut server.conn())
        .unwrap();
    let err = fcfs(&server.client()).campaign().unwrap_err();
    assert!(err.is_wrong_kind(), "{err}");
    assert_queue_empty(&server);
}

#[test]
fn a_candidate_that_leads_under_its_id_takes_its_leadership_back_without_queuing() {
    let server = Server::start();
    let first = fcfs(&named(&server, "node-a"))
        .as_candidate("node-a")
        .campaign()
        .unwrap();
    let (led_by, led) = mpsc::channel();
    let waiting = Candidate::start(&server, "waiting", &led_by);
    await_head(&server);
    // The same candidate, restarted: it leads again at once, though another waits.
    let restarted = fcfs(&named(&server, "node-a")).as_candidate("node-a");
    let resumed = restarted
        .try_campaign()
        .unwrap()
        .expect("its own leadership");
    assert_eq!(resumed.epoch(), first.epoch());
    assert!(first.resign().unwrap_err().is_lost());
    // Led by another id, it queues as any candidate does.
    let other = fcfs(&named(&server, "node-b")).as_candidate("node-b");
    assert!(other.try_campaign().unwrap().is_none());
    resumed.resign().unwrap();
    assert_eq!(next(&led), ("waiting".into(), 2));
    waiting.resign();
    assert_queue_empty(&server);
}

/// Starts a candidate process named `name` whose client keeps a queued candidate's place
/// for `wait`.
fn spawn_candidate(server: &Server, name: &str, wait: Duration) -> std::process::Child {
    spawn_worker(
        "election_fcfs::candidate_worker",
        &[
            (URL_VAR, server.url()),
            (NAME_VAR, name.into()),
            (WAIT_VAR, wait.as_millis().to_string()),
        ],
    )
}

#[test]
fn candidates_in_several_processes_lead_in_the_order_they_came() {
    let server = Server::start();
    let leader = fcfs(&named(&server, "leader")).campaign().unwrap();
    let wait = Duration::from_secs(5);
    let mut workers = vec![spawn_candidate(&server, "w0", wait)];
    await_head(&server);
    for k in 1..3 {
        workers.push(spawn_candidate(&server, &format!("w{k}"), wait));
        await_queued(&server, k);
    }
    leader.resign().unwrap();
    for mut worker in workers {
        assert!(worker.wait().unwrap().success());
    }
    let order: Vec<String> = redis::cmd("LRANGE")
        .arg(ORDER)
        .arg(0)
        .arg(-1)
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(order, ["w0 2", "w1 3", "w2 4"]);
    assert_queue_empty(&server);
}

/// A queued candidate's listing lasts as long as its place may: enlisting raises the
/// expiry that the head's shorter listing gave the candidates' hash, so the queued one is
/// not dropped from `candidates()` when the head's listing would have run out.
#[test]
fn a_queued_candidate_s_listing_outlasts_the_shorter_one_beside_it() {
    let server = Server::start();
    let leader = fcfs(&named(&server, "leader")).campaign().unwrap();
    let (led_by, led) = mpsc::channel();
    // It tries again only when woken: nothing but the enlisting raises the expiry.
    let sleepy = (server.builder().client_name("head"))
        .retry_base(Duration::from_secs(300))
        .retry_cap(Duration::from_secs(600))
        .build()
        .unwrap();
    let head = Candidate::of(fcfs(&sleepy), "head", &led_by);
    await_head(&server);
    let pttl = || -> i64 {
        redis::cmd("PTTL")
            .arg(LISTED)
            .query(&mut server.conn())
            .unwrap()
    };
    assert!(eventually(NO_HANG, || pttl() > 0), "the head is listed");
    // A short expiry, as the head's own listing sets (it may have enlisted too, if it
    // queued for a moment behind the leader's turn).
    let () = redis::cmd("PEXPIRE")
        .arg(LISTED)
        .arg(60_000)
        .query(&mut server.conn())
        .unwrap();
    let hour = 3_600_000;
    let behind = Candidate::start(&server, "behind", &led_by);
    await_queued(&server, 1);
    // Listed by the script that raises the expiry: seen listed, it is raised already.
    let election = server.client().election(NAME);
    let listed = || (election.candidates().unwrap().iter()).any(|c| c.name() == "behind");
    assert!(
        eventually(NO_HANG, listed),
        "the queued candidate is listed"
    );
    assert!(pttl() > hour, "{}", pttl());

    leader.resign().unwrap();
    assert_eq!(next(&led).0, "head");
    head.resign();
    assert_eq!(next(&led).0, "behind");
    behind.resign();
}

#[test]
fn a_crashed_queued_candidate_holds_the_queue_up_until_its_place_runs_out() {
    let server = Server::start();
    let leader = fcfs(&named(&server, "leader")).campaign().unwrap();
    let (led_by, led) = mpsc::channel();
    let head = Candidate::start(&server, "head", &led_by);
    await_head(&server);
    let mut crashed = spawn_candidate(&server, "crashed", Duration::from_secs(1));
    await_queued(&server, 1);
    let behind = Candidate::start(&server, "behind", &led_by);
    await_queued(&server, 2);
    // Listed while its place lasts, and no longer once it has run out.
    let election = server.client().election(NAME);
    let listed = |name: &str| (election.candidates().unwrap().iter()).any(|c| c.name() == name);
    assert!(listed("crashed"));
    crashed.kill().unwrap();
    crashed.wait().unwrap();
    assert!(eventually(NO_HANG, || !listed("crashed")));
    assert!(listed("behind"));

    leader.resign().unwrap();
    assert_eq!(next(&led), ("head".into(), 2));
    head.resign();
    // The dead candidate is granted the turn, never takes it, and loses it with its place.
    assert_eq!(next(&led), ("behind".into(), 3));
    behind.resign();
    // Its listing, left behind, goes with the first campaign a minute after it was made.
    let listed: Vec<String> = redis::cmd("HKEYS")
        .arg(LISTED)
        .query(&mut server.conn())
        .unwrap();
    assert!(
        matches!(&listed[..], [one] if one.starts_with("queued:")),
        "{listed:?}"
    );
    assert!(
        server
            .client()
            .election(NAME)
            .candidates()
            .unwrap()
            .is_empty()
    );
    let () = redis::cmd("HSET")
        .arg(LISTED)
        .arg(&listed[0])
        .arg("99999999999999 1 1 xcrashed")
        .query(&mut server.conn())
        .unwrap();
    drop(fcfs(&named(&server, "last")).campaign().unwrap());
    assert_queue_empty(&server);
}

/// A candidate of the tests above in a process of its own: campaigns first come, first
/// served, records `<name> <epoch>` in `ORDER` when it leads, and resigns.
#[test]
#[ignore = "run as a child process by the first-come-first-served election tests"]
fn candidate_worker() {
    let url = std::env::var(URL_VAR).expect("started by a parent test");
    let name = std::env::var(NAME_VAR).unwrap();
    let wait = Duration::from_millis(std::env::var(WAIT_VAR).unwrap().parse().unwrap());
    let client = LockClient::builder(&url)
        .client_name(&name)
        .fair_queue_wait(wait)
        .build()
        .unwrap();
    let leadership = fcfs(&client).campaign().unwrap();
    let mut redis = redis::Client::open(url).unwrap().get_connection().unwrap();
    let () = redis::cmd("RPUSH")
        .arg(ORDER)
        .arg(format!("{name} {}", leadership.epoch()))
        .query(&mut redis)
        .unwrap();
    leadership.resign().unwrap();
}

#[test]
fn on_a_cluster_the_queue_shares_the_elections_slot() {
    let cluster = support::Cluster::start();
    let client = |name: &str| cluster.builder().client_name(name).build().unwrap();
    for name in ["cron", "{tenant-7}:cron"] {
        let owner = cluster.owner_of(name);
        let turn = match name.contains('{') {
            true => format!("{name}:redmutex_queue"),
            false => format!("{{{name}}}:redmutex_queue"),
        };
        let queue = format!("redisson_lock_queue:{turn}");
        let queued = || -> usize {
            redis::cmd("LLEN")
                .arg(&queue)
                .query(&mut owner.conn())
                .unwrap()
        };
        let leader = client("leader").election(name).first_come_first_served();
        let leadership = leader.campaign().unwrap();
        let (led_by, led) = mpsc::channel();
        let candidates: Vec<_> = ["a", "b"]
            .into_iter()
            .map(|candidate| {
                let election = client(candidate).election(name).first_come_first_served();
                let led_by = led_by.clone();
                let thread = std::thread::spawn(move || {
                    let leadership = election.campaign().unwrap();
                    led_by.send((candidate, leadership.epoch())).unwrap();
                    leadership.resign().unwrap();
                });
                match candidate {
                    "a" => assert!(eventually(NO_HANG, || owner.exists(&turn))),
                    _ => assert!(eventually(NO_HANG, || queued() == 1)),
                }
                thread
            })
            .collect();
        let epoch = leadership.epoch();
        leadership.resign().unwrap();
        assert_eq!(next_of(&led), ("a", epoch + 1));
        assert_eq!(next_of(&led), ("b", epoch + 2));
        for candidate in candidates {
            candidate.join().unwrap();
        }
        assert!(!owner.exists(&turn) && queued() == 0);
    }
}

fn next_of(led: &mpsc::Receiver<(&'static str, u64)>) -> (&'static str, u64) {
    led.recv_timeout(NO_HANG).expect("someone leads")
}
