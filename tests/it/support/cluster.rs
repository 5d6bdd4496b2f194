//! A Redis Cluster of the tests' own: three primaries with one replica each, on free ports,
//! formed with cluster commands (no `redis-cli`), and the faults played on it: a slot
//! migrated by hand, a replica promoted with `CLUSTER FAILOVER`, a primary SIGKILLed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use redis::Value;
use redmutex::{LockClient, LockClientBuilder};

use super::{Args, Server, eventually};

/// How long a node may be silent before the others hold it failed: short, so that a killed
/// primary's replica is promoted within seconds.
const NODE_TIMEOUT_MS: u64 = 1500;

pub struct Cluster {
    /// Three primaries, then their replicas in the same order, as started; roles change
    /// with failovers.
    pub servers: Vec<Server>,
}

impl Cluster {
    /// Starts six servers, gives the primaries a third of the slots each, introduces them,
    /// makes the others replicas, and waits until every node reports the cluster healthy and
    /// every replica is in sync.
    pub fn start() -> Cluster {
        let servers: Vec<Server> = (0..6).map(|_| start_node()).collect();
        for (i, server) in servers.iter().enumerate() {
            redis::cmd("CLUSTER")
                .arg("SET-CONFIG-EPOCH")
                .arg(i + 1)
                .exec(&mut server.conn())
                .unwrap();
        }
        let ranges = [(0, 5460), (5461, 10922), (10923, 16383)];
        for (server, (start, end)) in servers.iter().zip(ranges) {
            redis::cmd("CLUSTER")
                .arg("ADDSLOTSRANGE")
                .arg(start)
                .arg(end)
                .exec(&mut server.conn())
                .unwrap();
        }
        let mut first = servers[0].conn();
        for server in &servers[1..] {
            redis::cmd("CLUSTER")
                .arg("MEET")
                .arg("127.0.0.1")
                .arg(server.port())
                .arg(bus_port(server))
                .exec(&mut first)
                .unwrap();
        }
        let cluster = Cluster { servers };
        assert!(
            eventually(Duration::from_secs(30), || cluster
                .servers
                .iter()
                .all(|s| known_nodes(s) == 6)),
            "the nodes did not all meet"
        );
        for i in 0..3 {
            let id = cluster.id(&cluster.servers[i]);
            redis::cmd("CLUSTER")
                .arg("REPLICATE")
                .arg(id)
                .exec(&mut cluster.servers[i + 3].conn())
                .unwrap();
        }
        cluster.await_healthy();
        cluster
    }

    /// Seed URLs for a client: two of the nodes.
    pub fn seeds(&self) -> Vec<String> {
        vec![self.servers[0].url(), self.servers[4].url()]
    }

    pub fn builder(&self) -> LockClientBuilder {
        let seeds = self.seeds();
        let seeds: Vec<&str> = seeds.iter().map(String::as_str).collect();
        LockClient::cluster(&seeds)
    }

    pub fn client(&self) -> LockClient {
        self.builder().build().unwrap()
    }

    /// Waits until every running node says the cluster is ok, sees three primaries each
    /// with a replica in sync, and agrees with the others on who serves what.
    pub fn await_healthy(&self) {
        self.await_agreement(1);
    }

    /// Waits until every running node says the cluster is ok, sees each primary with at
    /// least `replicas` replicas in sync, and agrees with the others on who serves what.
    pub fn await_agreement(&self, replicas: usize) {
        let healthy = eventually(Duration::from_secs(60), || {
            let running: Vec<&Server> = self.servers.iter().filter(|s| s.is_running()).collect();
            let views: Vec<Option<String>> =
                running.iter().map(|s| self.view(s, replicas)).collect();
            views.iter().all(Option::is_some)
                && views.windows(2).all(|pair| pair[0] == pair[1])
                && running
                    .iter()
                    .filter(|s| super::role(s) == "slave")
                    .all(|s| super::info(s, "replication").contains("master_link_status:up"))
        });
        assert!(healthy, "the cluster did not become healthy");
    }

    /// A node's view of the cluster when it is healthy: each slot range with its primary and
    /// replicas' ports; `None` when it reports a problem.
    fn view(&self, server: &Server, replicas: usize) -> Option<String> {
        let mut conn = server.try_conn()?;
        let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut conn).ok()?;
        if !info.contains("cluster_state:ok") {
            return None;
        }
        let slots: Value = redis::cmd("CLUSTER").arg("SLOTS").query(&mut conn).ok()?;
        let Value::Array(entries) = slots else {
            return None;
        };
        let mut view: Vec<String> = Vec::new();
        for entry in entries {
            let Value::Array(fields) = entry else {
                return None;
            };
            // Start, end, primary and its replicas.
            if fields.len() < 3 + replicas {
                return None;
            }
            let ports: Vec<String> = fields[2..]
                .iter()
                .map(|node| match node {
                    Value::Array(node) => format!("{:?}", node.get(1)),
                    _ => String::new(),
                })
                .collect();
            view.push(format!(
                "{:?}-{:?}:{}",
                fields[0],
                fields[1],
                ports.join(",")
            ));
        }
        view.sort();
        Some(view.join(" "))
    }

    /// The node id of `server`.
    pub fn id(&self, server: &Server) -> String {
        redis::cmd("CLUSTER")
            .arg("MYID")
            .query(&mut server.conn())
            .unwrap()
    }

    /// The slot of `key`.
    pub fn slot(&self, key: &str) -> u16 {
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut self.any().conn())
            .unwrap()
    }

    fn any(&self) -> &Server {
        self.servers.iter().find(|s| s.is_running()).unwrap()
    }

    /// The server that serves `slot` now, as a running primary says.
    pub fn owner(&self, slot: u16) -> &Server {
        let slots: Value = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query(&mut self.any().conn())
            .unwrap();
        let Value::Array(entries) = slots else {
            panic!("CLUSTER SLOTS: {slots:?}")
        };
        for entry in entries {
            let Value::Array(fields) = entry else {
                continue;
            };
            let (Value::Int(start), Value::Int(end)) = (&fields[0], &fields[1]) else {
                continue;
            };
            if (*start..=*end).contains(&i64::from(slot)) {
                let Value::Array(primary) = &fields[2] else {
                    continue;
                };
                let Value::Int(port) = primary[1] else {
                    continue;
                };
                return self.by_port(port as u16);
            }
        }
        panic!("no node serves slot {slot}")
    }

    /// The server that serves `key` now.
    pub fn owner_of(&self, key: &str) -> &Server {
        self.owner(self.slot(key))
    }

    pub fn by_port(&self, port: u16) -> &Server {
        self.servers.iter().find(|s| s.port() == port).unwrap()
    }

    /// The primaries now, as the nodes' roles say.
    pub fn primaries(&self) -> Vec<&Server> {
        (self.servers.iter())
            .filter(|s| s.is_running() && super::role(s) == "master")
            .collect()
    }

    /// The replica of `primary`.
    pub fn replica_of(&self, primary: &Server) -> &Server {
        let id = self.id(primary);
        (self.servers.iter())
            .find(|s| {
                s.is_running()
                    && super::role(s) == "slave"
                    && s.port() != primary.port()
                    && self.master_id(s).as_deref() == Some(id.as_str())
            })
            .expect("every primary has a replica")
    }

    /// The id of the primary `replica` follows, from its own line in `CLUSTER NODES`.
    fn master_id(&self, replica: &Server) -> Option<String> {
        let nodes: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query(&mut replica.conn())
            .ok()?;
        let line = nodes.lines().find(|line| line.contains("myself"))?;
        line.split(' ').nth(3).map(str::to_owned)
    }

    /// Moves `slot` and its keys from the primary serving it to `to`, as a resharding does
    /// (`SETSLOT IMPORTING` / `MIGRATING`, `MIGRATE` in batches, `SETSLOT NODE`), while
    /// clients keep using it.
    pub fn migrate(&self, slot: u16, to: &Server) {
        self.begin_migration(slot, to).finish();
    }

    /// Fills the slot of the hash tag `tag` with `count` keys of its own, as a slot of a
    /// busy application holds, so that moving it takes a while.
    pub fn fill(&self, tag: &str, count: usize) {
        let mut fill = redis::pipe();
        for i in 0..count {
            fill.cmd("SET")
                .arg(format!("{{{tag}}}:filler:{i}"))
                .arg(i)
                .ignore();
        }
        fill.exec(&mut self.owner(self.slot(tag)).conn()).unwrap();
    }

    /// Marks `slot` IMPORTING on `to` and MIGRATING on the primary serving it, as a
    /// resharding starts; its keys move with [`Migration::move_keys`].
    pub fn begin_migration(&self, slot: u16, to: &Server) -> Migration {
        let from = self.owner(slot);
        assert_ne!(
            from.port(),
            to.port(),
            "slot {slot} is served by the target already"
        );
        let (from_id, to_id) = (self.id(from), self.id(to));
        setslot(to, slot, "IMPORTING", &from_id);
        setslot(from, slot, "MIGRATING", &to_id);
        Migration {
            slot,
            began: Instant::now(),
            from: from.conn(),
            to: to.port(),
            to_id,
            primaries: self.primaries().iter().map(|s| s.conn()).collect(),
        }
    }

    /// SIGKILLs the server on `port`, waits until its replica was promoted and every node
    /// agrees, and returns the new primary's port.
    pub fn kill(&mut self, port: u16) -> u16 {
        let replica = self.replica_of(self.by_port(port)).port();
        let at = self.servers.iter().position(|s| s.port() == port).unwrap();
        self.servers[at].stop();
        let promoted = eventually(Duration::from_secs(60), || {
            super::role(self.by_port(replica)) == "master"
        });
        assert!(promoted, "the replica of {port} was not promoted");
        self.await_agreement(0);
        replica
    }

    /// Promotes `primary`'s replica with `CLUSTER FAILOVER` (the replica catches up first,
    /// so nothing acknowledged is lost) and waits until the cluster is healthy again.
    /// Returns the port of the new primary.
    pub fn failover(&self, primary: &Server) -> u16 {
        let replica = self.replica_of(primary);
        redis::cmd("CLUSTER")
            .arg("FAILOVER")
            .exec(&mut replica.conn())
            .unwrap();
        assert!(
            eventually(Duration::from_secs(30), || super::role(replica) == "master"),
            "the replica was not promoted"
        );
        self.await_healthy();
        replica.port()
    }
}

/// A cluster of one primary that serves every slot, with no replica: for tests that put a
/// proxy in front of it (`CONFIG SET cluster-announce-port` makes it name the proxy's port
/// in `CLUSTER SLOTS`). Returned once the slots are assigned; the caller waits for the state
/// it needs.
pub fn lone_primary() -> Server {
    let server = start_node();
    redis::cmd("CLUSTER")
        .arg("ADDSLOTSRANGE")
        .arg(0)
        .arg(16383)
        .exec(&mut server.conn())
        .unwrap();
    server
}

/// Starts one cluster-enabled server, with its cluster bus on a free port of its own (the
/// default, port + 10000, may be taken or out of range) and its node table in the temporary
/// directory.
fn start_node() -> Server {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let file = std::env::temp_dir().join(format!(
        "redmutex-cluster-{}-{}.conf",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_file(&file);
    Server::start_with(Args {
        own_port: Some("--cluster-port"),
        trailing: vec![
            "--cluster-enabled".into(),
            "yes".into(),
            "--cluster-config-file".into(),
            file.display().to_string(),
            "--cluster-node-timeout".into(),
            NODE_TIMEOUT_MS.to_string(),
            "--cluster-replica-validity-factor".into(),
            "0".into(),
            "--cluster-allow-replica-migration".into(),
            "no".into(),
        ],
        ..Args::default()
    })
}

fn bus_port(server: &Server) -> u16 {
    let port: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("cluster-port")
        .query(&mut server.conn())
        .unwrap();
    port[1].parse().unwrap()
}

fn known_nodes(server: &Server) -> usize {
    let Some(mut conn) = server.try_conn() else {
        return 0;
    };
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query(&mut conn)
        .unwrap_or_default();
    nodes
        .lines()
        .filter(|line| !line.contains("handshake") && !line.contains("noaddr"))
        .count()
}

fn setslot(server: &Server, slot: u16, state: &str, id: &str) {
    redis::cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(slot)
        .arg(state)
        .arg(id)
        .exec(&mut server.conn())
        .unwrap();
}

/// A slot being migrated between two primaries, with connections of its own so that it can
/// move keys from another thread.
pub struct Migration {
    pub slot: u16,
    began: Instant,
    from: redis::Connection,
    to: u16,
    to_id: String,
    primaries: Vec<redis::Connection>,
}

impl Migration {
    /// Moves up to `count` of the slot's keys to the importing primary; how many it moved.
    pub fn move_keys(&mut self, count: usize) -> usize {
        let keys: Vec<Vec<u8>> = redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(self.slot)
            .arg(count)
            .query(&mut self.from)
            .unwrap();
        if !keys.is_empty() {
            self.move_named(&keys);
        }
        keys.len()
    }

    /// Moves the keys `keys` of the slot to the importing primary now.
    pub fn move_named(&mut self, keys: &[impl redis::ToRedisArgs]) {
        redis::cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(self.to)
            .arg("")
            .arg(0)
            .arg(5000)
            .arg("KEYS")
            .arg(keys)
            .exec(&mut self.from)
            .unwrap();
    }

    /// On a thread of its own, moves the keys left 25 at a time, keeping the slot
    /// migrating ten seconds at least since it began, as a resharding of a large slot
    /// does, then finishes. The flag says when it has finished.
    pub fn finish_slowly(mut self) -> (std::thread::JoinHandle<()>, Arc<AtomicBool>) {
        let finished = Arc::new(AtomicBool::new(false));
        let flag = finished.clone();
        let mover = std::thread::spawn(move || {
            while self.move_keys(25) > 0 || self.began.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(40));
            }
            self.finish();
            flag.store(true, Ordering::SeqCst);
        });
        (mover, finished)
    }

    /// Moves what is left and gives the slot to the importing primary on every primary.
    pub fn finish(mut self) {
        while self.move_keys(50) > 0 {}
        for conn in &mut self.primaries {
            redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(self.slot)
                .arg("NODE")
                .arg(&self.to_id)
                .exec(conn)
                .unwrap();
        }
    }
}

/// The cluster slot of `key` (CRC16 of its hash tag, or of the whole key), computed here so
/// that names can be searched for a slot without asking a server each time.
pub fn key_slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let tagged = bytes.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &bytes[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    let mut crc: u16 = 0;
    for &byte in tagged.unwrap_or(bytes) {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}
