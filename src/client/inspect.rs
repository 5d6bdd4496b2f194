//! Who holds what: [`LockClient::inspect`] reads one lock of any kind, [`LockClient::locks`]
//! finds the locks under the client's prefix. Both only read.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use redis::Value;

use crate::base::config::MAX_NAME_LEN;
use crate::base::error::{Error, Noun, Result};
use crate::client::lock_client::LockClient;
use crate::layout::names;
use crate::lock::election::candidate::Candidate;
use crate::transport::common;

/// What kind of lock a key holds, as its layout tells.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockKind {
    /// Nothing is stored under the name: the lock is free.
    Free,
    /// A hash of one owner field (`<UUID>:<thread-id>`) and its hold count. A fair lock
    /// without waiters looks the same.
    Reentrant,
    /// A reentrant lock with a fencing counter beside it.
    Fenced,
    /// A reentrant lock with a queue of waiters beside it.
    Fair,
    /// A hash with a `mode` field: readers' holds, or one writer's.
    ReadWrite,
    /// A string holding a token (`SET NX`), as redis-py, redsync and node-redlock write. As
    /// data can hold the same shape, it always comes with a [`LockInfo::doubt`].
    Token,
    /// A string holding a number, with the semaphore's held permits beside it: the
    /// permits left.
    LeasedSemaphore,
    /// An election's leader: a hash of its token, epoch and name. Its one holder is the
    /// leader, by token, with its name as the holder's client;
    /// [`LockInfo::epoch`] is its epoch, and [`LockInfo::candidates`] its candidates.
    Election,
    /// A semaphore without leases ([`CountingSemaphore`](crate::CountingSemaphore),
    /// Redisson's `RSemaphore`): a string holding the number of permits available, told
    /// from a counter by the clients waiting on its channel (`redisson_sc:{<key>}`), as
    /// nothing else is written beside it. Nothing records who holds its permits, so it has
    /// no [`holders`](LockInfo::holders); [`LockInfo::available`] is its count (0 below
    /// zero) and [`LockInfo::waiters`] the clients waiting. A leased semaphore of which no
    /// permit is held, with waiters, looks the same. A number nobody waits on is
    /// [`NotALock`](Self::NotALock): its shape alone is a counter's.
    CountingSemaphore,
    /// A count-down latch ([`CountDownLatch`](crate::CountDownLatch), Redisson's
    /// `RCountDownLatch`): a string holding a positive count, told from a counter by the
    /// clients waiting on its channel (`redisson_countdownlatch__channel__{<key>}`).
    /// [`LockInfo::count`] is its count and [`LockInfo::waiters`] the clients waiting; it
    /// has no holders. An open latch has no key: [`Free`](Self::Free). A count nobody waits
    /// on is [`NotALock`](Self::NotALock), as a counter is.
    CountDownLatch,
    /// A key that has no lock's whole shape (see "What the tool will and will not touch" in
    /// `docs/operating.md`): of another Redis type, a hash whose fields are not one owner
    /// with a hold count (or a read-write lock's), a string that is no lock token, a number
    /// nobody waits on and without held permits beside it (a counter, or a semaphore or latch
    /// that nothing waits for), or a key whose name no lock can have (longer than
    /// [`MAX_NAME_LEN`](crate::MAX_NAME_LEN) after the prefix, or the prefix itself). Says
    /// what it holds; the operations tool neither lists (but with `--all`) nor breaks it.
    NotALock(String),
    /// What could not be read, and why: a key whose look failed, or every key of a server
    /// that could not be listed (then [`LockInfo::name`] is the pattern and
    /// [`LockInfo::server`] the server). A listing goes on past it and keeps it, so that
    /// one that could not see everything says so.
    Unreadable(String),
}

/// One holder of a lock.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// Who holds: an owner field (`<client-uuid>:<thread-id>`), a token, or a permit id.
    pub id: String,
    /// How many holds (reentrant locks); 1 for tokens and permits.
    pub holds: u64,
    /// `read` or `write` for a read-write lock's holders.
    pub mode: Option<&'static str>,
    /// A permit's own lease left.
    pub lease_left: Option<Duration>,
    /// The [`client_name`](crate::LockClientBuilder::client_name) of the holder's client,
    /// where its connections are named on the server (this crate's clients that may run
    /// `CLIENT SETNAME`, read when the inspecting user may run `CLIENT LIST`).
    pub client: Option<String>,
}

/// Everything [`LockClient::inspect`] found about a lock.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LockInfo {
    /// The lock's name, without the client's prefix (lossily decoded: see
    /// [`name_bytes`](Self::name_bytes)).
    pub name: String,
    /// The lock's name as stored, byte for byte, without the client's prefix: the name to
    /// act on, where [`name`](Self::name) is not UTF-8.
    pub name_bytes: Vec<u8>,
    /// Its kind; [`LockKind::Free`] when nothing is stored.
    pub kind: LockKind,
    /// Who holds it.
    pub holders: Vec<Holder>,
    /// The lock key's time to live; `None` for no key or a key without expiry.
    pub lease_left: Option<Duration>,
    /// Clients waiting for an unlock message: subscribers of its channels, or the fair
    /// queue's length if that is more. `None` when the user may not count subscribers.
    pub waiters: Option<u64>,
    /// The fair lock's waiting owners, first in line first.
    pub queue: Vec<String>,
    /// The fencing counter: the last token issued (for an election, the last epoch).
    pub fence: Option<u64>,
    /// An election's leader's epoch.
    pub epoch: Option<u64>,
    /// A semaphore's permits left to take.
    pub available: Option<u64>,
    /// A count-down latch's count.
    pub count: Option<u64>,
    /// An election's candidates, as [`Election::candidates`](crate::Election::candidates)
    /// lists them: its leader first, then those waiting to lead, in their order. Read by
    /// [`LockClient::inspect`] only (listings leave it `None`), and `None` for other kinds
    /// and where they could not be read (the reason is logged).
    pub candidates: Option<Vec<Candidate>>,
    /// The Redis keys and channels this lock is made of (lossily decoded: see
    /// [`keys_bytes`](Self::keys_bytes)).
    pub keys: Vec<String>,
    /// The same keys and channels, byte for byte.
    pub keys_bytes: Vec<Vec<u8>>,
    /// The server that answered, as `host:port` (a cluster's, or a Redlock client's first
    /// node with the lock).
    pub server: String,
    /// Why the key may be application data rather than a lock, where its shape alone
    /// cannot tell: a string holding a token's shape (an MD5 digest or an ObjectId looks the
    /// same), or a lock's shape without the expiry every lock writer sets. `None` for a
    /// lock beyond doubt. [`LockClient::locks`] leaves such keys out, [`LockClient::scan`]
    /// lists them, and only [`Lock::force_unlock_held_by`](crate::Lock::force_unlock_held_by)
    /// removes them.
    pub doubt: Option<String>,
}

impl LockInfo {
    /// Whether this is a lock beyond doubt, as [`LockClient::locks`] lists: neither free,
    /// nor data ([`LockKind::NotALock`]), nor possibly data ([`doubt`](Self::doubt)).
    /// Unreadable entries count, so that a listing says what it could not see.
    pub fn is_lock(&self) -> bool {
        self.doubt.is_none() && !matches!(self.kind, LockKind::Free | LockKind::NotALock(_))
    }
}

/// What the inspect script replied, in order.
struct Raw {
    kind: String,
    pttl: i64,
    fields: Vec<(String, String)>,
    queue: Vec<(String, i64)>,
    fence: i64,
    permits: Vec<(String, i64)>,
    subscribers: i64,
    value: String,
    now: i64,
    /// What the script judged the key: "hash", "rwlock", "election", "token",
    /// "semaphore", "counting", "latch", or "" for no lock.
    shaped: String,
    /// Why it is no lock, or why it may be data after all; "" for a lock beyond doubt.
    doubt: String,
}

impl LockClient {
    /// Reads the lock `name` of whatever kind it is: its holders, lease left, waiters, the
    /// fair queue, the fencing counter, a semaphore's permits, a latch's count, and the
    /// keys involved. Reads only, in one script on the server that owns the name (and, for
    /// an election, one more for its candidates). On Redlock, the first node that has the
    /// lock answers.
    ///
    /// ```no_run
    /// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
    /// let info = client.inspect("orders:42")?;
    /// for holder in &info.holders {
    ///     println!("{} holds {} ({:?} left)", holder.id, holder.holds, info.lease_left);
    /// }
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn inspect(&self, name: impl AsRef<[u8]>) -> Result<LockInfo> {
        let mut info = self.inspect_unnamed(name.as_ref())?;
        if !info.holders.is_empty() {
            name_holders(&mut info, &self.client_names());
        }
        if info.kind == LockKind::Election {
            let read = self.election(name.as_ref()).candidates();
            info.candidates = read
                .map_err(|err| log::debug!("no candidates of {}: {err:#}", info.name))
                .ok();
        }
        Ok(info)
    }

    /// [`inspect`](Self::inspect) without the holders' client names.
    fn inspect_unnamed(&self, name: &[u8]) -> Result<LockInfo> {
        let target = self.target(name, Noun::Lock);
        let key = target.open()?;
        let names = [
            key.to_vec(),
            names::channel(key),
            names::fair_queue(key),
            names::fair_timeouts(key),
            names::fence_counter(key),
            names::semaphore_timeouts(key),
            names::rwlock_channel(key),
            names::semaphore_channel(key),
            names::latch_channel(key),
        ];
        // The script takes the keys as keys and the four channels as arguments.
        let keys: [&[u8]; 5] = [0, 2, 3, 4, 5].map(|i| &names[i][..]);
        let channels: [&[u8]; 4] = [1, 6, 7, 8].map(|i| &names[i][..]);
        let cmd = common::inspect(&keys, &channels);
        let nodes = self.shared().nodes();
        let results = nodes.run_all_unhurried::<Value>(&cmd);
        let (mut free, mut failed) = (None, None);
        for (node, result) in nodes.list().iter().zip(results) {
            match result.and_then(|value| parse(value).ok_or_else(|| malformed(&node.name))) {
                Ok(raw) if raw.kind != "none" || !raw.queue.is_empty() => {
                    return Ok(info(name, &names, raw, &node.server_of(key)));
                }
                Ok(raw) => drop(free.get_or_insert((raw, node.server_of(key)))),
                Err(err) => drop(failed.get_or_insert(err)),
            }
        }
        match (free, failed) {
            (Some((raw, server)), _) => Ok(info(name, &names, raw, &server)),
            (None, failed) => Err(failed
                .unwrap_or_else(|| malformed("no node"))
                .with_lock(target.subject())),
        }
    }

    /// The client names of this crate's clients connected to any server of this client,
    /// by client id, read from their connections' names in `CLIENT LIST`; empty where the
    /// user may not run it.
    fn client_names(&self) -> HashMap<String, String> {
        let mut names = HashMap::new();
        let shards = (self.shared().nodes().list().iter())
            .filter_map(|node| node.shards().ok())
            .flatten();
        for shard in shards {
            let end = std::time::Instant::now() + self.shared().config().response_timeout;
            match shard.run::<String>(redis::cmd("CLIENT").arg("LIST"), end) {
                Ok(list) => names.extend(list.lines().filter_map(connection_owner)),
                Err(err) => log::debug!("no client names from {}: {err:#}", shard.name),
            }
        }
        names
    }

    /// The locks under the client's prefix whose names match `pattern` (a Redis glob, `*`
    /// for all), sorted by name: found with `SCAN` (never `KEYS`) on every server, read as
    /// [`inspect`](Self::inspect) does. Auxiliary keys (queues, counters, permits, latches),
    /// keys without a lock's shape or under a name no lock can have
    /// ([`LockKind::NotALock`]) and keys that may be data ([`LockInfo::doubt`]) are left
    /// out. Reads only.
    pub fn locks(&self, pattern: &str) -> Result<Vec<LockInfo>> {
        let mut locks = self.scan(pattern)?;
        locks.retain(LockInfo::is_lock);
        Ok(locks)
    }

    /// Like [`locks`](Self::locks), with the keys that are no locks too, as
    /// [`LockKind::NotALock`], and those that may be data ([`LockInfo::doubt`]). Reads only.
    pub fn scan(&self, pattern: &str) -> Result<Vec<LockInfo>> {
        self.scan_counting(pattern, |_| {})
    }

    /// [`scan`](Self::scan), telling `progress` how many keys matching the pattern `SCAN`
    /// has returned so far, after each of its pages: for a tool that shows how a long scan
    /// of a large keyspace goes.
    ///
    /// ```no_run
    /// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
    /// let found = client.scan_counting("*", |seen| eprint!("\r{seen} keys"))?;
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn scan_counting(
        &self,
        pattern: &str,
        mut progress: impl FnMut(u64),
    ) -> Result<Vec<LockInfo>> {
        let shared = self.shared();
        shared.check_process()?;
        let config = shared.config();
        let prefix = &config.key_prefix;
        let mut glob = escape_glob(prefix);
        glob.extend_from_slice(pattern.as_bytes());
        let mut keys = Vec::new();
        let (listed, unlisted) = self.scan_keys(&glob, &mut progress);
        for (server, err) in unlisted {
            keys.push(unreadable(pattern.as_bytes(), &server, &err));
        }
        let found: BTreeSet<Vec<u8>> = (listed.iter())
            .filter(|key| !auxiliary(key))
            .filter_map(|key| key.strip_prefix(&prefix[..]).map(<[u8]>::to_vec))
            .collect();
        let names = self.client_names();
        for name in found {
            let key = || [&prefix[..], &name[..]].concat();
            if let Some(why) = no_lock_name(&name) {
                let server = shared.nodes().list()[0].server_of(&key());
                keys.push(entry(&name, &server, LockKind::NotALock(why.to_owned())));
                continue;
            }
            let mut info = match self.inspect_unnamed(&name) {
                Ok(info) => info,
                Err(err) => {
                    let server = shared.nodes().list()[0].server_of(&key());
                    keys.push(unreadable(&name, &server, &err));
                    continue;
                }
            };
            if info.kind != LockKind::Free {
                name_holders(&mut info, &names);
                keys.push(info);
            }
        }
        Ok(keys)
    }

    /// The keys matching `glob` on every server (on a cluster, every primary), telling
    /// `progress` how many so far; and each server that could not be listed, with why.
    pub(crate) fn scan_keys(
        &self,
        glob: &[u8],
        mut progress: impl FnMut(u64),
    ) -> (Vec<Vec<u8>>, Vec<(String, Error)>) {
        let shared = self.shared();
        let (mut keys, mut unlisted) = (Vec::new(), Vec::new());
        for node in shared.nodes().list() {
            let shards = match node.shards() {
                Ok(shards) => shards,
                Err(err) => {
                    unlisted.push((node.name.clone(), err));
                    continue;
                }
            };
            for shard in shards {
                let mut cursor = 0u64;
                loop {
                    let mut scan = redis::cmd("SCAN");
                    scan.arg(cursor)
                        .arg("MATCH")
                        .arg(glob)
                        .arg("COUNT")
                        .arg(500);
                    let end = std::time::Instant::now() + shared.config().response_timeout;
                    let (next, listed): (u64, Vec<Vec<u8>>) = match shard.run(&scan, end) {
                        Ok(reply) => reply,
                        Err(err) => {
                            unlisted.push((shard.name.clone(), err));
                            break;
                        }
                    };
                    keys.extend(listed);
                    progress(keys.len() as u64);
                    if next == 0 {
                        break;
                    }
                    cursor = next;
                }
            }
        }
        (keys, unlisted)
    }
}

/// Why a key whose name under the prefix is `name` can be no lock of any kind, as no
/// handle can be made for that name; `None` for a name a lock may have.
fn no_lock_name(name: &[u8]) -> Option<&'static str> {
    const _: () = assert!(MAX_NAME_LEN == 1024, "the reason names the limit");
    if name.is_empty() {
        Some("the prefix itself, which names no lock")
    } else if name.len() > MAX_NAME_LEN {
        Some("a name longer than 1024 bytes (MAX_NAME_LEN), which no lock has")
    } else {
        None
    }
}

/// The entry of a listing for `name` on `server`, which could not be read for `err`.
fn unreadable(name: &[u8], server: &str, err: &Error) -> LockInfo {
    entry(name, server, LockKind::Unreadable(format!("{err:#}")))
}

/// The entry of a listing for `name` on `server`, of `kind`, with nothing else known.
fn entry(name: &[u8], server: &str, kind: LockKind) -> LockInfo {
    LockInfo {
        name: String::from_utf8_lossy(name).into_owned(),
        name_bytes: name.to_vec(),
        kind,
        holders: Vec::new(),
        lease_left: None,
        waiters: None,
        queue: Vec::new(),
        fence: None,
        epoch: None,
        available: None,
        count: None,
        candidates: None,
        keys: Vec::new(),
        keys_bytes: Vec::new(),
        server: server.to_owned(),
        doubt: None,
    }
}

fn malformed(node: &str) -> Error {
    Error::redis_at(
        node,
        redis::RedisError::from((
            redis::ErrorKind::Parse,
            "the inspect script answered with an unexpected shape",
        )),
    )
}

/// Keys that belong to a lock without being one: Redisson's prefixed names (latches,
/// counters, queues, the record of a fair lock's waiters), a read hold's lease key and a
/// counting semaphore's attempt markers and a waiter's wait edges.
fn auxiliary(key: &[u8]) -> bool {
    key.starts_with(b"redisson_")
        || key.windows(16).any(|w| w == b":rwlock_timeout:")
        || key.windows(16).any(|w| w == b":redmutex_taken:")
        || key.windows(15).any(|w| w == b":redmutex_wait:")
}

/// `bytes` with Redis glob's special characters escaped.
fn escape_glob(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    for &b in bytes {
        if matches!(b, b'*' | b'?' | b'[' | b']' | b'\\') {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

fn parse(value: Value) -> Option<Raw> {
    let Value::Array(items) = value else {
        return None;
    };
    let mut items = items.into_iter();
    let mut next = || items.next();
    let kind = text(next()?)?;
    let pttl = int(next()?)?;
    let fields = pairs(next()?, text, text)?;
    let queue = pairs(next()?, text, int)?;
    let fence = int(next()?)?;
    // Permit ids are 16 bytes, shown as 32 hex digits as Redisson shows them.
    let permits = pairs(next()?, hex, |v| text(v)?.parse().ok())?;
    let subscribers = int(next()?)?;
    let value = text(next()?)?;
    let now = int(next()?)?;
    let shaped = text(next()?)?;
    let doubt = text(next()?)?;
    Some(Raw {
        kind,
        pttl,
        fields,
        queue,
        fence,
        permits,
        subscribers,
        value,
        now,
        shaped,
        doubt,
    })
}

fn text(value: Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
        Value::SimpleString(text) => Some(text),
        Value::Okay => Some("OK".into()),
        _ => None,
    }
}

fn int(value: Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(n),
        Value::BulkString(bytes) => std::str::from_utf8(&bytes).ok()?.parse().ok(),
        _ => None,
    }
}

fn hex(value: Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => Some(bytes.iter().map(|b| format!("{b:02x}")).collect()),
        _ => None,
    }
}

/// A flat array of names and values, as pairs.
fn pairs<T>(
    value: Value,
    first: impl Fn(Value) -> Option<String>,
    second: impl Fn(Value) -> Option<T>,
) -> Option<Vec<(String, T)>> {
    let Value::Array(items) = value else {
        return None;
    };
    let mut items = items.into_iter();
    let mut out = Vec::new();
    while let Some(name) = items.next() {
        out.push((first(name)?, second(items.next()?)?));
    }
    Some(out)
}

fn info(name: &[u8], names: &[Vec<u8>; 9], raw: Raw, server: &str) -> LockInfo {
    let mut holders = Vec::new();
    let mut available = None;
    let mut count = None;
    let mut epoch = None;
    let holder = |id: &str, holds: u64, mode: Option<&'static str>| Holder {
        id: id.to_owned(),
        holds,
        mode,
        lease_left: None,
        client: None,
    };
    let kind = match raw.shaped.as_str() {
        "election" => {
            let field = |wanted: &str| raw.fields.iter().find(|(f, _)| f == wanted);
            if let (Some((_, token)), Some((_, number)), Some((_, leader))) =
                (field("token"), field("epoch"), field("name"))
            {
                epoch = number.parse().ok();
                let mut holder = holder(token, 1, None);
                holder.client = Some(leader.clone());
                holders.push(holder);
            }
            LockKind::Election
        }
        "hash" | "rwlock" => {
            let read_write = raw.shaped == "rwlock";
            for (field, value) in raw.fields.iter().filter(|(field, _)| field != "mode") {
                let holds = value.parse().unwrap_or(0);
                holders.push(match field.strip_suffix(":write") {
                    Some(owner) if read_write => holder(owner, holds, Some("write")),
                    _ => holder(field, holds, read_write.then_some("read")),
                });
            }
            if read_write {
                LockKind::ReadWrite
            } else if !raw.queue.is_empty() {
                LockKind::Fair
            } else if raw.fence >= 0 {
                LockKind::Fenced
            } else {
                LockKind::Reentrant
            }
        }
        "token" => {
            holders.push(holder(&raw.value, 1, None));
            LockKind::Token
        }
        "semaphore" => {
            available = raw.value.parse().ok();
            for (id, ends) in &raw.permits {
                let mut permit = holder(id, 1, None);
                let left = ends.saturating_sub(raw.now).max(0) as u64;
                permit.lease_left = Some(Duration::from_millis(left));
                holders.push(permit);
            }
            LockKind::LeasedSemaphore
        }
        "counting" => {
            // Below zero, more were taken away than there were: none is left to take.
            available = raw
                .value
                .parse::<i64>()
                .ok()
                .map(|n| n.max(0).unsigned_abs());
            LockKind::CountingSemaphore
        }
        "latch" => {
            count = raw.value.parse().ok();
            LockKind::CountDownLatch
        }
        _ if raw.kind == "none" && raw.queue.is_empty() => LockKind::Free,
        _ if raw.kind == "none" => LockKind::Fair,
        _ => LockKind::NotALock(raw.doubt.clone()),
    };
    let doubt = (!raw.shaped.is_empty() && !raw.doubt.is_empty()).then(|| raw.doubt.clone());
    let queue: Vec<String> = raw.queue.iter().map(|(owner, _)| owner.clone()).collect();
    let waiters = (raw.subscribers >= 0).then(|| (raw.subscribers as u64).max(queue.len() as u64));
    let keys_bytes = relevant_keys(&kind, names);
    LockInfo {
        name: String::from_utf8_lossy(name).into_owned(),
        name_bytes: name.to_vec(),
        kind,
        holders,
        lease_left: (raw.pttl >= 0).then(|| Duration::from_millis(raw.pttl as u64)),
        waiters,
        queue,
        fence: (raw.fence >= 0).then_some(raw.fence as u64),
        epoch,
        available,
        count,
        candidates: None,
        keys: (keys_bytes.iter())
            .map(|key| String::from_utf8_lossy(key).into_owned())
            .collect(),
        keys_bytes,
        server: server.to_owned(),
        doubt,
    }
}

/// The client id and client name of a `CLIENT LIST` line of one of this crate's
/// connections (named `redmutex:<id>:<name>` or `redmutex-notify:<id>:<name>`).
fn connection_owner(line: &str) -> Option<(String, String)> {
    let name = line
        .split(' ')
        .find_map(|field| field.strip_prefix("name="))?;
    let named =
        (name.strip_prefix("redmutex:")).or_else(|| name.strip_prefix("redmutex-notify:"))?;
    let (id, client) = named.split_once(':')?;
    Some((id.to_owned(), client.to_owned()))
}

/// Fills in the client names of `info`'s holders whose owner ids start with a client id
/// in `names`.
fn name_holders(info: &mut LockInfo, names: &HashMap<String, String>) {
    for holder in &mut info.holders {
        let client = holder.id.rsplit_once(':').map(|(client, _)| client);
        if let Some(name) = client.and_then(|id| names.get(id)) {
            holder.client = Some(name.clone());
        }
    }
}

/// The keys and channels of `kind` among `names` (in the order `inspect_unnamed` lists
/// them).
fn relevant_keys(kind: &LockKind, names: &[Vec<u8>; 9]) -> Vec<Vec<u8>> {
    let picks: &[usize] = match kind {
        LockKind::Fair => &[0, 1, 2, 3],
        LockKind::Fenced | LockKind::Election => &[0, 1, 4],
        LockKind::ReadWrite => &[0, 6],
        LockKind::LeasedSemaphore => &[0, 5, 7],
        LockKind::CountingSemaphore => &[0, 7],
        LockKind::CountDownLatch => &[0, 8],
        LockKind::Free | LockKind::Reentrant | LockKind::Token => &[0, 1],
        LockKind::NotALock(_) | LockKind::Unreadable(_) => &[0],
    };
    picks.iter().map(|&i| names[i].clone()).collect()
}
