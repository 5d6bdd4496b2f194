//! Throwaway `redis-server` processes for the tests, on free ports, never on 6379.
//!
//! `redis-test` starts the server; this adds what it lacks: waiting until the server
//! answers, a clear message when `redis-server` is missing, restarting on the same port,
//! pausing, and re-running this test binary as a worker process.
#![allow(dead_code)]

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use redis::ConnectionAddr;
use redis_test::server::RedisServer;
use redmutex::{LockClient, LockClientBuilder};

pub struct Server {
    server: Option<RedisServer>,
    port: u16,
}

impl Server {
    /// Starts a server on a free port and waits until it answers.
    pub fn start() -> Server {
        require_redis_server();
        for _ in 0..5 {
            let port = redis_test::utils::get_random_available_port();
            let mut server = Server { server: None, port };
            if server.spawn() {
                return server;
            }
        }
        panic!("redis-server did not start on any of 5 free ports");
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A plain connection, to look at and tamper with what the locks store.
    pub fn conn(&self) -> redis::Connection {
        let conn = redis::Client::open(self.url())
            .unwrap()
            .get_connection_with_timeout(Duration::from_secs(5))
            .unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        conn
    }

    /// A builder for this server with test-friendly timeouts.
    pub fn builder(&self) -> LockClientBuilder {
        LockClient::builder(&self.url())
            .connect_timeout(Duration::from_secs(5))
            .response_timeout(Duration::from_secs(5))
    }

    pub fn client(&self) -> LockClient {
        self.builder().build().expect("client for a running server")
    }

    /// Kills the server. Its port stays reserved for `restart`.
    pub fn stop(&mut self) {
        if let Some(mut server) = self.server.take() {
            server.stop();
        }
    }

    /// Starts a fresh, empty server on the same port.
    pub fn restart(&mut self) {
        self.stop();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.spawn() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not restart on {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Freezes the server process (SIGSTOP): connections stay open, nothing answers.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaws a paused server (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    /// Calls of one command since the server started, from `INFO commandstats`.
    pub fn calls(&self, command: &str) -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.conn())
            .unwrap();
        let prefix = format!("cmdstat_{command}:calls=");
        info.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .and_then(|rest| rest.split(',').next())
            .map_or(0, |calls| calls.parse().unwrap())
    }

    fn signal(&self, signal: &str) {
        let pid = self.server.as_ref().expect("server running").process.id();
        let status = Command::new("kill")
            .arg(signal)
            .arg(pid.to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Spawns on `self.port`; false if it exited without answering (port taken).
    fn spawn(&mut self) -> bool {
        let addr = ConnectionAddr::Tcp("127.0.0.1".into(), self.port);
        let mut server = RedisServer::new_with_addr_tls_modules_and_spawner(
            addr,
            None,
            None,
            false,
            None,
            &[],
            |cmd| {
                cmd.arg("--appendonly")
                    .arg("no")
                    .spawn()
                    .expect("spawn redis-server")
            },
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if server.process.try_wait().unwrap().is_some() {
                return false;
            }
            let ping = redis::Client::open(self.url())
                .unwrap()
                .get_connection_with_timeout(Duration::from_millis(200))
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
            if ping.is_ok() {
                self.server = Some(server);
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

fn require_redis_server() {
    if Command::new("redis-server")
        .arg("--version")
        .output()
        .is_err()
    {
        panic!(
            "redis-server is not installed; the tests start their own. \
             Install it with `apt-get install -y redis-server` (Debian/Ubuntu) \
             or `brew install redis` (macOS)."
        );
    }
}

/// Runs the ignored test `name` of this same test binary in a new process, with `env` set.
pub fn spawn_worker(name: &str, env: &[(&str, String)]) -> Child {
    Command::new(std::env::current_exe().unwrap())
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
