//! Other lock libraries on the same server, driven as subprocesses: redis-py's `Lock`
//! (`tests/peers/redis_py_lock.py`), node-redlock (`tests/peers/redlock_driver.mjs`) and
//! redsync's `Mutex` (`tests/peers/go/main.go`).
//!
//! The drivers read one command per line and answer one line:
//!
//! | command                                        | answers                      |
//! |------------------------------------------------|------------------------------|
//! | `acquire NAME TIMEOUT_MS BLOCKING_TIMEOUT_MS`  | `acquired TOKEN`, `busy`     |
//! | `release NAME`                                 | `released`, `not-owned`      |
//! | `extend NAME ADDITIONAL_MS`                    | `extended`, `not-owned`      |
//! | `owned NAME`                                   | `true`, `false`              |
//! | `release-token NAME TOKEN`                     | `released`, `not-owned`      |
//!
//! and `error MESSAGE` for anything else. `BLOCKING_TIMEOUT_MS` 0 is one try. redis-py's
//! `extend` adds to the time left; node-redlock's and redsync's set the time to live to
//! `ADDITIONAL_MS`.
//!
//! The drivers exit when their stdin closes, so they die with the test process even when it
//! is killed. They need `tests/peers/.venv`, `tests/peers/node_modules` and the built
//! `tests/peers/go/redsync_driver`, which the first peer of each kind installs
//! (`tests/peers/install`), under a file lock so that test binaries running at once install
//! once.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::toolchain::Toolchain;

/// How long a peer may take to answer, on top of an acquire's blocking timeout. Generous:
/// it only turns a hung peer into a failure instead of a hung test.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a peer may take to exit after `quit` before it is killed.
const EXIT_TIMEOUT: Duration = Duration::from_secs(5);

pub struct Peer {
    /// "redis-py", "node-redlock" or "redsync", for messages.
    kind: &'static str,
    child: Child,
    /// `None` once closed.
    stdin: Option<ChildStdin>,
    /// The lines the peer writes to stdout; disconnected when it closes stdout.
    replies: Receiver<String>,
    /// Everything the peer wrote to stderr so far, for failure messages.
    stderr: Arc<Mutex<String>>,
    stderr_reader: Option<JoinHandle<()>>,
}

impl Peer {
    /// redis-py's `Lock`, with a client connected to `url`.
    pub fn python(url: &str) -> Peer {
        let dir = peers_dir();
        install("python", Toolchain::Python);
        let mut command = Command::new(dir.join(".venv/bin/python"));
        command.arg(dir.join("redis_py_lock.py")).arg(url);
        Peer::spawn("redis-py", command)
    }

    /// node-redlock over ioredis, with one client connected to `url`.
    pub fn node(url: &str) -> Peer {
        let dir = peers_dir();
        install("node", Toolchain::Node);
        let mut command = Command::new("node");
        command.arg(dir.join("redlock_driver.mjs")).arg(url);
        Peer::spawn("node-redlock", command)
    }

    /// redsync's `Mutex` over go-redis, with one pool connected to `url`.
    pub fn go(url: &str) -> Peer {
        install("go", Toolchain::Go);
        let mut command = Command::new(peers_dir().join("go/redsync_driver"));
        command.arg(url);
        Peer::spawn("redsync", command)
    }

    /// Sends one command line and returns the answer line, without its newline. Panics if
    /// the peer exits or does not answer in time.
    pub fn call(&mut self, line: &str) -> String {
        assert!(!line.contains('\n'), "one command per line: {line:?}");
        let timeout = ANSWER_TIMEOUT + blocking_timeout(line);
        let stdin = self.stdin.as_mut().expect("the peer's stdin is open");
        if let Err(err) = writeln!(stdin, "{line}").and_then(|()| stdin.flush()) {
            let why = format!("could not send `{line}`: {err}");
            self.fail(&why);
        }
        match self.replies.recv_timeout(timeout) {
            Ok(reply) => reply,
            Err(RecvTimeoutError::Timeout) => {
                let why = format!("did not answer `{line}` within {timeout:?}");
                self.fail(&why)
            }
            Err(RecvTimeoutError::Disconnected) => {
                let why = format!("closed its stdout instead of answering `{line}`");
                self.fail(&why)
            }
        }
    }

    /// Like `call`, for a command that must answer `acquired TOKEN`: returns the token.
    pub fn acquire(&mut self, name: &str, timeout_ms: u64, blocking_timeout_ms: u64) -> String {
        let line = format!("acquire {name} {timeout_ms} {blocking_timeout_ms}");
        let reply = self.call(&line);
        match reply.strip_prefix("acquired ") {
            Some(token) => token.to_owned(),
            None => panic!("{} answered `{reply}` to `{line}`", self.kind),
        }
    }

    /// The process id of the driver.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn spawn(kind: &'static str, mut command: Command) -> Peer {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|err| panic!("could not start the {kind} peer ({command:?}): {err}"));
        let stdin = child.stdin.take();
        let (sender, replies) = channel();
        let stdout = child.stdout.take().unwrap();
        read_lines("peer-stdout", stdout, move |line| sender.send(line).is_ok());
        let (stderr, stderr_reader) = collect("peer-stderr", child.stderr.take().unwrap());
        Peer {
            kind,
            child,
            stdin,
            replies,
            stderr,
            stderr_reader: Some(stderr_reader),
        }
    }

    /// Panics with `why`, how the peer exited if it did, and what it wrote to stderr.
    fn fail(&mut self, why: &str) -> ! {
        let exit = match self.child.try_wait() {
            Ok(Some(status)) => {
                // It has exited: all its stderr is on its way.
                if let Some(reader) = self.stderr_reader.take() {
                    let _ = reader.join();
                }
                format!("; it exited with {status}")
            }
            _ => String::new(),
        };
        let stderr = self.stderr.lock().unwrap().clone();
        panic!("the {} peer {why}{exit}; its stderr:\n{stderr}", self.kind);
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = writeln!(stdin, "quit").and_then(|()| stdin.flush());
        }
        let deadline = Instant::now() + EXIT_TIMEOUT;
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The blocking timeout of an `acquire` line, zero for other lines.
fn blocking_timeout(line: &str) -> Duration {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["acquire", _, _, blocking] => Duration::from_millis(blocking.parse().unwrap_or(0)),
        _ => Duration::ZERO,
    }
}

pub(super) fn peers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers")
}

/// Installs the `part` ("python", "node", "go" or "valkey") of what `tests/peers/install`
/// installs unless it is there already, once per test process, under an exclusive lock on
/// `tests/peers/.install.lock` (test processes may run at once). Panics with one line naming
/// what to install when `toolchain`, which the part is installed with, is missing, and with
/// the end of the install's log when it fails.
pub(super) fn install(part: &'static str, toolchain: Toolchain) {
    static DONE: Mutex<Vec<&str>> = Mutex::new(Vec::new());
    let mut done = DONE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if done.contains(&part) {
        return;
    }
    if !toolchain.present() {
        panic!(
            "the {part} part of tests/peers/install needs {} on the PATH (Debian: {})",
            toolchain.what(),
            toolchain.debian()
        );
    }
    let dir = peers_dir();
    let lock = std::fs::File::create(dir.join(".install.lock")).unwrap();
    // SAFETY: flock on a file this function keeps open; the lock goes when it is closed.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    let log_path = dir.join(format!(".install-{part}.log"));
    let log = std::fs::File::create(&log_path).unwrap();
    let status = Command::new(dir.join("install"))
        .arg(part)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .status()
        .expect("run tests/peers/install");
    drop(lock);
    if !status.success() {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(15).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        panic!(
            "installing the {part} peer libraries failed ({status}); the end of {}:\n{}",
            log_path.display(),
            tail.join("\n")
        );
    }
    done.push(part);
}

/// Hands each line of `source` to `each` on a thread named `name`, until the source ends
/// or `each` says to stop.
pub fn read_lines(
    name: &str,
    source: impl Read + Send + 'static,
    mut each: impl FnMut(String) -> bool + Send + 'static,
) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            for line in BufReader::new(source).lines() {
                let Ok(line) = line else { break };
                if !each(line) {
                    break;
                }
            }
        })
        .unwrap()
}

/// Everything `source` writes, gathered on a thread named `name`, for a failure's message.
pub fn collect(
    name: &str,
    mut source: impl Read + Send + 'static,
) -> (Arc<Mutex<String>>, std::thread::JoinHandle<()>) {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = Arc::clone(&text);
    let reader = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let mut chunk = [0; 4096];
            while let Ok(n @ 1..) = source.read(&mut chunk) {
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&chunk[..n]));
            }
        })
        .unwrap();
    (text, reader)
}
