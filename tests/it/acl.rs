//! The whole life of every kind of lock as a Redis user with exactly the rights the docs
//! list ("Redis users (ACL)" in `docs/deploying.md`, and a kind's further rights in its
//! section of `docs/kinds.md`): the rules are read from the pages themselves.

use crate::support;

use std::time::Duration;

use redmutex::LockClient;
use support::{MakeLock, SHORT_LEASE, Server, channel, eventually, response_timeout_for};

/// The page that lists a lock user's rights, under "Redis users (ACL)".
const DEPLOYING: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/deploying.md"));

/// The page of the kinds, whose sections list the further rights a kind needs.
const KINDS: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/kinds.md"));

/// The lock user's `ACL SETUSER` command, continuation lines joined, split into words.
fn lock_user_rules() -> Vec<String> {
    rules("ACL SETUSER locker on")
}

/// The docs' `ACL SETUSER` command that begins with `start` (in `docs/deploying.md`, else in
/// `docs/kinds.md`), continuation lines joined, split into words.
pub fn rules(start: &str) -> Vec<String> {
    let page = [DEPLOYING, KINDS]
        .into_iter()
        .find(|page| page.contains(start))
        .unwrap_or_else(|| panic!("the docs list no ACL command beginning {start:?}"));
    let start = page.find(start).unwrap();
    let mut command = String::new();
    for line in page[start..].lines() {
        match line.trim_end().strip_suffix('\\') {
            Some(continued) => command.push_str(continued),
            None => {
                command.push_str(line);
                break;
            }
        }
    }
    command.split_whitespace().map(str::to_owned).collect()
}

/// The lock user and its cluster rights are listed under "Redis users (ACL)" in
/// `docs/deploying.md`, and the README links there.
#[test]
fn the_lock_user_is_listed_under_redis_users_and_the_readme_links_to_it() {
    let section = DEPLOYING
        .split_once("\n## Redis users (ACL)\n")
        .expect("docs/deploying.md has a section \"Redis users (ACL)\"")
        .1;
    let section = section.split("\n## ").next().unwrap();
    for start in ["ACL SETUSER locker on", "ACL SETUSER locker +cluster"] {
        assert!(
            section.contains(start),
            "{start:?} under \"Redis users (ACL)\""
        );
    }
    let readme = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"));
    assert!(
        readme.contains("](docs/deploying.md#redis-users-acl)"),
        "the README should link to docs/deploying.md#redis-users-acl"
    );
}

/// The lock user, with its cluster rights added, on every node of `cluster`; a URL of one
/// node as that user.
fn documented_cluster_user(cluster: &support::Cluster) -> String {
    let extra = rules("ACL SETUSER locker +cluster");
    let mut url = String::new();
    for server in &cluster.servers {
        url = documented_user(server);
        let mut cmd = redis::cmd("ACL");
        for word in &extra[1..] {
            cmd.arg(word);
        }
        let () = cmd.query(&mut server.conn()).unwrap();
    }
    url
}

/// Creates the documented lock user on `server` and returns its URL.
pub fn documented_user(server: &Server) -> String {
    let words = lock_user_rules();
    assert_eq!(words[..3], ["ACL", "SETUSER", "locker"], "{words:?}");
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER").arg("locker").arg("reset");
    for word in &words[3..] {
        cmd.arg(if word == ">password" { ">secret" } else { word });
    }
    let () = cmd.query(&mut server.conn()).unwrap();
    format!("redis://locker:secret@127.0.0.1:{}/", server.port())
}

fn client(url: &str, retry_cap: Duration) -> LockClient {
    LockClient::builder(url)
        .key_prefix("myapp:")
        .lease(SHORT_LEASE)
        .response_timeout(response_timeout_for(SHORT_LEASE))
        .connect_timeout(Duration::from_secs(5))
        .retry_cap(retry_cap)
        .build()
        .unwrap()
}

fn whole_life<K: MakeLock>(server: &Server, url: &str) {
    let name = format!("life-{}", K::NAME);
    let holder = client(url, Duration::from_millis(200));
    // A retry cap far beyond the test: only an unlock message wakes this waiter in time.
    let waiter = client(url, Duration::from_secs(600));
    let lock = K::make(&holder, &name);

    let guard = lock.lock().unwrap();
    assert!(lock.is_locked().unwrap());
    assert!(lock.remaining_lease().unwrap().is_some());
    let renewals = holder.stats().renewals;
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| {
            K::make(&waiter, &name)
                .try_lock_for(Duration::from_secs(120))
                .unwrap()
                .expect("woken")
                .unlock()
                .unwrap();
        });
        // A fair-lock waiter waits on a channel of its own, beside the lock's.
        let own = format!("{}:*", channel(&format!("myapp:{name}")));
        let rwlock = format!("redisson_rwlock:{{myapp:{name}}}");
        assert!(eventually(Duration::from_secs(30), || {
            server.subscribers(&channel(&format!("myapp:{name}"))) > 0
                || server.channels(&own) > 0
                || server.subscribers(&rwlock) > 0
        }));
        assert!(
            eventually(Duration::from_secs(30), || holder.stats().renewals
                >= renewals + 2),
            "{}: not renewed: {:?}",
            K::NAME,
            holder.stats()
        );
        assert!(!guard.is_lost());
        guard.unlock().unwrap();
        waiting.join().unwrap();
    });
    assert_eq!(holder.stats().locks_lost, 0);

    let _held = K::make(&waiter, &name).lock().unwrap();
    assert!(lock.force_unlock().unwrap(), "{}: force_unlock", K::NAME);
    assert!(!lock.is_locked().unwrap());
}

#[test]
fn every_kind_lives_its_whole_life_as_the_documented_user() {
    let server = Server::start();
    let url = documented_user(&server);
    whole_life::<redmutex::Reentrant>(&server, &url);
    whole_life::<redmutex::Fenced>(&server, &url);
    whole_life::<redmutex::Token>(&server, &url);
    whole_life::<redmutex::Fair>(&server, &url);
    whole_life::<redmutex::Write>(&server, &url);
}

#[test]
fn a_multi_lock_takes_renews_waits_and_wakes_as_the_documented_user() {
    let server = Server::start();
    let url = documented_user(&server);
    let holder = client(&url, Duration::from_millis(200));
    // Only the release's message wakes this waiter in time.
    let waiter = client(&url, Duration::from_secs(600));
    let names = ["multi-a", "multi-b", "multi-c"];
    let multi = holder.multi_lock(names);
    let guard = multi.lock().unwrap();
    let renewals = holder.stats().renewals;
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| {
            (waiter
                .multi_lock(names)
                .try_lock_for(Duration::from_secs(120)))
            .unwrap()
            .expect("woken")
            .unlock()
            .unwrap();
        });
        assert!(eventually(Duration::from_secs(30), || {
            server.subscribers(&channel("myapp:multi-a")) > 0
        }));
        assert!(eventually(Duration::from_secs(30), || holder
            .stats()
            .renewals
            >= renewals + 6));
        assert!(!guard.is_lost());
        guard.unlock().unwrap();
        waiting.join().unwrap();
    });
    assert_eq!(holder.stats().locks_lost, 0);
}

#[test]
fn a_read_write_lock_reads_renews_and_wakes_as_the_documented_user() {
    let server = Server::start();
    let url = documented_user(&server);
    let holder = client(&url, Duration::from_millis(200));
    let lock = holder.read_write_lock("shared");
    let reads = (lock.read().lock().unwrap(), lock.read().lock().unwrap());
    let renewals = holder.stats().renewals;
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            client(&url, Duration::from_secs(600))
                .read_write_lock("shared")
                .write()
                .try_lock_for(Duration::from_secs(120))
                .unwrap()
                .expect("woken")
                .unlock()
                .unwrap();
        });
        assert!(eventually(Duration::from_secs(30), || {
            server.subscribers("redisson_rwlock:{myapp:shared}") > 0
                && holder.stats().renewals >= renewals + 2
        }));
        drop(reads);
        writer.join().unwrap();
    });
    assert_eq!(holder.stats().locks_lost, 0);
    assert!(!server.exists("myapp:shared"));
}

#[test]
fn a_semaphore_lives_its_whole_life_as_the_documented_user() {
    let server = Server::start();
    let url = documented_user(&server);
    let holder = client(&url, Duration::from_millis(200));
    let semaphore = holder.leased_semaphore("pool");
    assert!(semaphore.try_set_permits(1).unwrap());
    let permit = semaphore.acquire().unwrap();
    let renewals = holder.stats().renewals;
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| {
            let waiter = client(&url, Duration::from_secs(600));
            let semaphore = waiter.leased_semaphore("pool");
            let permit = semaphore.try_acquire_for(Duration::from_secs(120)).unwrap();
            permit.expect("woken").release().unwrap();
        });
        assert!(eventually(Duration::from_secs(30), || {
            server.subscribers("redisson_sc:{myapp:pool}") > 0
                && holder.stats().renewals >= renewals + 2
        }));
        permit.release().unwrap();
        waiter.join().unwrap();
    });
    semaphore.add_permits(2).unwrap();
    assert_eq!(semaphore.available_permits().unwrap(), 3);
    let permit = semaphore.acquire().unwrap();
    permit.extend(Duration::from_secs(5)).unwrap();
    assert_eq!(semaphore.set_permits(4).unwrap(), 2);
    assert_eq!(semaphore.reduce_permits(1).unwrap(), 3);
    assert_eq!(semaphore.drain_permits().unwrap(), 3);
    assert_eq!(semaphore.add_permits(3).unwrap(), 3);
    permit.release().unwrap();
    assert_eq!(semaphore.available_permits().unwrap(), 4);
    assert_eq!(holder.stats().locks_lost, 0);
    assert!(semaphore.delete().unwrap());
    assert!(!server.exists("myapp:pool"));
}

#[test]
fn a_first_come_first_served_election_campaigns_queues_and_wakes_as_the_documented_user() {
    let server = Server::start();
    let url = documented_user(&server);
    let election = |retry_cap| {
        client(&url, retry_cap)
            .election("cron")
            .first_come_first_served()
    };
    let leader = election(Duration::from_millis(200)).campaign().unwrap();
    let candidates: Vec<_> = (0..2)
        .map(|queued| {
            // Only a resignation's message wakes these candidates in time.
            let candidate = election(Duration::from_secs(600));
            let thread = std::thread::spawn(move || {
                let leadership = candidate.campaign().unwrap();
                let epoch = leadership.epoch();
                leadership.resign().unwrap();
                epoch
            });
            assert!(eventually(Duration::from_secs(30), || {
                let behind: usize = redis::cmd("LLEN")
                    .arg("redisson_lock_queue:{myapp:cron}:redmutex_queue")
                    .query(&mut server.conn())
                    .unwrap();
                server.exists("{myapp:cron}:redmutex_queue") && behind == queued
            }));
            thread
        })
        .collect();
    leader.resign().unwrap();
    let epochs: Vec<u64> = candidates.into_iter().map(|c| c.join().unwrap()).collect();
    assert_eq!(epochs, [2, 3]);
    assert!(!server.exists("myapp:cron"));
    assert!(!server.exists("{myapp:cron}:redmutex_queue"));
}

#[test]
fn the_documented_user_may_touch_nothing_outside_its_prefix() {
    let server = Server::start();
    let url = documented_user(&server);
    let outside = LockClient::builder(&url)
        .key_prefix("otherapp:")
        .build()
        .unwrap_err();
    assert!(outside.is_permission(), "{outside}");
}

/// On a cluster, every kind's waiter is woken by the release as the documented user with its
/// cluster rights added, on every node.
#[test]
fn a_cluster_client_locks_waits_and_wakes_as_the_documented_user() {
    let cluster = support::Cluster::start();
    let url = documented_cluster_user(&cluster);
    let build = |retry_cap: Duration| {
        LockClient::cluster(&[&url])
            .key_prefix("myapp:")
            .retry_cap(retry_cap)
            .build()
            .unwrap()
    };
    let (holder, waiter) = (
        build(Duration::from_millis(200)),
        build(Duration::from_secs(600)),
    );
    for name in ["one", "two", "three", "four"] {
        let lock = holder.lock(name);
        let guard = lock.lock().unwrap();
        std::thread::scope(|scope| {
            let waiting = scope.spawn(|| {
                // A retry cap far beyond the test: only an unlock message wakes it in time.
                let lock = waiter.lock(name);
                let guard = lock.try_lock_for(Duration::from_secs(120)).unwrap();
                guard.expect("woken").unlock().unwrap();
            });
            let owner = cluster.owner_of(&format!("myapp:{name}"));
            let channel = channel(&format!("myapp:{name}"));
            assert!(eventually(Duration::from_secs(30), || {
                let subscribed: Vec<(String, usize)> = redis::cmd("PUBSUB")
                    .arg("SHARDNUMSUB")
                    .arg(&channel)
                    .query(&mut owner.conn())
                    .unwrap();
                subscribed[0].1 > 0
            }));
            guard.unlock().unwrap();
            waiting.join().unwrap();
        });
        let _held = waiter.lock(name).lock().unwrap();
        assert!(lock.force_unlock().unwrap());
    }
}

/// EVALSHA denied on one primary of a cluster only, not the one serving the client's probe
/// key: building a client fails naming that primary, and doctor, on a client built before,
/// reports that primary's rights failed and the others' ok.
#[test]
fn build_and_doctor_check_the_rights_on_every_primary_of_a_cluster() {
    let cluster = support::Cluster::start();
    let url = documented_cluster_user(&cluster);
    let build = || LockClient::cluster(&[&url]).key_prefix("myapp:").build();
    let client = build().unwrap();
    let probed = cluster.owner_of("myapp:redmutex:probe").port();
    let denied = (cluster.primaries().into_iter())
        .find(|server| server.port() != probed)
        .unwrap();
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("locker")
        .arg("-evalsha")
        .query(&mut denied.conn())
        .unwrap();
    let port = format!(":{}", denied.port());
    let err = build().unwrap_err();
    assert!(err.is_permission(), "{err}");
    assert!(err.to_string().contains(&port), "{err}");
    let report = client.doctor().unwrap();
    let rights: Vec<_> = (report.findings.iter())
        .filter(|finding| finding.check == "rights")
        .collect();
    assert_eq!(rights.len(), 3, "{report}");
    for finding in rights {
        let expected = match finding.server.ends_with(&port) {
            true => redmutex::FindingLevel::Fail,
            false => redmutex::FindingLevel::Ok,
        };
        assert_eq!(finding.level, expected, "{report}");
    }
}

#[test]
fn a_counting_semaphore_lives_its_whole_life_as_the_documented_user() {
    let server = Server::start();
    let url = documented_user(&server);
    let holder = client(&url, Duration::from_millis(200));
    let semaphore = holder.counting_semaphore("slots");
    assert!(semaphore.try_set_permits(1).unwrap());
    let permits = semaphore.acquire().unwrap();
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| {
            let waiter = client(&url, Duration::from_secs(600));
            let semaphore = waiter.counting_semaphore("slots");
            let permits = semaphore.try_acquire_for(Duration::from_secs(120)).unwrap();
            permits.expect("woken").release().unwrap();
        });
        assert!(eventually(Duration::from_secs(30), || {
            server.subscribers("redisson_sc:{myapp:slots}") > 0
        }));
        permits.release().unwrap();
        waiter.join().unwrap();
    });
    assert_eq!(semaphore.add_permits(2).unwrap(), 3);
    assert_eq!(semaphore.release(1).unwrap(), 4);
    let permits = semaphore
        .try_acquire_many(3)
        .unwrap()
        .expect("three of four");
    assert_eq!(semaphore.drain_permits().unwrap(), 1);
    permits.release().unwrap();
    assert_eq!(semaphore.available_permits().unwrap(), 3);
    assert!(semaphore.delete().unwrap());
    assert!(!server.exists("myapp:slots"));
}

#[test]
fn a_count_down_latch_lives_its_whole_life_as_the_documented_user_with_the_latch_rights() {
    let server = Server::start();
    let url = documented_user(&server);
    let extra = rules("ACL SETUSER locker &redisson_countdownlatch__channel__*");
    let mut cmd = redis::cmd("ACL");
    for word in &extra[1..] {
        cmd.arg(word);
    }
    let () = cmd.query(&mut server.conn()).unwrap();
    let latch = client(&url, Duration::from_secs(600)).count_down_latch("ready");
    assert!(latch.try_set_count(2).unwrap());
    assert_eq!(latch.count_down().unwrap(), 1);
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| latch.wait_for(Duration::from_secs(120)).unwrap());
        let channel = "redisson_countdownlatch__channel__{myapp:ready}";
        assert!(eventually(Duration::from_secs(30), || {
            server.subscribers(channel) > 0
        }));
        assert_eq!(latch.count_down().unwrap(), 0);
        assert!(waiter.join().unwrap(), "woken by the last count-down");
    });
    assert!(latch.try_set_count(1).unwrap());
    assert!(latch.delete().unwrap());
    assert!(!server.exists("myapp:ready"));
}

/// A user with the rights listed before fair waiters found their place with `LPOS` (the
/// documented user without `+lpos`) still waits in line: each attempt after a waiter's first
/// reads the queue instead, and the waiters are served in the order they came.
#[test]
fn fair_waiters_of_a_user_without_lpos_are_served_in_order() {
    let server = Server::start();
    let url = documented_user(&server);
    let mut admin = server.conn();
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("locker")
        .arg("-lpos")
        .query(&mut admin)
        .unwrap();
    let () = redis::cmd("ACL")
        .arg("LOG")
        .arg("RESET")
        .query(&mut admin)
        .unwrap();
    let holder = client(&url, Duration::from_millis(200));
    // Comes back every 100 ms at least, to keep its place.
    let waiters = || {
        LockClient::builder(&url)
            .key_prefix("myapp:")
            .fair_queue_wait(Duration::from_millis(300))
            .build()
            .unwrap()
    };
    let (first, second) = (waiters(), waiters());
    let name = "no-lpos";
    let queue = "redisson_lock_queue:{myapp:no-lpos}";
    let guard = holder.fair_lock(name).lock().unwrap();
    let order = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        let wait = |client: &LockClient, which: &'static str| {
            let guard = client.fair_lock(name).try_lock_for(Duration::from_secs(60));
            let guard = guard.unwrap().expect("served");
            order.lock().unwrap().push(which);
            guard.unlock().unwrap();
        };
        let queued = |n: usize| {
            eventually(Duration::from_secs(30), || {
                redis::cmd("LLEN")
                    .arg(queue)
                    .query::<usize>(&mut server.conn())
                    .unwrap()
                    == n
            })
        };
        scope.spawn(move || wait(&first, "first"));
        assert!(queued(1), "the first waiter never queued");
        scope.spawn(move || wait(&second, "second"));
        assert!(queued(2), "the second waiter never queued");
        // Both came back since: their places were found by reading the queue.
        let denied = || {
            let log: Vec<Vec<redis::Value>> = redis::cmd("ACL")
                .arg("LOG")
                .query(&mut server.conn())
                .unwrap();
            let text = |value: &redis::Value| redis::from_redis_value::<String>(value.clone()).ok();
            log.iter().any(|entry| {
                let words: Vec<String> = entry.iter().filter_map(text).collect();
                words.iter().any(|w| w == "lpos") && words.iter().any(|w| w == "lua")
            })
        };
        assert!(
            eventually(Duration::from_secs(30), denied),
            "no attempt asked for LPOS"
        );
        assert!(queued(2), "a waiter lost its place");
        guard.unlock().unwrap();
    });
    assert_eq!(*order.lock().unwrap(), ["first", "second"]);
}

/// The deadlock check as the documented user: its wait edges sit in the lock keys' slots,
/// under the prefix's hash tag the user may write, and the walk reads nothing else; two
/// such clients in a cycle, and the one that closed it is told, with nothing refused.
#[test]
fn a_deadlock_is_found_as_the_documented_user() {
    let server = Server::start();
    let url = documented_user(&server);
    let (older, later) = (
        client(&url, Duration::from_millis(200)),
        client(&url, Duration::from_millis(200)),
    );
    let waiting = || crate::deadlock::waiting_beside(&server, "myapp:a");
    let err = crate::deadlock::cycle_of_two((&older, &later), ("a", "b"), &waiting);
    assert!(err.is_deadlock(), "{err:#}");
    // Naming connections and reading the settings are refused and done without, as
    // documented; nothing else may be.
    let log: Vec<redis::Value> = redis::cmd("ACL")
        .arg("LOG")
        .query(&mut server.conn())
        .unwrap();
    let denied: Vec<String> = (log.iter().map(|entry| format!("{entry:?}")))
        .filter(|entry| !entry.contains("client|setname") && !entry.contains("config|get"))
        .collect();
    assert!(denied.is_empty(), "refused: {denied:?}");
}
