//! The semaphore without leases (Redisson's `RSemaphore` layout): permits counted as taken
//! and given back, by guards and by anyone; waiters woken by a release from another client;
//! deadlines and cancels; bad input and keys of another kind change nothing; a reply lost
//! after a script ran neither leaves permits taken with no guard nor gives them back twice.

use crate::support;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use redis::Script;
use redmutex::{Cancel, CountedPermits, CountingSemaphore, LockClient};
use support::{Proxy, Server, await_calls, await_subscribers, eventually, get_int, incr};

const NAME: &str = "slots";
const CHANNEL: &str = "redisson_sc:{slots}";
/// Within this a woken waiter must have its permits: well below the sleepy client's first
/// pause (30 s), so only a message can have woken it.
const WOKEN: Duration = Duration::from_secs(15);
const NO_HANG: Duration = Duration::from_secs(60);

fn sha(source: &str) -> Vec<u8> {
    Script::new(source).get_hash().as_bytes().to_vec()
}

fn acquire_sha() -> Vec<u8> {
    sha(include_str!("../../src/kinds/counted/csem_acquire.lua"))
}

fn add_sha() -> Vec<u8> {
    sha(include_str!("../../src/kinds/counted/csem_add.lua"))
}

fn keys(server: &Server) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.conn())
        .unwrap();
    keys.sort();
    keys
}

/// Keys other than the count and the latches of releases, which lapse by themselves: the
/// markers of attempts still there.
fn markers(server: &Server) -> Vec<String> {
    let mut keys = keys(server);
    keys.retain(|key| key != NAME && !key.starts_with("redisson_unlock_latch:"));
    keys
}

/// Starts `take` (of a client whose waiters would otherwise sleep for 30 s) in a thread;
/// returns its result's receiver once the channel has `subscribers` and the thread has
/// made `attempts` (2 for the first waiter: before and after it subscribed; 1 for a later
/// one, which finds the subscription there).
fn waiting<T: Send + 'static>(
    server: &Server,
    (subscribers, attempts): (usize, u64),
    take: impl FnOnce() -> T + Send + 'static,
) -> mpsc::Receiver<T> {
    let base = server.calls("evalsha");
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(take());
    });
    await_subscribers(server, CHANNEL, subscribers);
    await_calls(server, base + attempts);
    receiver
}

#[test]
fn permits_are_counted_as_guards_take_and_give_them_back() {
    let server = Server::start();
    let sem = server.client().counting_semaphore(NAME);
    assert_eq!(sem.available_permits().unwrap(), 0, "never set");
    assert!(sem.try_acquire().unwrap().is_none(), "none set");
    assert!(sem.try_set_permits(3).unwrap());
    assert!(!sem.try_set_permits(5).unwrap(), "set twice");
    let mut redis = server.conn();
    assert_eq!(
        get_int(&mut redis, NAME),
        3,
        "a plain integer string at the name"
    );

    let two = sem.acquire_many(2).unwrap();
    assert_eq!(two.count(), 2);
    assert_eq!(sem.available_permits().unwrap(), 1);
    assert!(
        sem.try_acquire_many(2).unwrap().is_none(),
        "one left, two asked"
    );
    assert_eq!(
        sem.available_permits().unwrap(),
        1,
        "a refused attempt takes none"
    );
    let one = sem.try_acquire().unwrap().expect("one left");
    assert_eq!(get_int(&mut redis, NAME), 0);
    // A scan shows the count, not the markers of the permits held.
    let listed = server.client().scan("*").unwrap();
    assert_eq!(markers(&server).len(), 2, "a marker per guard");
    let names: Vec<&str> = listed.iter().map(|info| info.name.as_str()).collect();
    assert_eq!(names, [NAME]);

    // A guard may move to another thread and be released there.
    std::thread::spawn(move || two.release().unwrap())
        .join()
        .unwrap();
    assert_eq!(sem.available_permits().unwrap(), 2);
    drop(one);
    assert_eq!(sem.available_permits().unwrap(), 3);
    assert_eq!(
        markers(&server),
        Vec::<String>::new(),
        "releases take their markers"
    );

    // Released by anyone, added to, taken away below zero, drained, deleted.
    assert_eq!(sem.release(2).unwrap(), 5);
    assert_eq!(sem.reduce_permits(7).unwrap(), -2);
    assert!(sem.try_acquire().unwrap().is_none());
    assert_eq!(
        sem.drain_permits().unwrap(),
        0,
        "nothing to drain below zero"
    );
    assert_eq!(sem.add_permits(6).unwrap(), 4);
    assert_eq!(sem.drain_permits().unwrap(), 4);
    assert_eq!(sem.available_permits().unwrap(), 0);
    assert!(sem.delete().unwrap());
    assert!(!sem.delete().unwrap());
    assert_eq!(keys(&server).iter().filter(|k| *k == NAME).count(), 0);
    assert_eq!(
        sem.release(1).unwrap(),
        1,
        "a release makes the count again"
    );
}

/// Four threads of two clients take one or two of three permits, over and over; a count
/// of the permits held, kept beside the semaphore, is checked on every entry.
#[test]
fn three_permits_are_never_held_four_times_at_once() {
    let server = Server::start();
    let clients = [server.client(), server.client()];
    assert!(
        clients[0]
            .counting_semaphore(NAME)
            .try_set_permits(3)
            .unwrap()
    );
    std::thread::scope(|scope| {
        for worker in 0..4_i64 {
            let (client, server) = (&clients[worker as usize % 2], &server);
            scope.spawn(move || {
                let mut redis = server.conn();
                let sem = client.counting_semaphore(NAME);
                for round in 0..12 {
                    let n = 1 + (worker + round) % 2;
                    let permits = sem.try_acquire_many_for(n.unsigned_abs(), NO_HANG).unwrap();
                    let permits = permits.expect("the permits within the minute");
                    let held = incr(&mut redis, "held", n);
                    assert!(held <= 3, "{held} permits held of 3");
                    if held > n {
                        incr(&mut redis, "shared", 1);
                    }
                    std::thread::sleep(Duration::from_millis(2));
                    incr(&mut redis, "held", -n);
                    permits.release().unwrap();
                }
            });
        }
    });
    let mut redis = server.conn();
    assert!(
        get_int(&mut redis, "shared") > 0,
        "the permits were never held by two guards at once"
    );
    assert_eq!(
        clients[0]
            .counting_semaphore(NAME)
            .available_permits()
            .unwrap(),
        3
    );
    assert_eq!(markers(&server), ["held", "shared"], "no marker left");
}

#[test]
fn a_release_from_another_client_wakes_as_many_waiters() {
    let server = Server::start();
    let sleepy = server.sleepy();
    let sem = sleepy.counting_semaphore(NAME);
    sem.try_set_permits(1).unwrap();
    let held = sem.acquire().unwrap();
    let (sender, got) = mpsc::channel();
    let (a, b, more) = (sem.clone(), sem.clone(), sender.clone());
    let take = move |sem: CountingSemaphore, n, sender: mpsc::Sender<_>| {
        let taken = sem.try_acquire_many_for(n, NO_HANG).unwrap();
        let _ = sender.send(taken.as_ref().map(|p| p.count()));
        // Held to the end, so that no release of it wakes the other.
        std::thread::park_timeout(NO_HANG);
        drop(taken);
    };
    let _first = waiting(&server, (1, 2), move || take(a, 1, more));
    // The second waiter shares the first's subscription.
    let _second = waiting(&server, (1, 1), move || take(b, 2, sender));

    // 2 available: the message wakes both waiters. One gets what it asked for (the first
    // takes 1 of 2, or the second takes both); the other then waits on, until the guard's
    // release lets it in (2 available then, or 1).
    let other = server.client().counting_semaphore(NAME);
    assert_eq!(other.release(2).unwrap(), 2);
    let one = got
        .recv_timeout(WOKEN)
        .expect("a waiter woken by the release");
    assert!(one.is_some());
    drop(held);
    let two = got
        .recv_timeout(WOKEN)
        .expect("a waiter woken by the guard's release");
    assert!(two.is_some());
    let mut counts = [one.unwrap(), two.unwrap()];
    counts.sort();
    assert_eq!(counts, [1, 2]);
}

/// In one client, W1 waits for 2 permits and W2, after it, for 1. A release of 1 wakes W1
/// first, which cannot use it: it hands the wake-up on to W2, which takes the permit at
/// once rather than at its own poll (the sleepy client's first pause, 30 s). W1 then takes
/// its two when they come. (That a wake-up nobody can use goes round once, not for ever,
/// is `notifier`'s unit test.)
#[test]
fn a_wake_up_a_waiter_cannot_use_goes_to_one_that_can() {
    let server = Server::start();
    let sleepy = server.sleepy();
    let sem = sleepy.counting_semaphore(NAME);
    sem.try_set_permits(1).unwrap();
    let held = sem.acquire().unwrap();
    let (sender, got) = mpsc::channel();
    let take = |sem: CountingSemaphore, n, sender: mpsc::Sender<_>| {
        move || {
            let taken = sem.try_acquire_many_for(n, NO_HANG).unwrap();
            let _ = sender.send((n, taken.as_ref().map(|p| p.count())));
            std::thread::park_timeout(NO_HANG);
            drop(taken);
        }
    };
    let _w1 = waiting(&server, (1, 2), take(sem.clone(), 2, sender.clone()));
    let _w2 = waiting(&server, (1, 1), take(sem.clone(), 1, sender));

    let other = server.client().counting_semaphore(NAME);
    assert_eq!(other.release(1).unwrap(), 1);
    let first = got.recv_timeout(WOKEN).expect("W2 woken by the hand-on");
    assert_eq!(first, (1, Some(1)));
    drop(held);
    other.release(1).unwrap();
    let second = got.recv_timeout(WOKEN).expect("W1 woken by the releases");
    assert_eq!(second, (2, Some(2)));
}

#[test]
fn deadlines_max_wait_and_cancel_end_waits_taking_nothing() {
    let server = Server::start();
    let sem = server.client().counting_semaphore(NAME);
    sem.try_set_permits(1).unwrap();
    assert!(
        sem.try_acquire_many_for(2, Duration::from_millis(100))
            .unwrap()
            .is_none()
    );
    let deadline = Instant::now() + Duration::from_millis(100);
    assert!(sem.try_acquire_many_until(2, deadline).unwrap().is_none());
    assert!(Instant::now() >= deadline, "returned before its deadline");

    let bounded = server
        .builder()
        .max_wait(Duration::from_millis(200))
        .build()
        .unwrap();
    let err = bounded
        .counting_semaphore(NAME)
        .acquire_many(2)
        .unwrap_err();
    assert!(err.is_timeout(), "{err}");

    let stop = Cancel::new();
    let sleepy = server.sleepy().counting_semaphore(NAME).with_cancel(&stop);
    let waiter = waiting(&server, (1, 2), move || {
        sleepy.acquire_many(2).map(|p| p.count())
    });
    stop.cancel();
    let err = waiter.recv_timeout(WOKEN).unwrap().unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    assert_eq!(sem.available_permits().unwrap(), 1);
    assert_eq!(markers(&server), Vec::<String>::new());
}

#[test]
fn bad_input_and_keys_of_another_kind_change_nothing() {
    let server = Server::start();
    let client = server.client();
    let sem = client.counting_semaphore(NAME);
    for bad in [0, (1 << 40) + 1] {
        assert!(sem.try_set_permits(bad).unwrap_err().is_invalid_input());
        assert!(sem.release(bad).unwrap_err().is_invalid_input());
        assert!(sem.acquire_many(bad).unwrap_err().is_invalid_input());
        assert!(sem.try_acquire_many(bad).unwrap_err().is_invalid_input());
        let timeout = Duration::from_millis(10);
        assert!(
            sem.try_acquire_many_for(bad, timeout)
                .unwrap_err()
                .is_invalid_input()
        );
    }
    for bad in [0, (1 << 40) + 1] {
        assert!(sem.add_permits(bad).unwrap_err().is_invalid_input());
        assert!(sem.reduce_permits(bad).unwrap_err().is_invalid_input());
    }
    for name in [String::new(), "n".repeat(1025)] {
        let err = client.counting_semaphore(&name).try_acquire().unwrap_err();
        assert!(matches!(err, redmutex::Error::InvalidName { .. }), "{err}");
        assert!(client.counting_semaphore(&name).release(1).is_err());
    }
    assert_eq!(keys(&server), Vec::<String>::new());

    // A count that would pass 2^50 either way.
    let mut redis = server.conn();
    let _: () = redis::cmd("SET")
        .arg(NAME)
        .arg(1u64 << 50)
        .query(&mut redis)
        .unwrap();
    assert!(sem.release(1).unwrap_err().is_invalid_input());
    assert_eq!(get_int(&mut redis, NAME), 1 << 50);
    let _: () = redis::cmd("DEL").arg(NAME).query(&mut redis).unwrap();

    // A lock's hash, a token lock's string, a list: every call says so and writes nothing.
    let held = client.lock(NAME).lock().unwrap();
    wrong_kind_everywhere(&sem, &server);
    drop(held);
    let _: () = redis::cmd("SET")
        .arg(NAME)
        .arg("a-token")
        .query(&mut redis)
        .unwrap();
    wrong_kind_everywhere(&sem, &server);
    let _: () = redis::cmd("DEL").arg(NAME).query(&mut redis).unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg(NAME)
        .arg("x")
        .query(&mut redis)
        .unwrap();
    wrong_kind_everywhere(&sem, &server);
}

fn wrong_kind_everywhere(sem: &CountingSemaphore, server: &Server) {
    let before: Vec<(String, Vec<u8>)> = dump(server);
    assert!(sem.try_acquire().unwrap_err().is_wrong_kind());
    assert!(sem.try_set_permits(1).unwrap_err().is_wrong_kind());
    assert!(sem.release(1).unwrap_err().is_wrong_kind());
    assert!(sem.reduce_permits(1).unwrap_err().is_wrong_kind());
    assert!(sem.available_permits().unwrap_err().is_wrong_kind());
    assert!(sem.drain_permits().unwrap_err().is_wrong_kind());
    assert!(sem.delete().unwrap_err().is_wrong_kind());
    assert_eq!(dump(server), before, "changed by a refused call");
}

/// Every key and its DUMP.
fn dump(server: &Server) -> Vec<(String, Vec<u8>)> {
    let mut redis = server.conn();
    keys(server)
        .into_iter()
        .map(|key| {
            let dumped: Vec<u8> = redis::cmd("DUMP").arg(&key).query(&mut redis).unwrap();
            (key, dumped)
        })
        .collect()
}

#[test]
fn a_counting_semaphore_on_redlock_is_unsupported() {
    let servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls: Vec<String> = servers.iter().map(Server::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let client = LockClient::redlock(&urls).build().unwrap();
    let sem = client.counting_semaphore(NAME);
    assert!(sem.try_acquire().unwrap_err().is_unsupported());
    assert!(sem.try_set_permits(1).unwrap_err().is_unsupported());
    assert!(sem.release(1).unwrap_err().is_unsupported());
    assert!(sem.add_permits(1).unwrap_err().is_unsupported());
    assert!(sem.available_permits().unwrap_err().is_unsupported());
    for server in &servers {
        assert_eq!(keys(server), Vec::<String>::new());
    }
}

/// An acquisition whose reply is cut after its script ran: sent again on a fresh
/// connection, it finds its own marker and holds what the first try took, once.
#[test]
fn an_acquisition_whose_reply_is_cut_holds_what_it_took_once() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let client = LockClient::open(&proxy.url()).unwrap();
    let sem = client.counting_semaphore(NAME);
    sem.try_set_permits(3).unwrap();
    proxy.cut_on_reply_to(&acquire_sha());
    let two = sem
        .try_acquire_many(2)
        .unwrap()
        .expect("taken by the first try");
    assert!(proxy.trap_sprung(), "the reply was cut");
    assert_eq!(sem.available_permits().unwrap(), 1, "taken once");
    drop(two);
    assert_eq!(sem.available_permits().unwrap(), 3);
    assert_eq!(markers(&server), Vec::<String>::new());
}

/// An acquisition whose reply comes after the response timeout: the call fails, and what
/// its script took is given back by its marker, once.
#[test]
fn an_acquisition_whose_reply_is_late_leaves_nothing_taken() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let timeout = Duration::from_millis(300);
    let client = LockClient::builder(&proxy.url())
        .response_timeout(timeout)
        .build()
        .unwrap();
    let sem = client.counting_semaphore(NAME);
    sem.try_set_permits(3).unwrap();
    proxy.delay_reply_to(&acquire_sha(), 4 * timeout);
    let err = sem.try_acquire_many(2).unwrap_err();
    assert!(err.is_outcome_unknown(), "{err}");
    assert!(proxy.trap_sprung());
    let observer = server.client().counting_semaphore(NAME);
    assert!(
        eventually(NO_HANG, || observer.available_permits().unwrap() == 3),
        "{} available: the late attempt's permits were not given back",
        observer.available_permits().unwrap()
    );
    // Its marker went with the permits it gave back.
    assert_eq!(markers(&server), Vec::<String>::new());
    assert_eq!(sem.available_permits().unwrap(), 3);
}

/// An acquisition held up (a frozen server, a partition) far longer than the client's
/// lease and a release latch's time, while its undo cannot reach Redis: when the server
/// runs again, the acquisition takes its permits, and the undo, still tried in the
/// background, gives them back. Permits never expire: an undo that gave up would leave
/// them taken for ever.
#[test]
fn an_acquisition_held_up_past_the_lease_and_latch_is_still_given_back() {
    let server = Server::start();
    // Its lease and latch (2 × (connect + response timeout)) are over within 400 ms. One
    // pooled connection: the attempt's, which the undo cannot use after it timed out.
    let client = (server.builder())
        .lease(Duration::from_millis(300))
        .connect_timeout(Duration::from_millis(100))
        .response_timeout(Duration::from_millis(90))
        .pool_size(1)
        .build()
        .unwrap();
    let observer = server.client().counting_semaphore(NAME);
    assert!(observer.try_set_permits(3).unwrap());
    let sem = client.counting_semaphore(NAME);
    // The scripts loaded, and the connection open, on which the attempt goes out.
    while let Err(err) = sem.available_permits() {
        assert!(err.is_connection(), "{err}");
    }
    server.pause();
    let err = sem.try_acquire_many(2).unwrap_err();
    // Time passes, and nothing can be seen of it: the server is frozen.
    std::thread::sleep(Duration::from_secs(2));
    server.resume();
    assert!(err.is_connection() || err.is_outcome_unknown(), "{err}");
    assert!(
        eventually(NO_HANG, || observer.available_permits().unwrap() == 3),
        "{} available: the held-up attempt's permits were not given back",
        observer.available_permits().unwrap()
    );
}

/// An acquisition held up on its way until after its undo ran takes nothing when it comes:
/// the scripts run by hand in that order, under one claim's marker.
#[test]
fn an_acquisition_that_comes_after_its_undo_takes_nothing() {
    let server = Server::start();
    let mut redis = server.conn();
    let sem = server.client().counting_semaphore(NAME);
    sem.try_set_permits(3).unwrap();
    let marker = "{slots}:redmutex_taken:0123456789abcdef0123456789abcdef";
    let undo = Script::new(include_str!("../../src/kinds/counted/csem_undo.lua"));
    let acquire = Script::new(include_str!("../../src/kinds/counted/csem_acquire.lua"));
    let given: i64 = undo
        .key(NAME)
        .key(marker)
        .arg(CHANNEL)
        .arg(60_000)
        .invoke(&mut redis)
        .unwrap();
    assert_eq!(given, 0, "nothing taken yet");
    let taken: i64 = acquire
        .key(NAME)
        .key(marker)
        .arg(2)
        .arg(60_000)
        .invoke(&mut redis)
        .unwrap();
    assert_eq!(taken, 0, "an undone attempt takes nothing");
    assert_eq!(sem.available_permits().unwrap(), 3);
    // In the usual order, the undo gives back what the attempt took, once.
    let other = "{slots}:redmutex_taken:00000000000000000000000000000001";
    let taken: i64 = acquire
        .key(NAME)
        .key(other)
        .arg(2)
        .arg(60_000)
        .invoke(&mut redis)
        .unwrap();
    assert_eq!(taken, 1);
    assert_eq!(sem.available_permits().unwrap(), 1);
    for expected in [2, 0] {
        let given: i64 = undo
            .key(NAME)
            .key(other)
            .arg(CHANNEL)
            .arg(60_000)
            .invoke(&mut redis)
            .unwrap();
        assert_eq!(given, expected);
        assert_eq!(sem.available_permits().unwrap(), 3);
    }
}

/// A release whose reply is cut after it ran is sent again and counts once, through a
/// guard or the handle; so does a cut `try_set_permits`, and a cut drain or delete answers
/// what its first try did.
#[test]
fn a_release_whose_reply_is_cut_counts_once() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let client = LockClient::open(&proxy.url()).unwrap();
    let sem = client.counting_semaphore(NAME);
    proxy.cut_on_reply_to(&sha(include_str!("../../src/kinds/counted/csem_set.lua")));
    assert!(sem.try_set_permits(3).unwrap(), "the first try set them");
    assert!(proxy.trap_sprung());
    let two = sem.acquire_many(2).unwrap();
    proxy.cut_on_reply_to(&add_sha());
    two.release().unwrap();
    assert!(proxy.trap_sprung());
    assert_eq!(sem.available_permits().unwrap(), 3, "given back once");
    proxy.cut_on_reply_to(&add_sha());
    assert_eq!(sem.release(2).unwrap(), 5);
    assert!(proxy.trap_sprung());
    assert_eq!(sem.available_permits().unwrap(), 5, "released once");
    proxy.cut_on_reply_to(&add_sha());
    assert_eq!(sem.reduce_permits(4).unwrap(), 1);
    assert!(proxy.trap_sprung());
    assert_eq!(sem.available_permits().unwrap(), 1, "taken away once");
    // A drain and a delete answer what their first try did.
    let read = sha(include_str!("../../src/kinds/counted/csem_read.lua"));
    sem.release(2).unwrap();
    proxy.cut_on_reply_to(&read);
    assert_eq!(
        sem.drain_permits().unwrap(),
        3,
        "what the first try drained"
    );
    assert!(proxy.trap_sprung());
    assert_eq!(sem.available_permits().unwrap(), 0);
    proxy.cut_on_reply_to(&read);
    assert!(sem.delete().unwrap(), "the first try deleted it");
    assert!(proxy.trap_sprung());
    assert!(!server.exists(NAME));
}

/// A release that could not reach Redis (every connection cut, new ones refused) fails, and the client gives the permits back itself once Redis is back, through the
/// acquisition's marker; a release that ran but whose reply came too late fails too, and
/// the same give-back then adds nothing: the permits count once either way, and no marker
/// is left to give them back again.
#[test]
fn a_release_that_did_not_get_through_is_given_back_once_by_the_client() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let timeout = Duration::from_millis(500);
    let client = LockClient::builder(&proxy.url())
        .response_timeout(timeout)
        .build()
        .unwrap();
    let sem = client.counting_semaphore(NAME);
    assert!(sem.try_set_permits(3).unwrap());

    let two = sem.acquire_many(2).unwrap();
    proxy.cut_all_and_refuse();
    let err = two.release().unwrap_err();
    assert!(err.is_connection(), "{err:#}");
    assert_eq!(get_int(&mut server.conn(), NAME), 1, "not given back yet");
    proxy.resume();
    assert!(
        eventually(NO_HANG, || get_int(&mut server.conn(), NAME) == 3),
        "given back once Redis was reachable"
    );

    // Now every send of the release runs, and no reply to it comes back.
    let two = sem.acquire_many(2).unwrap();
    proxy.silence_after(&add_sha());
    let err = two.release().unwrap_err();
    assert!(err.is_outcome_unknown(), "{err:#}");
    // The give-back finds the marker gone (the release ran) and leaves it "undone".
    let undone = || {
        let markers = markers(&server);
        let value = (markers.first()).and_then(|key| {
            (redis::cmd("GET").arg(key))
                .query::<String>(&mut server.conn())
                .ok()
        });
        markers.len() == 1 && value.as_deref() == Some("undone")
    };
    assert!(eventually(NO_HANG, undone), "{:?}", markers(&server));
    assert_eq!(sem.available_permits().unwrap(), 3, "counted once");
}

/// A guard's release held up on its way (the proxy holds every byte) fails; while it is
/// held, the acquisition's undo gives the permits back (run here by hand, as the client's
/// background undo would once it gets through). When the held release reaches the server
/// after that, it adds nothing: the permits count once.
#[test]
fn a_release_that_comes_after_its_undo_adds_nothing() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let client = LockClient::builder(&proxy.url())
        .response_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let sem = client.counting_semaphore(NAME);
    assert!(sem.try_set_permits(3).unwrap());
    let two = sem.acquire_many(2).unwrap();
    let marker = markers(&server).pop().expect("the acquisition's marker");
    proxy.pause();
    let err = two.release().unwrap_err();
    assert!(err.is_connection(), "{err:#}");
    let undo = Script::new(include_str!("../../src/kinds/counted/csem_undo.lua"));
    let given: i64 = undo
        .key(NAME)
        .key(&marker)
        .arg(CHANNEL)
        .arg(3_600_000)
        .invoke(&mut server.conn())
        .unwrap();
    assert_eq!(given, 2);
    let latches = |server: &Server| {
        let keys = keys(server);
        keys.iter()
            .filter(|k| k.starts_with("redisson_unlock_latch:"))
            .count()
    };
    let before = latches(&server);
    proxy.resume();
    assert!(proxy.flushed(NO_HANG));
    assert!(
        eventually(NO_HANG, || latches(&server) > before),
        "the held release did not run"
    );
    assert_eq!(get_int(&mut server.conn(), NAME), 3, "given back twice");
}

/// A release held up on its way (3 s) fails; the client's own background undo gives the
/// permits back, its reply is lost and it is sent again; then the held release lands. It
/// must add nothing: before, the second undo's "undone" marker looked to the release like
/// the acquisition's own, and the two permits were counted twice.
#[test]
fn a_release_that_lands_after_its_undo_ran_twice_adds_nothing() {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let client = LockClient::builder(&proxy.url())
        .response_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let sem = client.counting_semaphore(NAME);
    assert!(sem.try_set_permits(3).unwrap());
    let two = sem.acquire_many(2).unwrap();
    assert_eq!(get_int(&mut server.conn(), NAME), 1);
    proxy.delay_request_to(&add_sha(), Duration::from_secs(3));
    let err = two.release().unwrap_err();
    assert!(err.is_connection(), "{err:#}");
    // The background's first try of the undo: it runs, and its reply is lost.
    let undo = sha(include_str!("../../src/kinds/counted/csem_undo.lua"));
    proxy.cut_on_reply_to(&undo);
    let latches = |server: &Server| {
        let keys = keys(server);
        keys.iter()
            .filter(|k| k.starts_with("redisson_unlock_latch:"))
            .count()
    };
    let before = latches(&server);
    assert!(
        eventually(NO_HANG, || proxy.trap_sprung()),
        "the undo's reply was not lost"
    );
    assert!(
        eventually(NO_HANG, || latches(&server) > before),
        "the held release did not run"
    );
    assert_eq!(get_int(&mut server.conn(), NAME), 3, "counted twice");
}

/// On a cluster: the count, the markers and the latches share the name's slot; a waiter
/// subscribes on the primary serving it (sharded or not) and the release wakes it there.
#[test]
fn a_counting_semaphore_takes_waits_and_wakes_on_a_cluster() {
    let cluster = support::Cluster::start();
    let sem = cluster.client().counting_semaphore(NAME);
    assert!(sem.try_set_permits(2).unwrap());
    let two = sem.acquire_many(2).unwrap();
    // A waiter that would not try again for 30 s: only the message wakes it in time.
    let sleepy = (cluster.builder())
        .retry_base(Duration::from_secs(30))
        .retry_cap(Duration::from_secs(30))
        .build()
        .unwrap();
    let rival = sleepy.counting_semaphore(NAME);
    let (sender, woken) = mpsc::channel();
    std::thread::spawn(move || {
        let taken = rival.try_acquire_for(NO_HANG).unwrap();
        let _ = sender.send(
            taken
                .map(CountedPermits::release)
                .is_some_and(|r| r.is_ok()),
        );
    });
    let owner = cluster.owner_of(NAME);
    let subscribed = || owner.any_channels(CHANNEL) >= 1;
    assert!(
        eventually(NO_HANG, subscribed),
        "the waiter never subscribed"
    );
    two.release().unwrap();
    assert_eq!(
        woken.recv_timeout(WOKEN),
        Ok(true),
        "the release woke no waiter"
    );
    assert_eq!(sem.available_permits().unwrap(), 2);
    assert_eq!(sem.release(1).unwrap(), 3);
    assert!(sem.delete().unwrap());
}
