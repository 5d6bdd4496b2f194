//! Random nested locking against the wait-for graph the test keeps itself: three parties,
//! each a client of its own, take two or three of four locks one inside the other, in a
//! random order or in one global order, then give them all back. The model records, for
//! every party, the locks it holds and the one it waits for. Every deadlock the client
//! reports must be a cycle of the model at that moment (each waiter named waits for the
//! lock named, held by the next); every party must end (a cycle left unreported would hold
//! its waiters until the wait's bound); and in one global order no deadlock is reported.

use std::collections::BTreeSet;
use std::time::Duration;

use parking_lot::Mutex;
use proptest::prelude::*;
use redmutex::{Error, LockClient};

use crate::support::Server;

/// How many parties and locks a case has.
const PARTIES: usize = 3;
const LOCKS: usize = 4;

/// The bound of every wait: only reached when a deadlock goes unreported.
const WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct Plan {
    /// Each party's locks, in the order it takes them.
    orders: Vec<Vec<usize>>,
    /// Whether every party takes its locks in the one global order (sorted).
    global: bool,
}

/// What the test knows of each party: what it holds, and what it waits for.
#[derive(Default)]
struct Known {
    holds: Vec<BTreeSet<String>>,
    waits: Vec<Option<String>>,
}

pub struct Harness {
    _server: Server,
    clients: Vec<LockClient>,
    case: usize,
    /// Deadlocks reported, and cases run in a random order.
    reported: usize,
    random_cases: usize,
}

impl crate::model::Model for Harness {
    const NAME: &'static str = "nested locking";
    const CASES: u32 = 24;
    type Case = Plan;

    fn new() -> Self {
        let server = Server::start();
        let clients = (0..PARTIES)
            .map(|_| {
                let builder = server
                    .builder()
                    .deadlock_timeout(Some(Duration::from_millis(50)));
                builder.build().unwrap()
            })
            .collect();
        Harness {
            _server: server,
            clients,
            case: 0,
            reported: 0,
            random_cases: 0,
        }
    }

    fn cases() -> BoxedStrategy<Plan> {
        let order = Just((0..LOCKS).collect::<Vec<_>>())
            .prop_shuffle()
            .prop_flat_map(|all| (Just(all), 2..=3usize))
            .prop_map(|(all, n)| all[..n].to_vec());
        (proptest::collection::vec(order, PARTIES), any::<bool>())
            .prop_map(|(mut orders, global)| {
                if global {
                    orders.iter_mut().for_each(|order| order.sort_unstable());
                }
                Plan { orders, global }
            })
            .boxed()
    }

    fn run_case(&mut self, plan: &Plan) -> Result<(), String> {
        self.case += 1;
        let names: Vec<String> = (0..LOCKS)
            .map(|l| format!("nested:{}:{l}", self.case))
            .collect();
        let known = Mutex::new(Known {
            holds: vec![BTreeSet::new(); PARTIES],
            waits: vec![None; PARTIES],
        });
        let ids: Vec<String> = self
            .clients
            .iter()
            .map(|c| format!("{}:", c.id()))
            .collect();
        let outcomes: Vec<Result<bool, String>> = std::thread::scope(|scope| {
            let parties: Vec<_> = (0..PARTIES)
                .map(|party| {
                    let (client, order) = (&self.clients[party], &plan.orders[party]);
                    let (names, known, ids) = (&names, &known, &ids);
                    scope.spawn(move || party_run(party, client, order, names, known, ids))
                })
                .collect();
            parties.into_iter().map(|p| p.join().unwrap()).collect()
        });
        let mut told = 0;
        for (party, outcome) in outcomes.into_iter().enumerate() {
            match outcome {
                Ok(deadlocked) => told += usize::from(deadlocked),
                Err(why) => return Err(format!("party {party} in {plan:?}: {why}")),
            }
        }
        if plan.global && told > 0 {
            return Err(format!(
                "{told} deadlocks reported in one global order: {plan:?}"
            ));
        }
        if !plan.global {
            self.random_cases += 1;
            self.reported += told;
        }
        Ok(())
    }

    fn summary(&self) -> Option<String> {
        Some(format!(
            "{} deadlocks reported over {} cases in a random order, each a cycle of the model",
            self.reported, self.random_cases
        ))
    }
}

/// One party's case: takes its locks in order, a moment apart, then gives them back.
/// Whether it was told of a deadlock (then it gives back what it took), or what went
/// against the model.
fn party_run(
    party: usize,
    client: &LockClient,
    order: &[usize],
    names: &[String],
    known: &Mutex<Known>,
    ids: &[String],
) -> Result<bool, String> {
    let mut guards = Vec::new();
    let mut deadlocked = false;
    for &lock in order {
        let name = &names[lock];
        known.lock().waits[party] = Some(name.clone());
        match client.lock(name).try_lock_for(WAIT) {
            Ok(Some(guard)) => {
                let mut known = known.lock();
                known.waits[party] = None;
                known.holds[party].insert(name.clone());
                guards.push((name.clone(), guard));
            }
            Ok(None) => return Err(format!("waited {WAIT:?} for {name}: an unreported cycle")),
            Err(Error::Deadlock { cycle, .. }) => {
                let known = known.lock();
                let party_of = |waiter: &str| ids.iter().position(|id| waiter.starts_with(id));
                for (at, edge) in cycle.iter().enumerate() {
                    let waiter = party_of(&edge.waiter).ok_or("a waiter of no party")?;
                    let next = &cycle[(at + 1) % cycle.len()];
                    let holder = party_of(&next.waiter).ok_or("a holder of no party")?;
                    if known.waits[waiter].as_deref() != Some(edge.lock.as_str())
                        || !known.holds[holder].contains(&edge.lock)
                    {
                        return Err(format!(
                            "told of a cycle the model does not have: {cycle:?}; the model \
                             holds {:?} and waits {:?}",
                            known.holds, known.waits
                        ));
                    }
                }
                deadlocked = true;
                break;
            }
            Err(err) => return Err(format!("{err:#}")),
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    known.lock().waits[party] = None;
    for (name, guard) in guards.into_iter().rev() {
        known.lock().holds[party].remove(&name);
        guard.unlock().map_err(|err| format!("{err:#}"))?;
    }
    Ok(deadlocked)
}
