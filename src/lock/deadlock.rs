//! Deadlock detection across processes, as PostgreSQL does it for its locks: a waiter that
//! holds locks and is still waiting after half the deadlock timeout writes, beside each lock
//! it holds, what it waits for (a wait edge); once the timeout has passed, it follows the
//! graph from the lock it waits for: that lock's holders, the edges beside it of those of
//! them that wait, the holders of what they wait for, and so on. A path back to itself is a
//! cycle, which a second walk must find again before it counts. Of the cycle's waiters, the
//! one that began waiting last (it closed the cycle) ends its wait with
//! [`Error::Deadlock`], whoever finds it: two waiters that look at once at one cycle agree
//! on it. Another that finds the same waiters in a cycle at its next check ends its own.
//!
//! A cycle, once formed, stays until one of its waiters leaves it, so plain reads that find
//! one and find it again are sound. An edge counts only while its waiter still waits (it
//! deletes its edges when it stops, and they expire when its process dies) and only under
//! a holder that still holds (the walk goes through the holders the lock's hash names).

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::base::error::{Error, Result};
use crate::base::metrics;
use crate::base::wait_edge::WaitEdge;
use crate::kinds::undo::Undo;
use crate::layout::names;
use crate::layout::owner::{current_thread, field};
use crate::lease::shared::Shared;
use crate::lease::target::Target;
use crate::topology::quorum;

/// How many locks a walk follows at most: a cycle longer than this is not looked for.
const MOST_HOPS: usize = 64;

/// How many edges a walk reads at most: through locks with many readers that each wait,
/// paths could otherwise multiply. A walk that runs out finds no cycle.
const MOST_EDGES: usize = 1024;

/// The first line of an edge's value: the format's version.
const FORMAT: &str = "redmutex-wait 1";

/// The deadlock check of one wait: when it writes its edges and looks for a cycle, and the
/// edges it wrote, which it deletes when dropped (the wait ended, however it did).
pub(crate) struct DeadlockWatch<'a> {
    target: &'a Target,
    /// The kind of the lock waited for, as its handle names it.
    kind: &'static str,
    timeout: Duration,
    started: Instant,
    since: SystemTime,
    /// This thread's owner field in this client's holds.
    owner: String,
    /// When the edges are written first.
    write_at: Option<Instant>,
    /// When the graph is followed next (and the edges written again).
    check_at: Instant,
    /// Every edge written, by key: deleted when the wait ends.
    written: Vec<Vec<u8>>,
    /// The waiters of the cycle this waiter last left to another to end, if any.
    deferred: Option<Vec<String>>,
}

impl<'a> DeadlockWatch<'a> {
    /// The check of a wait that starts now on `target`, of kind `kind`; `None` when the
    /// client does not look for deadlocks, or this thread holds nothing: nobody can wait
    /// for it, and it takes nothing while it waits.
    pub(crate) fn new(target: &'a Target, kind: &'static str) -> Option<Self> {
        let timeout = target.shared.config().deadlock_timeout?;
        if !target.shared.holds().holds_any(current_thread()) {
            return None;
        }
        let started = Instant::now();
        Some(DeadlockWatch {
            target,
            kind,
            timeout,
            started,
            // In the edge's own unit, so that every waiter compares the same values.
            since: whole_millis(SystemTime::now()),
            owner: field(target.shared.id(), current_thread()),
            write_at: Some(started + timeout / 2),
            check_at: started + timeout,
            written: Vec::new(),
            deferred: None,
        })
    }

    /// When the next step is due: writing the edges, or looking for a cycle.
    pub(crate) fn due(&self) -> Instant {
        self.write_at
            .map_or(self.check_at, |at| at.min(self.check_at))
    }

    /// Does what is due by now: writes the edges, or (at the check) writes them again and
    /// follows the graph, each read by `limit` (the call's deadline and a response timeout)
    /// at the latest. [`Error::Deadlock`] when a cycle leads back to this waiter and it is
    /// the one to end it.
    pub(crate) fn tick(&mut self, limit: Option<Instant>) -> Result<()> {
        let now = Instant::now();
        if self.write_at.is_some_and(|at| at <= now) {
            self.write_at = None;
            self.write(limit);
        }
        if self.check_at > now {
            return Ok(());
        }
        self.check_at = now + self.timeout;
        self.write(limit);
        let graph = Graph::new(&self.target.shared, limit);
        let Some(cycle) = graph.cycle(&self.first(), &self.owner) else {
            self.deferred = None;
            return Ok(());
        };
        // One waiter of the cycle ends its wait, whichever of them finds it: the one that
        // began waiting last, which closed the cycle. The others wait on, and look again;
        // one that finds the same waiters in a cycle at its next check (the last one's
        // check comes later, or never) ends its own wait.
        let mut waiters: Vec<String> = cycle.iter().map(|(edge, _)| edge.waiter.clone()).collect();
        waiters.sort();
        let last = (cycle.iter().map(|(edge, _)| edge))
            .max_by(|a, b| (a.since, &a.waiter).cmp(&(b.since, &b.waiter)));
        let again = self.deferred.as_ref() == Some(&waiters);
        if last.is_some_and(|last| last.waiter != self.owner) && !again {
            log::debug!(
                "deadlock found while waiting for {}, left to its last waiter to end: {}",
                self.target.subject(),
                describe(&cycle)
            );
            self.deferred = Some(waiters);
            return Ok(());
        }
        metrics::deadlock();
        log::warn!(
            "deadlock found while waiting for {}: {}",
            self.target.subject(),
            describe(&cycle)
        );
        Err(Error::Deadlock {
            lock: self.target.subject().clone(),
            waited: self.started.elapsed(),
            cycle: cycle.into_iter().map(|(edge, _)| edge).collect(),
        })
    }

    /// This wait as an edge, and the key it waits for.
    fn first(&self) -> (WaitEdge, Vec<u8>) {
        let key = self.target.shared_key().to_vec();
        let edge = WaitEdge {
            waiter: self.owner.clone(),
            client: self.target.shared.config().client_name.clone(),
            lock: String::from_utf8_lossy(&key).into_owned(),
            kind: self.kind.to_owned(),
            since: self.since,
        };
        (edge, key)
    }

    /// How long an edge lasts: longer than two checks apart, so that a live waiter's edge
    /// never lapses, and short enough that a dead process's edges go soon after it.
    fn lasts(&self) -> Duration {
        self.timeout * 2 + self.target.shared.config().response_timeout
    }

    /// Writes (or writes again, with a fresh expiry) an edge beside each lock this thread
    /// holds, under its owner field. A failure is logged: it only hides this wait from the
    /// others' checks.
    fn write(&mut self, limit: Option<Instant>) {
        let shared = &self.target.shared;
        let mut held: Vec<Arc<[u8]>> = (shared.holds().held_by(current_thread()).into_iter())
            .map(|(key, _)| key)
            .collect();
        held.sort();
        held.dedup();
        let (edge, key) = self.first();
        let value = encode(&edge, &key);
        let lasts = self.lasts();
        let nodes = shared.nodes();
        for held in held {
            let edge_key = names::wait_edge(&held, &self.owner);
            let mut cmd = redis::cmd("SET");
            cmd.arg(&edge_key)
                .arg(&value)
                .arg("PX")
                .arg(lasts.as_millis() as u64);
            for result in nodes.run_all::<()>(&cmd, limit) {
                if let Err(err) = result {
                    let held = String::from_utf8_lossy(&held);
                    log::debug!("could not write a wait edge beside {held:?}: {err:#}");
                }
            }
            // Every edge ever written goes when the wait ends, also one beside a hold
            // lost since.
            if !self.written.contains(&edge_key) {
                self.written.push(edge_key);
            }
        }
    }
}

impl Drop for DeadlockWatch<'_> {
    /// Deletes every edge written, as a give-back: within a round of its own, and again in
    /// the background while Redis cannot be reached and the edge could still be alive.
    fn drop(&mut self) {
        let lasts = self.lasts();
        let subject = self.target.subject();
        let undos = self.written.drain(..).map(|key| {
            let undo = Undo {
                cmd: redis::cmd("DEL").arg(key).clone(),
                lasts,
                slot: None,
                leaves_until: None,
            };
            (subject, undo)
        });
        self.target.shared.give_back_all(undos);
    }
}

/// The wait-for graph as Redis holds it, read through a client's nodes, each read by
/// `limit` at the latest (a read that fails or comes too late finds nothing).
pub(crate) struct Graph<'a> {
    shared: &'a Shared,
    limit: Option<Instant>,
    /// How many more edges the walk under way may read.
    budget: Cell<usize>,
}

impl<'a> Graph<'a> {
    pub(crate) fn new(shared: &'a Shared, limit: Option<Instant>) -> Self {
        let budget = Cell::new(MOST_EDGES);
        Graph {
            shared,
            limit,
            budget,
        }
    }

    /// A cycle from `first` (a wait for a lock) back to `owner`: each edge with the key of
    /// the lock it waits for. `None` when there is none, or when a second walk, reading
    /// everything anew, does not find one too: a cycle stays until one of its waiters
    /// leaves it, so one found twice is there. A waiter that holds the lock it waits for
    /// already (a fair lock handed to it while it looked) waits for nobody.
    pub(crate) fn cycle(
        &self,
        first: &(WaitEdge, Vec<u8>),
        owner: &str,
    ) -> Option<Vec<(WaitEdge, Vec<u8>)>> {
        let walk = || {
            self.budget.set(MOST_EDGES);
            let holders = self.holders(&first.1);
            if holders.iter().any(|holder| holder == owner) {
                return None;
            }
            let mut on_path = vec![first.1.clone()];
            self.path(&first.1, holders, owner, &mut on_path)
        };
        let found = walk()?;
        walk()?;
        Some(std::iter::once(first.clone()).chain(found).collect())
    }

    /// The edges of a path from the lock at `key`, held by `holders`, back to `owner`;
    /// `None` when there is none. A lock waits for every one of its holders, so one that
    /// leads back makes a path. `on_path` holds the locks of the path so far: a holder
    /// waiting for one of them leads round a cycle that is not through `owner`.
    fn path(
        &self,
        key: &[u8],
        holders: Vec<String>,
        owner: &str,
        on_path: &mut Vec<Vec<u8>>,
    ) -> Option<Vec<(WaitEdge, Vec<u8>)>> {
        if on_path.len() > MOST_HOPS {
            return None;
        }
        if holders.iter().any(|holder| holder == owner) {
            return Some(Vec::new());
        }
        holders.into_iter().find_map(|holder| {
            self.budget.set(self.budget.get().checked_sub(1)?);
            let (edge, waited) = self.edge(&names::wait_edge(key, &holder))?;
            if on_path.contains(&waited) {
                return None;
            }
            on_path.push(waited.clone());
            let next = self.holders(&waited);
            let rest = self.path(&waited, next, owner, on_path);
            on_path.pop();
            rest.map(|rest| std::iter::once((edge, waited)).chain(rest).collect())
        })
    }

    /// The owners holding the lock at `key`, as its hash's fields name them (a writer's
    /// `<owner>:write` as its owner), on a quorum of nodes. A key of another shape (a
    /// token, a semaphore's count) has none this check can follow.
    pub(crate) fn holders(&self, key: &[u8]) -> Vec<String> {
        let nodes = self.shared.nodes();
        let answers = nodes.run_all::<Vec<Vec<u8>>>(redis::cmd("HKEYS").arg(key), self.limit);
        let mut counts: Vec<(String, usize)> = Vec::new();
        for fields in answers.into_iter().flatten() {
            let mut owners: Vec<String> = fields.iter().filter_map(|f| owner_of(f)).collect();
            owners.sort();
            owners.dedup();
            for owner in owners {
                match counts.iter_mut().find(|(o, _)| *o == owner) {
                    Some((_, n)) => *n += 1,
                    None => counts.push((owner, 1)),
                }
            }
        }
        let needed = quorum::quorum(nodes.list().len());
        (counts.into_iter())
            .filter(|(_, n)| *n >= needed)
            .map(|(owner, _)| owner)
            .collect()
    }

    /// The edge at `edge_key`, from the first node that has it.
    pub(crate) fn edge(&self, edge_key: &[u8]) -> Option<(WaitEdge, Vec<u8>)> {
        let nodes = self.shared.nodes();
        let cmd = redis::cmd("GET").arg(edge_key).clone();
        let answers = nodes.run_all::<Option<Vec<u8>>>(&cmd, self.limit);
        answers
            .into_iter()
            .flatten()
            .flatten()
            .find_map(|value| decode(&value))
    }
}

/// The owner a hash field names: `<client-uuid>:<thread-id>`, or a writer's field
/// `<client-uuid>:<thread-id>:write`; `None` for any other field (`mode`, a count).
fn owner_of(field: &[u8]) -> Option<String> {
    let field = std::str::from_utf8(field).ok()?;
    let owner = field.strip_suffix(":write").unwrap_or(field);
    let (client, thread) = owner.rsplit_once(':')?;
    let uuid = client.len() == 36
        && client.char_indices().all(|(at, c)| match at {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        });
    (uuid && !thread.is_empty() && thread.bytes().all(|b| b.is_ascii_digit()))
        .then(|| owner.to_owned())
}

/// An edge as stored: the format's line, then the waiter, its client's name, since when it
/// waits (milliseconds since the Unix epoch), the kind, each on a line of its own, and the
/// key waited for (any bytes) to the end.
pub(crate) fn encode(edge: &WaitEdge, key: &[u8]) -> Vec<u8> {
    let since = edge.since.duration_since(UNIX_EPOCH).unwrap_or_default();
    let head = format!(
        "{FORMAT}\n{}\n{}\n{}\n{}\n",
        edge.waiter,
        edge.client,
        since.as_millis(),
        edge.kind
    );
    [head.as_bytes(), key].concat()
}

/// An edge read back, with the key it waits for; `None` for a value of another shape.
fn decode(value: &[u8]) -> Option<(WaitEdge, Vec<u8>)> {
    let mut parts = value.splitn(6, |&b| b == b'\n');
    fn text(part: Option<&[u8]>) -> Option<&str> {
        part.and_then(|p| std::str::from_utf8(p).ok())
    }
    if text(parts.next())? != FORMAT {
        return None;
    }
    let waiter = text(parts.next())?.to_owned();
    let client = text(parts.next())?.to_owned();
    let since: u64 = text(parts.next())?.parse().ok()?;
    let kind = text(parts.next())?.to_owned();
    let key = parts.next()?.to_vec();
    let edge = WaitEdge {
        waiter,
        client,
        lock: String::from_utf8_lossy(&key).into_owned(),
        kind,
        since: UNIX_EPOCH.checked_add(Duration::from_millis(since))?,
    };
    Some((edge, key))
}

/// `time` without what is below a millisecond, as an edge stores it.
fn whole_millis(time: SystemTime) -> SystemTime {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    UNIX_EPOCH + Duration::from_millis(since.as_millis() as u64)
}

/// A cycle in words, for the log.
fn describe(cycle: &[(WaitEdge, Vec<u8>)]) -> String {
    let edges: Vec<String> = cycle.iter().map(|(edge, _)| edge.to_string()).collect();
    format!("{}, held by the first", edges.join(", held by "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edge_reads_back_as_written_whatever_bytes_its_key_has() {
        let edge = WaitEdge {
            waiter: "0b8f4a3e-1c2d-4e5f-8a9b-0c1d2e3f4a5b:7".into(),
            client: "web-3/41722".into(),
            lock: String::new(),
            kind: "fair".into(),
            since: UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
        };
        let key = b"orders:\n42\xff".to_vec();
        let (read, read_key) = decode(&encode(&edge, &key)).unwrap();
        assert_eq!(read_key, key);
        assert_eq!(read.lock, String::from_utf8_lossy(&key));
        assert_eq!(
            WaitEdge {
                lock: String::new(),
                ..read
            },
            edge
        );
        // A waiter compares its own edge with those it reads back: the same unit.
        let now = WaitEdge {
            since: whole_millis(SystemTime::now()),
            ..edge.clone()
        };
        assert_eq!(decode(&encode(&now, &key)).unwrap().0.since, now.since);
        assert!(decode(b"a token").is_none());
        assert!(decode(b"redmutex-wait 1\nw\nc\nnot a number\nfair\nk").is_none());
    }

    #[test]
    fn owners_are_read_from_owner_and_writer_fields_only() {
        let owner = "0b8f4a3e-1c2d-4e5f-8a9b-0c1d2e3f4a5b:7";
        assert_eq!(owner_of(owner.as_bytes()).as_deref(), Some(owner));
        let writer = format!("{owner}:write");
        assert_eq!(owner_of(writer.as_bytes()).as_deref(), Some(owner));
        for other in [
            "mode",
            "epoch",
            "0b8f4a3e-1c2d-4e5f-8a9b-0c1d2e3f4a5b:",
            "x:7",
        ] {
            assert_eq!(owner_of(other.as_bytes()), None, "{other}");
        }
    }
}
