//! The wait-for graph as the servers hold it, for people: every waiter that recorded what
//! it waits for, what it holds, who holds what it waits for, and whether it is on a cycle.

use std::collections::BTreeMap;

use crate::base::error::Result;
use crate::base::wait_edge::WaitEdge;
use crate::client::lock_client::LockClient;
use crate::layout::names::WAIT_EDGE;
use crate::lock::deadlock::Graph;

/// One waiter of the wait-for graph, as [`LockClient::waits`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Waiter {
    /// Who waits, for which lock, since when.
    pub edge: WaitEdge,
    /// The keys of the locks it holds, beside which it wrote its edge, sorted.
    pub holds: Vec<String>,
    /// The owners that hold the lock it waits for, as its hash names them, sorted.
    pub waits_on: Vec<String>,
    /// Whether it is on a cycle: it waits, through the holders and what they wait for, on
    /// itself, as its own deadlock check follows it. A deadlock, until one of the cycle's
    /// waiters leaves it (the one that began waiting last does so, at its next check).
    pub deadlocked: bool,
}

impl LockClient {
    /// Every waiter on this client's servers that recorded what it waits for (a waiter
    /// that holds locks and has waited half its
    /// [`deadlock_timeout`](crate::LockClientBuilder::deadlock_timeout)), whatever its key
    /// prefix: found with `SCAN` on every server, each with the holders of what it waits
    /// for, read at once after, and whether it is on a cycle. Sorted by when they began to
    /// wait. Reads only.
    ///
    /// ```no_run
    /// let client = redmutex::LockClient::open("redis://127.0.0.1:6379/")?;
    /// for waiter in client.waits()? {
    ///     let mark = if waiter.deadlocked { " (deadlocked)" } else { "" };
    ///     println!("{}{mark}, held by {:?}", waiter.edge, waiter.waits_on);
    /// }
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn waits(&self) -> Result<Vec<Waiter>> {
        let shared = self.shared();
        shared.check_process()?;
        let glob = [b"*:", WAIT_EDGE, b":*"].concat();
        let graph = Graph::new(shared, None);
        // By waiter: its edge, the key it waits for, and the locks it holds.
        let mut waiters: BTreeMap<String, (WaitEdge, Vec<u8>, Vec<String>)> = BTreeMap::new();
        let (mut keys, unlisted) = self.scan_keys(&glob, |_| {});
        if let Some((_, err)) = unlisted.into_iter().next() {
            return Err(err);
        }
        keys.sort();
        keys.dedup();
        for key in keys {
            let Some((edge, waited)) = graph.edge(&key) else {
                continue;
            };
            let held = held_of(&key);
            let entry =
                (waiters.entry(edge.waiter.clone())).or_insert_with(|| (edge, waited, Vec::new()));
            entry.2.push(held);
        }
        let mut found: Vec<Waiter> = (waiters.into_values())
            .map(|(edge, waited, mut holds)| {
                holds.sort();
                let mut waits_on = graph.holders(&waited);
                waits_on.sort();
                let owner = edge.waiter.clone();
                let deadlocked = graph.cycle(&(edge.clone(), waited), &owner).is_some();
                Waiter {
                    edge,
                    holds,
                    waits_on,
                    deadlocked,
                }
            })
            .collect();
        found.sort_by(|a, b| (a.edge.since, &a.edge.waiter).cmp(&(b.edge.since, &b.edge.waiter)));
        Ok(found)
    }
}

/// The lock an edge's key is beside: `{<held>}:redmutex_wait:<owner>` (or
/// `<held>:redmutex_wait:<owner>` for a name with a hash tag of its own), lossily decoded.
fn held_of(key: &[u8]) -> String {
    let marker = [b":", WAIT_EDGE, b":"].concat();
    let at = (key.windows(marker.len()).rposition(|w| w == marker)).unwrap_or(key.len());
    let tagged = &key[..at];
    let held = match tagged.strip_prefix(b"{").and_then(|t| t.strip_suffix(b"}")) {
        Some(inner) if !inner.contains(&b'{') => inner,
        _ => tagged,
    };
    String::from_utf8_lossy(held).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edge_key_names_the_lock_it_is_beside() {
        assert_eq!(held_of(b"{orders:42}:redmutex_wait:u:7"), "orders:42");
        assert_eq!(held_of(b"{jobs}:p:redmutex_wait:u:7"), "{jobs}:p");
    }
}
