//! Throwaway `redis-server` processes for the tests, on free ports, never on 6379.
//!
//! Each server runs under a tiny `sh` supervisor whose stdin is a pipe from this test
//! process. When the pipe closes, because the `Server` is dropped or stopped or because the
//! test process died (even by SIGKILL), the supervisor kills the server with SIGKILL and
//! waits for it. So no server outlives the tests that started it.
//!
//! Also here: waiting until a server answers, restarting on the same port, pausing,
//! re-running this test binary as a worker process, a fault-injecting TCP proxy, and other
//! lock libraries (redis-py, node-redlock, redsync, Redisson) driven as subprocesses, with
//! the check that their toolchains are there (`toolchain`).
// Without the tls feature, nothing uses the TLS servers and certificates.
#![cfg_attr(not(feature = "tls"), allow(dead_code, unused_imports))]

mod binary;
pub mod history;
pub mod java;
pub mod logs;
pub mod redisson;

mod cluster;
mod peer;
mod proxy;
mod sentinel;
mod skew;
pub mod tls;
#[cfg(feature = "cli")]
mod tool;
pub mod toolchain;

pub use binary::{has_tls, server_binary};
pub use cluster::{Cluster, key_slot, lone_primary};
pub use peer::Peer;
pub use proxy::Proxy;
pub use sentinel::{Deployment, MASTER, Options, StaleSentinel, info, role};
pub use skew::ClockSkew;
#[cfg(feature = "cli")]
pub use tool::tool;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use redmutex::{LockClient, LockClientBuilder};

/// Starts the server binary given after the script (second, after the file for its output)
/// with the arguments after it, prints its pid, then waits for its stdin to close, kills the
/// server and removes its output. A background job of a non-interactive shell reads
/// /dev/null, so the server itself never holds the pipe.
///
/// The server is started under [`dying_with_parent`] where it can be: killed by the
/// kernel when the supervisor dies, even stopped (SIGSTOP), as when a signal to the whole
/// process group of a run (Ctrl-C, a CI job's timeout) ends the supervisor before it could
/// kill the server itself. Else a signal that reaches the supervisor kills the server
/// first, which works for a server that is not stopped.
const SUPERVISOR: &str = r#"log=$1
server=$2
shift 2
"$server" "$@" >"$log" 2>&1 &
pid=$!
trap 'kill -9 "$pid" 2>/dev/null; rm -f "$log"; exit 1' INT TERM HUP
echo "$pid"
read -r _ || :
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
rm -f "$log"
exit 0"#;

pub struct Server {
    process: Option<Supervised>,
    port: u16,
    args: Args,
    /// For a TLS-only server: its certificates, and whether it asks clients for theirs.
    tls: Option<(Arc<tls::Certs>, bool)>,
}

/// What a server is started with besides its port and the test defaults.
#[derive(Clone, Default)]
pub struct Args {
    /// Before every other argument: a config file, `--sentinel`.
    pub leading: Vec<String>,
    /// After the defaults: `--replicaof`, `--requirepass`, ...
    pub trailing: Vec<String>,
    /// The password the server wants (`requirepass`), for `url` and `conn`.
    pub password: Option<String>,
    /// An argument that takes a free port of its own (`--cluster-port`): drawn with the
    /// server's port for each try to start, and kept across restarts.
    pub own_port: Option<&'static str>,
}

/// A running redis-server and its supervisor.
struct Supervised {
    supervisor: Child,
    /// Closing it (dropping it) makes the supervisor kill the server.
    lifeline: ChildStdin,
    /// The redis-server process itself, for signals.
    pid: u32,
}

impl Supervised {
    /// Kills the server and waits until it is gone, so that its port is free again.
    fn kill(mut self) {
        drop(self.lifeline);
        let _ = self.supervisor.wait();
    }
}

impl Server {
    /// Starts a server on a free port and waits until it answers.
    pub fn start() -> Server {
        Server::start_with(Args::default())
    }

    /// Starts a server that speaks TLS only, with `certs`; with `auth_clients`, it refuses
    /// clients without a certificate signed by `certs.ca`.
    pub fn start_tls(certs: &Arc<tls::Certs>, auth_clients: bool) -> Server {
        Server::start_configured(Args::default(), Some((certs.clone(), auth_clients)))
    }

    /// Starts a server with `args` on a free port and waits until it answers.
    pub fn start_with(args: Args) -> Server {
        Server::start_configured(args, None)
    }

    /// Starts a server with `args`, over TLS only when `tls` gives certificates (and whether
    /// it asks clients for theirs).
    pub fn start_configured(args: Args, tls: Option<(Arc<tls::Certs>, bool)>) -> Server {
        let mut failures = Vec::new();
        for _ in 0..5 {
            let port = free_port();
            let mut args = args.clone();
            if let Some(flag) = args.own_port.take() {
                args.trailing
                    .extend([flag.to_owned(), free_port().to_string()]);
            }
            let mut server = Server {
                process: None,
                port,
                args,
                tls: tls.clone(),
            };
            match server.spawn() {
                Ok(()) => return server,
                Err(why) => failures.push(format!("port {port}: {why}")),
            }
        }
        panic!(
            "redis-server did not start on any of 5 free ports:\n{}",
            failures.join("\n")
        );
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        match &self.args.password {
            Some(password) => format!("{scheme}://:{password}@127.0.0.1:{}/", self.port),
            None => format!("{scheme}://127.0.0.1:{}/", self.port),
        }
    }

    /// A `redis` client for this server, trusting its CA and with a client certificate
    /// when it speaks TLS.
    fn redis_client(&self) -> redis::Client {
        match &self.tls {
            None => redis::Client::open(self.url()).unwrap(),
            #[cfg(feature = "tls")]
            Some((certs, _)) => redis::Client::build_with_tls(
                self.url(),
                redis::TlsCertificates {
                    client_tls: Some(redis::ClientTlsConfig {
                        client_cert: certs.client_cert.clone(),
                        client_key: certs.client_key.clone(),
                    }),
                    root_cert: Some(certs.ca.clone()),
                },
            )
            .unwrap(),
            #[cfg(not(feature = "tls"))]
            Some(_) => panic!("a TLS server needs the tls feature"),
        }
    }

    /// The pid of the redis-server process (not of its supervisor).
    pub fn pid(&self) -> u32 {
        self.process.as_ref().expect("server running").pid
    }

    /// A plain connection, to look at and tamper with what the locks store.
    pub fn conn(&self) -> redis::Connection {
        let conn = self
            .redis_client()
            .get_connection_with_timeout(Duration::from_secs(5))
            .unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        conn
    }

    /// A plain connection, if the server answers within a second.
    pub fn try_conn(&self) -> Option<redis::Connection> {
        let conn = (self.redis_client())
            .get_connection_with_timeout(Duration::from_secs(1))
            .ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        Some(conn)
    }

    /// Whether the server was started and not stopped since.
    pub fn is_running(&self) -> bool {
        self.process.is_some()
    }

    /// A builder for this server with test-friendly timeouts. Tests that shorten the lease
    /// must also shorten the response timeout below the renew interval (lease / 3).
    /// For a TLS server, the builder trusts its CA and has a client certificate.
    pub fn builder(&self) -> LockClientBuilder {
        let builder = LockClient::builder(&self.url())
            .connect_timeout(Duration::from_secs(5))
            .response_timeout(Duration::from_secs(5));
        #[cfg(feature = "tls")]
        if let Some((certs, _)) = &self.tls {
            return builder
                .tls_root_ca(certs.ca.clone())
                .tls_client_cert(certs.client_cert.clone(), certs.client_key.clone());
        }
        builder
    }

    /// A client whose waiters would not try again for 30 s on their own (a fair waiter's
    /// place lasts 5 minutes): a waiter of it that returns sooner was woken by a message.
    pub fn sleepy(&self) -> LockClient {
        self.builder()
            .retry_base(Duration::from_secs(30))
            .retry_cap(Duration::from_secs(30))
            .fair_queue_wait(Duration::from_secs(300))
            .build()
            .unwrap()
    }

    /// A builder with watchdog lease `lease`, and the response timeout it allows: the
    /// client refuses one at or above the renew interval (lease / 3), so this takes 90% of
    /// that, as long as it can be for a busy machine.
    pub fn builder_with_lease(&self, lease: Duration) -> LockClientBuilder {
        self.builder()
            .lease(lease)
            .response_timeout(response_timeout_for(lease))
    }

    pub fn client(&self) -> LockClient {
        self.builder().build().expect("client for a running server")
    }

    /// Kills the server (SIGKILL) and waits until it is gone. Its port stays reserved for
    /// `restart`.
    pub fn stop(&mut self) {
        if let Some(process) = self.process.take() {
            process.kill();
        }
    }

    /// Starts a fresh, empty server on the same port.
    pub fn restart(&mut self) {
        self.stop();
        let deadline = Instant::now() + Duration::from_secs(10);
        while let Err(why) = self.spawn() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not restart on {}: {why}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts a fresh, empty server on the same port with `trailing` after the test
    /// defaults instead of the arguments it had there (`--rename-command`, say).
    pub fn restart_with(&mut self, trailing: &[&str]) {
        self.args.trailing = trailing.iter().map(|arg| arg.to_string()).collect();
        self.restart();
    }

    /// Freezes the server process (SIGSTOP): connections stay open, nothing answers.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaws a paused server (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    /// Whether `key` exists.
    pub fn exists(&self, key: &str) -> bool {
        redis::cmd("EXISTS")
            .arg(key)
            .query(&mut self.conn())
            .unwrap()
    }

    /// Calls of one command since the server started, from `INFO commandstats`.
    pub fn calls(&self, command: &str) -> u64 {
        self.command_stat(command, "calls")
    }

    /// How many times `command` was refused before it ran (ACL, wrong arguments), from
    /// `INFO commandstats`.
    pub fn rejected_calls(&self, command: &str) -> u64 {
        self.command_stat(command, "rejected_calls")
    }

    fn command_stat(&self, command: &str, stat: &str) -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.conn())
            .unwrap();
        let prefix = format!("cmdstat_{command}:");
        info.lines()
            .find_map(|line| line.trim_end().strip_prefix(&prefix))
            .and_then(|stats| {
                stats
                    .split(',')
                    .find_map(|pair| pair.strip_prefix(stat)?.strip_prefix('='))
            })
            .map_or(0, |n| n.parse().unwrap())
    }

    /// Subscribers of `channel` now, from `PUBSUB NUMSUB`.
    /// How many channels matching `pattern` have subscribers (`PUBSUB CHANNELS`).
    pub fn channels(&self, pattern: &str) -> usize {
        let channels: Vec<String> = redis::cmd("PUBSUB")
            .arg("CHANNELS")
            .arg(pattern)
            .query(&mut self.conn())
            .unwrap();
        channels.len()
    }

    /// The channels matching `pattern` subscribed on this server, sharded (as on a
    /// cluster with sharded pub/sub) or not.
    pub fn any_channels(&self, pattern: &str) -> usize {
        let sharded: Vec<String> = redis::cmd("PUBSUB")
            .arg("SHARDCHANNELS")
            .arg(pattern)
            .query(&mut self.conn())
            .unwrap();
        self.channels(pattern) + sharded.len()
    }

    pub fn subscribers(&self, channel: &str) -> usize {
        let counts: (String, usize) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(channel)
            .query(&mut self.conn())
            .unwrap();
        counts.1
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(signal)
            .arg(self.pid().to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Starts the server on its port and waits until it answers; else says why not, with
    /// the end of what the server printed.
    fn spawn(&mut self) -> Result<(), String> {
        let log = std::env::temp_dir().join(format!(
            "redmutex-test-{}-{}.log",
            std::process::id(),
            self.port
        ));
        let listen = match &self.tls {
            Some((certs, auth_clients)) => certs.server_args(self.port, *auth_clients),
            None => vec!["--port".into(), self.port.to_string()],
        };
        let mut supervisor = Command::new("sh")
            .arg("-c")
            .arg(SUPERVISOR)
            .arg("redis-supervisor")
            .arg(&log)
            .args(dying_with_parent())
            .arg(binary::server_binary())
            .args(&self.args.leading)
            .args(listen)
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            // A replica receives its primary's data as a file even without saving: it goes
            // to the temporary directory, named after the port, never into the checkout.
            .arg("--dir")
            .arg(std::env::temp_dir())
            .args(["--dbfilename", &format!("redmutex-test-{}.rdb", self.port)])
            .args(&self.args.trailing)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn sh to supervise redis-server");
        let lifeline = supervisor.stdin.take().unwrap();
        let mut line = String::new();
        BufReader::new(supervisor.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let pid: u32 = line.trim().parse().expect("the supervisor prints the pid");
        let process = Supervised {
            supervisor,
            lifeline,
            pid,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let why = loop {
            if !alive(pid) {
                break "it exited".to_owned();
            }
            // The server that answers must be ours, not another process on the same port.
            match self.answering_pid() {
                Some(answering) if answering == pid => {
                    self.process = Some(process);
                    return Ok(());
                }
                Some(other) => break format!("process {other} answered there instead"),
                None if Instant::now() >= deadline => break "no answer in 10 s".to_owned(),
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        let printed = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = (printed.lines().rev())
            .filter(|line| !line.trim().is_empty())
            .take(5)
            .collect();
        process.kill();
        Err(format!(
            "{why}; it printed: {}",
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ))
    }

    /// The `process_id` of the server answering on `self.port`, if any.
    fn answering_pid(&self) -> Option<u32> {
        let mut conn = self
            .redis_client()
            .get_connection_with_timeout(Duration::from_millis(200))
            .ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
        let info: String = redis::cmd("INFO").arg("server").query(&mut conn).ok()?;
        info.lines()
            .find_map(|line| line.strip_prefix("process_id:"))
            .and_then(|pid| pid.trim().parse().ok())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether process `pid` runs (a zombie does not). Elsewhere than on Linux, the wait for
/// an answer decides.
#[cfg(not(target_os = "linux"))]
pub fn alive(_pid: u32) -> bool {
    true
}

/// Whether process `pid` runs (a zombie does not).
#[cfg(target_os = "linux")]
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // The state follows the command name, which is in parentheses.
        let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
        !state.is_some_and(|rest| rest.starts_with('Z'))
    })
}

/// A port nothing listens on now and that no test of this process was given before: a
/// server's port stays its own across restarts, and none is handed to two tests. It is drawn
/// below Linux's ephemeral range (32768 and up by default), where the kernel never picks
/// the local end of an outgoing connection, so that none of the suite's connections can take
/// it before the server binds it. Never 6379.
pub fn free_port() -> u16 {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut given = GIVEN.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        let port = rand::random_range(10_000..32_768);
        if !given.contains(&port) && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.insert(port);
            return port;
        }
    }
}

/// Runs `body` in a process of its own: the test `name` (its path, such as
/// `watchdog::a_test`) runs again in a new process of this binary with no other test in it,
/// and `body` runs there. For what can only be seen process-wide: the library's threads, a
/// global metrics recorder.
pub fn alone(name: &str, body: impl FnOnce()) {
    const ALONE_VAR: &str = "REDMUTEX_TEST_ALONE";
    if std::env::var(ALONE_VAR).is_ok_and(|alone| alone == name) {
        return body();
    }
    let out = this_binary()
        .args(["--exact", name, "--nocapture", "--test-threads", "1"])
        .env(ALONE_VAR, name)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{name}, run in its own process, failed ({}):\n{stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // A name that matches no test runs nothing, and succeeds.
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "{name} did not run in its own process:\n{stdout}"
    );
}

/// Runs the ignored test `name` (its path, such as `fair::fair_worker`) of this same test
/// binary in a new process, with `env` set. It dies with the thread that started it (see
/// [`dying_with_parent`]).
pub fn spawn_worker(name: &str, env: &[(&str, String)]) -> Child {
    this_binary()
        .args([
            "--exact",
            name,
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// This test binary, to run one of its tests in a process of its own that dies with the
/// thread that starts it (see [`dying_with_parent`]).
pub fn this_binary() -> Command {
    let exe = std::env::current_exe().unwrap();
    match dying_with_parent().split_first() {
        Some((wrapper, args)) => {
            let mut command = Command::new(wrapper);
            command.args(args).arg(exe);
            command
        }
        None => Command::new(exe),
    }
}

/// What to run a program under so that the kernel kills it (SIGKILL, which ends a stopped
/// process too) when the thread that started it ends: `setpriv --pdeathsig KILL --`, where
/// there is `setpriv` (util-linux); nothing elsewhere. For a child that a test's own thread
/// starts and waits for, and for a server under its supervisor.
pub fn dying_with_parent() -> &'static [&'static str] {
    static WRAPPER: OnceLock<&'static [&'static str]> = OnceLock::new();
    WRAPPER.get_or_init(|| {
        let setpriv = ["setpriv", "--pdeathsig", "KILL", "--"];
        let works = Command::new(setpriv[0])
            .args(&setpriv[1..])
            .arg("true")
            .status()
            .is_ok_and(|status| status.success());
        if works {
            &["setpriv", "--pdeathsig", "KILL", "--"]
        } else {
            &[]
        }
    })
}

/// Every key of the server with its hash contents.
pub fn hash(conn: &mut redis::Connection, key: &str) -> Vec<(String, i64)> {
    redis::cmd("HGETALL").arg(key).query(conn).unwrap()
}

/// Waits until `condition` holds, checking every 10 ms, for at most `limit`.
pub fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The field of a "foreign" owner, as a Java service using Redisson would write it.
pub const FOREIGN: &str = "7d3a5b2e-1111-4c4c-8888-0123456789ab:1";

/// One hold by the foreign owner, in raw commands: HINCRBY on its field, then PEXPIRE.
pub fn foreign_hold(redis: &mut redis::Connection, key: &str, lease_ms: u64) {
    let _: i64 = redis::cmd("HINCRBY")
        .arg(key)
        .arg(FOREIGN)
        .arg(1)
        .query(redis)
        .unwrap();
    let _: bool = redis::cmd("PEXPIRE")
        .arg(key)
        .arg(lease_ms)
        .query(redis)
        .unwrap();
}

/// Threads of this process whose name starts with `prefix` (Linux; names are cut to 15 bytes).
pub fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter(|task| {
            let comm = task.as_ref().unwrap().path().join("comm");
            std::fs::read_to_string(comm).is_ok_and(|name| name.starts_with(prefix))
        })
        .count()
}

/// The shortest watchdog lease a test relies on surviving. A renew interval (a third of it)
/// apart, renewals still keep the lock through a stall of the watchdog thread of about a
/// second; 300 ms leases were lost on a busy machine where threads stalled for 0.5-0.8 s.
pub const SHORT_LEASE: Duration = Duration::from_millis(1500);

/// The longest response timeout a client with watchdog lease `lease` should get: 90% of the
/// renew interval (lease / 3), which it must stay below.
pub fn response_timeout_for(lease: Duration) -> Duration {
    lease * 3 / 10
}

/// The unlock channel of lock `key` (a key without braces).
pub fn channel(key: &str) -> String {
    format!("redisson_lock__channel:{{{key}}}")
}

/// Waits until `channel` has at least `n` subscribers on `server` (`PUBSUB NUMSUB`).
pub fn await_subscribers(server: &Server, channel: &str, n: usize) {
    assert!(
        eventually(Duration::from_secs(20), || server.subscribers(channel) >= n),
        "expected {n} subscribers of {channel}, saw {}",
        server.subscribers(channel)
    );
}

/// Waits until `server` has run `calls` EVALSHAs in all since it started.
pub fn await_calls(server: &Server, calls: u64) {
    assert!(
        eventually(Duration::from_secs(20), || server.calls("evalsha") >= calls),
        "expected {calls} EVALSHA, saw {}",
        server.calls("evalsha")
    );
}

/// The ids of the threads of this process (Linux).
pub fn thread_ids() -> std::collections::HashSet<u32> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| task.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// Makes a lock handle of one kind, so that a test body can run once per kind.
pub trait MakeLock: redmutex::Kind {
    /// The kind's name, for messages and for worker processes.
    const NAME: &'static str;
    fn make(client: &LockClient, name: &str) -> redmutex::Lock<Self>;
}

impl MakeLock for redmutex::Reentrant {
    const NAME: &'static str = "reentrant";
    fn make(client: &LockClient, name: &str) -> redmutex::Lock<Self> {
        client.lock(name)
    }
}

impl MakeLock for redmutex::Token {
    const NAME: &'static str = "token";
    fn make(client: &LockClient, name: &str) -> redmutex::Lock<Self> {
        client.token_lock(name)
    }
}

impl MakeLock for redmutex::Fenced {
    const NAME: &'static str = "fenced";
    fn make(client: &LockClient, name: &str) -> redmutex::Lock<Self> {
        client.fenced_lock(name)
    }
}

impl MakeLock for redmutex::Spin {
    const NAME: &'static str = "spin";
    fn make(client: &LockClient, name: &str) -> redmutex::Lock<Self> {
        client.spin_lock(name)
    }
}

impl MakeLock for redmutex::Fair {
    const NAME: &'static str = "fair";
    fn make(client: &LockClient, name: &str) -> redmutex::Lock<Self> {
        client.fair_lock(name)
    }
}

impl MakeLock for redmutex::NonReentrant {
    const NAME: &'static str = "non_reentrant";
    fn make(client: &LockClient, name: &str) -> redmutex::Lock<Self> {
        client.non_reentrant_lock(name)
    }
}

impl MakeLock for redmutex::NonReentrantFair {
    const NAME: &'static str = "non_reentrant_fair";
    fn make(client: &LockClient, name: &str) -> redmutex::Lock<Self> {
        client.non_reentrant_fair_lock(name)
    }
}

impl MakeLock for redmutex::Read {
    const NAME: &'static str = "read";
    fn make(client: &LockClient, name: &str) -> redmutex::Lock<Self> {
        client.read_write_lock(name).read().clone()
    }
}

impl MakeLock for redmutex::Write {
    const NAME: &'static str = "write";
    fn make(client: &LockClient, name: &str) -> redmutex::Lock<Self> {
        client.read_write_lock(name).write().clone()
    }
}

/// The integer at `key`, 0 when there is none.
pub fn get_int(redis: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("GET")
        .arg(key)
        .query::<Option<i64>>(redis)
        .unwrap()
        .unwrap_or(0)
}

/// `INCRBY key by`: the new value.
pub fn incr(redis: &mut redis::Connection, key: &str, by: i64) -> i64 {
    redis::cmd("INCRBY").arg(key).arg(by).query(redis).unwrap()
}

/// Writes, on `server`, a cache entry under a key of 1,100 bytes (under no prefix), longer
/// than a lock's name may be ([`redmutex::MAX_NAME_LEN`]), as an application might: no
/// lock of any kind. Its name.
pub fn plant_long_key(server: &Server) -> String {
    let long = "k".repeat(1100);
    assert!(long.len() > redmutex::MAX_NAME_LEN);
    let () = redis::cmd("SET")
        .arg(&long)
        .arg("cached")
        .query(&mut server.conn())
        .unwrap();
    long
}

/// Makes a user `narrow` (password `pw`) on `server` who may use every command and
/// channel but no key whose name begins with `s`. Its URL.
pub fn narrow_user(server: &Server) -> String {
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("narrow")
        .arg(&["on", ">pw", "~[^s]*", "&*", "+@all"][..])
        .query(&mut server.conn())
        .unwrap();
    format!("redis://narrow:pw@127.0.0.1:{}/", server.port())
}
