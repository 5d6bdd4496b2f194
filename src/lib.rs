//! Distributed locks on Redis for threaded Rust services: blocking, reentrant, renewed by a
//! watchdog thread, released by RAII guards.
//!
//! A lock is a Redis hash named after the lock, whose field `"<client-uuid>:<thread-id>"`
//! counts the holds of its one owner: the layout Redisson uses, so Rust and Java services
//! can share a lock. Releasing the last hold frees the key and publishes `0` on
//! `redisson_lock__channel:{<name>}` (on `redisson_lock__channel:<name>` when the name holds
//! a hash tag, as Redisson names it).
//!
//! # Quick start
//!
//! ```no_run
//! use std::time::Duration;
//!
//! let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
//! let lock = client.lock("orders:42");
//! {
//!     let _outer = lock.lock()?; // waits; the watchdog renews the lease while held
//!     let _inner = lock.lock()?; // the same thread re-enters
//!     assert_eq!(lock.hold_count()?, 2);
//! } // both guards dropped: both holds released, the key deleted
//!
//! if let Some(guard) = lock.try_lock_for(Duration::from_secs(2))? {
//!     // ... work ...
//!     guard.unlock()?; // the explicit form reports errors
//! }
//!
//! let guard = lock.lock_with_lease(Duration::from_secs(5))?; // no watchdog: expires in 5 s
//! drop(guard);
//! # Ok::<(), redmutex::Error>(())
//! ```
//!
//! # Connecting
//!
//! One builder per topology, each with every setting of [`LockClientBuilder`], and one
//! shortcut for the common case:
//!
//! | topology | entry point |
//! |---|---|
//! | one server, defaults | [`LockClient::open(url)`](LockClient::open) |
//! | one server | [`LockClient::builder(url)`](LockClient::builder)`.build()` |
//! | Redlock over independent masters | [`LockClient::redlock(urls)`](LockClient::redlock)`.build()` |
//! | a primary that Sentinel manages | [`LockClient::sentinel(urls, master)`](LockClient::sentinel)`.build()` |
//! | a Redis Cluster | [`LockClient::cluster(seeds)`](LockClient::cluster)`.build()` |
//! | Redlock over clients already built | [`LockClient::redlock_from(clients)`](LockClient::redlock_from) |
//!
//! ```no_run
//! use std::time::Duration;
//!
//! let client = redmutex::LockClient::sentinel(&["redis://10.0.0.1:26379/"], "mymaster")
//!     .lease(Duration::from_secs(10))
//!     .client_name("billing-worker")
//!     .build()?;
//! # Ok::<(), redmutex::Error>(())
//! ```
//!
//! # Kinds
//!
//! Every kind has the same acquisition calls, watchdog, waiting and errors:
//!
//! - [`client.lock(name)`](LockClient::lock): [`Reentrant`], Redisson's `RLock`.
//! - [`client.fenced_lock(name)`](LockClient::fenced_lock): [`Fenced`], Redisson's
//!   `RFencedLock`; each guard carries a fencing token that only grows.
//! - [`client.fair_lock(name)`](LockClient::fair_lock): [`Fair`], Redisson's
//!   `RFairLock`; waiters take it first come, first served, across processes.
//! - [`client.non_reentrant_lock(name)`](LockClient::non_reentrant_lock) and
//!   [`client.non_reentrant_fair_lock(name)`](LockClient::non_reentrant_fair_lock):
//!   [`NonReentrant`] and [`NonReentrantFair`], Redisson's `RNonReentrantLock` and
//!   `RNonReentrantFairLock`; a holder that asks again gets [`Error::Reentry`].
//! - [`client.spin_lock(name)`](LockClient::spin_lock): [`Spin`], Redisson's
//!   `RSpinLock`; the reentrant lock without pub/sub, its waiters backing off.
//! - [`client.read_write_lock(name)`](LockClient::read_write_lock): a [`ReadWriteLock`],
//!   Redisson's `RReadWriteLock`; many readers or one writer.
//! - [`client.leased_semaphore(name)`](LockClient::leased_semaphore): a [`LeasedSemaphore`], Redisson's
//!   `RPermitExpirableSemaphore`; up to N [`LeasedPermit`]s at once, each with a lease.
//! - [`client.multi_lock(names)`](LockClient::multi_lock): a [`MultiLock`], Redisson's
//!   `RedissonMultiLock`; several locks, of any kinds, taken all or none, one
//!   [`MultiGuard`] for all.
//! - [`client.counting_semaphore(name)`](LockClient::counting_semaphore): a
//!   [`CountingSemaphore`], Redisson's `RSemaphore`; a count of permits without leases,
//!   which anyone may give back or add to (a crashed holder's are not given back).
//! - [`client.token_lock(name)`](LockClient::token_lock): [`Token`], `SET key token NX PX`
//!   as redis-py, redsync and node-redlock store it; its guard may move between threads.
//! - [`client.election(name)`](LockClient::election): an [`Election`]; one leader at a
//!   time, whose [`Leadership`] carries an epoch that only grows and a value it publishes,
//!   its [`Candidate`]s listed, a listener of its own leaderships, a first-come-first-served
//!   option, and [`Observer`]s of who leads.
//! - [`client.count_down_latch(name)`](LockClient::count_down_latch): a [`CountDownLatch`],
//!   Redisson's `RCountDownLatch`; waiters wait until a count is counted down to zero.
//!
//! ```no_run
//! let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
//! let guard = client.fenced_lock("reports:daily").lock()?;
//! let token: u64 = guard.token(); // the storage refuses a write with a lower token
//! drop(guard);
//!
//! let guard = client.token_lock("jobs:7").lock()?;
//! std::thread::spawn(move || guard.unlock()); // a token guard is Send
//! # Ok::<(), redmutex::Error>(())
//! ```
//!
//! # What every kind guarantees
//!
//! Each kind the client makes is held to the same guarantees, and one test list checks every
//! kind against every one of them (`tests/it/conformance/`; a kind missing from it fails the
//! suite, and so does a guarantee a kind neither meets nor explains). The whole suite runs on
//! Redis and on Valkey.
//!
//! - **takes, waits, is woken**: taken, busy for another client in every acquisition form, and
//!   a waiter of another client that would not try again for 30 s gets it at once when it is
//!   given back.
//! - **deadline**: on a server answering every reply 600 ms late, a wait of 100 ms ends within
//!   its deadline plus one response timeout, and leaves nothing taken.
//! - **cancel**, **close**: a [`Cancel`] or closing the client ends any wait, with
//!   `is_cancelled()` or `is_closed()`, taking nothing.
//! - **cut attempt**: an attempt whose reply is lost after it ran leaves nothing taken once the
//!   call returns, and takes once.
//! - **late attempt**: an attempt whose reply comes after the response timeout leaves nothing
//!   taken once the call returns, and takes once.
//! - **cut release**: a release whose reply is lost after it ran counts once.
//! - **lapse**: a watched hold whose server stops answering is reported lost once its validity
//!   ends, and another client takes it once its key expires.
//! - **ACL**: its whole life as the least-privilege user of "Redis users (ACL)" in
//!   `docs/deploying.md`.
//! - **Cluster**, **migration**, **failover**: taken, waited for and woken on whichever shard
//!   owns its slot; given back and taken while its slot migrates; its waiters follow a killed
//!   primary to the promoted replica.
//! - **Redisson**: the real Redisson (3.52 and 4.7) holds and waits beside ours, where
//!   Redisson has the kind.
//! - **model**: random steps of several owners, with lost and late replies and stalls, checked
//!   against a model of the kind.
//! - **inspect**: `inspect` reads it as its kind while held, holding nothing once given back.
//! - **deadlock**: in a cycle of two clients' waits through it, the waiter that closed the
//!   cycle gets [`Error::Deadlock`] with its holds kept, and the other gets what it waits for.
//!
//! | kind | takes, waits, is woken | deadline | cancel | close | cut attempt | late attempt | cut release | lapse | ACL | Cluster | migration | failover | Redisson | model | inspect | deadlock |
//! |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
//! | `lock` | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes |
//! | `fenced_lock` | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes |
//! | `fair_lock` | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes |
//! | `non_reentrant_lock` | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes |
//! | `non_reentrant_fair_lock` | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes |
//! | `spin_lock` | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes |
//! | `token_lock` | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | no (1) |
//! | `read_write_lock.read` | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes |
//! | `read_write_lock.write` | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes |
//! | `multi_lock` | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | no (2) | yes |
//! | `leased_semaphore` | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | no (3) |
//! | `counting_semaphore` | yes | yes | yes | yes | yes | yes | yes | no (4) | yes | yes | yes | yes | yes | yes | yes | no (5) |
//! | `count_down_latch` | yes | yes | yes | yes | no (6) | no (7) | yes | no (8) | yes | yes | yes | yes | yes | yes | yes | no (9) |
//! | `election` | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | no (10) | yes | yes | no (11) |
//! | `election.first_come_first_served` | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | yes | no (12) | no (13) | yes | no (14) |
//!
//! 1. token (deadlock): its holds belong to no thread, so a cycle through them is not followed.
//! 2. multi (inspect): a multi-lock has no key of its own: its members are shown.
//! 3. leased_semaphore (deadlock): a permit may move to another thread (it is Send): the thread that holds it is not known, so a cycle through it is not followed.
//! 4. counting (lapse): counted permits have no lease: they are held until released.
//! 5. counting (deadlock): counted permits have no holders on record to follow.
//! 6. latch (cut attempt): a wait on a latch takes nothing: it reads the count.
//! 7. latch (late attempt): a wait on a latch takes nothing: it reads the count.
//! 8. latch (lapse): a latch holds nothing that could lapse.
//! 9. latch (deadlock): a latch's count has no holders: nothing to follow from its waiter.
//! 10. election (Redisson): Redisson has no leader election.
//! 11. election (deadlock): a leadership belongs to its candidate's token, not to a thread.
//! 12. election_fcfs (Redisson): Redisson has no leader election.
//! 13. election_fcfs (model): its leader, epochs and resignations are the election's, which has a model; the queue's order is checked across processes by election_fcfs.
//! 14. election_fcfs (deadlock): a leadership belongs to its candidate's token, not to a thread.
//!
//! # Semantics
//!
//! - **Owner.** A hold belongs to one thread of one [`LockClient`]. Another thread, or the
//!   same thread through another client, is another owner and waits.
//! - **Lease.** Holds taken without a lease use the client's lease (30 s by default), which
//!   a watchdog thread renews every third of it until the thread's last hold is released.
//!   Holds taken `*_with_lease` are not renewed and expire.
//! - **Loss.** When the watchdog, a release or a re-entry finds the hold gone, or the
//!   watchdog cannot renew it before its validity runs out, the guard's
//!   [`LockGuard::is_lost`] turns true and the client's
//!   [`on_lock_lost`](LockClientBuilder::on_lock_lost) callback is called once. A release
//!   or re-entry that finds it returns [`Error::Lost`].
//! - **Waiting.** A busy lock is retried when its unlock message arrives (pub/sub, one
//!   subscriber connection per client, checked every ping interval), and at the latest when
//!   the holder's lease would run out; never past the caller's deadline plus one response
//!   timeout. A string key (a `SET NX` lock of another library) is waited for the same way;
//!   a key of another type is [`Error::WrongKind`].
//! - **Cancelling.** [`Lock::with_cancel`], [`ReadWriteLock::with_cancel`],
//!   [`MultiLock::with_cancel`], [`LeasedSemaphore::with_cancel`],
//!   [`CountingSemaphore::with_cancel`], [`CountDownLatch::with_cancel`] and
//!   [`Election::with_cancel`] give the same handle,
//!   whose blocking calls a [`Cancel`] token ends from another thread with
//!   [`Error::Cancelled`];
//!   [`LockClient::close`] ends every wait of the client so and refuses new calls.
//! - **Explained waits.** A wait that finds a holder without expiry logs a warning naming
//!   the key; [`Error::Timeout`] names what held the lock ([`HeldBy`]).
//! - **Deadlocks.** A waiter that holds locks and still waits after the
//!   [`deadlock_timeout`](LockClientBuilder::deadlock_timeout) follows who holds what it
//!   waits for, across processes, through the locks threads own; a cycle back to it ends
//!   the wait of the waiter that closed it with [`Error::Deadlock`], holds kept. [`LockClient::waits`] shows the graph
//!   ([`Waiter`], [`WaitEdge`]).
//! - **Watching a hold.** [`LockGuard::watch`], [`LeasedPermit::watch`],
//!   [`MultiGuard::watch`] and [`Leadership::watch`] give a [`HoldWatch`]
//!   that another thread can poll or block on until the hold is found lost.
//! - **fork().** A client used in a forked child refuses every call with
//!   [`Error::Forked`].
//! - **Redlock.** [`LockClient::redlock`] takes each lock on a majority of N independent
//!   masters, with the same API; see "Redlock" in `docs/deploying.md` for when that is
//!   worth it and what it does not promise.
//! - **Sentinel.** [`LockClient::sentinel`] finds the primary through Redis Sentinel and
//!   follows it across failovers: once a sentinel announces a new primary, nothing is sent
//!   to the old one, waiters are woken to retry on the new one, and watched holds are
//!   renewed there at once or reported lost.
//! - **Cluster.** [`LockClient::cluster`] sends each command to the primary serving its
//!   lock's slot, follows `MOVED` and `ASK` through reshardings and failovers, and waits
//!   with sharded pub/sub on Redis 7. A name whose keys would cross slots is refused.
//! - **Health.** [`LockGuard::health`] tells a hold that is held from one whose last renewal
//!   failed ([`Health::Uncertain`]) and one that is lost;
//!   [`on_health_change`](LockClientBuilder::on_health_change) hears the changes.
//! - **Replicas.** [`min_replica_acks`](LockClientBuilder::min_replica_acks) makes every
//!   acquisition wait (`WAIT`) until that many replicas have it, or gives it back with
//!   [`Error::NotReplicated`].
//! - **Operating.** [`LockClient::inspect`] and [`LockClient::locks`] say who holds what;
//!   [`LockClient::doctor`] checks the servers for settings that break locks; the `cli`
//!   feature builds the `redmutex` tool on them, and the `metrics` feature reports through
//!   the `metrics` facade.
//! - **TLS.** With the `tls` feature, `rediss://` URLs connect over TLS (rustls), every
//!   connection of the client included; certificates via
//!   `LockClientBuilder::tls_root_ca` and `tls_client_cert`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

// The layers, each a folder using only the folders below it, top first (`tests/it/layers.rs`
// checks; a blank line between them keeps rustfmt from sorting them).

/// Entry points, builder, client.
mod client;

/// The generic lock machine: handle, acquisition quartet, waiting, guards.
mod lock;

/// The lock machine's holds: a client's shared state, its holds and the watchdog.
mod lease;

/// One file of protocol per kind, and the seam they implement.
mod kinds;

/// Pools, commands on every node, scripts.
mod transport;

/// Unlock notifications.
mod notify;

/// Redisson's names and the owner identity.
mod layout;

/// Where a node's server is; quorum arithmetic.
mod topology;

/// Settings, errors, backoff, counters, TLS settings.
mod base;

pub use base::cause::Cause;
pub use base::config::{MAX_LEASE, MAX_NAME_LEN, MIN_LEASE};
pub use base::error::{Error, NodeError, Result, Subject};
pub use base::health::{Health, HealthChange};
pub use base::held_by::HeldBy;
pub use base::lost::LockLost;
pub use base::stats::Stats;
pub use base::wait_edge::WaitEdge;
#[cfg(feature = "bench")]
#[doc(hidden)]
pub use client::bench_hooks;
pub use client::builder::LockClientBuilder;
pub use client::checks::{DoctorReport, Finding, FindingLevel};
pub use client::inspect::{Holder, LockInfo, LockKind};
pub use client::lock_client::LockClient;
pub use client::waits::Waiter;
pub use kinds::fair::Fair;
pub use kinds::fenced::Fenced;
pub use kinds::kind::Kind;
pub use kinds::non_reentrant::{NonReentrant, NonReentrantFair};
pub use kinds::read_write::{Read, Write};
pub use kinds::reentrant::{Reentrant, ThreadOwned};
pub use kinds::spin::Spin;
pub use kinds::token::Token;
pub use lock::count_down_latch::CountDownLatch;
pub use lock::counting_semaphore::{CountedPermits, CountingSemaphore};
pub use lock::election::candidate::Candidate;
pub use lock::election::leader::Leader;
pub use lock::election::listener::LeadershipEvent;
pub use lock::election::observer::{LeaderChange, Observer};
pub use lock::election::{Election, Leadership};
pub use lock::guard::LockGuard;
pub use lock::handle::Lock;
pub use lock::hold_watch::HoldWatch;
pub use lock::multi_lock::{MultiGuard, MultiLock};
pub use lock::read_write_lock::ReadWriteLock;
pub use lock::semaphore::{LeasedPermit, LeasedSemaphore};
pub use notify::cancel::Cancel;

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<LockClient>();
    send_sync::<Lock>();
    send_sync::<Lock<Token>>();
    send_sync::<Lock<Fair>>();
    send_sync::<Lock<NonReentrantFair>>();
    send_sync::<ReadWriteLock>();
    send_sync::<LeasedSemaphore>();
    send_sync::<Election>();
    send_sync::<CountDownLatch>();
    const fn send<T: Send>() {}
    send::<LockGuard<Token>>();
    send::<LeasedPermit>();
    send_sync::<CountingSemaphore>();
    send::<CountedPermits>();
    send::<Leadership>();
    send::<Observer>();
    send_sync::<Error>();
};
