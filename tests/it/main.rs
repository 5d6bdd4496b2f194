//! The integration tests, one binary so that the crate links once and tests of every area
//! run in parallel: a module per area, each test with its own throwaway servers
//! (`support`). `cargo test --all-features` runs them all; `cargo test --all-features --test
//! it model::` runs one area. Tests that need a feature (`cli`, `metrics`, `tls`) build only
//! with it, so that `cargo test` without features passes too. Tests that drive another lock
//! library (Redisson, redis-py, node-redlock, redsync) need its toolchain, and are skipped
//! without it unless `REDMUTEX_REQUIRE_PEERS=1` (`support::toolchain`).

mod support;

mod acl;
mod cancel;
mod cleanup;
mod cli;
mod cluster;
mod conformance;
mod counting_semaphore;
mod data_safety;
mod deadlock;
mod defaults;
mod doctor;
mod election;
mod election_candidacy;
mod election_fcfs;
mod election_leader;
mod errors;
mod exclusion;
mod explain;
mod failover;
mod failures;
mod fair;
mod faults;
mod fenced;
mod fork;
mod give_back;
mod health;
mod inspect;
mod interop;
mod java_counting_semaphore;
mod java_differential;
mod java_fair;
mod java_latch;
mod java_lock;
mod java_multi;
mod java_non_reentrant;
mod java_read_write;
mod java_semaphore;
mod java_spin;
mod kinds;
mod latch;
mod layers;
mod lost;
mod metrics;
mod model;
mod multi_lock;
mod non_reentrant;
mod notify;
mod peers;
mod proxy;
mod read_write;
mod redisson_family;
mod redlock;
mod reentrancy;
mod replicas;
mod scripts;
mod semaphore;
mod sentinel;
mod spin;
mod tls;
mod token_interop;
mod waiting;
mod watch;
mod watchdog;
