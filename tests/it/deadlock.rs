//! Deadlock detection: waiters that hold locks and wait in a cycle, across clients,
//! processes and kinds; the waiter that closed the cycle is told, keeps its holds and lets
//! the others go on; nothing else is ever told of a deadlock.

use crate::support;

use std::sync::Barrier;
use std::time::Duration;

use redmutex::{Error, LockClient};
use support::{Server, eventually, spawn_worker};

/// Only turns a hang into a failure.
const PATIENCE: Duration = Duration::from_secs(60);

/// The wait edges on the server beside the lock `held` (`*` for every lock).
fn edges(server: &Server, held: &str) -> Vec<String> {
    let pattern = format!("{{{held}}}:redmutex_wait:*");
    redis::cmd("KEYS")
        .arg(pattern)
        .query(&mut server.conn())
        .unwrap()
}

/// The locks of the deadlock `err` names, in its order: what each waiter waits for.
fn cycle_of(err: &Error) -> Vec<String> {
    match err {
        Error::Deadlock { cycle, .. } => cycle.iter().map(|edge| edge.lock.clone()).collect(),
        other => panic!("not a deadlock: {other:#}"),
    }
}

/// A cycle of two clients over the locks `a` and `b`: `older` holds `a` and waits for `b`;
/// once `waiting` sees it wait, `later` holds `b` and waits for `a`, closing the cycle.
/// Returns how the later wait ended, once the later client kept its hold through it (it
/// is checked) and then gave it back, and the older one got `b`.
pub fn cycle_of_two(
    (older, later): (&LockClient, &LockClient),
    (a, b): (&str, &str),
    waiting: &(dyn Fn() -> bool + Sync),
) -> Error {
    let both_hold = Barrier::new(2);
    std::thread::scope(|scope| {
        let first = scope.spawn(|| {
            let held = older.lock(a).lock().unwrap();
            both_hold.wait();
            let got = older.lock(b).try_lock_for(PATIENCE).unwrap();
            assert!(got.is_some(), "the older waiter did not get its lock");
            drop((got, held));
        });
        let held = later.lock(b).lock().unwrap();
        both_hold.wait();
        assert!(
            eventually(PATIENCE, waiting),
            "the older waiter never waited"
        );
        let err = later.lock(a).try_lock_for(PATIENCE).unwrap_err();
        assert_eq!(
            later.lock(b).hold_count().unwrap(),
            1,
            "its hold was not kept"
        );
        assert!(!held.is_lost());
        drop(held);
        first.join().unwrap();
        err
    })
}

/// Whether `server` has a wait edge beside the lock whose key is `held`.
pub fn waiting_beside(server: &Server, held: &str) -> bool {
    !edges(server, held).is_empty()
}

#[test]
fn of_two_clients_taking_two_locks_in_opposite_orders_the_later_waiter_is_told() {
    let server = Server::start();
    let (older, later) = (server.client(), server.client());
    let err = cycle_of_two((&older, &later), ("a", "b"), &|| {
        waiting_beside(&server, "a")
    });
    assert!(err.is_deadlock(), "{err:#}");
    assert_eq!(cycle_of(&err), ["a", "b"]);
    let text = err.to_string();
    assert!(text.starts_with("deadlock: "), "{text}");
    assert!(
        text.contains(older.id()) && text.contains("held by this thread"),
        "{text}"
    );
    assert!(edges(&server, "*").is_empty(), "edges left behind");
}

/// Every command the server runs while it is kept, as `MONITOR` shows them.
struct Monitor {
    seen: std::sync::Arc<parking_lot::Mutex<Vec<u8>>>,
}

impl Monitor {
    fn start(server: &Server) -> Monitor {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port())).unwrap();
        stream.write_all(b"MONITOR\r\n").unwrap();
        let seen = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
        let kept = std::sync::Arc::downgrade(&seen);
        std::thread::spawn(move || {
            let mut buf = [0; 4096];
            while let Ok(n) = stream.read(&mut buf) {
                match kept.upgrade() {
                    Some(seen) if n > 0 => seen.lock().extend_from_slice(&buf[..n]),
                    _ => break,
                }
            }
        });
        let monitor = Monitor { seen };
        assert!(eventually(PATIENCE, || monitor.text().starts_with("+OK")));
        monitor
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock()).into_owned()
    }

    /// What it saw up to `marker`, which is sent (as `ECHO`) after everything before it.
    fn until(&self, server: &Server, marker: &str) -> String {
        let _: String = redis::cmd("ECHO")
            .arg(marker)
            .query(&mut server.conn())
            .unwrap();
        assert!(eventually(PATIENCE, || self.text().contains(marker)));
        let text = self.text();
        text[..text.find(marker).unwrap()].to_owned()
    }
}

/// A waiter that holds nothing writes no edge however long it waits, nor does one whose
/// wait ends within half its deadlock timeout; one that holds a lock and waits longer does.
#[test]
fn only_a_waiter_that_holds_a_lock_and_waits_long_writes_its_edge() {
    let server = Server::start();
    let monitor = Monitor::start(&server);
    let quick = server
        .builder()
        .deadlock_timeout(Some(Duration::from_millis(20)))
        .build();
    let quick = quick.unwrap();
    let holder = server.client();
    let held = holder.lock("held").lock().unwrap();
    let waited = quick
        .lock("held")
        .try_lock_for(Duration::from_millis(300))
        .unwrap();
    assert!(waited.is_none());

    // Holding a lock, a wait that ends long before half of its 60 s deadlock timeout.
    let patient = server
        .builder()
        .deadlock_timeout(Some(PATIENCE))
        .build()
        .unwrap();
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| {
            let other = patient.lock("other").lock().unwrap();
            let got = patient.lock("held").try_lock_for(PATIENCE).unwrap();
            drop((got, other));
        });
        assert!(eventually(PATIENCE, || server
            .subscribers("redisson_lock__channel:{held}")
            > 0));
        drop(held);
        waiter.join().unwrap();
    });
    let before = monitor.until(&server, "now-holding-and-waiting-long");
    assert!(!before.contains("redmutex_wait"), "{before}");

    // Holding a lock and waiting past half the deadlock timeout: its edge.
    let held = holder.lock("held").lock().unwrap();
    let mine = quick.lock("mine").lock().unwrap();
    let waited = quick
        .lock("held")
        .try_lock_for(Duration::from_millis(300))
        .unwrap();
    assert!(waited.is_none());
    let after = monitor.until(&server, "all-done");
    let after = &after[before.len()..];
    assert!(after.contains("{mine}:redmutex_wait:"), "{after}");
    drop((mine, held));
    assert!(edges(&server, "*").is_empty(), "edges left behind");
}

/// One party of a cycle, in a process of its own: takes `DEADLOCK_HOLD`, says so, waits for
/// the word to go, then waits for `DEADLOCK_WAIT` and records how that ended.
#[test]
#[ignore = "run as a child process by the tests of cycles across processes"]
fn party() {
    let var = |name: &str| std::env::var(name).expect("set by the parent test");
    let (url, party) = (var("DEADLOCK_URL"), var("DEADLOCK_PARTY"));
    let mut builder = LockClient::builder(&url).client_name(&party);
    if let Ok(lease) = std::env::var("DEADLOCK_LEASE_MS") {
        let lease = Duration::from_millis(lease.parse().unwrap());
        builder = builder.lease(lease).response_timeout(lease / 4);
    }
    let client = builder.build().unwrap();
    let mut redis = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let held = take(&client, &var("DEADLOCK_HOLD"), None)
        .unwrap()
        .expect("free");
    let () = redis::cmd("SET")
        .arg(format!("held:{party}"))
        .arg(1)
        .query(&mut redis)
        .unwrap();
    assert!(eventually(PATIENCE, || {
        redis::cmd("EXISTS")
            .arg(format!("go:{party}"))
            .query(&mut redis)
            .unwrap()
    }));
    let outcome = match take(&client, &var("DEADLOCK_WAIT"), Some(PATIENCE)) {
        Ok(Some(_)) => "acquired".to_owned(),
        Ok(None) => "timeout".to_owned(),
        Err(err) if err.is_deadlock() => format!("deadlock {}", cycle_of(&err).join(" ")),
        Err(err) => format!("error {err:#}"),
    };
    let () = redis::cmd("SET")
        .arg(format!("result:{party}"))
        .arg(outcome)
        .query(&mut redis)
        .unwrap();
    drop(held);
}

/// Takes what `spec` names (`lock:a`, `fair:f`, `read:w`, `write:w`, `multi:a,b`): at once
/// when `wait` is `None`, else waiting that long at most.
fn take(
    client: &LockClient,
    spec: &str,
    wait: Option<Duration>,
) -> redmutex::Result<Option<Box<dyn std::any::Any>>> {
    fn boxed<G: 'static>(guard: Option<G>) -> Option<Box<dyn std::any::Any>> {
        guard.map(|guard| Box::new(guard) as Box<dyn std::any::Any>)
    }
    let wait = wait.unwrap_or(Duration::ZERO);
    let (kind, name) = spec.split_once(':').expect("kind:name");
    Ok(match kind {
        "lock" => boxed(client.lock(name).try_lock_for(wait)?),
        "fair" => boxed(client.fair_lock(name).try_lock_for(wait)?),
        "read" => boxed(client.read_write_lock(name).read().try_lock_for(wait)?),
        "write" => boxed(client.read_write_lock(name).write().try_lock_for(wait)?),
        "multi" => {
            let multi = (name.split(',')).fold(redmutex::MultiLock::new(), |multi, name| {
                multi.and(client.lock(name))
            });
            boxed(multi.try_lock_for(wait)?)
        }
        other => panic!("no kind {other}"),
    })
}

/// Parties in processes of their own, each holding its first lock and waiting for its
/// second, set going one after the other; each waits until the one before is seen waiting.
/// Returns how each wait ended, in order.
fn cycle_across_processes(server: &Server, parties: &[(&str, &str)]) -> Vec<String> {
    let mut conn = server.conn();
    let names: Vec<String> = (0..parties.len()).map(|at| format!("p{at}")).collect();
    let workers: Vec<_> = (parties.iter().zip(&names))
        .map(|((hold, wait), party)| {
            let env = [
                ("DEADLOCK_URL", server.url()),
                ("DEADLOCK_PARTY", party.clone()),
                ("DEADLOCK_HOLD", hold.to_string()),
                ("DEADLOCK_WAIT", wait.to_string()),
            ];
            spawn_worker("deadlock::party", &env)
        })
        .collect();
    for party in &names {
        let key = format!("held:{party}");
        assert!(
            eventually(PATIENCE, || server.exists(&key)),
            "{party} did not take its lock"
        );
    }
    for ((hold, _), party) in parties.iter().zip(&names) {
        let () = redis::cmd("SET")
            .arg(format!("go:{party}"))
            .arg(1)
            .query(&mut conn)
            .unwrap();
        // Seen waiting: its edge beside the lock it holds (the last closes the cycle).
        let held = hold.split_once(':').unwrap().1.split(',').next().unwrap();
        if party != names.last().unwrap() {
            assert!(
                eventually(PATIENCE, || !edges(server, held).is_empty()),
                "{party}"
            );
        }
    }
    for mut worker in workers {
        assert!(worker.wait().unwrap().success(), "a party failed");
    }
    (names.iter())
        .map(|party| {
            redis::cmd("GET")
                .arg(format!("result:{party}"))
                .query(&mut conn)
                .unwrap()
        })
        .collect()
}

#[test]
fn a_fair_lock_a_write_lock_and_a_multi_lock_in_one_cycle_across_three_processes() {
    let server = Server::start();
    let results = cycle_across_processes(
        &server,
        &[
            ("fair:f", "multi:a,z"),
            ("lock:a", "write:w"),
            ("write:w", "fair:f"),
        ],
    );
    assert_eq!(results, ["acquired", "acquired", "deadlock f a w"]);
    assert!(edges(&server, "*").is_empty(), "edges left behind");
}

/// A ring of threads, party `i` of client `clients[i]` holding `names[i]` and waiting for
/// the next name; each set waiting once `waiting` sees the one before waiting (by its edge
/// beside the name it holds). Returns how each wait ended; every party then gives its
/// hold back.
fn ring(
    clients: &[LockClient],
    names: &[String],
    waiting: &(dyn Fn(&str) -> bool + Sync),
) -> Vec<Result<bool, Error>> {
    let n = names.len();
    let holding = Barrier::new(n + 1);
    let (go, gone): (Vec<_>, Vec<_>) = (0..n).map(|_| std::sync::mpsc::channel::<()>()).unzip();
    std::thread::scope(|scope| {
        let parties: Vec<_> = (gone.into_iter().enumerate())
            .map(|(at, gone)| {
                let (client, holding) = (&clients[at], &holding);
                let (mine, next) = (&names[at], &names[(at + 1) % n]);
                scope.spawn(move || {
                    let held = client.lock(mine).lock().unwrap();
                    holding.wait();
                    gone.recv().unwrap();
                    let waited = client.lock(next).try_lock_for(PATIENCE);
                    drop(held);
                    waited.map(|guard| guard.is_some())
                })
            })
            .collect();
        holding.wait();
        for (at, go) in go.iter().enumerate() {
            go.send(()).unwrap();
            if at + 1 < n {
                assert!(eventually(PATIENCE, || waiting(&names[at])), "party {at}");
            }
        }
        parties
            .into_iter()
            .map(|party| party.join().unwrap())
            .collect()
    })
}

/// The outcomes of a ring: every party but the last got its lock; the last was told of a
/// deadlock whose cycle goes from the first name to the last (each waits for the next).
fn the_last_is_told(outcomes: Vec<Result<bool, Error>>, names: &[String]) {
    let (last, others) = outcomes.split_last().unwrap();
    for (at, outcome) in others.iter().enumerate() {
        assert!(matches!(outcome, Ok(true)), "party {at}: {outcome:?}");
    }
    assert_eq!(cycle_of(last.as_ref().unwrap_err()), names);
}

/// Five clients in a ring, while three more take and give back the same locks without
/// holding anything else: the contenders are never told of a deadlock, and the ring's last
/// waiter is, once.
#[test]
fn five_parties_in_a_ring_among_contenders() {
    let server = Server::start();
    let names: Vec<String> = (0..5).map(|i| format!("ring:{i}")).collect();
    let clients: Vec<_> = (0..5).map(|_| server.client()).collect();
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let contenders: Vec<_> = (0..3)
            .map(|at| {
                let (client, names, done) = (server.client(), &names, &done);
                scope.spawn(move || {
                    let mut rounds = 0;
                    while !done.load(std::sync::atomic::Ordering::Acquire) {
                        let lock = client.lock(&names[(at + rounds) % names.len()]);
                        let guard = lock.try_lock_for(Duration::from_millis(50)).unwrap();
                        drop(guard);
                        rounds += 1;
                    }
                })
            })
            .collect();
        let outcomes = ring(&clients, &names, &|held| !edges(&server, held).is_empty());
        done.store(true, std::sync::atomic::Ordering::Release);
        contenders.into_iter().for_each(|c| c.join().unwrap());
        the_last_is_told(outcomes, &names);
    });
    assert!(edges(&server, "*").is_empty(), "edges left behind");
}

/// On a cluster, three locks on three shards in a ring: the walk reads each lock and each
/// edge where its slot is served.
#[test]
fn a_ring_over_three_shards_of_a_cluster() {
    let cluster = support::Cluster::start();
    // The first names that fall on three different primaries.
    let mut names: Vec<String> = Vec::new();
    for i in 0.. {
        let name = format!("shard-ring:{i}");
        let port = cluster.owner_of(&name).port();
        if names.iter().all(|n| cluster.owner_of(n).port() != port) {
            names.push(name);
        }
        if names.len() == 3 {
            break;
        }
    }
    let clients: Vec<_> = (0..3).map(|_| cluster.client()).collect();
    let waiting = |held: &str| -> bool {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{{{held}}}:redmutex_wait:*"))
            .query(&mut cluster.owner_of(held).conn())
            .unwrap();
        !keys.is_empty()
    };
    let outcomes = ring(&clients, &names, &waiting);
    the_last_is_told(outcomes, &names);
}

/// Redlock over three masters: the holders a walk follows are those a quorum has, and an
/// edge is written on every master.
#[test]
fn a_ring_of_redlock_clients() {
    let servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls: Vec<String> = servers.iter().map(Server::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let clients: Vec<_> = (0..2)
        .map(|_| LockClient::redlock(&urls).build().unwrap())
        .collect();
    let names: Vec<String> = vec!["red:a".into(), "red:b".into()];
    let outcomes = ring(&clients, &names, &|held| {
        servers.iter().all(|server| !edges(server, held).is_empty())
    });
    the_last_is_told(outcomes, &names);
}

/// A writer waiting on a reader, who waits on the writer's other lock: the writer, last to
/// wait, is told; the reader then gets the lock.
#[test]
fn a_writer_waiting_on_a_reader_that_waits_on_it() {
    let server = Server::start();
    let (reader, writer) = (server.client(), server.client());
    let holding = Barrier::new(2);
    std::thread::scope(|scope| {
        let reading = scope.spawn(|| {
            let read = reader.read_write_lock("rw").read().lock().unwrap();
            holding.wait();
            let got = reader.lock("other").try_lock_for(PATIENCE).unwrap();
            drop((got, read));
        });
        let other = writer.lock("other").lock().unwrap();
        holding.wait();
        assert!(eventually(PATIENCE, || !edges(&server, "rw").is_empty()));
        let err = writer
            .read_write_lock("rw")
            .write()
            .try_lock_for(PATIENCE)
            .unwrap_err();
        assert_eq!(cycle_of(&err), ["rw", "other"]);
        drop(other);
        reading.join().unwrap();
    });
}

/// A cycle that a lease ends before anyone looks: the waiter for the lease's lock gets it,
/// and nobody is told of a deadlock.
#[test]
fn a_cycle_broken_by_a_lease_before_the_check_is_no_deadlock() {
    let server = Server::start();
    let (short, long) = (server.client(), server.client());
    let holding = Barrier::new(2);
    std::thread::scope(|scope| {
        let leased = scope.spawn(|| {
            // Ends long before the other's first check, a second after it waits.
            let a = short
                .lock("a")
                .lock_with_lease(Duration::from_millis(100))
                .unwrap();
            holding.wait();
            let b = short.lock("b").try_lock_for(PATIENCE).unwrap();
            assert!(b.is_some());
            drop((b, a));
        });
        let b = long.lock("b").lock().unwrap();
        holding.wait();
        let a = long.lock("a").try_lock_for(PATIENCE).unwrap();
        assert!(a.is_some(), "the lease ended");
        drop((a, b));
        leased.join().unwrap();
    });
}

/// A waiter that holds a lock and waits long, with checks every 20 ms, for a holder that
/// waits for nothing: its wait ends by its timeout, never as a deadlock.
#[test]
fn a_long_wait_without_a_cycle_is_never_a_deadlock() {
    let server = Server::start();
    let checking = server
        .builder()
        .deadlock_timeout(Some(Duration::from_millis(20)));
    let checking = checking.build().unwrap();
    let holder = server.client();
    let held = holder.lock("busy").lock().unwrap();
    let mine = checking.lock("mine").lock().unwrap();
    // Re-entering its own lock, and reading under its own write lock, waits for nothing.
    let again = checking.lock("mine").lock().unwrap();
    let rw = checking.read_write_lock("rw");
    let write = rw.write().lock().unwrap();
    let read = rw.read().lock().unwrap();
    let monitor = Monitor::start(&server);
    let waited = checking
        .lock("busy")
        .try_lock_for(Duration::from_millis(500))
        .unwrap();
    assert!(waited.is_none(), "a timeout, not a deadlock");
    let seen = monitor.until(&server, "waited");
    assert!(
        seen.matches("\"HKEYS\" \"busy\"").count() >= 2,
        "it looked: {seen}"
    );
    drop((read, write, again, mine, held));
}

/// A waiter whose process is killed while it waits: its edge expires soon after, and a
/// waiter that would have closed a cycle with it, coming after that, waits for the dead
/// holder's lease to end and gets the lock, never told of a deadlock.
#[test]
fn a_killed_waiter_s_edge_expires_and_makes_no_deadlock() {
    let server = Server::start();
    let survivor = server.client();
    let b = survivor.lock("dead:b").lock().unwrap();
    let env = [
        ("DEADLOCK_URL", server.url()),
        ("DEADLOCK_PARTY", "doomed".to_owned()),
        ("DEADLOCK_HOLD", "lock:dead:a".to_owned()),
        ("DEADLOCK_WAIT", "lock:dead:b".to_owned()),
        ("DEADLOCK_LEASE_MS", "3000".to_owned()),
    ];
    let mut doomed = spawn_worker("deadlock::party", &env);
    assert!(eventually(PATIENCE, || server.exists("held:doomed")));
    let () = redis::cmd("SET")
        .arg("go:doomed")
        .arg(1)
        .query(&mut server.conn())
        .unwrap();
    assert!(eventually(PATIENCE, || edges(&server, "dead:a").len() == 1));
    doomed.kill().unwrap();
    doomed.wait().unwrap();
    assert!(server.exists("dead:a"), "held until its lease ends");
    assert!(
        eventually(PATIENCE, || edges(&server, "dead:a").is_empty()),
        "the edge stayed"
    );
    let a = survivor.lock("dead:a").try_lock_for(PATIENCE).unwrap();
    assert!(a.is_some(), "the dead holder's lease ended");
    drop((a, b));
}

/// A leased permit may move to another thread (it is `Send`), so the check does not take
/// the thread that took it for its holder: a permit handed to a worker, whose taker then
/// waits on the waiter for the semaphore, makes no deadlock. The waiter gets the permit
/// once the worker gives it back.
#[test]
fn a_permit_handed_to_another_thread_makes_no_deadlock() {
    let server = Server::start();
    let quick = || {
        let builder = server
            .builder()
            .deadlock_timeout(Some(Duration::from_millis(20)));
        builder.build().unwrap()
    };
    let (taker, waiter) = (quick(), quick());
    assert!(taker.leased_semaphore("pool").try_set_permits(1).unwrap());
    let permit = taker.leased_semaphore("pool").acquire().unwrap();
    let b = waiter.lock("pool:b").lock().unwrap();
    let (give_back, worker_may_go) = std::sync::mpsc::channel::<()>();
    let monitor = Monitor::start(&server);
    std::thread::scope(|scope| {
        let worker = scope.spawn(move || {
            // Given back when told, or when the test ends without telling.
            let _ = worker_may_go.recv();
            permit.release().unwrap();
        });
        let taking = scope.spawn(|| {
            let a = taker.lock("pool:a").lock().unwrap();
            let got = taker.lock("pool:b").try_lock_for(PATIENCE).unwrap();
            assert!(got.is_some());
            drop((got, a));
        });
        assert!(eventually(PATIENCE, || !edges(&server, "pool:a").is_empty()));
        // The worker gives the permit back once the waiter has looked twice.
        let monitor = &monitor;
        let watching = scope.spawn(move || {
            let looked = eventually(PATIENCE, || {
                monitor.text().matches("\"HKEYS\" \"pool\"").count() >= 2
            });
            let _ = give_back.send(());
            looked
        });
        let got = waiter.leased_semaphore("pool").try_acquire_for(PATIENCE);
        assert!(watching.join().unwrap(), "the waiter never looked");
        assert!(matches!(got, Ok(Some(_))), "{got:?}");
        drop((got, b));
        worker.join().unwrap();
        taking.join().unwrap();
    });
    assert!(edges(&server, "*").is_empty(), "edges left behind");
}
