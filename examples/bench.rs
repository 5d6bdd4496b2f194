//! Measures the lock against raw Redis round trips, in one run, and prints one table.
//!
//! `cargo run --release --features bench --example bench` starts a throwaway
//! redis-server unless `REDIS_URL` is set; the Redlock, Sentinel, replica, TLS and Cluster
//! rows always start servers of their own (`redis-server`, and `redis-cli` to form the
//! cluster, on the `PATH`). Absolute times on shared machines swing severalfold; the
//! ratios are the result.
//! Samples that are compared are interleaved, so load from elsewhere hits both alike.
//! `bench quick` runs shorter rounds (for a smoke test); `bench cluster` only the Redis
//! Cluster rows; `bench handoff` only the hand-off's parts and the fair lock's direct
//! hand-off rows, on against off (with `quick` too, shorter); `bench scale` only the rows
//! of long fair queues, many waiters and many held locks; `bench redisson` only the rows
//! beside Redisson 4.7.0, run in a JVM (`tests/peers/java/Bench.java`; a JDK 17+, and
//! Maven to install Redisson on first use).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::Script;
use redmutex::bench_hooks::{self, RawKind};
use redmutex::{Kind, Lock, LockClient, Result};

struct Plan {
    rounds: usize,
    pairs: u32,
    handoffs: usize,
    contention: Duration,
    fairness: Duration,
    held: &'static [usize],
    /// Lengths of fair queues whose hand-offs are timed.
    queues: &'static [usize],
    /// Threads waiting each on a lock of its own.
    waiters: usize,
}

const FULL: Plan = Plan {
    rounds: 21,
    pairs: 500,
    handoffs: 300,
    contention: Duration::from_secs(3),
    fairness: Duration::from_secs(5),
    held: &[1_000, 10_000],
    queues: &[10, 100, 1_000],
    waiters: 1_000,
};

const QUICK: Plan = Plan {
    rounds: 3,
    pairs: 100,
    handoffs: 30,
    contention: Duration::from_millis(500),
    fairness: Duration::from_millis(500),
    held: &[100],
    queues: &[10, 100],
    waiters: 100,
};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("worker") {
        return worker(&args[1..]);
    }
    let plan = if args.first().map(String::as_str) == Some("quick") {
        QUICK
    } else {
        FULL
    };
    if args.iter().any(|arg| arg == "cluster") {
        return print(cluster(&plan)?);
    }
    let (url, _throwaway) = redis_url();
    if args.iter().any(|arg| arg == "handoff") {
        return print(direct_handoff(&plan, &url)?);
    }
    if args.iter().any(|arg| arg == "redisson") {
        return print(vs_redisson(&plan, &url)?);
    }
    if args.iter().any(|arg| arg == "scale") {
        return print(scale(&plan, &url)?);
    }
    if args.iter().any(|arg| arg == "deadlock") {
        return print(deadlocks(&plan, &url)?);
    }
    let client = LockClient::open(&url)?;
    let mut rows = Vec::new();

    let Uncontended {
        floor,
        raw_pair,
        pair,
    } = uncontended(&plan, &url, &client)?;
    let rt = |d: Duration| d.as_secs_f64() / floor.as_secs_f64();
    rows.push((
        "floor",
        format!(
            "raw EVALSHA round trip (`return nil`): {} µs",
            micros(floor)
        ),
    ));
    rows.push((
        "uncontended",
        format!(
            "{:.0} lock+unlock pairs/s; ratio to 2 × floor round trips: {:.2} (the same two scripts sent raw: {:.2}; the library over them: {:.2})",
            per_sec(pair),
            2.0 / rt(pair),
            2.0 / rt(raw_pair),
            raw_pair.as_secs_f64() / pair.as_secs_f64()
        ),
    ));
    let kinds = kinds(&plan, &url, &client)?;
    let to_floor = |d: Duration| kinds.setnx_floor.as_secs_f64() / d.as_secs_f64();
    rows.push((
        "token lock",
        format!(
            "uncontended lock+unlock: {} µs; ratio to one raw SET NX PX plus one no-op EVALSHA: {:.2} (its own SET NX PX and release script sent raw: {:.2}; a bare compare-and-delete script in place of the release, sent raw: {:.2})",
            micros(kinds.token),
            to_floor(kinds.token),
            to_floor(kinds.token_raw),
            to_floor(kinds.compare_delete),
        ),
    ));
    rows.push((
        "fenced lock",
        format!(
            "uncontended lock+unlock: {} µs = {:.2} × the reentrant lock's {} µs",
            micros(kinds.fenced),
            kinds.fenced.as_secs_f64() / kinds.reentrant.as_secs_f64(),
            micros(kinds.reentrant)
        ),
    ));
    rows.push((
        "spin lock",
        format!(
            "uncontended lock+unlock: {} µs = {:.2} × the reentrant lock's",
            micros(kinds.spin),
            kinds.spin.as_secs_f64() / kinds.reentrant.as_secs_f64(),
        ),
    ));
    let nested = reentry(&plan, &client)?;
    rows.push((
        "re-entry",
        format!(
            "nested acquire+release while held: {:.2} round trips",
            rt(nested)
        ),
    ));
    // One sample of each in turn, so that load from elsewhere hits them alike.
    let mut handoffs = interleaved(
        &plan,
        vec![
            ("thread", handoff_thread(client.lock("bench:handoff"))),
            ("process", handoff_process(&url, &client)),
            (
                "thread, token lock",
                handoff_thread(client.token_lock("bench:handoff-token")),
            ),
            (
                "thread, fair lock",
                handoff_thread(client.fair_lock("bench:handoff-fair")),
            ),
            (
                "thread, spin lock",
                handoff_thread(client.spin_lock("bench:handoff-spin")),
            ),
        ],
    )?;
    let reentrant_p50 = percentile(&mut handoffs[0].1, 50);
    for (how, mut samples) in handoffs {
        let (p50, p99) = (percentile(&mut samples, 50), percentile(&mut samples, 99));
        rows.push((
            "hand-off",
            format!(
                "another {how}: p50 {} µs = {:.1} round trips ({:.2} × the reentrant lock's to another thread); p99 {} µs = {:.1} round trips",
                micros(p50),
                rt(p50),
                p50.as_secs_f64() / reentrant_p50.as_secs_f64(),
                micros(p99),
                rt(p99)
            ),
        ));
    }
    let mut subscribe = subscribe_latencies(&plan, &client)?;
    let (p50, p99) = (
        percentile(&mut subscribe, 50),
        percentile(&mut subscribe, 99),
    );
    #[allow(unused_mut)]
    let mut measure = format!(
        "register a waiter until SUBSCRIBE confirmed: p50 {} µs = {:.1} round trips; p99 {} µs = {:.1} round trips",
        micros(p50),
        rt(p50),
        micros(p99),
        rt(p99)
    );
    #[cfg(feature = "tls")]
    {
        let (tls_floor, mut samples) = subscribe_over_tls(&plan)?;
        let (p50, p99) = (percentile(&mut samples, 50), percentile(&mut samples, 99));
        let rt = |d: Duration| d.as_secs_f64() / tls_floor.as_secs_f64();
        measure += &format!(
            "; over TLS: p50 {} µs = {:.1} TLS round trips; p99 {} µs = {:.1} (TLS round trip: {} µs)",
            micros(p50),
            rt(p50),
            micros(p99),
            rt(p99),
            micros(tls_floor)
        );
    }
    rows.push(("subscribe", measure));
    let threads = contended_threads(&plan, &client, 4);
    let processes = contended_processes(&plan, &url, 4);
    let solo = contended_threads(&plan, &client, 1);
    rows.push((
        "contended",
        format!(
            "4 threads: {threads:.0} pairs/s = {:.2} × uncontended; 4 processes: {processes:.0} pairs/s = {:.2} × uncontended (uncontended in the same window: {solo:.0} pairs/s)",
            threads / solo,
            processes / solo
        ),
    ));
    let counts = fairness(&plan, &client, 8);
    let (max, min) = (counts.iter().max().unwrap(), counts.iter().min().unwrap());
    rows.push((
        "fairness",
        format!(
            "8 threads for {:?}: max / min acquisitions = {max} / {min} = {:.2}",
            plan.fairness,
            *max as f64 / (*min).max(1) as f64
        ),
    ));
    rows.extend(family(&plan, &url, &client)?);
    rows.extend(composites(&plan, &client)?);
    rows.push(("count-down latch", latch(&plan, &url, &client)?));
    rows.extend(direct_handoff(&plan, &url)?);
    rows.extend(vs_redisson(&plan, &url)?);
    rows.extend(scale(&plan, &url)?);
    rows.extend(deadlocks(&plan, &url)?);
    rows.push(("redlock", redlock(&plan)?));
    rows.push(("sentinel", sentinel(&plan)?));
    rows.push(("replica acks", replica_acks(&plan)?));
    rows.extend(cluster(&plan)?);

    print(rows)
}

fn print(rows: Vec<(&str, String)>) -> Result<()> {
    println!("| row | measure |");
    println!("|---|---|");
    for (row, measure) in rows {
        println!("| {row} | {measure} |");
    }
    Ok(())
}

/// Interleaved: a no-op EVALSHA, the acquire and release scripts sent raw, and lock+unlock
/// pairs, each on one thread and connection.
fn uncontended(plan: &Plan, url: &str, client: &LockClient) -> Result<Uncontended> {
    let lock = client.lock("bench:uncontended");
    let mut raw = redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .expect("raw connection");
    let noop = Script::new("return nil");
    bench_hooks::load_scripts(&mut raw).expect("load scripts");
    let (mut floor, mut scripts, mut pairs) = (Vec::new(), Vec::new(), Vec::new());
    let mut call = 0u64;
    for _ in 0..plan.rounds {
        floor.push(mean_of(2 * plan.pairs, || {
            let () = noop.invoke(&mut raw).expect("evalsha");
        }));
        scripts.push(mean_of(plan.pairs, || {
            call += 1;
            raw_pair(&mut raw, "bench:raw", call, false);
        }));
        pairs.push(mean_of(plan.pairs, || {
            lock.lock().and_then(|g| g.unlock()).expect("lock+unlock");
        }));
    }
    Ok(Uncontended {
        floor: percentile(&mut floor, 50),
        raw_pair: percentile(&mut scripts, 50),
        pair: percentile(&mut pairs, 50),
    })
}

/// The reentrant lock's acquire and release scripts sent raw on `raw`, as the library
/// sends them for a first hold on `key` (`call` numbers the release's latch); `sharded`
/// publishes as a cluster with sharded pub/sub does.
fn raw_pair(raw: &mut redis::Connection, key: &str, call: u64, sharded: bool) {
    let (acquire, release) = bench_hooks::raw_pair(RawKind::Reentrant, key, call);
    let release = match sharded {
        true => bench_hooks::sharded(&release),
        false => release,
    };
    send_cmds(raw, RawKind::Reentrant, acquire, release);
}

/// One uncontended pair of `kind` on `key`, its commands as the library builds them, sent
/// raw on `raw`.
fn send_pair(raw: &mut redis::Connection, kind: RawKind, key: &str, call: u64) {
    let (acquire, release) = bench_hooks::raw_pair(kind, key, call);
    send_cmds(raw, kind, acquire, release);
}

/// Sends the pair `acquire` and `release` of `kind`; both must succeed (a first hold
/// taken, then freed).
fn send_cmds(raw: &mut redis::Connection, kind: RawKind, acquire: redis::Cmd, release: redis::Cmd) {
    let taken: redis::Value = acquire.query(raw).expect("acquire");
    let taken_ok = match kind {
        RawKind::Token => taken == redis::Value::Okay,
        RawKind::LeasedSemaphore => {
            matches!(&taken, redis::Value::Array(v) if v.first() == Some(&redis::Value::Int(1)))
        }
        RawKind::Counting => taken == redis::Value::Int(1),
        _ => taken == redis::Value::Nil,
    };
    assert!(taken_ok, "{kind:?} acquire: {taken:?}");
    let released: redis::Value = release.query(raw).expect("release");
    assert_eq!(released, redis::Value::Int(1), "{kind:?} release");
}

struct Uncontended {
    floor: Duration,
    raw_pair: Duration,
    pair: Duration,
}

/// Interleaved: one raw SET NX PX plus one no-op EVALSHA, lock+unlock pairs of the token,
/// reentrant, fenced and spin locks, and two floors of the token lock's pair: its own commands
/// sent raw, and a bare compare-and-delete script in place of its release.
fn kinds(plan: &Plan, url: &str, client: &LockClient) -> Result<Kinds> {
    let mut raw = redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .expect("raw connection");
    let noop = Script::new("return nil");
    bench_hooks::load_scripts(&mut raw).expect("load scripts");
    let compare_delete = Script::new(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0",
    );
    let (token, reentrant, fenced, spin) = (
        client.token_lock("bench:token"),
        client.lock("bench:reentrant"),
        client.fenced_lock("bench:fenced"),
        client.spin_lock("bench:spin"),
    );
    let mut samples: [Vec<Duration>; 7] = Default::default();
    let token_pair = |raw: &mut redis::Connection, release: &dyn Fn(&mut redis::Connection)| {
        let _: Option<String> = redis::cmd("SET")
            .arg("bench:token-raw")
            .arg("0123456789abcdef0123456789abcdef")
            .arg("NX")
            .arg("PX")
            .arg(30_000)
            .query(raw)
            .expect("set");
        release(raw);
    };
    // A fresh key each time, so that every SET NX succeeds and writes, as an acquire does.
    let mut fresh = 0u64;
    for _ in 0..plan.rounds {
        samples[0].push(mean_of(plan.pairs, || {
            fresh += 1;
            let _: Option<String> = redis::cmd("SET")
                .arg(format!("bench:setnx:{fresh}"))
                .arg("token")
                .arg("NX")
                .arg("PX")
                .arg(30_000)
                .query(&mut raw)
                .expect("set");
            let () = noop.invoke(&mut raw).expect("evalsha");
        }));
        samples[1].push(mean_of(plan.pairs, || {
            token.lock().and_then(|g| g.unlock()).expect("token");
        }));
        samples[2].push(mean_of(plan.pairs, || {
            reentrant
                .lock()
                .and_then(|g| g.unlock())
                .expect("reentrant");
        }));
        samples[3].push(mean_of(plan.pairs, || {
            fenced.lock().and_then(|g| g.unlock()).expect("fenced");
        }));
        samples[4].push(mean_of(plan.pairs, || {
            fresh += 1;
            send_pair(&mut raw, RawKind::Token, "bench:token-raw", fresh);
        }));
        samples[5].push(mean_of(plan.pairs, || {
            token_pair(&mut raw, &|raw| {
                let deleted: i64 = compare_delete
                    .key("bench:token-raw")
                    .arg("0123456789abcdef0123456789abcdef")
                    .invoke(raw)
                    .expect("compare and delete");
                assert_eq!(deleted, 1);
            });
        }));
        samples[6].push(mean_of(plan.pairs, || {
            spin.lock().and_then(|g| g.unlock()).expect("spin");
        }));
    }
    let [
        setnx_floor,
        token,
        reentrant,
        fenced,
        token_raw,
        compare_delete,
        spin,
    ] = samples.map(|mut s| percentile(&mut s, 50));
    Ok(Kinds {
        setnx_floor,
        token,
        reentrant,
        fenced,
        token_raw,
        compare_delete,
        spin,
    })
}

struct Kinds {
    setnx_floor: Duration,
    token: Duration,
    reentrant: Duration,
    fenced: Duration,
    token_raw: Duration,
    compare_delete: Duration,
    spin: Duration,
}

fn reentry(plan: &Plan, client: &LockClient) -> Result<Duration> {
    let lock = client.lock("bench:reentry");
    let _outer = lock.lock()?;
    let mut samples: Vec<_> = (0..plan.rounds)
        .map(|_| {
            mean_of(plan.pairs, || {
                lock.lock().and_then(|g| g.unlock()).expect("nested");
            })
        })
        .collect();
    Ok(percentile(&mut samples, 50))
}

/// A thread that, each time it is told to go, takes `lock`, says when it got it, and lets
/// it go; it ends when the sender is dropped.
fn waiter_thread<K: Kind>(
    lock: Lock<K>,
) -> (
    crossbeam_channel::Sender<()>,
    crossbeam_channel::Receiver<Instant>,
) {
    let (go_tx, go_rx) = crossbeam_channel::bounded::<()>(0);
    let (got_tx, got_rx) = crossbeam_channel::bounded::<Instant>(0);
    std::thread::spawn(move || {
        while go_rx.recv().is_ok() {
            let guard = lock.lock().expect("waiter lock");
            got_tx.send(Instant::now()).unwrap();
            guard.unlock().expect("waiter unlock");
        }
    });
    (go_tx, got_rx)
}

/// One hand-off at each call: from `unlock()` called in this thread (the release sent) to
/// `lock()` returning in a thread that waits for it.
fn handoff_thread<K: Kind>(lock: Lock<K>) -> Sampler {
    let (go_tx, got_rx) = waiter_thread(lock.clone());
    Box::new(move || {
        let guard = lock.lock()?;
        go_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(3)); // let the waiter block
        let released = Instant::now();
        guard.unlock()?;
        let acquired = got_rx.recv().unwrap();
        Ok(acquired.saturating_duration_since(released))
    })
}

/// Takes one sample a call; its thread or process ends when it is dropped.
type Sampler = Box<dyn FnMut() -> Result<Duration>>;

/// Samples of each sampler, one of each in turn, after ten rounds of warm-up.
fn interleaved(
    plan: &Plan,
    mut samplers: Vec<(&'static str, Sampler)>,
) -> Result<Vec<(&'static str, Vec<Duration>)>> {
    let mut samples = vec![Vec::new(); samplers.len()];
    for i in 0..plan.handoffs + 10 {
        for ((_, sample), taken) in samplers.iter_mut().zip(&mut samples) {
            let duration = sample()?;
            if i >= 10 {
                taken.push(duration);
            }
        }
    }
    Ok(samplers.iter().map(|(how, _)| *how).zip(samples).collect())
}

/// Subscriptions to fresh channels while the subscriber is running: each waiter wakes the
/// subscriber thread with a message and waits for the confirmation.
fn subscribe_latencies(plan: &Plan, client: &LockClient) -> Result<Vec<Duration>> {
    let mut samples = Vec::new();
    for i in 0..plan.handoffs + 10 {
        let channel = format!("redisson_lock__channel:{{bench:subscribe:{i}}}");
        let took = redmutex::bench_hooks::subscribe_latency(client, channel.as_bytes())
            .expect("subscriber thread");
        if i >= 10 {
            samples.push(took);
        }
    }
    Ok(samples)
}

/// The round trip of a PING over TLS, and subscription latencies, on a throwaway TLS server.
#[cfg(feature = "tls")]
fn subscribe_over_tls(plan: &Plan) -> Result<(Duration, Vec<Duration>)> {
    let mut ca = None;
    let server = Server::start_with(|port, dir| {
        ca = Some(tls_files(dir));
        let file = |name: &str| dir.join(name).display().to_string();
        [
            ("--port", "0".into()),
            ("--tls-port", port.to_string()),
            ("--tls-cert-file", file("server.crt")),
            ("--tls-key-file", file("server.key")),
            ("--tls-auth-clients", "no".into()),
        ]
        .into_iter()
        .flat_map(|(name, value)| [name.into(), value])
        .collect()
    });
    let (ca, url) = (ca.unwrap(), format!("rediss://127.0.0.1:{}/", server.port));
    let client = LockClient::builder(&url).tls_root_ca(ca.clone()).build()?;
    let tls = redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(ca),
    };
    let mut raw = redis::Client::build_with_tls(url, tls)
        .and_then(|client| client.get_connection())
        .expect("a TLS connection");
    let floor = mean_of(plan.pairs, || {
        let _: String = redis::cmd("PING").query(&mut raw).unwrap();
    });
    Ok((floor, subscribe_latencies(plan, &client)?))
}

/// The same across processes, timed with the wall clock both share.
/// The same as [`handoff_thread`] with the waiter in another process, which reports the
/// wall-clock time it got the lock.
fn handoff_process(url: &str, client: &LockClient) -> Sampler {
    let lock = client.lock("bench:handoff-process");
    let mut waiter = Waiter::spawn(url);
    Box::new(move || {
        let guard = lock.lock()?;
        waiter.go();
        std::thread::sleep(Duration::from_millis(3));
        let released = wall_nanos();
        guard.unlock()?;
        let acquired = waiter.acquired();
        Ok(Duration::from_nanos(
            acquired.saturating_sub(released) as u64
        ))
    })
}

/// A hand-off worker process; it ends, and is waited for, when this is dropped.
struct Waiter {
    child: std::process::Child,
    to_child: Option<std::process::ChildStdin>,
    from_child: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Waiter {
    fn spawn(url: &str) -> Self {
        let mut child = spawn_worker(&["handoff", url]);
        let to_child = child.stdin.take();
        let from_child = BufReader::new(child.stdout.take().unwrap()).lines();
        Waiter {
            child,
            to_child,
            from_child,
        }
    }

    /// Tells the worker to take the lock.
    fn go(&mut self) {
        writeln!(self.to_child.as_ref().unwrap(), "go").unwrap();
    }

    /// When the worker got the lock, in nanoseconds of the wall clock.
    fn acquired(&mut self) -> u128 {
        self.from_child.next().unwrap().unwrap().parse().unwrap()
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        drop(self.to_child.take());
        let _ = self.child.wait();
    }
}

/// The fair lock with direct hand-off on against off, each measure taken in turns so that
/// load from elsewhere hits both alike: the hand-off (release sent → the next holder's
/// guard returned), 4 threads running GET + SET sections, and uncontended lock+unlock.
fn direct_handoff(plan: &Plan, url: &str) -> Result<Vec<(&'static str, String)>> {
    let on = LockClient::builder(url).direct_handoff(true).build()?;
    let off = LockClient::builder(url).direct_handoff(false).build()?;
    let mut rows = Vec::new();

    rows.extend(handoff_parts(plan, url, &on, &off)?);
    let granted_before = on.stats().grants_taken;
    let mut handoffs = interleaved(
        plan,
        vec![
            ("on", handoff_thread(on.fair_lock("bench:direct-on"))),
            ("off", handoff_thread(off.fair_lock("bench:direct-off"))),
        ],
    )?;
    let granted = on.stats().grants_taken - granted_before;
    let (on_p50, on_p99) = (
        percentile(&mut handoffs[0].1, 50),
        percentile(&mut handoffs[0].1, 99),
    );
    let (off_p50, off_p99) = (
        percentile(&mut handoffs[1].1, 50),
        percentile(&mut handoffs[1].1, 99),
    );
    rows.push((
        "direct hand-off",
        format!(
            "fair hand-off to another thread (release sent → guard returned): on p50 {} µs = {:.2} × off's {} µs (target ≤ 0.7); p99 on {} µs, off {} µs; {granted} of {} taken on the grant alone",
            micros(on_p50),
            on_p50.as_secs_f64() / off_p50.as_secs_f64(),
            micros(off_p50),
            micros(on_p99),
            micros(off_p99),
            plan.handoffs + 10
        ),
    ));

    // 4 threads, each section a GET and a SET of a counter under the lock; the turns
    // alternate, and the counter must come out exact.
    let turns = 6;
    let span = plan.contention / 2;
    let mut sections = [Vec::new(), Vec::new()];
    for turn in 0..turns {
        for (i, client) in [&on, &off].into_iter().enumerate() {
            let name = if i == 0 {
                "bench:gs-on"
            } else {
                "bench:gs-off"
            };
            let rate = get_set_sections(url, &client.fair_lock(name), 4, span, turn);
            sections[i].push(rate);
        }
    }
    let mut ratios: Vec<f64> = (sections[0].iter().zip(&sections[1]))
        .map(|(on, off)| on / off)
        .collect();
    ratios.sort_by(f64::total_cmp);
    let mean = |rates: &[f64]| rates.iter().sum::<f64>() / rates.len() as f64;
    rows.push((
        "direct hand-off",
        format!(
            "4 threads of GET + SET under the fair lock: on {:.0} sections/s, off {:.0}; on / off per turn, median of {turns}: {:.2} (target ≥ 1.2; range {:.2}–{:.2})",
            mean(&sections[0]),
            mean(&sections[1]),
            ratios[ratios.len() / 2],
            ratios[0],
            ratios[ratios.len() - 1]
        ),
    ));

    let (lock_on, lock_off) = (
        on.fair_lock("bench:solo-on"),
        off.fair_lock("bench:solo-off"),
    );
    let mut pairs = [Vec::new(), Vec::new()];
    for _ in 0..plan.rounds {
        pairs[0].push(mean_of(plan.pairs, || {
            lock_on.lock().and_then(|g| g.unlock()).expect("fair on");
        }));
        pairs[1].push(mean_of(plan.pairs, || {
            lock_off.lock().and_then(|g| g.unlock()).expect("fair off");
        }));
    }
    let (on_pair, off_pair) = (percentile(&mut pairs[0], 50), percentile(&mut pairs[1], 50));
    rows.push((
        "direct hand-off",
        format!(
            "uncontended fair lock+unlock: on {} µs = {:.3} × off's {} µs (target within 3 %)",
            micros(on_pair),
            on_pair.as_secs_f64() / off_pair.as_secs_f64(),
            micros(off_pair)
        ),
    ));
    Ok(rows)
}

/// Where a hand-off's time goes, for a waiter of another thread of one client, in turns over
/// the reentrant lock, and the fair lock with the direct hand-off on and off: the holder's
/// release (its round trip), the unlock message as a subscriber of our own sees it (a
/// plain `PSUBSCRIBE` connection in a thread of its own: the earliest a subscriber could
/// have it), and the next holder's guard after that; beside a round trip after a pause
/// as long as the holder's (3 ms), as a sleeping waiter's attempt meets it, and back to
/// back.
fn handoff_parts(
    plan: &Plan,
    url: &str,
    on: &LockClient,
    off: &LockClient,
) -> Result<Vec<(&'static str, String)>> {
    let (seen_tx, seen_rx) = crossbeam_channel::unbounded::<(String, Instant)>();
    let watch = std::thread::spawn({
        let url = url.to_owned();
        move || {
            let mut conn =
                (redis::Client::open(url).and_then(|c| c.get_connection())).expect("a connection");
            let mut pubsub = conn.as_pubsub();
            pubsub
                .psubscribe("redisson_lock__channel:{bench:parts*")
                .unwrap();
            while let Ok(message) = pubsub.get_message() {
                let at = Instant::now();
                if seen_tx
                    .send((message.get_channel_name().to_owned(), at))
                    .is_err()
                {
                    break;
                }
            }
        }
    });
    let mut raw =
        (redis::Client::open(url).and_then(|c| c.get_connection())).expect("a connection");
    let noop = Script::new("return nil");
    let _: () = noop.invoke(&mut raw).expect("no-op");
    let mut rtt = |pause: Duration| {
        std::thread::sleep(pause);
        let sent = Instant::now();
        let _: () = noop.invoke(&mut raw).expect("no-op");
        sent.elapsed()
    };
    let (mut paused, mut back_to_back) = (Vec::new(), Vec::new());
    let reentrant = LockClient::open(url)?;
    let mut parts: Vec<(&str, [Vec<Duration>; 4])> = vec![
        ("reentrant lock", Default::default()),
        ("fair lock, direct hand-off on", Default::default()),
        ("fair lock, direct hand-off off", Default::default()),
    ];
    let mut samplers: Vec<PartSampler> = vec![
        part_sampler(reentrant.lock("bench:parts-reentrant"), seen_rx.clone()),
        part_sampler(on.fair_lock("bench:parts-on"), seen_rx.clone()),
        part_sampler(off.fair_lock("bench:parts-off"), seen_rx.clone()),
    ];
    drop(seen_rx);
    for i in 0..plan.handoffs + 10 {
        for ((_, taken), sample) in parts.iter_mut().zip(&mut samplers) {
            let [release, message, after, whole] = sample()?;
            paused.push(rtt(Duration::from_millis(3)));
            back_to_back.push(rtt(Duration::ZERO));
            if i >= 10 {
                for (part, d) in taken.iter_mut().zip([release, message, after, whole]) {
                    part.push(d);
                }
            }
        }
    }
    drop(samplers);
    let (paused, back_to_back) = (
        percentile(&mut paused, 50),
        percentile(&mut back_to_back, 50),
    );
    let mut rows = Vec::new();
    for (what, mut taken) in parts {
        let [release, message, after, whole] = taken.each_mut().map(|d| percentile(d, 50));
        rows.push((
            "hand-off parts",
            format!(
                "{what}, to another thread, p50 of {}: release sent → returned {} µs; → the unlock message at a plain subscriber {} µs; that → the next holder's guard {} µs; in all {} µs = {:.2} round trips after a 3 ms pause ({} µs; back to back {} µs)",
                plan.handoffs,
                micros(release),
                micros(message),
                micros(after),
                micros(whole),
                whole.as_secs_f64() / paused.as_secs_f64(),
                micros(paused),
                micros(back_to_back),
            ),
        ));
    }
    drop(watch);
    Ok(rows)
}

/// One hand-off a call, in parts: the release's round trip, the release sent until the
/// unlock message reached a plain subscriber, that until the next holder's guard, and the
/// whole.
type PartSampler = Box<dyn FnMut() -> Result<[Duration; 4]>>;

fn part_sampler<K: Kind>(
    lock: Lock<K>,
    seen: crossbeam_channel::Receiver<(String, Instant)>,
) -> PartSampler {
    let (go_tx, got_rx) = waiter_thread(lock.clone());
    let channel = format!("redisson_lock__channel:{{{}}}", lock.name());
    Box::new(move || {
        let guard = lock.lock()?;
        go_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(3)); // let the waiter block
        // Messages of earlier turns (the waiter's own releases publish to no one).
        while seen.try_recv().is_ok() {}
        let released = Instant::now();
        guard.unlock()?;
        let returned = Instant::now();
        let acquired = got_rx.recv().unwrap();
        // This lock's message: on its channel, or a waiter's channel beside it.
        let message = std::iter::from_fn(|| seen.recv_timeout(Duration::from_secs(1)).ok())
            .find(|(name, _)| name.starts_with(&channel))
            .map_or(acquired, |(_, at)| at);
        Ok([
            returned - released,
            message.saturating_duration_since(released),
            acquired.saturating_duration_since(message),
            acquired - released,
        ])
    })
}

/// Sections per second of `threads` threads for `span`, each section a GET and a SET of a
/// counter of its own under `lock`; panics unless the counter comes out exact.
fn get_set_sections<K: Kind>(
    url: &str,
    lock: &Lock<K>,
    threads: usize,
    span: Duration,
    turn: usize,
) -> f64 {
    let counter = format!("bench:gs-counter:{}:{turn}", lock.name());
    // A server named by `REDIS_URL` may keep the counter of an earlier run.
    let mut redis = redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .expect("raw connection");
    let () = redis::cmd("DEL").arg(&counter).query(&mut redis).unwrap();
    let stop = AtomicBool::new(false);
    let total: u64 = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (lock, stop, counter) = (lock.clone(), &stop, &counter);
                scope.spawn(move || {
                    let mut redis = redis::Client::open(url)
                        .and_then(|c| c.get_connection())
                        .expect("raw connection");
                    let mut count = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let guard = lock.lock().expect("section lock");
                        let value: Option<u64> =
                            redis::cmd("GET").arg(counter).query(&mut redis).unwrap();
                        let () = redis::cmd("SET")
                            .arg(counter)
                            .arg(value.unwrap_or(0) + 1)
                            .query(&mut redis)
                            .unwrap();
                        guard.unlock().expect("section unlock");
                        count += 1;
                    }
                    count
                })
            })
            .collect();
        std::thread::sleep(span);
        stop.store(true, Ordering::Relaxed);
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let value: Option<u64> = redis::cmd("GET").arg(&counter).query(&mut redis).unwrap();
    assert_eq!(value.unwrap_or(0), total, "two holders at once");
    total as f64 / span.as_secs_f64()
}

/// Pairs per second over all contenders on one key.
fn contended_threads(plan: &Plan, client: &LockClient, threads: usize) -> f64 {
    let total: u64 = fairness_counts(&client.lock("bench:contended"), threads, plan.contention)
        .iter()
        .sum();
    total as f64 / plan.contention.as_secs_f64()
}

fn contended_processes(plan: &Plan, url: &str, processes: usize) -> f64 {
    let millis = plan.contention.as_millis().to_string();
    let children: Vec<_> = (0..processes)
        .map(|_| spawn_worker(&["contend", url, &millis]))
        .collect();
    let mut total = 0u64;
    for mut child in children {
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        total += line.trim().parse::<u64>().unwrap();
        child.wait().unwrap();
    }
    total as f64 / plan.contention.as_secs_f64()
}

/// Deadlock detection: what it costs where nothing deadlocks, uncontended and contended,
/// against the same client with it off, in alternating rounds; and how long after a cycle
/// closes the waiter that closed it is told, against its deadlock timeout.
fn deadlocks(plan: &Plan, url: &str) -> Result<Vec<(&'static str, String)>> {
    let on = LockClient::open(url)?;
    let off = LockClient::builder(url).deadlock_timeout(None).build()?;
    let (mut pairs_on, mut pairs_off) = (Vec::new(), Vec::new());
    let (mut nested_on, mut nested_off) = (0.0, 0.0);
    for round in 0..plan.rounds {
        for (client, pairs) in [(&on, &mut pairs_on), (&off, &mut pairs_off)] {
            let lock = client.lock("bench:dl-uncontended");
            pairs.push(mean_of(plan.pairs, || {
                lock.lock().and_then(|g| g.unlock()).expect("lock+unlock");
            }));
        }
        // Four threads, each holding a lock of its own, contend for one shared lock: the
        // waits a deadlock check would follow, if they lasted.
        let span = plan.contention / plan.rounds.min(5) as u32;
        if round < 5 {
            nested_on += nested_sections(&on, 4, span);
            nested_off += nested_sections(&off, 4, span);
        }
    }
    let (on_pair, off_pair) = (
        percentile(&mut pairs_on, 50),
        percentile(&mut pairs_off, 50),
    );
    let timeout = Duration::from_millis(100);
    let mut told = Vec::new();
    for sample in 0..plan.rounds.max(5) {
        told.push(time_to_victim(url, timeout, sample)?);
    }
    let (p50, p99) = (percentile(&mut told, 50), percentile(&mut told, 99));
    Ok(vec![
        (
            "deadlock check",
            format!(
                "uncontended lock+unlock with it on: {} µs = {:.3} × off ({} µs)",
                micros(on_pair),
                on_pair.as_secs_f64() / off_pair.as_secs_f64(),
                micros(off_pair)
            ),
        ),
        (
            "deadlock check",
            format!(
                "4 threads, each holding its own lock, contending for one: {nested_on:.0} sections with it on = {:.3} × off ({nested_off:.0})",
                nested_on / nested_off
            ),
        ),
        (
            "deadlock check",
            format!(
                "a cycle of two closed, to the error of the waiter that closed it, deadlock timeout {} ms: p50 {} ms = {:.2} × the timeout, p99 {} ms = {:.2} ×",
                timeout.as_millis(),
                p50.as_millis(),
                p50.as_secs_f64() / timeout.as_secs_f64(),
                p99.as_millis(),
                p99.as_secs_f64() / timeout.as_secs_f64()
            ),
        ),
    ])
}

/// Sections run over `span` by `threads` threads of `client`, each holding a lock of its
/// own while it takes and gives back one shared lock.
fn nested_sections(client: &LockClient, threads: usize, span: Duration) -> f64 {
    let stop = AtomicBool::new(false);
    let total: u64 = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|at| {
                let stop = &stop;
                scope.spawn(move || {
                    let outer = client
                        .lock(format!("bench:dl-own:{at}"))
                        .lock()
                        .expect("own");
                    let shared = client.lock("bench:dl-shared");
                    let mut count = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        shared.lock().and_then(|g| g.unlock()).expect("shared");
                        count += 1;
                    }
                    drop(outer);
                    count
                })
            })
            .collect();
        std::thread::sleep(span);
        stop.store(true, Ordering::Relaxed);
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    total as f64 / span.as_secs_f64()
}

/// One cycle of two clients with deadlock timeout `timeout`: how long after the second
/// began the wait that closed it its call returned the deadlock.
fn time_to_victim(url: &str, timeout: Duration, sample: usize) -> Result<Duration> {
    let client = || {
        LockClient::builder(url)
            .deadlock_timeout(Some(timeout))
            .build()
    };
    let (one, two) = (client()?, client()?);
    let (a, b) = (
        format!("bench:dl-a:{sample}"),
        format!("bench:dl-b:{sample}"),
    );
    let holding = std::sync::Barrier::new(2);
    let waiting = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let older = scope.spawn(|| {
            let held = one.lock(&a).lock().expect("a");
            holding.wait();
            waiting.store(true, Ordering::Release);
            let got = one.lock(&b).try_lock_for(Duration::from_secs(60));
            drop((got, held));
        });
        let held = two.lock(&b).lock()?;
        holding.wait();
        while !waiting.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        // The older waiter's wait has begun: this one closes the cycle.
        std::thread::sleep(timeout);
        let closed = Instant::now();
        let err = two.lock(&a).try_lock_for(Duration::from_secs(60)).err();
        let took = closed.elapsed();
        assert!(err.is_some_and(|err| err.is_deadlock()), "not told");
        drop(held);
        older.join().unwrap();
        Ok(took)
    })
}

fn fairness(plan: &Plan, client: &LockClient, threads: usize) -> Vec<u64> {
    fairness_counts(&client.lock("bench:fairness"), threads, plan.fairness)
}

/// Each of `threads` takes and releases `lock` for `span`; returns each one's count.
fn fairness_counts<K: Kind>(lock: &Lock<K>, threads: usize, span: Duration) -> Vec<u64> {
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (lock, stop) = (lock.clone(), &stop);
                scope.spawn(move || {
                    let mut count = 0;
                    while !stop.load(Ordering::Relaxed) {
                        lock.lock().and_then(|g| g.unlock()).expect("contend");
                        count += 1;
                    }
                    count
                })
            })
            .collect();
        std::thread::sleep(span);
        stop.store(true, Ordering::Relaxed);
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// The fair lock, the read-write lock and the semaphore: fairness of the fair lock, readers in parallel, and each kind's pair against its own two scripts sent raw.
fn family(plan: &Plan, url: &str, client: &LockClient) -> Result<Vec<(&'static str, String)>> {
    let mut rows = Vec::new();
    let counts = fairness_counts(&client.fair_lock("bench:fair-fairness"), 8, plan.fairness);
    let (max, min) = (counts.iter().max().unwrap(), counts.iter().min().unwrap());
    rows.push((
        "fair lock",
        format!(
            "8 threads for {:?}: max / min acquisitions = {max} / {min} = {:.2}",
            plan.fairness,
            *max as f64 / (*min).max(1) as f64
        ),
    ));

    let rw = client.read_write_lock("bench:rw");
    let readers = |threads: usize| {
        let stop = AtomicBool::new(false);
        let total: u64 = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    let (read, stop) = (rw.read().clone(), &stop);
                    scope.spawn(move || {
                        let mut count = 0;
                        while !stop.load(Ordering::Relaxed) {
                            read.lock().and_then(|g| g.unlock()).expect("read");
                            count += 1;
                        }
                        count
                    })
                })
                .collect();
            std::thread::sleep(plan.contention);
            stop.store(true, Ordering::Relaxed);
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        total as f64 / plan.contention.as_secs_f64()
    };
    let one = readers(1);
    let before = script_time(url);
    let eight = readers(8);
    let (usec, calls) = script_time(url);
    let per_script = (usec - before.0) as f64 / (calls - before.1).max(1) as f64;
    rows.push((
        "readers",
        format!(
            "read lock+unlock pairs/s: 8 threads {eight:.0} = {:.2} × 1 thread ({one:.0}); Redis runs each of their scripts in {per_script:.1} µs (INFO commandstats), so its one thread allows at most {:.0} pairs/s",
            eight / one,
            1e6 / (2.0 * per_script)
        ),
    ));

    let mut raw = redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .expect("raw connection");
    bench_hooks::load_scripts(&mut raw).expect("load scripts");
    let (fair, semaphore, reentrant) = (
        client.fair_lock("bench:fair"),
        client.leased_semaphore("bench:semaphore"),
        client.lock("bench:family-reentrant"),
    );
    semaphore.try_set_permits(1)?;
    let _: () = redis::cmd("SET")
        .arg("bench:semaphore-raw")
        .arg(1)
        .query(&mut raw)
        .expect("permits");
    let mut request = 0u64;
    let mut samples: [Vec<Duration>; 7] = Default::default();
    for _ in 0..plan.rounds {
        samples[0].push(mean_of(plan.pairs, || {
            reentrant
                .lock()
                .and_then(|g| g.unlock())
                .expect("reentrant");
        }));
        samples[1].push(mean_of(plan.pairs, || {
            fair.lock().and_then(|g| g.unlock()).expect("fair");
        }));
        samples[2].push(mean_of(plan.pairs, || {
            request += 1;
            send_pair(&mut raw, RawKind::Fair, "bench:fair-raw", request);
        }));
        samples[3].push(mean_of(plan.pairs, || {
            rw.read().lock().and_then(|g| g.unlock()).expect("read");
        }));
        samples[4].push(mean_of(plan.pairs, || {
            request += 1;
            send_pair(&mut raw, RawKind::Read, "bench:rw-raw", request);
        }));
        samples[5].push(mean_of(plan.pairs, || {
            semaphore
                .acquire()
                .and_then(|p| p.release())
                .expect("semaphore");
        }));
        samples[6].push(mean_of(plan.pairs, || {
            request += 1;
            send_pair(
                &mut raw,
                RawKind::LeasedSemaphore,
                "bench:semaphore-raw",
                request,
            );
        }));
    }
    let [
        reentrant,
        fair,
        fair_raw,
        read,
        read_raw,
        semaphore,
        semaphore_raw,
    ] = samples.map(|mut s| percentile(&mut s, 50));
    let over = |library: Duration, raw: Duration| library.as_secs_f64() / raw.as_secs_f64();
    rows.push((
        "family pairs",
        format!(
            "uncontended pair against its own two scripts sent raw: fair lock {:.2}, read lock {:.2}, semaphore {:.2}; against the reentrant lock's pair ({} µs): fair {:.2}, read {:.2}, semaphore acquire+release {:.2}",
            over(fair, fair_raw),
            over(read, read_raw),
            over(semaphore, semaphore_raw),
            micros(reentrant),
            over(fair, reentrant),
            over(read, reentrant),
            over(semaphore, reentrant),
        ),
    ));
    rows.push(counting(plan, client, &mut raw)?);
    Ok(rows)
}

/// The non-reentrant lock and the multi-lock, each against the reentrant lock it is made of:
/// uncontended lock+unlock, interleaved, medians of the rounds.
fn composites(plan: &Plan, client: &LockClient) -> Result<Vec<(&'static str, String)>> {
    let reentrant = client.lock("bench:composite-reentrant");
    let once = client.non_reentrant_lock("bench:composite-once");
    let names = ["bench:multi-a", "bench:multi-b", "bench:multi-c"];
    let multi = client.multi_lock(names);
    let singles: Vec<_> = names
        .iter()
        .map(|name| client.lock(format!("{name}-1")))
        .collect();
    let mut samples: [Vec<Duration>; 4] = Default::default();
    for _ in 0..plan.rounds {
        samples[0].push(mean_of(plan.pairs, || {
            reentrant
                .lock()
                .and_then(|g| g.unlock())
                .expect("reentrant");
        }));
        samples[1].push(mean_of(plan.pairs, || {
            once.lock().and_then(|g| g.unlock()).expect("non-reentrant");
        }));
        samples[2].push(mean_of(plan.pairs, || {
            multi.lock().and_then(|g| g.unlock()).expect("multi-lock");
        }));
        samples[3].push(mean_of(plan.pairs, || {
            let guards: Vec<_> = singles.iter().map(|l| l.lock().expect("single")).collect();
            guards
                .into_iter()
                .rev()
                .for_each(|g| g.unlock().expect("single"));
        }));
    }
    let [reentrant, once, multi, singles] = samples.map(|mut s| percentile(&mut s, 50));
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    Ok(vec![
        (
            "non-reentrant lock",
            format!(
                "uncontended lock+unlock: {} µs = {:.2} × the reentrant lock's {} µs",
                micros(once),
                ratio(once, reentrant),
                micros(reentrant)
            ),
        ),
        (
            "multi-lock",
            format!(
                "3 locks, uncontended lock+unlock: {} µs = {:.2} × the same three locks taken one by one and released ({} µs), {:.2} × one reentrant pair",
                micros(multi),
                ratio(multi, singles),
                micros(singles),
                ratio(multi, reentrant)
            ),
        ),
    ])
}

/// The counting semaphore's uncontended acquire+release pairs per second, against its own
/// two scripts sent raw.
fn counting(
    plan: &Plan,
    client: &LockClient,
    raw: &mut redis::Connection,
) -> Result<(&'static str, String)> {
    let semaphore = client.counting_semaphore("bench:counting");
    semaphore.try_set_permits(1)?;
    let _: () = redis::cmd("SET")
        .arg("bench:counting-raw")
        .arg(1)
        .query(raw)
        .expect("permits");
    let (mut ours, mut raws, mut request) = (Vec::new(), Vec::new(), 0u64);
    for _ in 0..plan.rounds {
        ours.push(mean_of(plan.pairs, || {
            semaphore
                .acquire()
                .and_then(|p| p.release())
                .expect("counting semaphore");
        }));
        raws.push(mean_of(plan.pairs, || {
            request += 1;
            send_pair(raw, RawKind::Counting, "bench:counting-raw", request);
        }));
    }
    let (ours, raws) = (percentile(&mut ours, 50), percentile(&mut raws, 50));
    Ok((
        "counting semaphore",
        format!(
            "uncontended acquire+release pairs/s: {:.0}, its two scripts sent raw {:.0} ({:.2} ×)",
            1.0 / ours.as_secs_f64(),
            1.0 / raws.as_secs_f64(),
            ours.as_secs_f64() / raws.as_secs_f64()
        ),
    ))
}

/// A count-down latch's uncontended round (set a count of 1, count it down, wait on the
/// open latch: three scripts) against the same three steps as plain commands on one raw
/// connection (`SET`, `DECR`, `GET`).
fn latch(plan: &Plan, url: &str, client: &LockClient) -> Result<String> {
    let latch = client.count_down_latch("bench:latch");
    let mut raw = redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .expect("raw connection");
    let mut samples: [Vec<Duration>; 2] = Default::default();
    for _ in 0..plan.rounds {
        samples[0].push(mean_of(plan.pairs, || {
            latch.try_set_count(1).expect("set");
            latch.count_down().expect("count down");
            latch.wait().expect("wait");
        }));
        samples[1].push(mean_of(plan.pairs, || {
            let () = redis::cmd("SET")
                .arg("bench:latch-raw")
                .arg(1)
                .query(&mut raw)
                .expect("SET");
            let _: i64 = redis::cmd("DECR")
                .arg("bench:latch-raw")
                .query(&mut raw)
                .expect("DECR");
            let _: Option<i64> = redis::cmd("GET")
                .arg("bench:latch-raw")
                .query(&mut raw)
                .expect("GET");
        }));
    }
    let [ours, plain] = samples.map(|mut s| percentile(&mut s, 50));
    Ok(format!(
        "set + count_down + wait rounds/s: {:.0} ({} µs), against SET + DECR + GET sent raw {:.0} ({} µs): {:.2}×",
        per_sec(ours),
        micros(ours),
        per_sec(plain),
        micros(plain),
        ours.as_secs_f64() / plain.as_secs_f64()
    ))
}

/// The microseconds Redis has spent in EVALSHA, and how many it ran (`INFO commandstats`).
fn script_time(url: &str) -> (u64, u64) {
    let mut conn = redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .expect("raw connection");
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut conn)
        .expect("info");
    let line = info
        .lines()
        .find(|line| line.starts_with("cmdstat_evalsha:"))
        .unwrap_or_default();
    let field = |name: &str| {
        line.split([':', ','])
            .find_map(|field| field.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
            .unwrap_or(0)
    };
    (field("usec"), field("calls"))
}

/// `n` locks held at once by one thread for three leases: all still held, renewals
/// without error, and the resident memory each held lock adds. A 10 s lease asks for 3,000
/// renewals a second at 10,000 locks; a 3 s lease (10,000 a second) saturates a 2-core
/// machine running Redis too, and renewals then time out waiting for a pooled connection.
/// How the cost grows: the hand-off along a long fair queue, many waiters on as many
/// locks, and many locks held at once.
fn scale(plan: &Plan, url: &str) -> Result<Vec<(&'static str, String)>> {
    let mut rows = Vec::new();
    let mut per_handoff = Vec::new();
    for &n in plan.queues {
        // Enough rounds for a thousand hand-offs or so at each length.
        let rounds = (1_000 / n).clamp(1, 10);
        let mut samples = Vec::new();
        let mut errors = 0;
        for round in 0..rounds {
            let (took, failed) = fair_queue(url, &format!("bench:queue:{n}:{round}"), n)?;
            samples.push(took / n as u32);
            errors += failed;
        }
        let p50 = percentile(&mut samples, 50);
        per_handoff.push(p50);
        rows.push((
            "fair queue",
            format!(
                "{n} threads queued on one fair lock, from the holder's release until all have taken it once: {} µs per hand-off (median of {rounds}; {:.2} × the {}-waiter row), {errors} errors",
                micros(p50),
                p50.as_secs_f64() / per_handoff[0].as_secs_f64(),
                plan.queues[0],
            ),
        ));
    }
    rows.push(("many waiters", many_waiters(url, plan.waiters)?));
    for &n in plan.held {
        rows.push(("many held", many_held(url, n)?));
    }
    Ok(rows)
}

/// `n` threads of one client (every setting at its default) queue on one fair lock; the
/// time from the holder's release until the last of them has taken it, and how many failed.
fn fair_queue(url: &str, name: &str, n: usize) -> Result<(Duration, usize)> {
    let client = LockClient::open(url)?;
    let mut raw =
        (redis::Client::open(url).and_then(|c| c.get_connection())).expect("a connection");
    let queue = format!("redisson_lock_queue:{{{name}}}");
    let guard = client.fair_lock(name).lock()?;
    let last = std::sync::Mutex::new(None);
    let failed = std::sync::atomic::AtomicUsize::new(0);
    let released = std::thread::scope(|scope| {
        for _ in 0..n {
            scope.spawn(|| {
                match client
                    .fair_lock(name)
                    .try_lock_for(Duration::from_secs(120))
                {
                    Ok(Some(guard)) => {
                        latest(&last, Instant::now());
                        drop(guard);
                    }
                    _ => _ = failed.fetch_add(1, Ordering::Relaxed),
                }
            });
        }
        wait_for("the queue", || {
            redis::cmd("LLEN").arg(&queue).query::<usize>(&mut raw) == Ok(n)
        });
        let released = Instant::now();
        drop(guard);
        released
    });
    let last = last.into_inner().unwrap().unwrap_or(released);
    Ok((last - released, failed.into_inner()))
}

/// `n` threads of one client each wait on a lock of its own, all held by another client;
/// the time from the holder's releases until every waiter has its lock, and the
/// connections the waiting client's notifications used.
fn many_waiters(url: &str, n: usize) -> Result<String> {
    let holder = LockClient::open(url)?;
    let waiting = LockClient::builder(url)
        .client_name("bench-waiters")
        .build()?;
    let mut raw =
        (redis::Client::open(url).and_then(|c| c.get_connection())).expect("a connection");
    let guards: Vec<_> = (0..n)
        .map(|i| holder.lock(format!("bench:waiters:{i}")).lock())
        .collect::<Result<_>>()?;
    let last = std::sync::Mutex::new(None);
    let failed = std::sync::atomic::AtomicUsize::new(0);
    let (released, subscribers) = std::thread::scope(|scope| {
        for i in 0..n {
            let (waiting, last, failed) = (&waiting, &last, &failed);
            scope.spawn(move || {
                let lock = waiting.lock(format!("bench:waiters:{i}"));
                match lock.try_lock_for(Duration::from_secs(120)) {
                    Ok(Some(guard)) => {
                        latest(last, Instant::now());
                        drop(guard);
                    }
                    _ => _ = failed.fetch_add(1, Ordering::Relaxed),
                }
            });
        }
        wait_for("every waiter's subscription", || {
            let numsub: Vec<(String, usize)> = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(
                    (0..n)
                        .map(|i| format!("redisson_lock__channel:{{bench:waiters:{i}}}"))
                        .collect::<Vec<_>>(),
                )
                .query(&mut raw)
                .unwrap_or_default();
            numsub.iter().all(|(_, count)| *count > 0) && numsub.len() == n
        });
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query(&mut raw)
            .unwrap_or_default();
        let subscribers = list
            .lines()
            .filter(|line| {
                line.contains("name=redmutex-notify:") && line.contains(":bench-waiters ")
            })
            .filter(|line| {
                (line.split(' ')).any(|field| {
                    field
                        .strip_prefix("sub=")
                        .or_else(|| field.strip_prefix("ssub="))
                        .is_some_and(|n| n != "0")
                })
            })
            .count();
        let released = Instant::now();
        drop(guards);
        (released, subscribers)
    });
    let took = last.into_inner().unwrap().unwrap_or(released) - released;
    Ok(format!(
        "{n} threads each waiting on a lock of its own, held by another client: all woken and holding {} ms after the releases began, {} errors; the holder's {n} releases took part of it; the waiting client's connections subscribed: {subscribers}",
        took.as_millis(),
        failed.into_inner()
    ))
}

/// Keeps the later of `at` and what `last` holds.
fn latest(last: &std::sync::Mutex<Option<Instant>>, at: Instant) {
    let mut last = last.lock().unwrap();
    *last = Some(last.map_or(at, |t| t.max(at)));
}

/// Threads of this process, from /proc (Linux).
fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    (status.lines())
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

fn many_held(url: &str, n: usize) -> Result<String> {
    let lease = Duration::from_secs(10);
    let client = LockClient::builder(url)
        .lease(lease)
        .pool_size(16)
        .build()?;
    let before = resident_bytes();
    let guards: Vec<_> = (0..n)
        .map(|i| client.lock(format!("bench:held:{i}")).lock())
        .collect::<Result<_>>()?;
    // The least lease left each key showed, in scans of every key's PTTL through three
    // leases: the lease less that is the longest it went unrenewed, as far as seen.
    let mut raw =
        (redis::Client::open(url).and_then(|c| c.get_connection())).expect("a connection");
    let mut least = vec![i64::MAX; n];
    let end = Instant::now() + 3 * lease;
    while Instant::now() < end {
        let mut pipe = redis::pipe();
        for i in 0..n {
            pipe.cmd("PTTL").arg(format!("bench:held:{i}"));
        }
        let ttls: Vec<i64> = pipe.query(&mut raw).expect("PTTL");
        for (least, ttl) in least.iter_mut().zip(ttls) {
            *least = (*least).min(ttl);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut unrenewed: Vec<Duration> = (least.iter())
        .map(|&ttl| lease.saturating_sub(Duration::from_millis(ttl.max(0) as u64)))
        .collect();
    let unrenewed = percentile(&mut unrenewed, 99);
    let threads = threads();
    let per_lock = resident_bytes().saturating_sub(before) / n as u64;
    let lost = guards.iter().filter(|g| g.is_lost()).count();
    let still_held = guards
        .iter()
        .filter(|g| g.lock().is_held_by_current_thread().unwrap_or(false))
        .count();
    let stats = client.stats();
    drop(guards);
    Ok(format!(
        "{n} locks for 3 leases of {lease:?}: {still_held} still held, {lost} lost, {} renewals, {} renewal errors, {:.1} KiB resident per held lock, {threads} threads in the process; longest a key went unrenewed, p99 over keys: {} ms (renewals due every {} ms)",
        stats.renewals,
        stats.renewal_failures,
        per_lock as f64 / 1024.0,
        unrenewed.as_millis(),
        (lease / 3).as_millis(),
    ))
}

/// Lock+unlock pairs on five throwaway servers against one of them alone, interleaved.
fn redlock(plan: &Plan) -> Result<String> {
    let servers: Vec<_> = (0..5).map(|_| Server::start()).collect();
    let urls: Vec<String> = servers.iter().map(Server::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let redlock = LockClient::redlock(&urls).build()?;
    let five = redlock.lock("bench:redlock");
    let five_token = redlock.token_lock("bench:redlock-token");
    let one = LockClient::open(urls[0])?.lock("bench:redlock-single");
    let mut raw: Vec<redis::Connection> = urls
        .iter()
        .map(|url| {
            redis::Client::open(*url)
                .and_then(|c| c.get_connection())
                .expect("raw connection")
        })
        .collect();
    let noop = Script::new("return nil");
    let () = noop.invoke(&mut raw[0]).expect("load the no-op");
    for conn in &mut raw[1..] {
        let () = noop.invoke(conn).expect("load the no-op");
    }
    let packed = redis::cmd("EVALSHA")
        .arg(noop.get_hash())
        .arg(0)
        .get_packed_command();
    // Two rounds of one no-op script on every node, each sent to all before any is read.
    let fan_out = |raw: &mut [redis::Connection]| {
        for _ in 0..2 {
            for conn in raw.iter_mut() {
                conn.send_packed_command(&packed).expect("send");
            }
            for conn in raw.iter_mut() {
                let _ = conn.recv_response().expect("reply");
            }
        }
    };
    // The reentrant lock's own acquire and release scripts, fanned out the same way.
    let (acquire, release) = (
        Script::new(include_str!("../src/kinds/reentrant/acquire.lua")),
        Script::new(include_str!("../src/kinds/reentrant/release.lua")),
    );
    for conn in raw.iter_mut() {
        for script in [&acquire, &release] {
            let _: String = script.prepare_invoke().load(conn).expect("load");
        }
    }
    let mut call = 0u64;
    let mut scripts_fan_out = |raw: &mut [redis::Connection]| {
        call += 1;
        let take = redis::cmd("EVALSHA")
            .arg(acquire.get_hash())
            .arg(1)
            .arg("bench:redlock-raw")
            .arg(30_000)
            .arg("bench:1")
            .arg(0)
            .get_packed_command();
        let give = redis::cmd("EVALSHA")
            .arg(release.get_hash())
            .arg(3)
            .arg("bench:redlock-raw")
            .arg("redisson_lock__channel:{bench:redlock-raw}")
            .arg(format!(
                "redisson_unlock_latch:{{bench:redlock-raw}}:{call:032x}"
            ))
            .arg(0)
            .arg(30_000)
            .arg("bench:1")
            .arg(1)
            .arg(8_000)
            .get_packed_command();
        for packed in [take, give] {
            for conn in raw.iter_mut() {
                conn.send_packed_command(&packed).expect("send");
            }
            for conn in raw.iter_mut() {
                let _ = conn.recv_response().expect("reply");
            }
        }
    };
    let (mut five_pairs, mut one_pairs, mut bare) = (Vec::new(), Vec::new(), Vec::new());
    let (mut token_pairs, mut raw_pairs) = (Vec::new(), Vec::new());
    for _ in 0..plan.rounds {
        one_pairs.push(mean_of(plan.pairs, || {
            one.lock().and_then(|g| g.unlock()).expect("one node");
        }));
        five_pairs.push(mean_of(plan.pairs, || {
            five.lock().and_then(|g| g.unlock()).expect("five nodes");
        }));
        bare.push(mean_of(plan.pairs, || fan_out(&mut raw)));
        raw_pairs.push(mean_of(plan.pairs, || scripts_fan_out(&mut raw)));
        token_pairs.push(mean_of(plan.pairs, || {
            five_token
                .lock()
                .and_then(|g| g.unlock())
                .expect("five nodes, token lock");
        }));
    }
    let (five, one, bare, token, scripts) = (
        percentile(&mut five_pairs, 50),
        percentile(&mut one_pairs, 50),
        percentile(&mut bare, 50),
        percentile(&mut token_pairs, 50),
        percentile(&mut raw_pairs, 50),
    );
    Ok(format!(
        "lock+unlock on 5 nodes: {} µs = {:.2} × a bare fan-out of two no-op scripts to the same 5 ({} µs), {:.2} × one node ({} µs); its own two scripts fanned out raw: {:.2} × the bare fan-out; token lock on 5 nodes: {:.2} × the bare fan-out",
        micros(five),
        five.as_secs_f64() / bare.as_secs_f64(),
        micros(bare),
        five.as_secs_f64() / one.as_secs_f64(),
        micros(one),
        scripts.as_secs_f64() / bare.as_secs_f64(),
        token.as_secs_f64() / bare.as_secs_f64(),
    ))
}

/// Lock+unlock pairs through Sentinel against a client of the same primary's URL,
/// interleaved.
fn sentinel(plan: &Plan) -> Result<String> {
    let primary = Server::start();
    let sentinel = Server::start_with(|port, dir| {
        let conf = dir.join("sentinel.conf");
        let monitor = format!("sentinel monitor bench 127.0.0.1 {} 1\n", primary.port);
        std::fs::write(&conf, monitor).expect("write sentinel.conf");
        let conf = conf.display().to_string();
        vec![conf, "--sentinel".into(), "--port".into(), port.to_string()]
    });
    let via = LockClient::sentinel(&[&sentinel.url()], "bench")
        .build()?
        .lock("bench:sentinel");
    let direct = LockClient::open(&primary.url())?.lock("bench:direct");
    let (mut via_pairs, mut direct_pairs) = (Vec::new(), Vec::new());
    for _ in 0..plan.rounds {
        direct_pairs.push(mean_of(plan.pairs, || {
            direct.lock().and_then(|g| g.unlock()).expect("direct");
        }));
        via_pairs.push(mean_of(plan.pairs, || {
            via.lock()
                .and_then(|g| g.unlock())
                .expect("through Sentinel");
        }));
    }
    let (via, direct) = (
        percentile(&mut via_pairs, 50),
        percentile(&mut direct_pairs, 50),
    );
    Ok(format!(
        "lock+unlock through Sentinel: {} µs; straight to the same primary: {} µs; ratio {:.2}",
        micros(via),
        micros(direct),
        via.as_secs_f64() / direct.as_secs_f64()
    ))
}

/// An acquisition that waits for one replica (`min_replica_acks(1, ..)`) against one that
/// does not, both in round trips of a no-op script on the same primary, interleaved.
fn replica_acks(plan: &Plan) -> Result<String> {
    let (primary, _replica) = primary_with_replica();
    let mut raw = primary.conn();
    let acked = LockClient::builder(&primary.url())
        .min_replica_acks(1, Duration::from_secs(1))
        .build()?
        .lock("bench:acked");
    let plain = LockClient::open(&primary.url())?.lock("bench:plain");
    let noop = Script::new("return nil");
    let (mut floor, mut with, mut without) = (Vec::new(), Vec::new(), Vec::new());
    let acquisition = |lock: &Lock| {
        let mut took = Duration::ZERO;
        for _ in 0..plan.pairs {
            let started = Instant::now();
            let guard = lock.lock().expect("acquire");
            took += started.elapsed();
            guard.unlock().expect("release");
        }
        took / plan.pairs
    };
    for _ in 0..plan.rounds {
        floor.push(mean_of(plan.pairs, || {
            let () = noop.invoke(&mut raw).expect("evalsha");
        }));
        without.push(acquisition(&plain));
        with.push(acquisition(&acked));
    }
    let floor = percentile(&mut floor, 50).as_secs_f64();
    let (with, without) = (
        percentile(&mut with, 50).as_secs_f64(),
        percentile(&mut without, 50).as_secs_f64(),
    );
    Ok(format!(
        "acquisition with WAIT 1 (one replica): {:.1} round trips; without: {:.1} (round trip: {:.0} µs)",
        with / floor,
        without / floor,
        floor * 1e6
    ))
}

/// A standalone primary with one replica online.
fn primary_with_replica() -> (Server, Server) {
    let primary = Server::start();
    let replica = Server::start();
    let () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(primary.port)
        .query(&mut replica.conn())
        .expect("replicaof");
    let mut raw = primary.conn();
    wait_for("the replica to come online", || {
        info(&mut raw, "replication").contains("state=online")
    });
    (primary, replica)
}

/// Redis Cluster (three primaries with a replica each), interleaved: lock+unlock against a
/// standalone primary with a replica and against its own scripts sent raw to the owning
/// primary; hand-off between threads; 64 threads over 1,000 names against the same on the
/// standalone primary.
fn cluster(plan: &Plan) -> Result<Vec<(&'static str, String)>> {
    let cluster = start_cluster();
    let client = LockClient::cluster(&[&cluster[0].url()]).build()?;
    let (primary, _replica) = primary_with_replica();
    let single = LockClient::open(&primary.url())?;
    let name = "bench:cluster";
    let (on_cluster, on_single) = (client.lock(name), single.lock(name));
    // The primary that serves the name: the others answer MOVED.
    let mut raw = (cluster.iter().map(Server::conn))
        .find_map(|mut conn| {
            let found: redis::RedisResult<bool> = redis::cmd("EXISTS").arg(name).query(&mut conn);
            found.is_ok().then_some(conn)
        })
        .expect("a primary that serves the name");
    let noop = Script::new("return nil");
    // Every primary is Redis 7: the client publishes sharded, so the raw release does too.
    bench_hooks::load_scripts(&mut raw).expect("load scripts");
    let (mut floor, mut scripts, mut pairs, mut singles) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut call = 0u64;
    let (mut raw_cpu, mut lib_cpu) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..plan.rounds {
        floor.push(mean_of(2 * plan.pairs, || {
            let () = noop.invoke(&mut raw).expect("evalsha");
        }));
        let started = cpu_time();
        scripts.push(mean_of(plan.pairs, || {
            call += 1;
            raw_pair(&mut raw, "{bench:cluster}:raw", call, true);
        }));
        let between = cpu_time();
        raw_cpu += between - started;
        pairs.push(mean_of(plan.pairs, || {
            on_cluster
                .lock()
                .and_then(|g| g.unlock())
                .expect("lock+unlock");
        }));
        lib_cpu += cpu_time() - between;
        singles.push(mean_of(plan.pairs, || {
            on_single
                .lock()
                .and_then(|g| g.unlock())
                .expect("lock+unlock");
        }));
    }
    // Each round's ratio, then their median: drift between rounds cancels out.
    let median_ratio = |a: &[Duration], b: &[Duration]| {
        let mut ratios: Vec<f64> = (a.iter().zip(b))
            .map(|(a, b)| a.as_secs_f64() / b.as_secs_f64())
            .collect();
        ratios.sort_by(f64::total_cmp);
        ratios[ratios.len() / 2]
    };
    let (to_single, to_raw) = (
        median_ratio(&pairs, &singles),
        median_ratio(&pairs, &scripts),
    );
    let floor = percentile(&mut floor, 50);
    let (pair, single_pair) = (percentile(&mut pairs, 50), percentile(&mut singles, 50));
    let mut rows = vec![(
        "cluster",
        format!(
            "lock+unlock: {} µs; median ratio of a round to a standalone primary with a replica ({} µs): {to_single:.2}; to its own scripts sent raw to the owning primary: {to_raw:.2}; client CPU per pair: {:.1} µs, raw {:.1} µs",
            micros(pair),
            micros(single_pair),
            lib_cpu.as_secs_f64() * 1e6 / f64::from(plan.pairs * plan.rounds as u32),
            raw_cpu.as_secs_f64() * 1e6 / f64::from(plan.pairs * plan.rounds as u32),
        ),
    )];
    let rt = |d: Duration| d.as_secs_f64() / floor.as_secs_f64();
    let mut handoffs = interleaved(plan, vec![("thread", handoff_thread(client.lock(name)))])?;
    let samples = &mut handoffs[0].1;
    let (p50, p99) = (percentile(samples, 50), percentile(samples, 99));
    rows.push((
        "cluster hand-off",
        format!(
            "another thread: p50 {} µs = {:.1} round trips; p99 {} µs = {:.1} round trips",
            micros(p50),
            rt(p50),
            micros(p99),
            rt(p99)
        ),
    ));
    let spread = |client: &LockClient| spread_pairs(plan, client, 64, 1_000);
    let (on_cluster, on_single) = (spread(&client), spread(&single));
    rows.push((
        "cluster spread",
        format!(
            "64 threads over 1,000 names: {on_cluster:.0} pairs/s = {:.2} × the same on a standalone primary ({on_single:.0} pairs/s)",
            on_cluster / on_single
        ),
    ));
    Ok(rows)
}

/// Lock+unlock pairs per second of `threads` threads, each taking names of `names` in turn
/// from its own starting point, for the contention span.
fn spread_pairs(plan: &Plan, client: &LockClient, threads: usize, names: usize) -> f64 {
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (client, stop) = (client.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut done = 0u64;
                let mut i = t * names / threads;
                while !stop.load(Ordering::Relaxed) {
                    let lock = client.lock(format!("bench:spread:{}", i % names));
                    lock.lock().and_then(|g| g.unlock()).expect("lock+unlock");
                    done += 1;
                    i += 1;
                }
                done
            })
        })
        .collect();
    std::thread::sleep(plan.contention);
    stop.store(true, Ordering::Relaxed);
    let total: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    total as f64 / plan.contention.as_secs_f64()
}

/// The child side of the process rows.
fn worker(args: &[String]) -> Result<()> {
    let client = LockClient::open(&args[1])?;
    match args[0].as_str() {
        "handoff" => {
            let lock = client.lock("bench:handoff-process");
            let stdout = std::io::stdout();
            for line in std::io::stdin().lock().lines() {
                line.unwrap();
                let guard = lock.lock()?;
                let acquired = wall_nanos();
                writeln!(stdout.lock(), "{acquired}").unwrap();
                guard.unlock()?;
            }
        }
        "contend" => {
            let span = Duration::from_millis(args[2].parse().unwrap());
            let lock = client.lock("bench:contended");
            let deadline = Instant::now() + span;
            let mut count = 0u64;
            while Instant::now() < deadline {
                lock.lock()?.unlock()?;
                count += 1;
            }
            println!("{count}");
        }
        other => panic!("unknown worker {other}"),
    }
    Ok(())
}

fn spawn_worker(args: &[&str]) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .arg("worker")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

fn mean_of(n: u32, mut f: impl FnMut()) -> Duration {
    let started = Instant::now();
    for _ in 0..n {
        f();
    }
    started.elapsed() / n
}

fn percentile(samples: &mut [Duration], p: usize) -> Duration {
    samples.sort();
    samples[(samples.len() * p / 100).min(samples.len() - 1)]
}

fn per_sec(d: Duration) -> f64 {
    1.0 / d.as_secs_f64()
}

fn micros(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1e6)
}

fn wall_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// Resident set size of this process, from /proc (Linux).
/// CPU time this process (every thread of it) has used.
fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Your Redis at `REDIS_URL`, or else a throwaway server.
fn redis_url() -> (String, Option<Server>) {
    match std::env::var("REDIS_URL") {
        Ok(url) => (url, None),
        Err(_) => {
            let server = Server::start();
            (server.url(), Some(server))
        }
    }
}

/// A throwaway `redis-server` on a free port, with a directory of its own for what it
/// writes; stopped, and its directory removed, when dropped.
struct Server {
    port: u16,
    dir: PathBuf,
    /// The shell that stops the server once this process closes its stdin, even if it
    /// crashed.
    shell: Child,
}

impl Server {
    /// A plain server.
    fn start() -> Server {
        Server::start_with(|port, _| vec!["--port".into(), port.to_string()])
    }

    /// A server started with the arguments `args` makes of its port and its directory.
    fn start_with(args: impl FnOnce(u16, &Path) -> Vec<String>) -> Server {
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("redmutex-bench-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory for the server");
        let script = "redis-server \"$@\" --bind 127.0.0.1 --save '' --appendonly no >/dev/null & \
                      read _; kill $!; wait";
        let shell = Command::new("sh")
            .args(["-c", script, "redis-server"])
            .args(args(port, &dir))
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::piped())
            .spawn()
            .expect("sh and redis-server on the PATH, or REDIS_URL set");
        let server = Server { port, dir, shell };
        wait_for("redis-server to listen", || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        server
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|client| client.get_connection())
            .expect("a connection to the server")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.shell.stdin.take());
        let _ = self.shell.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Three primaries with a replica each, formed by `redis-cli --cluster create`.
fn start_cluster() -> Vec<Server> {
    let node = |port, _: &Path| {
        let args = format!(
            "--port {port} --cluster-enabled yes --cluster-port {}",
            free_port()
        );
        args.split(' ').map(String::from).collect()
    };
    let nodes: Vec<Server> = (0..6).map(|_| Server::start_with(node)).collect();
    let created = Command::new("redis-cli")
        .args(["--cluster", "create"])
        .args(nodes.iter().map(|node| format!("127.0.0.1:{}", node.port)))
        .args(["--cluster-replicas", "1", "--cluster-yes"])
        .stdout(Stdio::null())
        .status()
        .expect("redis-cli on the PATH");
    assert!(created.success(), "redis-cli --cluster create failed");
    let mut conns: Vec<_> = nodes.iter().map(Server::conn).collect();
    wait_for("the cluster to be ok on every node", || {
        conns.iter_mut().all(|conn| {
            let info: String = redis::cmd("CLUSTER").arg("INFO").query(conn).unwrap();
            info.contains("cluster_state:ok")
        })
    });
    nodes
}

/// A server's certificate for 127.0.0.1, signed by a CA of its own, written to `dir` as
/// `server.crt` and `server.key`; returns the CA (PEM).
#[cfg(feature = "tls")]
fn tls_files(dir: &Path) -> Vec<u8> {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    let cert = params.signed_by(&key, &ca).unwrap();
    std::fs::write(dir.join("server.crt"), cert.pem()).unwrap();
    std::fs::write(dir.join("server.key"), key.serialize_pem()).unwrap();
    ca.pem().into_bytes()
}

/// `INFO section` of a server.
fn info(conn: &mut redis::Connection, section: &str) -> String {
    redis::cmd("INFO").arg(section).query(conn).expect("INFO")
}

/// A port the kernel just handed out and took back.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// Polls `done` until it holds; panics after 30 s.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Beside Redisson 4.7.0 (`tests/peers/java/Bench.java`, in a JVM of its own, timed inside
/// it) on the same server, each measure taken in turns, Redisson's then ours (then ours
/// first in the next turn), and the median of each turn's ratio: uncontended lock+unlock
/// pairs, 4 threads of GET + SET sections, the hand-off to another thread, 8 readers. Then,
/// untimed, the commands each side sends per unit of work (from `MONITOR`), and the CPU
/// time and context switches of each process per uncontended pair and per hand-off.
fn vs_redisson(plan: &Plan, url: &str) -> Result<Vec<(&'static str, String)>> {
    let client = LockClient::open(url)?;
    let mut java = JavaBench::start(url, plan.pairs * 10);
    let mut rows = Vec::new();
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let range = |v: &[f64]| {
        let (min, max) = (
            v.iter().copied().fold(f64::INFINITY, f64::min),
            v.iter().copied().fold(0.0, f64::max),
        );
        format!("{min:.2}–{max:.2}")
    };
    // Each turn's pair of rates, Redisson's measured first in even turns, ours in odd ones.
    let turns = |n: usize,
                 java_rate: &mut dyn FnMut(usize) -> f64,
                 ours_rate: &mut dyn FnMut(usize) -> f64| {
        let (mut theirs, mut ours) = (Vec::new(), Vec::new());
        for turn in 0..n {
            if turn % 2 == 0 {
                theirs.push(java_rate(turn));
                ours.push(ours_rate(turn));
            } else {
                ours.push(ours_rate(turn));
                theirs.push(java_rate(turn));
            }
        }
        (ours, theirs)
    };

    let lock = client.lock("bench:vs-uncontended");
    let (ours, theirs) = turns(
        plan.rounds,
        &mut |_| {
            let nanos: u64 = java
                .call(&format!("uncontended {}", plan.pairs))
                .parse()
                .unwrap();
            f64::from(plan.pairs) * 1e9 / nanos as f64
        },
        &mut |_| {
            per_sec(mean_of(plan.pairs, || {
                lock.lock().and_then(|g| g.unlock()).expect("lock+unlock");
            }))
        },
    );
    let ratios: Vec<f64> = ours.iter().zip(&theirs).map(|(o, t)| o / t).collect();
    rows.push((
        "vs Redisson",
        format!(
            "uncontended: ours {:.0} pairs/s, Redisson {:.0} pairs/s, ratio {:.2} (median of {} turns; range {})",
            median(ours.clone()),
            median(theirs.clone()),
            median(ratios.clone()),
            ratios.len(),
            range(&ratios)
        ),
    ));

    let (sections_turns, span) = (6, plan.contention / 2);
    let lock = client.lock("bench:vs-gs");
    let (ours, theirs) = turns(
        sections_turns,
        &mut |turn| {
            let line = format!(
                "sections 4 {} bench:vs-gs-counter:java:{turn}",
                span.as_millis()
            );
            let total: u64 = java.call(&line).parse().unwrap();
            total as f64 / span.as_secs_f64()
        },
        &mut |turn| get_set_sections(url, &lock, 4, span, turn),
    );
    let ratios: Vec<f64> = ours.iter().zip(&theirs).map(|(o, t)| o / t).collect();
    rows.push((
        "vs Redisson",
        format!(
            "4 threads of GET + SET under one lock: ours {:.0} sections/s, Redisson {:.0} sections/s, ratio {:.2} (median of {} turns; range {})",
            median(ours),
            median(theirs),
            median(ratios.clone()),
            ratios.len(),
            range(&ratios)
        ),
    ));

    // Hand-offs in batches, a batch of each side in turn; ours after ten of warm-up.
    let batches = 10;
    let batch = (plan.handoffs / batches).max(1);
    let mut sampler = handoff_thread(client.lock("bench:vs-handoff"));
    for _ in 0..10 {
        sampler()?;
    }
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for turn in 0..batches {
        let mut java_batch = |theirs: &mut Vec<Duration>| {
            let line = java.call(&format!("handoff {batch}"));
            theirs.extend(
                line.split(' ')
                    .map(|n| Duration::from_nanos(n.parse().unwrap())),
            );
        };
        if turn % 2 == 0 {
            java_batch(&mut theirs);
        }
        for _ in 0..batch {
            ours.push(sampler()?);
        }
        if turn % 2 == 1 {
            java_batch(&mut theirs);
        }
    }
    let (ours_p50, theirs_p50) = (percentile(&mut ours, 50), percentile(&mut theirs, 50));
    rows.push((
        "vs Redisson",
        format!(
            "hand-off to another thread of the same client (release sent → lock() returned): ours p50 {} µs, Redisson p50 {} µs, ratio {:.2} (Redisson's time / ours; p99 ours {} µs, Redisson {} µs; {} samples each)",
            micros(ours_p50),
            micros(theirs_p50),
            theirs_p50.as_secs_f64() / ours_p50.as_secs_f64(),
            micros(percentile(&mut ours, 99)),
            micros(percentile(&mut theirs, 99)),
            ours.len()
        ),
    ));

    let rw = client.read_write_lock("bench:vs-rw");
    let (ours, theirs) = turns(
        sections_turns,
        &mut |_| {
            let total: u64 = java
                .call(&format!("readers 8 {}", span.as_millis()))
                .parse()
                .unwrap();
            total as f64 / span.as_secs_f64()
        },
        &mut |_| {
            let total: u64 = fairness_counts(rw.read(), 8, span).iter().sum();
            total as f64 / span.as_secs_f64()
        },
    );
    let ratios: Vec<f64> = ours.iter().zip(&theirs).map(|(o, t)| o / t).collect();
    rows.push((
        "vs Redisson",
        format!(
            "8 readers: ours {:.0} read pairs/s, Redisson {:.0} read pairs/s, ratio {:.2} (median of {} turns; range {})",
            median(ours),
            median(theirs),
            median(ratios.clone()),
            ratios.len(),
            range(&ratios)
        ),
    ));

    // Untimed: what each side sends to the server per unit of work.
    let n = 200;
    let lock = client.lock("bench:vs-uncontended");
    let ours = monitored(url, || {
        for _ in 0..n {
            lock.lock().and_then(|g| g.unlock()).expect("lock+unlock");
        }
        n
    });
    let theirs = monitored(url, || {
        java.call(&format!("uncontended {n}"));
        n
    });
    rows.push((
        "vs Redisson",
        format!("commands per uncontended pair: ours {ours}; Redisson {theirs}"),
    ));
    // Untimed too: CPU time and thread switches of each process per uncontended pair.
    let n = 10 * plan.pairs;
    let ours = process_cost(std::process::id(), n, || {
        for _ in 0..n {
            lock.lock().and_then(|g| g.unlock()).expect("lock+unlock");
        }
    });
    let theirs = process_cost(java.child.id(), n, || {
        java.call(&format!("uncontended {n}"));
    });
    rows.push((
        "vs Redisson",
        format!("per uncontended pair, the client process: ours {ours}; Redisson's JVM {theirs}"),
    ));
    let span = Duration::from_millis(300);
    let lock = client.lock("bench:vs-gs");
    let ours = monitored(url, || {
        (get_set_sections(url, &lock, 4, span, 100) * span.as_secs_f64()).round() as u64
    });
    let theirs = monitored(url, || {
        java.call(&format!(
            "sections 4 {} bench:vs-gs-counter:java:100",
            span.as_millis()
        ))
        .parse()
        .unwrap()
    });
    rows.push((
        "vs Redisson",
        format!("commands per GET + SET section (4 threads): ours {ours}; Redisson {theirs}"),
    ));
    let ours = monitored(url, || {
        for _ in 0..20 {
            sampler().expect("hand-off");
        }
        20
    });
    let theirs = monitored(url, || {
        java.call("handoff 20");
        20
    });
    rows.push((
        "vs Redisson",
        format!(
            "commands per hand-off (both holders' lock+unlock): ours {ours}; Redisson {theirs}"
        ),
    ));
    let n = 100;
    let ours = process_cost(std::process::id(), n, || {
        for _ in 0..n {
            sampler().expect("hand-off");
        }
    });
    let theirs = process_cost(java.child.id(), n, || {
        java.call(&format!("handoff {n}"));
    });
    rows.push((
        "vs Redisson",
        format!("per hand-off (both holders' lock+unlock), the client process: ours {ours}; Redisson's JVM {theirs}"),
    ));
    let ours = monitored(url, || fairness_counts(rw.read(), 8, span).iter().sum());
    let theirs = monitored(url, || {
        java.call(&format!("readers 8 {}", span.as_millis()))
            .parse()
            .unwrap()
    });
    rows.push((
        "vs Redisson",
        format!("commands per read pair (8 threads): ours {ours}; Redisson {theirs}"),
    ));
    Ok(rows)
}

/// Runs `work`, which returns how many units it did, with `MONITOR` on; returns the
/// commands clients sent per unit, by name (those scripts ran inside them apart), and
/// how many connections sent them.
fn monitored(url: &str, work: impl FnOnce() -> u64) -> String {
    let addr = url.trim_start_matches("redis://").trim_end_matches('/');
    let mut stream = TcpStream::connect(addr).expect("a monitor connection");
    stream.write_all(b"MONITOR\r\n").unwrap();
    let mut lines = BufReader::new(stream.try_clone().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "+OK");
    let marker = format!("bench-monitor-end-{}", wall_nanos());
    let reader = std::thread::spawn({
        let marker = marker.clone();
        move || {
            let mut counts = std::collections::BTreeMap::<String, u64>::new();
            let mut clients = std::collections::BTreeSet::new();
            for line in lines {
                let line = line.unwrap();
                if line.contains(&marker) {
                    break;
                }
                // +1700000000.123456 [0 127.0.0.1:50000] "evalsha" "..." ...
                let Some((source, command)) = line
                    .split_once('[')
                    .and_then(|(_, rest)| rest.split_once("] \""))
                else {
                    continue;
                };
                let name = command.split('"').next().unwrap_or("").to_lowercase();
                if source.contains("lua") {
                    *counts.entry(format!("in scripts: {name}")).or_default() += 1;
                } else {
                    clients.insert(source.to_owned());
                    *counts.entry(name).or_default() += 1;
                }
            }
            (counts, clients.len())
        }
    });
    let units = work();
    let mut conn = redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .expect("raw connection");
    let _: String = redis::cmd("ECHO").arg(&marker).query(&mut conn).unwrap();
    let (counts, clients) = reader.join().unwrap();
    drop(stream);
    let units = units.max(1) as f64;
    let sent: u64 = (counts
        .iter()
        .filter(|(name, _)| !name.starts_with("in scripts")))
    .map(|(_, n)| n)
    .sum();
    let by_name: Vec<String> = counts
        .iter()
        .filter(|(name, _)| !name.starts_with("in scripts"))
        .map(|(name, n)| format!("{} {:.2}", name.to_uppercase(), *n as f64 / units))
        .collect();
    let scripted: u64 = (counts
        .iter()
        .filter(|(name, _)| name.starts_with("in scripts")))
    .map(|(_, n)| n)
    .sum();
    format!(
        "{:.2} sent ({}) on {clients} connection{}, {:.2} run inside scripts",
        sent as f64 / units,
        by_name.join(", "),
        if clients == 1 { "" } else { "s" },
        scripted as f64 / units
    )
}

/// The CPU time (user and system) and context switches of process `pid`, every thread of
/// it, per unit while `work` does `units`.
fn process_cost(pid: u32, units: u32, work: impl FnOnce()) -> String {
    let sample = || {
        let (mut ticks, mut switches) = (0u64, 0u64);
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("/proc");
        for task in tasks.flatten() {
            let path = task.path();
            let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
            // After the command's closing parenthesis: fields 3 on; utime and stime are 14, 15.
            let fields: Vec<&str> = stat
                .rsplit_once(')')
                .map_or("", |(_, f)| f)
                .split_whitespace()
                .collect();
            ticks += (fields
                .get(11)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0))
                + fields
                    .get(12)
                    .and_then(|f| f.parse::<u64>().ok())
                    .unwrap_or(0);
            let status = std::fs::read_to_string(path.join("status")).unwrap_or_default();
            switches += (status.lines())
                .filter(|line| line.contains("ctxt_switches"))
                .filter_map(|line| line.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>();
        }
        (ticks, switches)
    };
    let before = sample();
    work();
    let after = sample();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let units = f64::from(units);
    format!(
        "{:.0} µs CPU, {:.1} context switches",
        (after.0 - before.0) as f64 / hz * 1e6 / units,
        (after.1 - before.1) as f64 / units
    )
}

/// Redisson's side of [`vs_redisson`]: `tests/peers/java/Bench.java` in a JVM with its
/// default collector and full JIT, warmed up; it ends when this is dropped.
struct JavaBench {
    child: Child,
    to_child: Option<std::process::ChildStdin>,
    from_child: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl JavaBench {
    fn start(url: &str, warmup: u32) -> JavaBench {
        let peers = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers");
        // Installs Redisson and compiles the program unless they are there already.
        let log = peers.join(".install-java.log");
        let status = Command::new(peers.join("install"))
            .arg("java")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(&log).unwrap())
            .status()
            .expect("run tests/peers/install (needs a JDK 17+ and Maven)");
        assert!(
            status.success(),
            "tests/peers/install java failed; see {}",
            log.display()
        );
        let java = peers.join("java");
        let mut child = Command::new("java")
            .arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
            .arg("-cp")
            .arg(format!(
                "{}:{}/*",
                java.join("classes").display(),
                java.join("lib/4.7.0").display()
            ))
            .arg("Bench")
            .arg(url)
            .arg(warmup.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("java on the PATH");
        let to_child = child.stdin.take();
        let from_child = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut bench = JavaBench {
            child,
            to_child,
            from_child,
        };
        assert_eq!(bench.answer(), "ready");
        bench
    }

    fn call(&mut self, line: &str) -> String {
        writeln!(self.to_child.as_ref().unwrap(), "{line}").unwrap();
        self.answer()
    }

    fn answer(&mut self) -> String {
        let line = self
            .from_child
            .next()
            .expect("an answer from Bench.java")
            .unwrap();
        assert!(!line.starts_with("error"), "Bench.java: {line}");
        line
    }
}

impl Drop for JavaBench {
    fn drop(&mut self) {
        drop(self.to_child.take());
        let _ = self.child.wait();
    }
}
