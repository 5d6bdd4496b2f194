//! The `redmutex` tool, run as a subprocess against real servers: `locks` and `show` list
//! every kind while held, waited for and released; `--json` parses; `unlock --force` frees
//! a lock and wakes its waiter; `doctor` rates eviction policies, says "unknown" where
//! CONFIG is denied and says so when a server runs no scripts; bad usage exits with 2;
//! output into a closed pipe ends quietly.
#![cfg(feature = "cli")]

use crate::support;

use std::io::Read;
use std::process::{Child, Stdio};
use std::time::Duration;

use redmutex::LockClient;
use support::{Server, eventually};

const PATIENCE: Duration = Duration::from_secs(60);

/// Runs the tool against `url` with `args`; returns its exit code and standard output.
fn tool(url: &str, args: &[&str]) -> (i32, String) {
    let (code, stdout, _) = tool_with(url, args, &[]);
    (code, stdout)
}

/// The same with environment variables `env`; returns standard error too.
pub(crate) fn tool_with(url: &str, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = support::tool();
    cmd.envs(env.iter().copied());
    cmd.arg("--url").arg(url).args(args);
    let output = cmd.timeout(PATIENCE).output().unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let code = output.status.code().unwrap_or(-1);
    (code, text(&output.stdout), text(&output.stderr))
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|err| panic!("{err}: {text}"))
}

#[test]
fn locks_and_show_list_every_kind_held_waited_for_and_released() {
    let server = Server::start();
    let url = server.url();
    let (ours, theirs) = (server.client(), server.client());
    let reentrant = ours.lock("orders:42").lock().unwrap();
    let token = ours.token_lock("jobs:7").lock().unwrap();
    let fenced = ours.fenced_lock("ledger").lock().unwrap();
    let rw = ours.read_write_lock("config");
    let read = rw.read().lock().unwrap();
    let semaphore = ours.leased_semaphore("pool");
    assert!(semaphore.try_set_permits(2).unwrap());
    let permit = semaphore.acquire().unwrap();
    let fair = ours.fair_lock("queue").lock().unwrap();
    let rival = theirs.fair_lock("queue");
    let waiter = std::thread::spawn(move || rival.try_lock_for(PATIENCE).unwrap().is_some());
    assert!(eventually(PATIENCE, || ours
        .inspect("queue")
        .unwrap()
        .queue
        .len()
        == 1));

    // A token lock's string may as well be a digest: listed only with --all, as such.
    let (code, table) = tool(&url, &["locks"]);
    assert_eq!(code, 0, "{table}");
    assert!(!table.contains("jobs:7"), "{table}");
    let (code, table) = tool(&url, &["locks", "--all"]);
    assert_eq!(code, 0, "{table}");
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("NAME"), "{table}");
    let permit_id = permit.id();
    for (name, kind, holder) in [
        ("orders:42", "reentrant", ours.id()),
        ("jobs:7", "token (may be a lock)", token.token()),
        ("ledger", "fenced", ours.id()),
        ("config", "read-write", ours.id()),
        ("pool", "leased-semaphore", permit_id.as_str()),
        ("queue", "fair", ours.id()),
    ] {
        let line = (lines.iter())
            .find(|line| line.starts_with(name))
            .unwrap_or_else(|| panic!("{name} missing:\n{table}"));
        assert!(line.contains(kind), "{line}");
        assert!(line.contains(holder), "{line}: the holder is named");
    }
    let (_, listed) = tool(&url, &["locks", "--json"]);
    let listed = json(&listed);
    assert_eq!(listed.as_array().unwrap().len(), 5);
    let queue = (listed.as_array().unwrap().iter())
        .find(|lock| lock["name"] == "queue")
        .unwrap();
    assert_eq!(queue["queue"].as_array().unwrap().len(), 1, "{queue}");
    assert!(queue["waiters"].as_u64().unwrap() >= 1);

    let (code, shown) = tool(&url, &["show", "ledger"]);
    assert_eq!(code, 0);
    assert!(
        shown.contains(&format!("fence:      {}", fenced.token())),
        "{shown}"
    );
    assert!(shown.contains("redisson_lock_token:{ledger}"), "{shown}");
    let (_, shown) = tool(&url, &["show", "jobs:7", "--json"]);
    assert_eq!(json(&shown)["holders"][0]["id"], token.token());

    drop((reentrant, token, fenced, read, fair));
    assert!(waiter.join().unwrap());
    permit.release().unwrap();
    let (_, table) = tool(&url, &["locks"]);
    assert_eq!(table.lines().count(), 1, "no lock stays:\n{table}");
    // The semaphore's count stays, with no permit held: a number, listed only with --all.
    let (_, table) = tool(&url, &["locks", "--all"]);
    let lines: Vec<&str> = table.lines().skip(1).collect();
    assert_eq!(lines.len(), 1, "{table}");
    assert!(
        lines[0].starts_with("pool") && lines[0].contains("no lock"),
        "{table}"
    );
    let (code, shown) = tool(&url, &["show", "orders:42"]);
    assert_eq!(code, 0);
    assert!(shown.contains("kind:       free"), "{shown}");
}

#[test]
fn unlock_force_frees_a_lock_and_wakes_its_waiter() {
    let server = Server::start();
    let url = server.url();
    let holder = server.client();
    let guard = holder.lock("stuck").lock().unwrap();
    // A retry cap far beyond the test: only the unlock message wakes it in time.
    let waiting = server
        .builder()
        .retry_cap(Duration::from_secs(600))
        .build()
        .unwrap();
    let rival = waiting.lock("stuck");
    let waiter = std::thread::spawn(move || rival.try_lock_for(PATIENCE).unwrap().is_some());
    assert!(eventually(PATIENCE, || holder
        .inspect("stuck")
        .unwrap()
        .waiters
        == Some(1)));

    let (code, _) = tool(&url, &["unlock", "stuck"]);
    assert_eq!(code, 2, "without --force");
    let (code, _) = tool(&url, &["unlock", "stuck", "--force"]);
    assert_eq!(code, 2, "no terminal to ask on, and no --yes");
    assert!(holder.lock("stuck").is_locked().unwrap());

    let (code, said) = tool(&url, &["unlock", "stuck", "--force", "--yes"]);
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("removed stuck"), "{said}");
    assert!(said.contains(holder.id()), "{said}");
    assert!(waiter.join().unwrap(), "the waiter was woken and took it");
    assert!(guard.unlock().unwrap_err().is_lost());
    let (code, _) = tool(&url, &["unlock", "nothing", "--force", "--yes"]);
    assert_eq!(code, 1, "nothing to unlock");
}

#[test]
fn doctor_rates_eviction_and_says_unknown_without_config_rights() {
    let server = Server::start();
    let url = server.url();
    let (code, said) = tool(&url, &["doctor"]);
    // The test servers run without persistence: a warning, which fails only with --strict.
    assert!(said.contains("warn    persistence"), "{said}");
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("ok      eviction"), "{said}");
    let (code, said) = tool(&url, &["doctor", "--strict"]);
    assert_eq!(code, 1, "{said}");
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("allkeys-lru")
        .arg("maxmemory")
        .arg("100mb")
        .query(&mut server.conn())
        .unwrap();
    let (code, said) = tool(&url, &["doctor"]);
    assert_eq!(code, 1);
    assert!(said.contains("fail    eviction"), "{said}");
    let (_, said) = tool(&url, &["doctor", "--json"]);
    let report = json(&said);
    assert_eq!(report["worst"], "fail");
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("reader")
        .arg(&["on", ">secret", "~*", "&*", "+@all", "-config"][..])
        .query(&mut server.conn())
        .unwrap();
    let narrow = format!("redis://reader:secret@127.0.0.1:{}/", server.port());
    let (_, said) = tool(&narrow, &["doctor"]);
    assert!(said.contains("unknown eviction"), "{said}");
}

#[test]
fn doctor_says_plainly_that_a_server_runs_no_scripts() {
    let renamed = [
        "--rename-command",
        "EVAL",
        "",
        "--rename-command",
        "EVALSHA",
        "",
    ];
    let server = Server::start_with(support::Args {
        trailing: renamed.map(String::from).to_vec(),
        ..support::Args::default()
    });
    let (code, report, said) = tool_with(&server.url(), &["doctor"], &[]);
    assert_eq!(code, 1, "{said}");
    assert!(report.contains("the server runs no scripts"), "{report}");
    assert!(report.contains("turn scripting on"), "{report}");
}

#[test]
fn doctor_warns_of_a_redlock_node_whose_clock_is_skewed() {
    let servers = [Server::start(), Server::start(), Server::start()];
    let skewed = support::ClockSkew::start(servers[2].port(), Duration::from_secs(5));
    let urls = format!("{},{},{}", servers[0].url(), servers[1].url(), skewed.url());
    let (code, said) = tool(&urls, &["doctor", "--strict"]);
    assert_eq!(code, 1, "{said}");
    let port = skewed
        .url()
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    let line = (said.lines())
        .find(|line| line.contains("clock") && line.contains(&format!(":{port} ")))
        .unwrap_or_else(|| panic!("no clock line for the skewed node:\n{said}"));
    assert!(line.starts_with("warn"), "{line}");
    let others = said
        .lines()
        .filter(|l| l.starts_with("ok      clock"))
        .count();
    assert_eq!(others, 2, "{said}");
}

#[test]
fn locks_show_and_unlock_route_on_a_cluster() {
    let cluster = support::Cluster::start();
    let client = cluster.client();
    let names = ["a", "b", "c", "d", "e", "f"];
    let guards: Vec<_> = names
        .iter()
        .map(|n| client.lock(n).lock().unwrap())
        .collect();
    let seed = &cluster.seeds()[0];
    let mut cmd = support::tool();
    cmd.env("REDIS_URL", seed)
        .args(["--cluster", "locks", "--json"]);
    let output = cmd.timeout(PATIENCE).output().unwrap();
    let listed = json(&String::from_utf8_lossy(&output.stdout));
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), names.len(), "{listed:?}");
    for lock in listed {
        let name = lock["name"].as_str().unwrap();
        let owner = cluster.owner_of(name).port();
        assert!(
            lock["server"]
                .as_str()
                .unwrap()
                .ends_with(&format!(":{owner}")),
            "{lock}: read from the primary serving it"
        );
    }
    let mut cmd = support::tool();
    cmd.env("REDIS_URL", seed)
        .args(["--cluster", "unlock", "c", "--force", "--yes"]);
    assert!(cmd.timeout(PATIENCE).output().unwrap().status.success());
    assert!(!client.lock("c").is_locked().unwrap());
    drop(guards);
}

#[test]
fn show_finds_the_primary_through_sentinel() {
    let d = support::Deployment::start(support::Options {
        replicas: 0,
        sentinels: 1,
        quorum: 1,
        ..Default::default()
    });
    let client = LockClient::sentinel(&[&d.sentinels[0].url()], support::MASTER)
        .build()
        .unwrap();
    let _guard = client.lock("through-sentinel").lock().unwrap();
    let mut cmd = support::tool();
    cmd.args([
        "--url",
        &d.sentinels[0].url(),
        "--sentinel",
        support::MASTER,
    ])
    .args(["show", "through-sentinel"]);
    let output = cmd.timeout(PATIENCE).output().unwrap();
    let shown = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{shown}");
    assert!(shown.contains("kind:       reentrant"), "{shown}");
    assert!(shown.contains(client.id()), "{shown}");
}

#[test]
fn bad_usage_exits_with_2_and_errors_with_1() {
    let server = Server::start();
    assert_eq!(tool(&server.url(), &["frobnicate"]).0, 2);
    assert_eq!(tool(&server.url(), &["show"]).0, 2);
    assert_eq!(tool("redis://127.0.0.1:1/", &["locks"]).0, 1, "unreachable");
    assert_eq!(tool("not a url", &["locks"]).0, 1);
    let _ = LockClient::open(&server.url()).unwrap();
}

/// Application data where the tool looks for locks: a cache entry, a session hash, a
/// counter, a list, a hash whose field looks like a name and a number. `locks` leaves them
/// out (`--all` lists them as no locks), and `unlock --force --yes` refuses every one,
/// leaving it byte for byte as it was; a lock beside them is still broken.
#[test]
fn the_tool_never_lists_nor_deletes_what_is_not_a_lock() {
    let server = Server::start();
    let url = server.url();
    let mut redis = server.conn();
    let data = ["cache:user:1", "session:1", "hits", "jobs", "user:7"];
    let _: () = redis::pipe()
        .cmd("SET")
        .arg(data[0])
        .arg(r#"{"name":"bob"}"#)
        .cmd("HSET")
        .arg(data[1])
        .arg("a")
        .arg("1")
        .cmd("SET")
        .arg(data[2])
        .arg(42)
        .cmd("RPUSH")
        .arg(data[3])
        .arg("x")
        .cmd("HSET")
        .arg(data[4])
        .arg("user:1")
        .arg("3")
        .query(&mut redis)
        .unwrap();
    let dump = |redis: &mut redis::Connection| -> Vec<Vec<u8>> {
        (data.iter())
            .map(|key| redis::cmd("DUMP").arg(key).query(redis).unwrap())
            .collect()
    };
    let before = dump(&mut redis);
    let holder = server.client();
    let _held = holder.lock("orders:42").lock().unwrap();

    let (code, table) = tool(&url, &["locks"]);
    assert_eq!(code, 0);
    let listed: Vec<&str> = (table.lines().skip(1))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(listed, ["orders:42"], "{table}");
    let (_, table) = tool(&url, &["locks", "--all"]);
    for key in data {
        let line = (table.lines())
            .find(|line| line.starts_with(key))
            .unwrap_or_else(|| panic!("{key} not listed with --all:\n{table}"));
        assert!(line.contains("no lock"), "{line}");
    }

    for key in data {
        let (code, _, said) = tool_with(&url, &["unlock", key, "--force", "--yes"], &[]);
        assert_eq!(code, 1, "{key}: {said}");
        assert!(said.contains("is no lock"), "{key}: {said}");
        let (_, shown) = tool(&url, &["show", key]);
        assert!(shown.contains("no lock"), "{shown}");
        assert!(!shown.contains("bob"), "data shown as a holder: {shown}");
    }
    assert_eq!(dump(&mut redis), before, "the data changed");
    let (code, said) = tool(&url, &["unlock", "orders:42", "--force", "--yes"]);
    assert_eq!(code, 0, "{said}");
    assert_eq!(dump(&mut redis), before, "the data changed");
}

/// A lock under a prefix the tool was not given: `show` says where it is; the prefix may
/// come from `REDMUTEX_PREFIX`; a prefix without a separator is warned about.
#[test]
fn show_points_to_the_prefix_a_lock_is_under() {
    let server = Server::start();
    let url = server.url();
    let client = server.builder().key_prefix("myapp:").build().unwrap();
    let _held = client.lock("orders:42").lock().unwrap();

    let (code, shown, said) = tool_with(&url, &["show", "orders:42"], &[]);
    assert_eq!(code, 0);
    assert!(shown.contains("kind:       free"), "{shown}");
    assert!(said.contains("did you mean --prefix myapp:?"), "{said}");

    let prefixed = [("REDMUTEX_PREFIX", "myapp:")];
    let (_, shown, said) = tool_with(&url, &["show", "orders:42"], &prefixed);
    assert!(shown.contains("kind:       reentrant"), "{shown}");
    assert!(said.is_empty(), "{said}");

    let (_, _, said) = tool_with(&url, &["--prefix", "myapp", "show", "orders:42"], &[]);
    assert!(said.contains("ends without a separator"), "{said}");
}

/// Holders are named by their clients' names: the tool shows each beside the owner id.
#[test]
fn holders_are_shown_with_their_client_names() {
    let server = Server::start();
    let url = server.url();
    let billing = server.builder().client_name("billing-7").build().unwrap();
    let _held = billing.lock("invoices").lock().unwrap();
    let unnamed = server.client();
    let _also = unnamed.lock("orders").lock().unwrap();

    let (code, table) = tool(&url, &["locks"]);
    assert_eq!(code, 0);
    let line = (table.lines().find(|l| l.starts_with("invoices"))).unwrap();
    assert!(line.contains(&format!("{}:", billing.id())), "{line}");
    assert!(line.contains("[billing-7]"), "{line}");
    // The default name: host name and process id.
    let line = (table.lines().find(|l| l.starts_with("orders"))).unwrap();
    assert!(
        line.contains(&format!("/{}]", std::process::id())),
        "{line}"
    );
    let (_, shown) = tool(&url, &["show", "invoices", "--json"]);
    assert_eq!(json(&shown)["holders"][0]["client"], "billing-7");
}

/// Refused credentials: the tool says how to give them from a shell.
#[test]
fn an_auth_failure_says_how_to_give_credentials() {
    let server = Server::start();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("secret")
        .query(&mut server.conn())
        .unwrap();
    let url = format!("redis://127.0.0.1:{}/", server.port());
    let (code, _, said) = tool_with(&url, &["locks"], &[]);
    assert_eq!(code, 1, "{said}");
    assert!(
        said.contains("--url redis://USER:PASSWORD@HOST:PORT/"),
        "{said}"
    );
}

/// A key under the prefix that cannot be looked at (the user may not read it): `locks`
/// lists what it could read and the key as unreadable, and exits 1, the listing being
/// incomplete. In JSON, its kind is `unreadable` and the reason is in a field of its own.
#[test]
fn locks_lists_past_a_key_it_cannot_read_and_exits_1() {
    let server = Server::start();
    let client = server.client();
    let _guard = client.lock("readable").lock().unwrap();
    let () = redis::cmd("SET")
        .arg("secret")
        .arg("1")
        .query(&mut server.conn())
        .unwrap();
    let url = support::narrow_user(&server);
    let (code, stdout, stderr) = tool_with(&url, &["locks"], &[]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stdout.contains("readable"), "{stdout}");
    let line = (stdout.lines().find(|l| l.starts_with("secret"))).unwrap();
    assert!(line.contains("unreadable: "), "{stdout}");
    assert!(stderr.contains("incomplete"), "{stderr}");
    let (code, listed) = tool(&url, &["locks", "--json"]);
    assert_eq!(code, 1);
    let listed = json(&listed);
    let secret = (listed.as_array().unwrap().iter())
        .find(|lock| lock["name"] == "secret")
        .unwrap();
    assert_eq!(secret["kind"], "unreadable", "{secret}");
    assert!(!secret["error"].as_str().unwrap().is_empty(), "{secret}");
    let readable = (listed.as_array().unwrap().iter())
        .find(|lock| lock["name"] == "readable")
        .unwrap();
    assert_eq!(readable["kind"], "reentrant", "{readable}");
    assert_eq!(readable.get("error"), None, "{readable}");
}

/// A cache entry under a key longer than any lock's name, beside a held lock: no lock.
/// `locks` leaves it out and exits 0; `locks --all` lists it as no lock, saying why, and
/// in JSON its kind is `no-lock` with what it holds in a field of its own.
#[test]
fn a_key_longer_than_any_lock_name_is_no_lock() {
    let server = Server::start();
    let url = server.url();
    let _guard = server.client().lock("held").lock().unwrap();
    let long = support::plant_long_key(&server);

    let (code, table, said) = tool_with(&url, &["locks"], &[]);
    assert_eq!(code, 0, "{table}{said}");
    assert_eq!(listed_names(&table), ["held"], "{table}");
    assert!(said.is_empty(), "{said}");
    let (code, table) = tool(&url, &["locks", "--all"]);
    assert_eq!(code, 0, "{table}");
    let line = (table.lines().find(|l| l.starts_with(&long))).unwrap();
    assert!(line.contains("no lock: "), "{line}");
    assert!(line.contains("1024"), "{line}");
    assert!(!line.contains("unreadable"), "{line}");

    let (code, listed) = tool(&url, &["locks", "--json"]);
    assert_eq!(code, 0);
    let listed = json(&listed);
    let names: Vec<&str> = (listed.as_array().unwrap().iter())
        .map(|lock| lock["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["held"]);
    let (code, listed) = tool(&url, &["locks", "--all", "--json"]);
    assert_eq!(code, 0);
    let listed = json(&listed);
    let entry = (listed.as_array().unwrap().iter())
        .find(|lock| lock["name"] == long.as_str())
        .unwrap();
    assert_eq!(entry["kind"], "no-lock", "{entry}");
    assert!(
        entry["contents"].as_str().unwrap().contains("1024"),
        "{entry}"
    );
    assert_eq!(entry.get("error"), None, "{entry}");
    let held = (listed.as_array().unwrap().iter())
        .find(|lock| lock["name"] == "held")
        .unwrap();
    assert_eq!(held["kind"], "reentrant", "{held}");
    assert_eq!(held.get("contents"), None, "{held}");
}

/// A counting semaphore and a count-down latch with a waiter each, and an election with
/// queued candidates: `locks` lists them with their counts; `show` gives a count and its
/// waiters, and the candidates in order, in text and JSON; `unlock` breaks neither count,
/// and inspecting changes nothing.
#[test]
fn the_tool_shows_counts_waiters_and_candidates() {
    let server = Server::start();
    let url = server.url();
    let ours = server.client();
    let pool = ours.counting_semaphore("pool");
    assert!(pool.try_set_permits(3).unwrap());
    let held = pool.acquire_many(3).unwrap();
    let latch = ours.count_down_latch("ready");
    assert!(latch.try_set_count(2).unwrap());
    let theirs = server.client();
    let wanted = theirs.counting_semaphore("pool");
    let taker = std::thread::spawn(move || wanted.try_acquire_for(PATIENCE).unwrap().is_some());
    let waited = theirs.count_down_latch("ready");
    let waiter = std::thread::spawn(move || waited.wait_for(PATIENCE).unwrap());
    // Waiting, as the tool sees it.
    let shown = |name: &str| json(&tool(&url, &["show", name, "--json"]).1);
    assert!(eventually(PATIENCE, || shown("pool")["waiters"] == 1));
    assert!(eventually(PATIENCE, || shown("ready")["waiters"] == 1));

    let named = |name: &str| server.builder().client_name(name).build().unwrap();
    let clients = [named("alpha"), named("bravo"), named("charlie")];
    let fcfs = |at: usize| clients[at].election("cron").first_come_first_served();
    let leadership = fcfs(0).campaign().unwrap();
    let mut campaigns = Vec::new();
    for at in 1..clients.len() {
        let election = fcfs(at);
        campaigns.push(std::thread::spawn(move || {
            election.try_campaign_for(PATIENCE).unwrap().is_some()
        }));
        let listed = || shown("cron")["candidates"].as_array().map_or(0, Vec::len);
        assert!(eventually(PATIENCE, || listed() == at + 1));
    }
    let mut redis = server.conn();
    let dump = |redis: &mut redis::Connection| -> Vec<Vec<u8>> {
        (["pool", "ready"].iter())
            .map(|key| redis::cmd("DUMP").arg(key).query(redis).unwrap())
            .collect()
    };
    let before = dump(&mut redis);

    let (code, table) = tool(&url, &["locks"]);
    assert_eq!(code, 0, "{table}");
    let line = |name: &str| {
        (table.lines().find(|l| l.starts_with(name)))
            .unwrap_or_else(|| panic!("{name} missing:\n{table}"))
            .to_owned()
    };
    let pool_line = line("pool");
    assert!(pool_line.contains("counting semaphore"), "{pool_line}");
    assert!(pool_line.contains("0 available"), "{pool_line}");
    assert!(
        pool_line.trim_end().ends_with(" 1"),
        "one waiter: {pool_line}"
    );
    let ready_line = line("ready");
    assert!(ready_line.contains("count-down latch"), "{ready_line}");
    assert!(ready_line.contains("count 2"), "{ready_line}");
    assert!(
        ready_line.trim_end().ends_with(" 1"),
        "one waiter: {ready_line}"
    );
    assert!(line("cron").contains("alpha"), "{table}");

    let (code, text) = tool(&url, &["show", "pool"]);
    assert_eq!(code, 0);
    assert!(text.contains("kind:       counting semaphore\n"), "{text}");
    assert!(text.contains("available:  0\n"), "{text}");
    assert!(text.contains("waiters:    1\n"), "{text}");
    assert!(text.contains("redisson_sc:{pool}"), "{text}");
    let (code, text) = tool(&url, &["show", "ready"]);
    assert_eq!(code, 0);
    assert!(text.contains("kind:       count-down latch\n"), "{text}");
    assert!(text.contains("count:      2\n"), "{text}");
    assert!(text.contains("waiters:    1\n"), "{text}");
    let value = shown("pool");
    assert_eq!(value["kind"], "counting-semaphore", "{value}");
    assert_eq!(
        (value["available"].as_u64(), value["waiters"].as_u64()),
        (Some(0), Some(1))
    );
    let value = shown("ready");
    assert_eq!(value["kind"], "count-down-latch", "{value}");
    assert_eq!(
        (value["count"].as_u64(), value["waiters"].as_u64()),
        (Some(2), Some(1))
    );

    // The candidates, leader first, then in the order they came.
    let (code, text) = tool(&url, &["show", "cron"]);
    assert_eq!(code, 0);
    let candidates: Vec<&str> = (text.lines())
        .filter_map(|l| l.strip_prefix("candidate:  "))
        .collect();
    assert_eq!(candidates.len(), 3, "{text}");
    for (line, (name, role)) in
        candidates
            .iter()
            .zip([("alpha", "leads"), ("bravo", "waits"), ("charlie", "waits")])
    {
        assert!(line.starts_with(&format!("{name} {role} ")), "{text}");
    }
    let value = shown("cron");
    let listed: Vec<(&str, bool)> = (value["candidates"].as_array().unwrap().iter())
        .map(|c| (c["name"].as_str().unwrap(), c["leader"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        listed,
        [("alpha", true), ("bravo", false), ("charlie", false)],
        "{value}"
    );

    for name in ["pool", "ready"] {
        let (code, _, said) = tool_with(&url, &["unlock", name, "--force", "--yes"], &[]);
        assert_eq!(code, 1, "{name}: {said}");
        assert!(said.contains("which unlock does not break"), "{said}");
    }
    assert_eq!(dump(&mut redis), before, "a count changed");

    leadership.resign().unwrap();
    for campaign in campaigns {
        assert!(campaign.join().unwrap());
    }
    drop(held);
    assert!(taker.join().unwrap());
    latch.count_down().unwrap();
    latch.count_down().unwrap();
    assert!(waiter.join().unwrap());
}

/// Runs the tool against `url` with `args`, its standard output `stdout`; waits for it,
/// killing it past `PATIENCE`. Returns its exit code (-1 when killed) and standard error.
fn tool_writing_to(
    url: &str,
    args: &[&str],
    stdout: Stdio,
    reader: impl FnOnce(&mut Child),
) -> (i32, String) {
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin!("redmutex"))
        .env_remove("REDIS_URL")
        .env_remove("REDMUTEX_PREFIX")
        .arg("--url")
        .arg(url)
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    reader(&mut child);
    let mut stderr = child.stderr.take().unwrap();
    let collected = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).map(|_| text)
    });
    if !eventually(PATIENCE, || child.try_wait().unwrap().is_some()) {
        child.kill().unwrap();
    }
    let code = child.wait().unwrap().code().unwrap_or(-1);
    (code, collected.join().unwrap().unwrap())
}

/// Every output of the tool ends quietly when its reader has gone, as `| head -1` does:
/// no panic, no message, the command's own exit code. Into a pipe closed before the tool
/// starts, and one whose reader takes a byte of a listing longer than the pipe holds.
#[test]
fn output_ends_quietly_on_a_closed_pipe() {
    let server = Server::start();
    let url = server.url();
    let mut set = redis::pipe();
    for i in 0..2000 {
        set.cmd("SET")
            .arg(format!("held:{i:04}"))
            .arg(format!("{i:032x}"))
            .arg("PX")
            .arg(600_000)
            .ignore();
    }
    let () = set.query(&mut server.conn()).unwrap();
    let quiet = |args: &[&str], (code, said): (i32, String)| {
        assert!(!said.contains("panicked"), "{args:?}: {said}");
        assert_ne!(code, 101, "{args:?}: {said}");
        assert!(said.is_empty(), "{args:?}: {said}");
        code
    };
    for args in [
        // Token-shaped strings may be data: listed with --all.
        &["locks", "--all"][..],
        &["--json", "locks", "--all"],
        &["show", "held:0001"],
        &["--json", "show", "held:0001"],
        &["doctor"],
        &["--json", "doctor"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let code = quiet(args, tool_writing_to(&url, args, writer.into(), |_| {}));
        // The test servers run without persistence: the doctor warns, and exits 0.
        assert_eq!(code, 0, "{args:?}");
    }
    let args = ["locks", "--all"];
    let ran = tool_writing_to(&url, &args, Stdio::piped(), |child| {
        let mut byte = [0];
        child.stdout.take().unwrap().read_exact(&mut byte).unwrap();
    });
    assert_eq!(quiet(&args, ran), 0);
    let (code, listed) = tool(&url, &["locks", "--all"]);
    assert_eq!(
        (code, listed.lines().count()),
        (0, 2001),
        "the listing is whole"
    );
}

/// Runs the tool against `url` with `args` given as bytes; returns its exit code and its
/// standard output as bytes.
fn tool_raw(url: &str, args: &[&[u8]]) -> (i32, Vec<u8>) {
    use std::os::unix::ffi::OsStrExt;
    let mut cmd = support::tool();
    cmd.arg("--url").arg(url);
    cmd.args(args.iter().map(|arg| std::ffi::OsStr::from_bytes(arg)));
    let output = cmd.timeout(PATIENCE).output().unwrap();
    (output.status.code().unwrap_or(-1), output.stdout)
}

/// Text output as text, checked to hold nothing a terminal acts on but line ends.
fn terminal_safe(stdout: Vec<u8>) -> String {
    let text = String::from_utf8(stdout).expect("text output is UTF-8");
    let acting = (text.chars()).find(|&c| c != '\n' && (c.is_control() || c == '\u{202e}'));
    assert!(acting.is_none(), "{acting:?} printed in\n{text}");
    text
}

/// The names in the first column of a `locks` table.
fn listed_names(table: &str) -> Vec<String> {
    (table.lines().skip(1))
        .map(|line| line.split(' ').next().unwrap().to_owned())
        .collect()
}

/// A lock name holding terminal controls (a title, a screen clear, a newline) is listed and
/// shown escaped, one line each, and `unlock` with the name as printed removes exactly that
/// lock: not the lock whose name is the printed text itself. A name longer than an error
/// message shows is listed whole, and unlocked as listed.
#[test]
fn a_name_with_terminal_controls_is_printed_escaped_and_unlocked_as_printed() {
    let server = Server::start();
    let url = server.url();
    let client = server.client();
    let hostile = "evil\x1b]0;pwned\x07\x1b[2J\nrow\u{202e}";
    let printed = r"evil\x1b]0;pwned\x07\x1b[2J\nrow\xe2\x80\xae";
    let long = "n".repeat(80);
    let names = [hostile, printed, "evil", &long];
    let _guards: Vec<_> = (names.iter())
        .map(|name| client.lock(name).lock().unwrap())
        .collect();

    let (code, table) = tool_raw(&url, &[b"locks"]);
    assert_eq!(code, 0);
    let table = terminal_safe(table);
    let mut listed = listed_names(&table);
    listed.sort();
    let mut expected = vec![
        printed.to_owned(),
        printed.replace('\\', r"\\"),
        "evil".into(),
    ];
    expected.push(long.clone());
    expected.sort();
    assert_eq!(listed, expected, "{table}");

    let (code, shown) = tool_raw(&url, &[b"show", printed.as_bytes()]);
    assert_eq!(code, 0);
    let shown = terminal_safe(shown);
    assert!(
        shown.contains(&format!("name:       {printed}\n")),
        "{shown}"
    );
    assert!(shown.contains("kind:       reentrant"), "{shown}");
    let (_, listed) = tool(&url, &["locks", "--json"]);
    let listed = json(&listed);
    assert!(
        (listed.as_array().unwrap().iter()).any(|lock| lock["name"] == hostile),
        "JSON gives the name exactly: {listed}"
    );

    for name in [printed, &long] {
        let (code, said) = tool_raw(&url, &[b"unlock", name.as_bytes(), b"--force", b"--yes"]);
        assert_eq!(code, 0, "{name}");
        terminal_safe(said);
    }
    assert!(!client.lock(hostile).is_locked().unwrap());
    assert!(!client.lock(&long).is_locked().unwrap());
    for left in [printed, "evil"] {
        assert!(client.lock(left).is_locked().unwrap(), "{left} was removed");
    }
}

/// A lock whose key is not UTF-8 is listed escaped, its bytes in hex in the JSON output,
/// and unlocked with the name as printed, or given raw; the lock whose name is the lossy
/// decoding of those bytes is left alone.
#[test]
fn a_name_that_is_not_utf8_is_listed_escaped_and_unlocked_as_printed() {
    let server = Server::start();
    let url = server.url();
    let client = server.client();
    let raw: &[u8] = b"caf\xff";
    let lossy = "caf\u{fffd}";
    let _lossy_guard = client.lock(lossy).lock().unwrap();
    let raw_guard = client.lock(raw).lock().unwrap();

    let (code, table) = tool_raw(&url, &[b"locks"]);
    assert_eq!(code, 0);
    let table = terminal_safe(table);
    let mut listed = listed_names(&table);
    listed.sort();
    assert_eq!(listed, [r"caf\xff", lossy], "{table}");
    let (_, listed) = tool(&url, &["locks", "--json"]);
    let listed = json(&listed);
    let entry = |name: &str| {
        (listed.as_array().unwrap().iter())
            .find(|lock| lock["name"] == name)
            .unwrap_or_else(|| panic!("{name} not in {listed}"))
            .clone()
    };
    assert_eq!(entry(r"caf\xff")["name_hex"], "636166ff");
    assert_eq!(entry(lossy).get("name_hex"), None);

    let (code, said) = tool_raw(&url, &[b"unlock", br"caf\xff", b"--force", b"--yes"]);
    assert_eq!(code, 0);
    let said = terminal_safe(said);
    assert!(said.contains(r"removed caf\xff "), "{said}");
    assert!(!client.lock(raw).is_locked().unwrap());
    assert!(
        client.lock(lossy).is_locked().unwrap(),
        "the lossy name's lock was removed"
    );

    // The hold was broken: a re-entry would find it lost.
    drop(raw_guard);
    let _again = client.lock(raw).lock().unwrap();
    let (code, _) = tool_raw(&url, &[b"unlock", raw, b"--force", b"--yes"]);
    assert_eq!(code, 0, "the name given raw");
    assert!(!client.lock(raw).is_locked().unwrap());
    assert!(client.lock(lossy).is_locked().unwrap());
    let (code, _) = tool_raw(&url, &[b"unlock", br"caf\q", b"--force", b"--yes"]);
    assert_eq!(code, 2, "no such escape");
}

/// A cycle that stays a while: a waiter of ours, checking every 6 s, and an owner that holds
/// what it waits for and began to wait later (written here as the check would write it),
/// which never checks. The waiter of ours finds the cycle and leaves it to that later
/// waiter, so the tool sees it: `waits` marks both, exits 1, and `show` lists the waiter
/// for a lock. Finding the same waiters at its next check, ours ends its own wait.
#[test]
fn waits_shows_the_wait_for_graph_and_marks_a_cycle() {
    const TIMEOUT: Duration = Duration::from_secs(6);
    let server = Server::start();
    let url = server.url();
    let mut conn = server.conn();
    let other = "0b8f4a3e-1c2d-4e5f-8a9b-0c1d2e3f4a5b:1";
    let () = redis::cmd("HSET")
        .arg("b")
        .arg(other)
        .arg(1)
        .query(&mut conn)
        .unwrap();
    let later = std::time::SystemTime::now() + Duration::from_secs(3600);
    let since = later
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let edge = format!("redmutex-wait 1\n{other}\nelsewhere\n{since}\nreentrant\na");
    let () = redis::cmd("SET")
        .arg(format!("{{b}}:redmutex_wait:{other}"))
        .arg(edge)
        .query(&mut conn)
        .unwrap();
    let ours = server
        .builder()
        .client_name("ours")
        .deadlock_timeout(Some(TIMEOUT))
        .build()
        .unwrap();
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| {
            let a = ours.lock("a").lock().unwrap();
            let b = ours.lock("b").try_lock_for(PATIENCE);
            drop(a);
            b.map(|b| b.is_some())
        });
        assert!(eventually(PATIENCE, || {
            let (code, text) = tool(&url, &["waits"]);
            code == 1 && text.matches("DEADLOCK").count() == 2
        }));
        let (code, text) = tool(&url, &["waits", "--json"]);
        assert_eq!(code, 1);
        let waits = json(&text);
        let waits = waits.as_array().unwrap();
        assert_eq!(waits.len(), 2, "{text}");
        let mine = &waits[0];
        assert_eq!(mine["client"], "ours");
        assert_eq!(mine["waits_for"], "b");
        assert_eq!(mine["holds"], serde_json::json!(["a"]));
        assert_eq!(mine["held_by"], serde_json::json!([other]));
        assert_eq!(mine["deadlocked"], true);
        assert_eq!(waits[1]["waiter"], other);
        assert_eq!(waits[1]["holds"], serde_json::json!(["b"]));
        // The other owner listens for "a"'s release, as a waiter does: "a" has a waiter.
        let mut listening = server.conn();
        let mut listening = listening.as_pubsub();
        listening.subscribe("redisson_lock__channel:{a}").unwrap();
        let (code, shown) = tool(&url, &["show", "a"]);
        assert_eq!(code, 0);
        assert!(
            shown.contains(&format!("waits:      {other} of \"elsewhere\"")),
            "{shown}"
        );
        let (_, shown) = tool(&url, &["show", "b", "--json"]);
        assert_eq!(json(&shown)["waits"][0]["client"], "ours", "{shown}");
        // The other owner never ends it: ours does, at its second check.
        match waiter.join().unwrap() {
            Err(redmutex::Error::Deadlock { waited, cycle, .. }) => {
                assert!(
                    waited >= TIMEOUT * 2,
                    "ended at its first check, after {waited:?}"
                );
                assert_eq!(cycle.len(), 2);
            }
            other => panic!("not told of the deadlock: {other:?}"),
        }
        let () = redis::cmd("DEL").arg("b").query(&mut conn).unwrap();
    });
    let () = redis::cmd("DEL")
        .arg(format!("{{b}}:redmutex_wait:{other}"))
        .query(&mut conn)
        .unwrap();
    let (code, text) = tool(&url, &["waits"]);
    assert_eq!((code, text.lines().count()), (0, 1), "{text}");
}
