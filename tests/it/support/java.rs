//! Real Redisson, driven in a JVM as a subprocess (`tests/peers/java/Driver.java`, which
//! lists its requests). Both pinned versions are at hand: [`Redisson::V3`] (3.52.0) and
//! [`Redisson::V4`] (4.7.0, whose read-lock renewal was rewritten in 4.4 and which has the
//! non-reentrant locks).
//!
//! One JVM per version serves the whole test process ([`Jvm::shared`]): its start and
//! warm-up are paid once, and tests running at once share it, each with clients of its
//! own. A test that kills Java mid-call starts a JVM of its own ([`Jvm::private`]).
//!
//! Requests run on named Java threads, so one Java thread is one Redisson owner, and a
//! request that blocks (a `lock` waiting its turn) leaves the others free: [`Thread::send`]
//! returns at once with a [`Pending`] reply.

use std::collections::HashMap;
use std::io::Write;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};

use super::peer::{collect, install, peers_dir, read_lines};
use super::toolchain::Toolchain;

/// How long a request may take beyond its own wait: only turns a hung JVM into a failure.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// A pinned Redisson version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Redisson {
    V3,
    V4,
}

impl Redisson {
    /// Both, for tests that run against each.
    pub const ALL: [Redisson; 2] = [Redisson::V3, Redisson::V4];

    pub fn version(self) -> &'static str {
        match self {
            Redisson::V3 => "3.52.0",
            Redisson::V4 => "4.7.0",
        }
    }
}

/// What a request answered: its value, or the Java exception as `Class: message`.
pub type Reply = Result<Value, String>;

type Waiters = Arc<Mutex<HashMap<u64, Sender<Reply>>>>;

/// One JVM running the driver.
pub struct Jvm {
    version: Redisson,
    stdin: Mutex<ChildStdin>,
    child: Mutex<Child>,
    waiters: Waiters,
    stderr: Arc<Mutex<String>>,
    next: AtomicU64,
}

impl Jvm {
    /// The JVM of `version` this test process shares, started on first use.
    pub fn shared(version: Redisson) -> &'static Jvm {
        static JVMS: [OnceLock<Jvm>; 2] = [OnceLock::new(), OnceLock::new()];
        JVMS[version as usize].get_or_init(|| Jvm::start(version))
    }

    /// A JVM of this test's own, killed when dropped.
    pub fn private(version: Redisson) -> Jvm {
        Jvm::start(version)
    }

    fn start(version: Redisson) -> Jvm {
        install("java", Toolchain::Java);
        let dir = peers_dir().join("java");
        let classpath = format!(
            "{}:{}/*",
            dir.join("classes").display(),
            dir.join("lib").join(version.version()).display()
        );
        let mut child = Command::new("java")
            .arg("-XX:+UseSerialGC")
            .arg("-XX:TieredStopAtLevel=1")
            .arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
            .arg("-cp")
            .arg(classpath)
            .arg("Driver")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|err| panic!("could not start the Redisson driver: {err}"));
        let waiters: Waiters = Arc::default();
        let stdout = child.stdout.take().unwrap();
        let routes = Arc::clone(&waiters);
        let route = move |line: String| {
            let Ok(reply) = serde_json::from_str::<Value>(&line) else {
                return true;
            };
            let id = reply["id"].as_u64().unwrap_or(u64::MAX);
            let answer = if reply["ok"] == true {
                Ok(reply["value"].clone())
            } else {
                Err(reply["error"].as_str().unwrap_or("?").to_owned())
            };
            if let Some(waiter) = routes.lock().unwrap().remove(&id) {
                let _ = waiter.send(answer);
            }
            true
        };
        let routes = Arc::clone(&waiters);
        let reader = read_lines("redisson-stdout", stdout, route);
        // The JVM is gone: every waiter's sender goes with the map's entries.
        std::thread::spawn(move || {
            let _ = reader.join();
            routes.lock().unwrap().clear();
        });
        let (stderr, _) = collect("redisson-stderr", child.stderr.take().unwrap());
        Jvm {
            version,
            stdin: Mutex::new(child.stdin.take().unwrap()),
            child: Mutex::new(child),
            waiters,
            stderr,
            next: AtomicU64::new(1),
        }
    }

    /// The JVM's process id, for a thread dump (`jcmd <pid> Thread.print`).
    pub fn pid(&self) -> u32 {
        self.child.lock().unwrap().id()
    }

    /// A Redisson client of its own connected to `url`, with Redisson's watchdog timeout
    /// when `watchdog` is `None` (30 s).
    pub fn connect(&self, url: &str, watchdog: Option<Duration>) -> Client<'_> {
        let mut request = json!({"op": "connect", "url": url});
        if let Some(watchdog) = watchdog {
            request["watchdog"] = json!(watchdog.as_millis() as u64);
        }
        let value = self
            .send(request)
            .wait()
            .unwrap_or_else(|err| panic!("Redisson {:?} could not connect: {err}", self.version));
        Client {
            jvm: self,
            id: value["client"].as_str().unwrap().to_owned(),
            uuid: value["uuid"].as_str().unwrap().to_owned(),
        }
    }

    /// Sends `request` with an id of its own; the reply comes through the [`Pending`].
    pub fn send(&self, mut request: Value) -> Pending<'_> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        request["id"] = json!(id);
        let (sender, receiver) = channel();
        self.waiters.lock().unwrap().insert(id, sender);
        let line = format!("{request}\n");
        let mut stdin = self.stdin.lock().unwrap();
        if let Err(err) = stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.flush())
        {
            drop(stdin);
            self.fail(&format!("could not take `{request}`: {err}"));
        }
        Pending {
            jvm: self,
            request,
            receiver,
        }
    }

    /// Kills the JVM at once, as a crash would: its Redisson clients release nothing.
    pub fn kill(&self) {
        let mut child = self.child.lock().unwrap();
        let _ = child.kill();
        let _ = child.wait();
    }

    fn fail(&self, why: &str) -> ! {
        let stderr = self.stderr.lock().unwrap().clone();
        panic!(
            "the Redisson {} driver {why}; its stderr:\n{stderr}",
            self.version.version()
        );
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A request on its way.
pub struct Pending<'a> {
    jvm: &'a Jvm,
    request: Value,
    receiver: Receiver<Reply>,
}

impl Pending<'_> {
    /// The reply, waiting as long as the request may take. Panics if the JVM is gone or hung.
    pub fn wait(self) -> Reply {
        let own = self.request["wait"].as_u64().unwrap_or(0);
        match self.wait_for(ANSWER_TIMEOUT + Duration::from_millis(own)) {
            Some(reply) => reply,
            None => {
                let why = format!("did not answer `{}` in time", self.request);
                self.jvm.fail(&why)
            }
        }
    }

    /// The reply if it comes within `timeout`.
    pub fn wait_for(&self, timeout: Duration) -> Option<Reply> {
        match self.receiver.recv_timeout(timeout) {
            Ok(reply) => Some(reply),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                let why = format!("exited before answering `{}`", self.request);
                self.jvm.fail(&why)
            }
        }
    }

    /// Whether the reply has come, without waiting.
    pub fn is_done(&self) -> Option<Reply> {
        self.wait_for(Duration::ZERO)
    }
}

/// A Redisson client in the JVM; shut down when dropped (locks it holds stay, as after a
/// crash, until their lease runs out: its watchdog stops).
pub struct Client<'a> {
    jvm: &'a Jvm,
    id: String,
    /// The client's id, the first half of its owners' `<uuid>:<thread id>`.
    pub uuid: String,
}

impl<'a> Client<'a> {
    /// The Java thread `name` of this client: one Redisson owner.
    pub fn thread(&self, name: &str) -> Thread<'_, 'a> {
        Thread {
            client: self,
            name: name.to_owned(),
        }
    }

    pub fn jvm(&self) -> &'a Jvm {
        self.jvm
    }
}

impl Drop for Client<'_> {
    fn drop(&mut self) {
        // Not waited for, and id 0 is nobody's: the JVM may be gone already (killed).
        let line = format!(
            "{}\n",
            json!({"op": "shutdown", "client": self.id, "id": 0})
        );
        if let Ok(mut stdin) = self.jvm.stdin.lock() {
            let _ = stdin
                .write_all(line.as_bytes())
                .and_then(|()| stdin.flush());
        }
    }
}

/// A named Java thread of a [`Client`].
pub struct Thread<'c, 'a> {
    client: &'c Client<'a>,
    name: String,
}

impl<'a> Thread<'_, 'a> {
    /// Sends `op` on an object of `kind` called `name`, with the fields of `extra` (an object
    /// or null) beside.
    pub fn send(&self, op: &str, kind: &str, name: &str, extra: Value) -> Pending<'a> {
        let mut request = json!({
            "op": op,
            "kind": kind,
            "name": name,
            "client": self.client.id,
            "thread": self.name,
        });
        if let Value::Object(fields) = extra {
            for (key, value) in fields {
                request[key] = value;
            }
        }
        self.client.jvm.send(request)
    }

    /// Like `send`, waiting for the reply.
    pub fn call(&self, op: &str, kind: &str, name: &str, extra: Value) -> Reply {
        self.send(op, kind, name, extra).wait()
    }

    /// Like `call`, for a request that must succeed: panics with Java's error otherwise.
    pub fn ok(&self, op: &str, kind: &str, name: &str, extra: Value) -> Value {
        self.call(op, kind, name, extra).unwrap_or_else(|err| {
            panic!(
                "Redisson {} refused {op} on {kind} {name:?} from thread {}: {err}",
                self.client.jvm.version.version(),
                self.name
            )
        })
    }

    /// The thread's owner id as Redisson writes it, `<uuid>:<thread id>`.
    pub fn owner(&self) -> String {
        let value = self.ok("owner", "", "", Value::Null);
        value.as_str().unwrap().to_owned()
    }
}
