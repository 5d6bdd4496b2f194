//! The peer drivers (`support::Peer`) against a real server, with no redmutex lock involved:
//! what redis-py's `Lock` and node-redlock store, that each excludes a second process, keeps
//! its hold from a wrong token, extends and releases, and that the two exclude each other;
//! and that a test whose toolchain is missing is skipped, or fails when none may be.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use support::toolchain::{REQUIRE_VAR, Toolchain, skip_without};
use support::{Peer, Server, eventually};

#[derive(Clone, Copy, Debug)]
enum Kind {
    Python,
    Node,
}

impl Kind {
    fn spawn(self, server: &Server) -> Peer {
        match self {
            Kind::Python => Peer::python(&server.url()),
            Kind::Node => Peer::node(&server.url()),
        }
    }

    /// The server command each acquire attempt of this peer runs: redis-py sends
    /// `SET NX PX`, node-redlock runs its acquire script by EVALSHA.
    fn attempt_command(self) -> &'static str {
        match self {
            Kind::Python => "set",
            Kind::Node => "evalsha",
        }
    }
}

/// A token no peer makes: same shape, all zeros.
const WRONG: &str = "00000000000000000000000000000000";

fn get(server: &Server, key: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(key)
        .query(&mut server.conn())
        .unwrap()
}

fn pttl(server: &Server, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query(&mut server.conn())
        .unwrap()
}

fn key_type(server: &Server, key: &str) -> String {
    redis::cmd("TYPE")
        .arg(key)
        .query(&mut server.conn())
        .unwrap()
}

/// Both peers make tokens of 32 lowercase hex digits (redis-py: `uuid1().hex`,
/// node-redlock: 16 random bytes in hex).
fn assert_token_shape(token: &str) {
    assert_eq!(token.len(), 32, "token {token:?}");
    assert!(
        token
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)),
        "token {token:?}"
    );
}

/// The key holds `token` as a plain string with a time to live of at most `lease_ms`.
fn assert_held(server: &Server, key: &str, token: &str, lease_ms: i64) {
    assert_eq!(get(server, key).as_deref(), Some(token));
    assert_eq!(key_type(server, key), "string");
    let ttl = pttl(server, key);
    assert!(0 < ttl && ttl <= lease_ms, "PTTL {ttl}, lease {lease_ms}");
}

fn hold_extend_release(kind: Kind) {
    let server = Server::start();
    let mut holder = kind.spawn(&server);
    let mut other = kind.spawn(&server);

    let token = holder.acquire("res", 100_000, 0);
    assert_token_shape(&token);
    assert_held(&server, "res", &token, 100_000);
    assert_eq!(holder.call("owned res"), "true");
    assert_eq!(other.call("owned res"), "false");

    // A second process is refused, with one try and when it waits a little.
    assert_eq!(other.call("acquire res 100000 0"), "busy");
    assert_eq!(other.call("acquire res 100000 300"), "busy");
    assert_held(&server, "res", &token, 100_000);

    // A wrong token releases nothing, from the other process or the holder's.
    assert_eq!(
        other.call(&format!("release-token res {WRONG}")),
        "not-owned"
    );
    assert_eq!(
        holder.call(&format!("release-token res {WRONG}")),
        "not-owned"
    );
    assert_held(&server, "res", &token, 100_000);
    assert_eq!(holder.call("owned res"), "true");

    assert_eq!(holder.call("extend res 200000"), "extended");
    assert_eq!(get(&server, "res").as_deref(), Some(token.as_str()));
    let ttl = pttl(&server, "res");
    match kind {
        // redis-py adds to the time left.
        Kind::Python => assert!(200_000 < ttl && ttl <= 300_000, "PTTL {ttl}"),
        // node-redlock sets the time to live anew.
        Kind::Node => assert!(100_000 < ttl && ttl <= 200_000, "PTTL {ttl}"),
    }

    assert_eq!(holder.call("release res"), "released");
    assert_eq!(get(&server, "res"), None);
    assert_eq!(holder.call("owned res"), "false");

    // Free again: the other process gets it, with a new token.
    let second = other.acquire("res", 100_000, 0);
    assert_ne!(second, token);
    assert_held(&server, "res", &second, 100_000);
    assert_eq!(other.call("release res"), "released");
    assert_eq!(get(&server, "res"), None);
}

#[test]
fn redis_py_holds_extends_and_releases() {
    if skip_without(&[Toolchain::Python]) {
        return;
    }
    hold_extend_release(Kind::Python);
}

#[test]
fn node_redlock_holds_extends_and_releases() {
    if skip_without(&[Toolchain::Node]) {
        return;
    }
    hold_extend_release(Kind::Node);
}

/// A hold whose key was deleted and taken by another process: the first holder's extend and
/// release answer `not-owned` and leave the new hold alone.
fn lost_hold(kind: Kind) {
    let server = Server::start();
    let mut first = kind.spawn(&server);
    let mut second = kind.spawn(&server);

    first.acquire("res", 100_000, 0);
    let _: i64 = redis::cmd("DEL")
        .arg("res")
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(first.call("owned res"), "false");
    assert_eq!(first.call("extend res 100000"), "not-owned");
    assert_eq!(get(&server, "res"), None);

    let token = second.acquire("res", 100_000, 0);
    assert_eq!(first.call("extend res 100000"), "not-owned");
    assert_eq!(first.call("release res"), "not-owned");
    assert_held(&server, "res", &token, 100_000);
    assert_eq!(second.call("owned res"), "true");
}

#[test]
fn redis_py_reports_a_lost_hold() {
    if skip_without(&[Toolchain::Python]) {
        return;
    }
    lost_hold(Kind::Python);
}

#[test]
fn node_redlock_reports_a_lost_hold() {
    if skip_without(&[Toolchain::Node]) {
        return;
    }
    lost_hold(Kind::Node);
}

/// A blocking acquire made while another process holds the name returns `acquired` once
/// that process releases.
fn blocking_acquire_waits(kind: Kind) {
    let server = Server::start();
    let mut holder = kind.spawn(&server);
    let mut waiter = kind.spawn(&server);

    holder.acquire("res", 100_000, 0);
    let attempts = server.calls(kind.attempt_command());
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| waiter.call("acquire res 100000 60000"));
        // The waiter has tried once and been refused: from here on, it is waiting.
        assert!(
            eventually(Duration::from_secs(20), || server
                .calls(kind.attempt_command())
                > attempts),
            "the waiter made no attempt"
        );
        assert_eq!(holder.call("release res"), "released");
        let reply = waiting.join().unwrap();
        let token = reply
            .strip_prefix("acquired ")
            .unwrap_or_else(|| panic!("the waiter answered {reply:?}"));
        assert_held(&server, "res", token, 100_000);
    });
}

#[test]
fn redis_py_blocking_acquire_waits_for_a_release() {
    if skip_without(&[Toolchain::Python]) {
        return;
    }
    blocking_acquire_waits(Kind::Python);
}

#[test]
fn node_redlock_blocking_acquire_waits_for_a_release() {
    if skip_without(&[Toolchain::Node]) {
        return;
    }
    blocking_acquire_waits(Kind::Node);
}

/// redis-py and node-redlock store the same thing under the same key, so each sees the
/// other's hold as busy, and each one's compare-and-delete releases the other's hold given
/// its token.
#[test]
fn redis_py_and_node_redlock_exclude_each_other() {
    if skip_without(&[Toolchain::Python, Toolchain::Node]) {
        return;
    }
    let server = Server::start();
    let mut python = Peer::python(&server.url());
    let mut node = Peer::node(&server.url());

    let token = python.acquire("shared", 100_000, 0);
    assert_eq!(node.call("acquire shared 100000 0"), "busy");
    assert_eq!(node.call("acquire shared 100000 300"), "busy");
    assert_eq!(
        node.call(&format!("release-token shared {WRONG}")),
        "not-owned"
    );
    assert_held(&server, "shared", &token, 100_000);
    assert_eq!(
        node.call(&format!("release-token shared {token}")),
        "released"
    );
    assert_eq!(get(&server, "shared"), None);
    assert_eq!(python.call("release shared"), "not-owned");

    let token = node.acquire("shared", 100_000, 0);
    assert_eq!(python.call("acquire shared 100000 0"), "busy");
    assert_eq!(python.call("acquire shared 100000 300"), "busy");
    assert_eq!(
        python.call(&format!("release-token shared {WRONG}")),
        "not-owned"
    );
    assert_held(&server, "shared", &token, 100_000);
    assert_eq!(
        python.call(&format!("release-token shared {token}")),
        "released"
    );
    assert_eq!(get(&server, "shared"), None);
    assert_eq!(node.call("extend shared 100000"), "not-owned");
    assert_eq!(node.call("release shared"), "not-owned");

    // And each gets the name once the other has released it.
    let token = python.acquire("shared", 100_000, 0);
    assert_eq!(python.call("release shared"), "released");
    let second = node.acquire("shared", 100_000, 0);
    assert_ne!(second, token);
    assert_eq!(node.call("release shared"), "released");
    assert_eq!(get(&server, "shared"), None);
}

const URL_VAR: &str = "REDMUTEX_PEERS_URL";
const PIDS_VAR: &str = "REDMUTEX_PEERS_PIDS";

/// Run by `peers_die_with_a_killed_test_process` in a process of its own: starts one peer of
/// each kind, writes their pids to a file, then waits to be killed.
#[test]
#[ignore = "run as a worker process by peers_die_with_a_killed_test_process"]
fn peers_worker() {
    if skip_without(&[Toolchain::Python, Toolchain::Node]) {
        return;
    }
    let url = std::env::var(URL_VAR).unwrap();
    let pids = std::env::var(PIDS_VAR).unwrap();
    let mut peers = [Peer::python(&url), Peer::node(&url)];
    for peer in &mut peers {
        assert_eq!(peer.call("owned res"), "false");
    }
    let written = format!("{} {}", peers[0].pid(), peers[1].pid());
    std::fs::write(format!("{pids}.tmp"), written).unwrap();
    std::fs::rename(format!("{pids}.tmp"), &pids).unwrap();
    // Killed long before this.
    std::thread::sleep(Duration::from_secs(120));
}

/// SIGKILLs a process that runs peers: they see their stdin close and exit.
#[cfg(target_os = "linux")]
#[test]
fn peers_die_with_a_killed_test_process() {
    if skip_without(&[Toolchain::Python, Toolchain::Node]) {
        return;
    }
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    let server = Server::start();
    let pids = std::env::temp_dir().join(format!("redmutex-peers-{}", std::process::id()));
    let _ = std::fs::remove_file(&pids);
    let mut worker = Killed(support::spawn_worker(
        "peers::peers_worker",
        &[
            (URL_VAR, server.url()),
            (PIDS_VAR, pids.display().to_string()),
        ],
    ));
    assert!(
        eventually(Duration::from_secs(60), || pids.exists()
            || matches!(worker.0.try_wait(), Ok(Some(_)))),
        "the worker wrote no pids"
    );
    let written = std::fs::read_to_string(&pids)
        .unwrap_or_else(|_| panic!("the worker exited without starting its peers"));
    std::fs::remove_file(&pids).unwrap();
    let peers: Vec<u32> = written
        .split_whitespace()
        .map(|pid| pid.parse().unwrap())
        .collect();
    assert_eq!(peers.len(), 2);
    assert!(peers.iter().all(|&pid| support::alive(pid)));

    worker.0.kill().unwrap();
    worker.0.wait().unwrap();
    assert!(
        eventually(Duration::from_secs(20), || !peers
            .iter()
            .any(|&pid| support::alive(pid))),
        "peers still running after their test process was killed: {peers:?}"
    );
}

/// A peer test where its toolchain is missing: a Java test and a redis-py test of this
/// binary, run in a process whose `PATH` holds the server binary and what the process is
/// started under, and no toolchain. Both pass, each writing one line that says it is
/// skipped and what to install; with `REDMUTEX_REQUIRE_PEERS=1` both fail, naming what is
/// missing.
#[test]
fn a_peer_test_without_its_toolchain_is_skipped_unless_peers_are_required() {
    const JAVA_TEST: &str =
        "java_spin::java_s_spin_lock_is_taken_by_our_spinning_waiter_after_its_release";
    const PYTHON_TEST: &str = "peers::redis_py_holds_extends_and_releases";
    let dir = std::env::temp_dir().join(format!("redmutex-no-toolchains-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let link = |program: &Path, name: &str| {
        std::os::unix::fs::symlink(on_path(program), dir.join(name)).unwrap();
    };
    link(support::server_binary(), "redis-server");
    if let Some(wrapper) = support::dying_with_parent().first() {
        link(Path::new(wrapper), wrapper);
    }
    let run = |require: Option<&str>| {
        let mut command = support::this_binary();
        command
            .args(["--exact", JAVA_TEST, PYTHON_TEST, "--test-threads", "1"])
            .env("PATH", &dir)
            // The server is `redis-server` from that PATH.
            .env_remove("REDMUTEX_TEST_SERVER")
            .stdin(Stdio::null());
        match require {
            Some(value) => command.env(REQUIRE_VAR, value),
            None => command.env_remove(REQUIRE_VAR),
        };
        let out = command.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status, stdout, stderr)
    };

    let (status, stdout, stderr) = run(None);
    assert!(status.success(), "{status}:\n{stdout}{stderr}");
    // A name that matches no test runs nothing, and succeeds.
    assert!(
        stdout.contains("test result: ok. 2 passed"),
        "{stdout}{stderr}"
    );
    let skipped: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("skipped "))
        .collect();
    assert_eq!(
        skipped,
        [
            format!(
                "skipped {JAVA_TEST}: it needs a JDK 17 or newer with Maven on the PATH; \
                 install it to run the test (Debian: default-jdk-headless maven)"
            ),
            format!(
                "skipped {PYTHON_TEST}: it needs Python 3 with venv on the PATH; install it \
                 to run the test (Debian: python3 python3-venv)"
            ),
        ],
        "{stderr}"
    );

    let (status, stdout, stderr) = run(Some("1"));
    assert!(!status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("test result: FAILED. 0 passed; 2 failed"),
        "{stdout}{stderr}"
    );
    let output = format!("{stdout}{stderr}");
    for (test, what) in [
        (JAVA_TEST, "a JDK 17 or newer with Maven"),
        (PYTHON_TEST, "Python 3 with venv"),
    ] {
        let failure =
            format!("{test} needs {what} on the PATH, and {REQUIRE_VAR}=1 forbids skipping it");
        assert!(output.contains(&failure), "no `{failure}` in:\n{output}");
    }
    assert!(!stderr.contains("skipped "), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `program` as an absolute path: itself, resolved, when it is a path with a directory,
/// else the first executable file of that name on the `PATH`.
fn on_path(program: &Path) -> PathBuf {
    if program.components().count() > 1 {
        return std::fs::canonicalize(program).unwrap();
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| panic!("{} is not on the PATH", program.display()))
}
