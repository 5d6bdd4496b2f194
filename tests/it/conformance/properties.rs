//! The properties every kind is held to, each written once over an [`Entry`].

use std::sync::mpsc;
use std::time::{Duration, Instant};

use redmutex::{Cancel, Error, LockClient, LockKind};

use super::entries::Entry;
use crate::support::{self, Proxy, Server, eventually};

/// How long anything expected may take on a busy machine: far below the waits that would
/// mean a missed wake-up (30 s of a sleepy client) or a lease run out (the default 30 s).
const PATIENCE: Duration = Duration::from_secs(25);
/// The one name each property acts on; every property has a server of its own.
const NAME: &str = "conform";

/// What a property sees of the servers: commands run, and subscriptions.
pub struct Seen<'a> {
    /// Scripts run so far, on every server.
    pub calls: Box<dyn Fn() -> u64 + 'a>,
    /// Channels matching a pattern with a subscriber, on every server.
    pub channels: Box<dyn Fn(&str) -> usize + 'a>,
}

impl Seen<'_> {
    fn of(server: &Server) -> Seen<'_> {
        Seen {
            calls: Box::new(|| server.calls("evalsha")),
            channels: Box::new(|pattern: &str| server.channels(pattern)),
        }
    }

    /// What is seen before a waiter starts, for [`waiting`](Self::waiting): scripts run.
    fn mark(&self) -> u64 {
        (self.calls)()
    }

    /// Whether a waiter on `name` started after `mark` is waiting: it made an attempt, and
    /// a channel named after it has a subscriber (a waiter subscribes before it attempts);
    /// for a kind whose waiters do not subscribe, it attempted twice.
    fn waiting(&self, entry: &Entry, name: &str, calls: u64) -> bool {
        if entry.subscribes {
            (self.calls)() > calls && (self.channels)(&format!("*{name}*")) > 0
        } else {
            (self.calls)() >= calls + 2
        }
    }
}

/// Runs `wait` in a thread; its result, once it returns, as whether it took and gave back.
fn in_thread(
    wait: impl FnOnce() -> redmutex::Result<bool> + Send + 'static,
) -> mpsc::Receiver<redmutex::Result<bool>> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || sender.send(wait()).unwrap());
    receiver
}

/// Whether `client` takes `name` now or within [`PATIENCE`], giving it back at once.
fn taken_by(entry: &Entry, client: &LockClient, name: &str) -> bool {
    let rival = (entry.rival)(client, name);
    eventually(PATIENCE, || match rival.try_now().unwrap() {
        Some(held) => {
            held().unwrap();
            true
        }
        None => false,
    })
}

/// Taken, busy for another party in every acquisition form, and a waiter of another client
/// that would not try again for 30 s on its own gets it when it is given back: the release
/// wakes it.
pub fn quartet(entry: &Entry) {
    let server = Server::start();
    quartet_on(
        entry,
        &server.client(),
        &server.sleepy(),
        NAME,
        &Seen::of(&server),
    );
}

/// [`quartet`] with `ours` and `theirs` on any deployment that `seen` looks at.
pub fn quartet_on(entry: &Entry, ours: &LockClient, theirs: &LockClient, name: &str, seen: &Seen) {
    (entry.prepare)(ours, name);
    let held = entry.occupy(ours, name);
    let rival = (entry.make)(theirs, name, None);
    assert!(rival.try_now().unwrap().is_none(), "{}: busy", entry.name);
    let soon = Instant::now() + Duration::from_millis(50);
    assert!(rival.take_until(soon).unwrap().is_none(), "{}", entry.name);
    let mark = seen.mark();
    let waiter = in_thread(move || {
        let held = rival.take_until(Instant::now() + PATIENCE)?;
        Ok(held.map(|held| held().unwrap()).is_some())
    });
    assert!(
        eventually(PATIENCE, || seen.waiting(entry, name, mark)),
        "{}: never waited",
        entry.name
    );
    held().unwrap();
    let woken = waiter.recv_timeout(PATIENCE * 2).expect("the waiter hung");
    assert!(woken.unwrap(), "{}: the waiter was not woken", entry.name);
    assert!(taken_by(entry, ours, name), "{}: free again", entry.name);
}

/// On a server whose every reply comes 600 ms late, a wait of 100 ms on a busy name ends
/// within its deadline plus one response timeout (1 s), and leaves nothing taken. The bound
/// checked adds 1.9 s for a busy machine; a step that takes a fresh bound of its own, or a
/// give-back after the deadline, goes past it.
pub fn deadline(entry: &Entry) {
    let server = Server::start();
    let ours = server.client();
    (entry.prepare)(&ours, NAME);
    (entry.prepare)(&ours, "warm");
    let proxy = Proxy::start(server.port());
    let theirs = LockClient::builder(&proxy.url())
        .response_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    // Connections open and a subscription made: only the replies will be slow.
    let warm = entry.occupy(&ours, "warm");
    let rival = (entry.make)(&theirs, "warm", None);
    assert!(
        rival
            .take_until(Instant::now() + Duration::from_millis(200))
            .unwrap()
            .is_none()
    );
    warm().unwrap();

    let held = entry.occupy(&ours, NAME);
    proxy.delay_replies(Duration::from_millis(600));
    let started = Instant::now();
    let result = (entry.make)(&theirs, NAME, None).take_until(started + Duration::from_millis(100));
    let took = started.elapsed();
    proxy.delay_replies(Duration::ZERO);
    match result {
        Ok(None) => {}
        Ok(Some(_)) => panic!("{}: taken while busy", entry.name),
        Err(err) => assert!(!err.is_invalid_input(), "{}: {err}", entry.name),
    }
    assert!(
        took < Duration::from_secs(3),
        "{}: took {took:?}",
        entry.name
    );
    held().unwrap();
    let third = server.client();
    assert!(taken_by(entry, &third, NAME), "{}: left taken", entry.name);
}

/// A wait with no bound of its own ends on a cancel, with `is_cancelled`, and takes nothing.
pub fn cancel(entry: &Entry) {
    ends_waiting(
        entry,
        |_, stop| stop.cancel(),
        |err| err.is_cancelled() && !err.is_closed(),
    );
}

/// A wait with no bound of its own ends when its client is closed, with `is_closed`, and
/// takes nothing.
pub fn close(entry: &Entry) {
    ends_waiting(entry, |client, _| client.close(), |err| err.is_closed());
}

fn ends_waiting(
    entry: &Entry,
    end: impl FnOnce(&LockClient, &Cancel),
    expected: impl Fn(&redmutex::Error) -> bool,
) {
    let server = Server::start();
    let (ours, theirs) = (server.client(), server.sleepy());
    (entry.prepare)(&ours, NAME);
    let held = entry.occupy(&ours, NAME);
    let stop = Cancel::new();
    let rival = (entry.make)(&theirs, NAME, Some(&stop));
    let seen = Seen::of(&server);
    let mark = seen.mark();
    let waiter = in_thread(move || rival.take().map(|held| held().is_ok()));
    assert!(
        eventually(PATIENCE, || seen.waiting(entry, NAME, mark)),
        "{}: never waited",
        entry.name
    );
    end(&theirs, &stop);
    let ended = waiter.recv_timeout(PATIENCE).expect("the wait went on");
    let err = ended.map(|_| ()).expect_err("the wait took it");
    assert!(expected(&err), "{}: {err}", entry.name);
    assert_eq!(
        err.lock_name().map(|n| n.contains(NAME)),
        Some(true),
        "{}: {err}",
        entry.name
    );
    // Nothing taken: the holder still excludes a third party, and gives back alone.
    let third = server.client();
    assert!(
        (entry.rival)(&third, NAME).try_now().unwrap().is_none(),
        "{}",
        entry.name
    );
    held().unwrap();
    assert!(taken_by(entry, &third, NAME), "{}: left taken", entry.name);
}

/// The response timeout of the clients through a proxy.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(1);

/// A client through `proxy` with a short response timeout, its scripts loaded.
fn through(entry: &Entry, server: &Server, proxy: &Proxy) -> LockClient {
    let client = LockClient::builder(&proxy.url())
        .response_timeout(RESPONSE_TIMEOUT)
        .build()
        .unwrap();
    (entry.prepare)(&server.client(), "warm");
    if let Some(held) = (entry.make)(&client, "warm", None).try_now().unwrap() {
        held().unwrap();
    }
    client
}

/// An attempt whose reply is cut after it ran leaves nothing taken once the call returns
/// (what it may have taken is given back), and takes once: a third party then takes it,
/// and a fourth does not.
pub fn cut_attempt(entry: &Entry) {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let theirs = through(entry, &server, &proxy);
    (entry.prepare)(&server.client(), NAME);
    proxy.cut_on_reply_to(entry.attempt);
    let result = (entry.make)(&theirs, NAME, None).try_now();
    assert!(
        proxy.trap_sprung(),
        "{}: the attempt's reply was not cut",
        entry.name
    );
    if let Ok(Some(held)) = result {
        held().unwrap();
    }
    taken_once(entry, &server);
}

/// An attempt whose reply comes after the response timeout (it ran on the server at once)
/// leaves nothing taken once the call returns, and takes once, however late the reply.
pub fn late_attempt(entry: &Entry) {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let theirs = through(entry, &server, &proxy);
    (entry.prepare)(&server.client(), NAME);
    proxy.delay_reply_to(entry.attempt, RESPONSE_TIMEOUT * 5 / 2);
    let result = (entry.make)(&theirs, NAME, None).try_now();
    assert!(
        proxy.trap_sprung(),
        "{}: the attempt's reply was not held up",
        entry.name
    );
    if let Ok(Some(held)) = result {
        held().unwrap();
    }
    taken_once(entry, &server);
}

/// A release whose reply is cut after it ran counts once: the name is free for one third
/// party, not two (a semaphore's one permit is not given back twice).
pub fn cut_release(entry: &Entry) {
    let server = Server::start();
    let proxy = Proxy::start(server.port());
    let theirs = through(entry, &server, &proxy);
    (entry.prepare)(&server.client(), NAME);
    let held = (entry.make)(&theirs, NAME, None)
        .try_now()
        .unwrap()
        .expect("free");
    proxy.cut_on_reply_to(b"EVALSHA");
    let _ = held();
    assert!(
        proxy.trap_sprung(),
        "{}: the release's reply was not cut",
        entry.name
    );
    taken_once(entry, &server);
}

/// A third client takes `NAME` (within [`PATIENCE`]: a give-back or a release sent again may
/// still be under way), and while it holds, a fourth cannot.
fn taken_once(entry: &Entry, server: &Server) {
    let (third, fourth) = (server.client(), server.client());
    let rival = (entry.rival)(&third, NAME);
    let mut held = None;
    assert!(
        eventually(PATIENCE, || {
            held = rival.try_now().unwrap();
            held.is_some()
        }),
        "{}: left taken",
        entry.name
    );
    let after = (entry.make)(&fourth, NAME, None).try_now().unwrap();
    assert!(after.is_none(), "{}: free twice", entry.name);
    held.unwrap()().unwrap();
}

/// A watched hold whose server stops answering is reported lost (the client's lost
/// callback) once its validity ends, and another client takes it once its key expires.
pub fn lapse(entry: &Entry) {
    let server = Server::start();
    let (tx, rx) = crossbeam_channel::unbounded();
    let lease = support::SHORT_LEASE;
    let ours = server
        .builder_with_lease(lease)
        .on_lock_lost(move |lost| {
            let _ = tx.send(lost.name.clone());
        })
        .build()
        .unwrap();
    (entry.prepare)(&ours, NAME);
    let _held = (entry.make)(&ours, NAME, None)
        .try_now()
        .unwrap()
        .expect("free");
    server.pause();
    let lost = rx.recv_timeout(PATIENCE);
    server.resume();
    let lost = lost.unwrap_or_else(|_| panic!("{}: the loss was not told", entry.name));
    assert!(lost.contains(NAME), "{}: {lost}", entry.name);
    assert!(
        taken_by(entry, &server.client(), NAME),
        "{}: the key stayed",
        entry.name
    );
}

/// `inspect` reads it as its kind while it is held and waited for, with its waiter counted
/// (for kinds whose waiters subscribe), a listing of every key shows it as the same kind,
/// and once given back it holds nothing. A token's key comes with the doubt every token's
/// shape carries; a counting semaphore or a latch that nobody waits for is a plain number.
pub fn inspect(entry: &Entry) {
    let server = Server::start();
    let (ours, theirs) = (server.client(), server.sleepy());
    (entry.prepare)(&ours, NAME);
    let held = entry.occupy(&ours, NAME);
    let rival = (entry.make)(&theirs, NAME, None);
    let seen = Seen::of(&server);
    let mark = seen.mark();
    let waiter = in_thread(move || {
        let held = rival.take_until(Instant::now() + PATIENCE)?;
        Ok(held.map(|held| held().unwrap()).is_some())
    });
    assert!(eventually(PATIENCE, || seen.waiting(entry, NAME, mark)));
    // Its waiter is counted once its subscription is confirmed.
    let mut info = ours.inspect(NAME).unwrap();
    let counted = eventually(PATIENCE, || {
        info = ours.inspect(NAME).unwrap();
        !entry.subscribes || info.waiters >= Some(1)
    });
    assert!(
        counted,
        "{}: its waiter is not counted: {info:?}",
        entry.name
    );
    let read = !matches!(
        info.kind,
        LockKind::Free | LockKind::NotALock(_) | LockKind::Unreadable(_)
    );
    assert!(read, "{}: {info:?}", entry.name);
    let listed = ours.scan("*").unwrap();
    let found = listed.iter().find(|listed| listed.name == NAME);
    assert_eq!(
        found.map(|f| &f.kind),
        Some(&info.kind),
        "{}: {listed:?}",
        entry.name
    );
    held().unwrap();
    assert!(
        waiter
            .recv_timeout(PATIENCE * 2)
            .expect("the waiter hung")
            .unwrap()
    );
    let info = ours.inspect(NAME).unwrap();
    assert!(info.holders.is_empty(), "{}: {info:?}", entry.name);
}

/// Taken, waited for and woken (as in [`quartet`]) by clients logged in as the
/// least-privilege user of `docs/deploying.md`, with the further rights the docs list for
/// the kind.
pub fn acl(entry: &Entry) {
    let server = Server::start();
    let url = crate::acl::documented_user(&server);
    for start in entry.rights {
        let rules = crate::acl::rules(start);
        let mut cmd = redis::cmd("ACL");
        for word in &rules[1..] {
            cmd.arg(word);
        }
        let () = cmd.query(&mut server.conn()).unwrap();
    }
    let builder = || LockClient::builder(&url).key_prefix("myapp:");
    let ours = builder().build().unwrap();
    let theirs = (builder().retry_base(Duration::from_secs(30)))
        .retry_cap(Duration::from_secs(30))
        .build()
        .unwrap();
    quartet_on(entry, &ours, &theirs, NAME, &Seen::of(&server));
}

/// Two clients in a cycle of waits through this kind: the first holds it (as its rival
/// does) and waits for a plain lock; the second holds that lock and then waits for it, and,
/// having closed the cycle, is told of a deadlock with its hold kept; the first then gets
/// what it waits for.
pub fn deadlock(entry: &Entry) {
    let server = Server::start();
    let (first, second) = (server.client(), server.client());
    (entry.prepare)(&first, NAME);
    let holding = std::sync::Barrier::new(2);
    std::thread::scope(|scope| {
        let older = scope.spawn(|| {
            let held = entry.occupy(&first, NAME);
            holding.wait();
            let other = first.lock("other").try_lock_for(PATIENCE).unwrap();
            assert!(
                other.is_some(),
                "{}: the first waiter never got it",
                entry.name
            );
            drop(other);
            held().unwrap();
        });
        let other = second.lock("other").lock().unwrap();
        holding.wait();
        let waiting = || -> bool {
            let edges: Vec<String> = redis::cmd("KEYS")
                .arg("*:redmutex_wait:*")
                .query(&mut server.conn())
                .unwrap();
            !edges.is_empty()
        };
        assert!(
            eventually(PATIENCE, waiting),
            "{}: the first never waited",
            entry.name
        );
        let closing = (entry.make)(&second, NAME, None);
        let err = closing.take_until(Instant::now() + PATIENCE).err();
        assert!(
            err.as_ref().is_some_and(Error::is_deadlock),
            "{}: not told of the deadlock: {err:?}",
            entry.name
        );
        assert!(!other.is_lost(), "{}: its hold was not kept", entry.name);
        drop(other);
        older.join().unwrap();
    });
}
