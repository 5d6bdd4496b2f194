//! Real Redisson (3.52.0 and 4.7.0) and this crate on one read-write lock, both ways:
//! readers of both sides share it, a writer of either side excludes the other's readers,
//! each side's release wakes the other's waiters, hold counts stay each owner's own, and
//! Redisson's read renewal writes the expiries as its version does (4.4 rewrote it).

use crate::support;

use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::time::{Duration, Instant};

use redmutex::{LockClient, LockKind};
use serde_json::{Value, json};
use support::java::{Jvm, Redisson};
use support::toolchain::{Toolchain, skip_without};
use support::{Server, await_subscribers, eventually};

const NAME: &str = "rw";
const CHANNEL: &str = "redisson_rwlock:{rw}";
/// The lease of the holds that make others wait: no waiter may wait it out in a test.
const LONG: Duration = Duration::from_secs(60);
/// Within this a woken waiter must be in: well below [`LONG`], our client's lease (30 s)
/// and its retry interval (30 s), so only a message can have woken it in time.
const WOKEN: Duration = Duration::from_secs(15);
/// The watchdog timeout of the Java clients whose renewal is under test.
const JAVA_WATCHDOG: Duration = Duration::from_millis(1500);

fn long() -> Value {
    json!({"wait": 0, "lease": LONG.as_millis() as u64})
}

/// A Java `tryLock` that waits up to [`LONG`] with a lease of [`LONG`].
fn waiting() -> Value {
    json!({"wait": LONG.as_millis() as u64, "lease": LONG.as_millis() as u64})
}

fn pttl(server: &Server, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query(&mut server.conn())
        .unwrap()
}

/// The lease key of read hold `i` of `owner`.
fn lease_key(owner: &str, i: u32) -> String {
    format!("{{{NAME}}}:{owner}:rwlock_timeout:{i}")
}

/// The holders of the lock as our inspection sees them: (owner, holds, mode).
fn holders(server: &Server) -> Vec<(String, u64, &'static str)> {
    let info = server.client().inspect(NAME).unwrap();
    let mut holders: Vec<_> = (info.holders.iter())
        .map(|holder| (holder.id.clone(), holder.holds, holder.mode.unwrap_or("?")))
        .collect();
    holders.sort();
    holders
}

/// The one holder that is not `java`: ours.
fn our_owner(server: &Server, java: &str) -> String {
    let ours: Vec<_> = (holders(server).into_iter())
        .filter(|(owner, _, _)| owner != java)
        .collect();
    assert_eq!(ours.len(), 1, "{ours:?}");
    ours[0].0.clone()
}

/// A waiter of ours on a thread of its own: it takes its side of the lock (waiting up to
/// [`LONG`]), says whether it did, holds until told, and says whether its release went
/// through.
struct Waiter {
    taken: Receiver<bool>,
    release: Sender<()>,
}

impl Waiter {
    fn start<G: 'static>(
        take: impl FnOnce() -> Option<G> + Send + 'static,
        unlock: impl FnOnce(G) -> bool + Send + 'static,
    ) -> Waiter {
        let (taken_tx, taken) = channel();
        let (release, release_rx) = channel::<()>();
        std::thread::spawn(move || {
            let guard = take();
            let _ = taken_tx.send(guard.is_some());
            if let Some(guard) = guard {
                let _ = release_rx.recv();
                let _ = taken_tx.send(unlock(guard));
            }
        });
        Waiter { taken, release }
    }

    fn reader(client: &LockClient) -> Waiter {
        let lock = client.read_write_lock(NAME);
        Waiter::start(
            move || lock.read().try_lock_for(LONG).unwrap(),
            |guard| guard.unlock().is_ok(),
        )
    }

    fn writer(client: &LockClient) -> Waiter {
        let lock = client.read_write_lock(NAME);
        Waiter::start(
            move || lock.write().try_lock_for(LONG).unwrap(),
            |guard| guard.unlock().is_ok(),
        )
    }

    fn is_waiting(&self) -> bool {
        self.taken.try_recv() == Err(TryRecvError::Empty)
    }

    /// Whether it got in within [`WOKEN`].
    fn woken(&self) -> bool {
        self.taken.recv_timeout(WOKEN) == Ok(true)
    }

    fn unlock(&self) {
        self.release.send(()).unwrap();
        assert_eq!(
            self.taken.recv_timeout(LONG),
            Ok(true),
            "our release failed"
        );
    }
}

/// Starts a waiter with `start` and waits until it has subscribed to the lock's channel.
fn subscribed<T>(server: &Server, start: impl FnOnce() -> T) -> T {
    let before = server.subscribers(CHANNEL);
    let waiter = start();
    await_subscribers(server, CHANNEL, before + 1);
    waiter
}

#[test]
fn readers_of_both_sides_share_and_a_writer_of_either_side_is_woken_when_both_leave() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    for version in Redisson::ALL {
        for java_writes in [true, false] {
            let server = Server::start();
            let java = Jvm::shared(version).connect(&server.url(), None);
            let (reader, writer) = (java.thread("reader"), java.thread("writer"));
            let ours = server.sleepy().read_write_lock(NAME);

            assert_eq!(reader.ok("tryLock", "read", NAME, long()), json!(true));
            let read = ours.read().lock().unwrap();
            let java_owner = reader.owner();
            let seen = holders(&server);
            assert_eq!(seen.len(), 2, "{version:?}: {seen:?}");
            assert!(
                seen.iter()
                    .all(|(_, holds, mode)| (*holds, *mode) == (1, "read"))
            );
            assert!(seen.iter().any(|(owner, _, _)| *owner == java_owner));

            if java_writes {
                // Their reader leaves first; our release, the last, wakes their writer.
                let pending =
                    subscribed(&server, || writer.send("tryLock", "write", NAME, waiting()));
                reader.ok("unlock", "read", NAME, Value::Null);
                assert_eq!(
                    pending.is_done(),
                    None,
                    "{version:?}: written beside our read"
                );
                read.unlock().unwrap();
                assert_eq!(
                    pending.wait_for(WOKEN),
                    Some(Ok(json!(true))),
                    "{version:?}: their writer was not woken by our read release"
                );
                assert!(
                    ours.read().try_lock().unwrap().is_none(),
                    "read beside their write"
                );
                assert_eq!(writer.ok("holdCount", "write", NAME, Value::Null), json!(1));
                writer.ok("unlock", "write", NAME, Value::Null);
            } else {
                // Our reader leaves first; their release, the last, wakes our writer.
                let other = server.sleepy();
                let waiter = subscribed(&server, || Waiter::writer(&other));
                read.unlock().unwrap();
                assert!(
                    waiter.is_waiting(),
                    "{version:?}: written beside their read"
                );
                reader.ok("unlock", "read", NAME, Value::Null);
                assert!(
                    waiter.woken(),
                    "{version:?}: our writer was not woken by their read release"
                );
                assert_eq!(reader.ok("tryLock", "read", NAME, long()), json!(false));
                assert_eq!(
                    reader.ok("isLocked", "write", NAME, Value::Null),
                    json!(true)
                );
                waiter.unlock();
            }
            assert!(!server.exists(NAME), "{version:?}: left behind");
        }
    }
}

#[test]
fn a_writer_of_either_side_excludes_the_other_s_readers_and_its_release_wakes_them_all() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    for version in Redisson::ALL {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let writer = java.thread("writer");
        let ours = server.sleepy();

        // Their writer: our readers wait, and its release ("1") wakes them all at once.
        assert_eq!(writer.ok("tryLock", "write", NAME, long()), json!(true));
        assert!(
            ours.read_write_lock(NAME)
                .read()
                .try_lock()
                .unwrap()
                .is_none()
        );
        let first = subscribed(&server, || Waiter::reader(&ours));
        let second = Waiter::reader(&ours);
        writer.ok("unlock", "write", NAME, Value::Null);
        assert!(first.woken(), "{version:?}: our first reader was not woken");
        assert!(
            second.woken(),
            "{version:?}: our second reader was not woken"
        );
        assert_eq!(holders(&server).len(), 2, "{version:?}: both read at once");
        assert_eq!(writer.ok("tryLock", "write", NAME, long()), json!(false));
        first.unlock();
        second.unlock();
        assert!(!server.exists(NAME));
        // Our subscription goes with our client: the next one counted is theirs.
        drop(ours);
        assert!(eventually(WOKEN, || server.subscribers(CHANNEL) == 0));
        let ours = server.sleepy();

        // Our writer: their readers wait, and our release wakes them all at once.
        // Redisson's wake-all ("1") frees only the threads waiting when it comes (a thread
        // between its last attempt and its wait sleeps on until the lease ends, among Java
        // clients too), so the release goes once both wait.
        let write = ours
            .read_write_lock(NAME)
            .write()
            .lock_with_lease(LONG)
            .unwrap();
        let names = ["woken-by-our-write-1", "woken-by-our-write-2"];
        let (one, two) = (java.thread(names[0]), java.thread(names[1]));
        assert_eq!(one.ok("tryLock", "read", NAME, long()), json!(false));
        let pending_one = one.send("tryLock", "read", NAME, waiting());
        let pending_two = two.send("tryLock", "read", NAME, waiting());
        assert!(
            eventually(WOKEN, || waiting_on_a_lock(java.jvm(), &names)),
            "{version:?}: their readers do not wait"
        );
        write.unlock().unwrap();
        for (pending, which) in [(pending_one, "first"), (pending_two, "second")] {
            assert_eq!(
                pending.wait_for(WOKEN),
                Some(Ok(json!(true))),
                "{version:?}: their {which} reader was not woken by our write release"
            );
        }
        assert_eq!(holders(&server).len(), 2, "{version:?}: both read at once");
        assert!(
            ours.read_write_lock(NAME)
                .write()
                .try_lock()
                .unwrap()
                .is_none()
        );
        one.ok("unlock", "read", NAME, Value::Null);
        two.ok("unlock", "read", NAME, Value::Null);
        assert!(!server.exists(NAME));
    }
}

/// Whether the Java threads named `names` (unique in their JVM) all wait in a lock's
/// `tryLock` for a message, as a thread dump shows them.
fn waiting_on_a_lock(jvm: &Jvm, names: &[&str]) -> bool {
    let dump = std::process::Command::new("jcmd")
        .arg(jvm.pid().to_string())
        .arg("Thread.print")
        .output()
        .expect("jcmd, of the JDK");
    let dump = String::from_utf8_lossy(&dump.stdout);
    names.iter().all(|name| {
        dump.split("\n\n").any(|thread| {
            thread.contains(&format!("/{name}\""))
                && thread.contains("java.util.concurrent.Semaphore.tryAcquire")
                && thread.contains("org.redisson.RedissonLock.tryLock")
        })
    })
}

/// Checks, every 50 ms for three of their leases, that the lease keys `keys` stay and that
/// our writer stays out.
fn read_past_their_lease(server: &Server, version: Redisson, keys: &[String]) {
    let writer = server.client().read_write_lock(NAME);
    let start = Instant::now();
    while start.elapsed() < JAVA_WATCHDOG * 3 {
        for key in keys {
            assert!(
                server.exists(key),
                "{version:?}: {key} ran out after {:?}",
                start.elapsed()
            );
        }
        assert!(
            writer.write().try_lock().unwrap().is_none(),
            "{version:?}: written"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A Java reader under its watchdog holds past its lease, and our inspection sees its hold
/// and the lease left. Then our reader with a lease of its own joins, and their next
/// renewal sets the hash to their lease on both versions; 3.x sets our lease key to it too,
/// 4.4 and later leave it as it is.
#[test]
fn a_java_reader_s_renewal_keeps_the_lock_and_writes_the_expiries_of_its_version() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    for version in Redisson::ALL {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), Some(JAVA_WATCHDOG));
        let reader = java.thread("reader");
        let owner = reader.owner();
        reader.ok("lock", "read", NAME, Value::Null);
        read_past_their_lease(&server, version, &[lease_key(&owner, 1)]);
        let info = server.client().inspect(NAME).unwrap();
        assert_eq!(info.kind, LockKind::ReadWrite);
        assert_eq!(holders(&server), [(owner.clone(), 1, "read")]);
        let left = info.lease_left.expect("an expiry");
        assert!(left <= JAVA_WATCHDOG, "{version:?}: {left:?} left");

        let ours = server.sleepy().read_write_lock(NAME);
        let read = ours.read().lock_with_lease(LONG).unwrap();
        let ours_key = lease_key(&our_owner(&server, &owner), 1);
        // Our 60 s lease set the hash's expiry above theirs; their next renewal, which
        // may already have run, sets it back.
        assert!(
            eventually(WOKEN, || pttl(&server, NAME)
                <= JAVA_WATCHDOG.as_millis() as i64),
            "{version:?}: their renewal did not set the hash to their lease"
        );
        let ours_left = pttl(&server, &ours_key);
        match version {
            Redisson::V3 => assert!(
                (0..=JAVA_WATCHDOG.as_millis() as i64).contains(&ours_left),
                "3.x sets every reader's lease key to its lease: ours has {ours_left} ms"
            ),
            Redisson::V4 => assert!(
                ours_left > (LONG - WOKEN).as_millis() as i64,
                "4.x renews only its own lease keys: ours has {ours_left} ms"
            ),
        }
        // Their release leaves the hash lasting as long as our lease key: in 3.x, as
        // `docs/kinds.md` says, our hold then ends long before its guard's validity.
        assert_eq!(reader.ok("holdCount", "read", NAME, Value::Null), json!(1));
        reader.ok("unlock", "read", NAME, Value::Null);
        let hash_left = pttl(&server, NAME);
        match version {
            Redisson::V3 => {
                assert!(
                    hash_left <= JAVA_WATCHDOG.as_millis() as i64,
                    "{hash_left} ms"
                );
                assert!(read.valid_until() > Instant::now() + WOKEN);
                let _ = read.unlock();
            }
            Redisson::V4 => {
                assert!(
                    hash_left > (LONG - WOKEN).as_millis() as i64,
                    "{hash_left} ms"
                );
                read.unlock().unwrap();
            }
        }
    }
}

/// Our watched read hold, renewed on our lease, is what Java sees: the lock stays read past
/// our lease, their `remainTimeToLive` is within it, their writer stays out, their readers
/// join; read re-entry on both sides counts each owner's own holds.
#[test]
fn our_read_renewal_and_read_hold_counts_are_seen_from_both_sides() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    let lease = Duration::from_millis(1500);
    for version in Redisson::ALL {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let (reader, writer) = (java.thread("reader"), java.thread("writer"));
        let ours = server.builder_with_lease(lease).build().unwrap();
        let lock = ours.read_write_lock(NAME);

        let read = lock.read().lock().unwrap();
        let again = lock.read().lock().unwrap();
        let start = Instant::now();
        while start.elapsed() < lease * 3 {
            let ttl = writer
                .ok("ttl", "read", NAME, Value::Null)
                .as_i64()
                .unwrap();
            assert!(
                (1..=lease.as_millis() as i64).contains(&ttl),
                "{version:?}: their remainTimeToLive {ttl}"
            );
            assert_eq!(writer.ok("tryLock", "write", NAME, long()), json!(false));
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(!read.is_lost() && !again.is_lost());
        assert_eq!(lock.read().hold_count().unwrap(), 2);

        assert_eq!(reader.ok("tryLock", "read", NAME, long()), json!(true));
        assert_eq!(reader.ok("tryLock", "read", NAME, long()), json!(true));
        assert_eq!(reader.ok("holdCount", "read", NAME, Value::Null), json!(2));
        let java_owner = reader.owner();
        let ours_owner = our_owner(&server, &java_owner);
        let mut both = vec![
            (java_owner.clone(), 2, "read"),
            (ours_owner.clone(), 2, "read"),
        ];
        both.sort();
        assert_eq!(holders(&server), both, "{version:?}");

        // One release on each side: each count drops by one, the other's stays.
        again.unlock().unwrap();
        assert_eq!(reader.ok("holdCount", "read", NAME, Value::Null), json!(2));
        reader.ok("unlock", "read", NAME, Value::Null);
        assert_eq!(reader.ok("holdCount", "read", NAME, Value::Null), json!(1));
        assert_eq!(lock.read().hold_count().unwrap(), 1);
        let mut both = vec![(java_owner, 1, "read"), (ours_owner, 1, "read")];
        both.sort();
        assert_eq!(holders(&server), both, "{version:?}");
        assert_eq!(writer.ok("tryLock", "write", NAME, long()), json!(false));

        read.unlock().unwrap();
        assert!(server.exists(NAME), "{version:?}: freed under their read");
        reader.ok("unlock", "read", NAME, Value::Null);
        assert!(!server.exists(NAME));
    }
}

/// A writer reading too, on each side: Redisson lets its writer read, and so does this
/// crate; the other side's readers and writers stay out while either is held, its readers
/// come in beside the read left once the write is released, and the last release wakes a
/// waiting reader of the other side.
#[test]
fn a_writer_that_reads_too_is_honoured_by_the_other_side() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    for version in Redisson::ALL {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), None);
        let (them, other) = (java.thread("them"), java.thread("other"));
        let ours = server.sleepy().read_write_lock(NAME);

        // Theirs writes, then reads.
        assert_eq!(them.ok("tryLock", "write", NAME, long()), json!(true));
        assert_eq!(them.ok("tryLock", "read", NAME, long()), json!(true));
        assert_eq!(them.ok("holdCount", "write", NAME, Value::Null), json!(1));
        assert_eq!(them.ok("holdCount", "read", NAME, Value::Null), json!(1));
        let owner = them.owner();
        let seen = [(owner.clone(), 1, "read"), (owner.clone(), 1, "write")];
        assert_eq!(holders(&server), seen, "{version:?}");
        assert!(
            ours.read().try_lock().unwrap().is_none(),
            "read beside their write"
        );
        assert!(ours.write().try_lock().unwrap().is_none());
        them.ok("unlock", "write", NAME, Value::Null);
        let read = ours.read().try_lock().unwrap();
        assert!(read.is_some(), "{version:?}: not read beside their read");
        assert!(
            server
                .sleepy()
                .read_write_lock(NAME)
                .write()
                .try_lock()
                .unwrap()
                .is_none()
        );
        drop(read);
        them.ok("unlock", "read", NAME, Value::Null);
        assert!(!server.exists(NAME));

        // Ours writes, then reads.
        let write = ours.write().lock().unwrap();
        let read = ours.read().lock().unwrap();
        assert_eq!(ours.write().hold_count().unwrap(), 1);
        assert_eq!(ours.read().hold_count().unwrap(), 1);
        assert_eq!(other.ok("tryLock", "read", NAME, long()), json!(false));
        assert_eq!(other.ok("tryLock", "write", NAME, long()), json!(false));
        let pending = subscribed(&server, || other.send("tryLock", "read", NAME, waiting()));
        write.unlock().unwrap();
        assert_eq!(
            them.ok("tryLock", "write", NAME, long()),
            json!(false),
            "{version:?}: written beside our read"
        );
        read.unlock().unwrap();
        assert_eq!(
            pending.wait_for(WOKEN),
            Some(Ok(json!(true))),
            "{version:?}: their reader was not woken"
        );
        other.ok("unlock", "read", NAME, Value::Null);
        assert!(!server.exists(NAME));
    }
}

/// A Java reader under its watchdog beside re-entered read holds outlives its lease, and
/// our read release leaves the lock read: when it holds twice itself, and when ours holds
/// twice and it came after.
fn a_java_reader_beside_reentered_reads_outlives_its_lease(version: Redisson) {
    for java_twice in [true, false] {
        let server = Server::start();
        let java = Jvm::shared(version).connect(&server.url(), Some(JAVA_WATCHDOG));
        let reader = java.thread("reader");
        let owner = reader.owner();
        let ours = server.sleepy().read_write_lock(NAME);
        let read = ours.read().lock().unwrap();
        let again = (!java_twice).then(|| ours.read().lock().unwrap());
        let java_holds = if java_twice { 2 } else { 1 };
        for _ in 0..java_holds {
            reader.ok("lock", "read", NAME, Value::Null);
        }
        read_past_their_lease(&server, version, &[]);
        drop(again);
        read.unlock().unwrap();
        assert!(
            server
                .sleepy()
                .read_write_lock(NAME)
                .write()
                .try_lock()
                .unwrap()
                .is_none(),
            "{version:?} (theirs twice: {java_twice}): written beside their read"
        );
        for i in 1..=java_holds {
            assert!(
                server.exists(&lease_key(&owner, i)),
                "{version:?}: lease {i} ran out"
            );
        }
        let holds = reader.ok("holdCount", "read", NAME, Value::Null);
        assert_eq!(holds, json!(java_holds));
        for _ in 0..java_holds {
            reader.ok("unlock", "read", NAME, Value::Null);
        }
        assert!(!server.exists(NAME));
    }
}

#[test]
fn a_java_reader_beside_reentered_reads_outlives_its_lease_4x() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    a_java_reader_beside_reentered_reads_outlives_its_lease(Redisson::V4);
}

/// Redisson 3.52.0's read renewal (`ReadLockTask`) reuses its loop variable `i` in the
/// inner loop over a reader's holds, so at the first reader field (in the hash's order)
/// counting 2 or more it reads `KEYS[3]`, nil in a batch of one lock: the script fails
/// after setting the hash's expiry and before setting the lease keys of that field and of
/// those after it, every time. Their lease keys run out under a running watchdog, and the
/// next read release (Redisson's or ours, by Redisson's rule) frees the lock under them.
#[test]
#[ignore = "Redisson 3.52.0 defect: its read renewal fails while any reader holds twice, \
            so Java readers' lease keys run out under their watchdog and a read release \
            frees the lock under them (4.4 rewrote the renewal)"]
fn a_java_reader_beside_reentered_reads_outlives_its_lease_3x() {
    if skip_without(&[Toolchain::Java]) {
        return;
    }
    a_java_reader_beside_reentered_reads_outlives_its_lease(Redisson::V3);
}
