//! A Sentinel deployment for the tests: a primary, its replicas and sentinels monitoring
//! them under one master name, each a supervised server on a free port, with config files
//! in a directory of their own that goes with the deployment.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::tls::Certs;
use super::{Args, Server, eventually};

/// The master name the sentinels monitor.
pub const MASTER: &str = "mymaster";

/// How a deployment is set up.
#[derive(Clone)]
pub struct Options {
    pub replicas: usize,
    pub sentinels: usize,
    /// How many sentinels must agree that the primary is down.
    pub quorum: usize,
    /// `requirepass` of every sentinel.
    pub sentinel_password: Option<String>,
    /// `requirepass` (and `masterauth`) of the primary and the replicas.
    pub password: Option<String>,
    /// Every server and sentinel speaks TLS only, with these certificates, and replicates
    /// and monitors over TLS.
    pub tls: Option<Arc<Certs>>,
    /// More arguments for the first primary's server alone.
    pub primary_args: Vec<String>,
}

impl Default for Options {
    /// One primary, one replica, three sentinels, quorum 2, no passwords.
    fn default() -> Self {
        Options {
            replicas: 1,
            sentinels: 3,
            quorum: 2,
            sentinel_password: None,
            password: None,
            tls: None,
            primary_args: Vec::new(),
        }
    }
}

pub struct Deployment {
    /// The first is the primary at the start; the others replicate it.
    pub servers: Vec<Server>,
    pub sentinels: Vec<Server>,
    options: Options,
    dir: PathBuf,
}

impl Deployment {
    /// Starts the servers and the sentinels, and waits until every sentinel knows every
    /// replica and every other sentinel, so that a failover can be agreed on at once.
    pub fn start(options: Options) -> Deployment {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "redmutex-sentinel-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let auth: Vec<String> = match &options.password {
            Some(pw) => vec![
                "--requirepass".into(),
                pw.clone(),
                "--masterauth".into(),
                pw.clone(),
            ],
            None => Vec::new(),
        };
        // Each in a directory of its own: a replica writes the data it syncs to disk there.
        let data_args = |i: usize, trailing: Vec<String>| {
            let own = dir.join(format!("server-{i}"));
            std::fs::create_dir_all(&own).unwrap();
            let mut own = vec!["--dir".into(), own.to_str().unwrap().into()];
            if options.tls.is_some() {
                own.extend(["--tls-replication".into(), "yes".into()]);
            }
            Args {
                trailing: [auth.clone(), own, trailing].concat(),
                password: options.password.clone(),
                ..Args::default()
            }
        };
        let tls = options.tls.clone().map(|certs| (certs, false));
        let primary =
            Server::start_configured(data_args(0, options.primary_args.clone()), tls.clone());
        let mut servers = vec![primary];
        for i in 1..=options.replicas {
            let of = vec![
                "--replicaof".into(),
                "127.0.0.1".into(),
                servers[0].port().to_string(),
            ];
            servers.push(Server::start_configured(data_args(i, of), tls.clone()));
        }
        for replica in &servers[1..] {
            assert!(
                eventually(Duration::from_secs(30), || info(replica, "replication")
                    .contains("master_link_status:up")),
                "replica on {} did not sync",
                replica.port()
            );
        }
        let mut deployment = Deployment {
            servers,
            sentinels: Vec::new(),
            options: options.clone(),
            dir,
        };
        for i in 0..options.sentinels {
            let conf = deployment.dir.join(format!("sentinel-{i}.conf"));
            std::fs::write(&conf, deployment.sentinel_conf()).unwrap();
            let args = Args {
                leading: vec![conf.to_str().unwrap().into(), "--sentinel".into()],
                password: options.sentinel_password.clone(),
                ..Args::default()
            };
            let sentinel = Server::start_configured(args, tls.clone());
            deployment.sentinels.push(sentinel);
        }
        for sentinel in &deployment.sentinels {
            assert!(
                eventually(Duration::from_secs(60), || {
                    let replicas: Vec<redis::Value> = sentinel_cmd(sentinel, "REPLICAS");
                    let sentinels: Vec<redis::Value> = sentinel_cmd(sentinel, "SENTINELS");
                    replicas.len() == options.replicas && sentinels.len() + 1 == options.sentinels
                }),
                "sentinel on {} did not discover the deployment",
                sentinel.port()
            );
        }
        deployment
    }

    fn sentinel_conf(&self) -> String {
        let o = &self.options;
        let mut conf = format!(
            "sentinel monitor {MASTER} 127.0.0.1 {} {}\n\
             sentinel down-after-milliseconds {MASTER} 1000\n\
             sentinel failover-timeout {MASTER} 5000\n\
             sentinel parallel-syncs {MASTER} 1\n\
             dir {}\n",
            self.servers[0].port(),
            o.quorum,
            self.dir.display()
        );
        if let Some(pw) = &o.password {
            conf += &format!("sentinel auth-pass {MASTER} {pw}\n");
        }
        if let Some(pw) = &o.sentinel_password {
            conf += &format!("requirepass {pw}\nsentinel sentinel-pass {pw}\n");
        }
        if o.tls.is_some() {
            conf += "tls-replication yes\n";
        }
        conf
    }

    /// The certificates of a TLS deployment.
    pub fn certs(&self) -> Option<&Arc<Certs>> {
        self.options.tls.as_ref()
    }

    /// The sentinels' URLs, with their password when they have one.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(Server::url).collect()
    }

    /// The port of the primary the sentinel `i` names now.
    pub fn named_primary(&self, i: usize) -> Option<u16> {
        let addr: Option<(String, u16)> = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(MASTER)
            .query(&mut self.sentinels[i].conn())
            .ok()?;
        addr.map(|(_, port)| port)
    }

    /// The server on `port`.
    pub fn server(&self, port: u16) -> &Server {
        self.servers.iter().find(|s| s.port() == port).unwrap()
    }

    /// Has sentinel 0 fail the primary over (`SENTINEL FAILOVER`) and waits until every
    /// sentinel names a new primary and that one says it is a master; returns its index.
    pub fn failover(&self) -> usize {
        let old = self.named_primary(0).unwrap();
        assert!(
            eventually(Duration::from_secs(60), || {
                redis::cmd("SENTINEL")
                    .arg("FAILOVER")
                    .arg(MASTER)
                    .query::<()>(&mut self.sentinels[0].conn())
                    .is_ok()
            }),
            "SENTINEL FAILOVER was refused for a minute"
        );
        self.await_new_primary(old)
    }

    /// Waits until every sentinel names a primary other than the one on `old`, and that one
    /// says it is a master; returns its index.
    pub fn await_new_primary(&self, old: u16) -> usize {
        let mut new = None;
        assert!(
            eventually(Duration::from_secs(120), || {
                let named: Vec<Option<u16>> = (0..self.sentinels.len())
                    .map(|i| self.named_primary(i))
                    .collect();
                new = named[0].filter(|&port| port != old && named.iter().all(|n| *n == named[0]));
                new.is_some_and(|port| role(self.server(port)) == "master")
            }),
            "the sentinels did not agree on a new primary"
        );
        let port = new.unwrap();
        self.servers.iter().position(|s| s.port() == port).unwrap()
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        self.sentinels.clear();
        self.servers.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn sentinel_cmd(sentinel: &Server, what: &str) -> Vec<redis::Value> {
    redis::cmd("SENTINEL")
        .arg(what)
        .arg(MASTER)
        .query(&mut sentinel.conn())
        .unwrap_or_default()
}

/// A section of `INFO`.
pub fn info(server: &Server, section: &str) -> String {
    redis::cmd("INFO")
        .arg(section)
        .query(&mut server.conn())
        .unwrap_or_default()
}

/// What `ROLE` says first: `master` or `slave`.
pub fn role(server: &Server) -> String {
    let role: Vec<redis::Value> = redis::cmd("ROLE")
        .query(&mut server.conn())
        .unwrap_or_default();
    match role.first() {
        Some(redis::Value::BulkString(role)) => String::from_utf8_lossy(role).into_owned(),
        _ => String::new(),
    }
}

/// A sentinel that missed a failover: whatever happens, it names the primary on `port` under
/// configuration epoch `epoch` (`SENTINEL MASTER`, `SENTINEL GET-MASTER-ADDR-BY-NAME`). It
/// also takes subscriptions, which it never publishes on, and answers PING, and counts what
/// it was asked. Its threads end with the test process.
pub struct StaleSentinel {
    port: u16,
    counts: Arc<Counts>,
}

#[derive(Default)]
struct Counts {
    asked: AtomicU32,
    /// PINGs on a subscribed connection: the client's watch loop is under way there.
    pinged: AtomicU32,
}

impl StaleSentinel {
    pub fn start(primary_port: u16, epoch: u64) -> StaleSentinel {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let counts = Arc::new(Counts::default());
        let shared = counts.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let counts = shared.clone();
                std::thread::spawn(move || serve(stream, primary_port, epoch, &counts));
            }
        });
        StaleSentinel { port, counts }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// How many times it was asked where the primary is.
    pub fn asked(&self) -> u32 {
        self.counts.asked.load(Ordering::SeqCst)
    }

    /// How many PINGs it got on subscribed connections.
    pub fn pinged(&self) -> u32 {
        self.counts.pinged.load(Ordering::SeqCst)
    }
}

/// Answers one connection's commands (RESP arrays of bulk strings) until it closes.
fn serve(stream: std::net::TcpStream, primary_port: u16, epoch: u64, counts: &Counts) {
    use std::io::{BufRead, BufReader, Read, Write};
    let bulk = |s: &str| format!("${}\r\n{s}\r\n", s.len());
    let array = |items: &[String]| {
        let body: String = items.iter().map(|item| bulk(item)).collect();
        format!("*{}\r\n{body}", items.len())
    };
    let mut out = stream.try_clone().unwrap();
    let mut input = BufReader::new(stream);
    let mut line = String::new();
    let mut subscribed = false;
    loop {
        line.clear();
        if input.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let Some(n) = line
            .trim_end()
            .strip_prefix('*')
            .and_then(|n| n.parse().ok())
        else {
            return;
        };
        let mut args: Vec<String> = Vec::with_capacity(n);
        for _ in 0..n {
            line.clear();
            input.read_line(&mut line).unwrap_or(0);
            let len: usize = line.trim_end()[1..].parse().unwrap_or(0);
            let mut arg = vec![0; len + 2];
            if input.read_exact(&mut arg).is_err() {
                return;
            }
            args.push(String::from_utf8_lossy(&arg[..len]).into_owned());
        }
        let upper: Vec<String> = args.iter().map(|arg| arg.to_uppercase()).collect();
        let words: Vec<&str> = upper.iter().map(String::as_str).collect();
        let primary = (String::from("127.0.0.1"), primary_port.to_string());
        let reply = match words[..] {
            ["SENTINEL", "MASTER", _] => {
                counts.asked.fetch_add(1, Ordering::SeqCst);
                let fields = [
                    "name",
                    MASTER,
                    "ip",
                    &primary.0,
                    "port",
                    &primary.1,
                    "flags",
                    "master",
                    "config-epoch",
                    &epoch.to_string(),
                ];
                array(&fields.map(String::from))
            }
            ["SENTINEL", "GET-MASTER-ADDR-BY-NAME", _] => {
                counts.asked.fetch_add(1, Ordering::SeqCst);
                array(&[primary.0.clone(), primary.1.clone()])
            }
            ["SUBSCRIBE", ..] => {
                subscribed = true;
                format!("*3\r\n{}{}:1\r\n", bulk("subscribe"), bulk(&args[1]))
            }
            ["PING"] if subscribed => {
                counts.pinged.fetch_add(1, Ordering::SeqCst);
                array(&["pong".into(), String::new()])
            }
            ["PING"] => "+PONG\r\n".into(),
            _ => "+OK\r\n".into(),
        };
        if out.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}
