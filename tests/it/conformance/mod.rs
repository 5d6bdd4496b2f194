//! One list of every kind the client makes, and every property each kind is held to, run
//! over each entry: a guarantee is written once, in `properties.rs`, and a kind meets it or
//! says why not. A kind missing from the list, or a property an entry neither meets nor
//! explains, fails `the_list_covers_every_kind_and_every_property`.
//!
//! Properties checked elsewhere (a Java peer, a model, a migration) name their test, which
//! must exist. Valkey runs this whole list too: the suite runs on it in CI.

mod cluster;
mod entries;
mod properties;
mod subject;

use std::collections::BTreeSet;

pub use entries::{Coverage, Entry};

/// A guarantee every kind is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Property {
    /// Taken, busy for others in every form, and a release wakes a waiter.
    Quartet,
    /// A wait ends within its deadline plus one response timeout on a slow server.
    Deadline,
    /// A cancel ends any wait, taking nothing.
    Cancel,
    /// Closing the client ends its waits, taking nothing.
    Close,
    /// An attempt whose reply is cut leaves nothing taken, and takes once.
    CutAttempt,
    /// An attempt whose reply comes after the response timeout leaves nothing taken.
    LateAttempt,
    /// A release whose reply is cut counts once.
    CutRelease,
    /// A hold whose server stops answering is reported lost when its validity ends.
    Lapse,
    /// Its whole life as the least-privilege ACL user of `docs/deploying.md`.
    Acl,
    /// Taken, waited for and woken on a Cluster, on whichever shard owns its slot.
    Cluster,
    /// Released and taken while its slot migrates.
    Migration,
    /// Waiting calls follow a killed primary to its promoted replica.
    Failover,
    /// The real Redisson holds and waits beside it, where Redisson has the kind.
    Redisson,
    /// Random steps of several owners, with faults, against a model.
    Model,
    /// `inspect` shows it held, and free once given back.
    Inspect,
    /// In a cycle of two clients' waits through it, the one that closed the cycle is told
    /// of a deadlock, and the other gets what it waits for.
    Deadlock,
}

const PROPERTIES: [Property; 16] = [
    Property::Quartet,
    Property::Deadline,
    Property::Cancel,
    Property::Close,
    Property::CutAttempt,
    Property::LateAttempt,
    Property::CutRelease,
    Property::Lapse,
    Property::Acl,
    Property::Cluster,
    Property::Migration,
    Property::Failover,
    Property::Redisson,
    Property::Model,
    Property::Inspect,
    Property::Deadlock,
];

/// Runs `property` over `entry`, if the entry says it is checked here.
fn run(property: Property, entry: &Entry, body: fn(&Entry)) {
    if (entry.coverage)(property) == Coverage::Here {
        body(entry);
    }
}

macro_rules! every_kind {
    ($($module:ident => $entry:ident),* $(,)?) => {
        /// Every entry, in the order of the client's constructors.
        pub static ALL: &[&Entry] = &[$(&entries::$entry),*];

        $(mod $module {
            use super::{Property::*, entries::$entry as ENTRY, properties, run};

            #[test]
            fn quartet() {
                run(Quartet, &ENTRY, properties::quartet);
            }
            #[test]
            fn deadline() {
                run(Deadline, &ENTRY, properties::deadline);
            }
            #[test]
            fn cancel() {
                run(Cancel, &ENTRY, properties::cancel);
            }
            #[test]
            fn close() {
                run(Close, &ENTRY, properties::close);
            }
            #[test]
            fn cut_attempt() {
                run(CutAttempt, &ENTRY, properties::cut_attempt);
            }
            #[test]
            fn late_attempt() {
                run(LateAttempt, &ENTRY, properties::late_attempt);
            }
            #[test]
            fn cut_release() {
                run(CutRelease, &ENTRY, properties::cut_release);
            }
            #[test]
            fn lapse() {
                run(Lapse, &ENTRY, properties::lapse);
            }
            #[test]
            fn acl() {
                run(Acl, &ENTRY, properties::acl);
            }
            #[test]
            fn inspect() {
                run(Inspect, &ENTRY, properties::inspect);
            }
            #[test]
            fn deadlock() {
                run(Deadlock, &ENTRY, properties::deadlock);
            }
        })*
    };
}

every_kind! {
    reentrant => REENTRANT,
    fenced => FENCED,
    fair => FAIR,
    non_reentrant => NON_REENTRANT,
    non_reentrant_fair => NON_REENTRANT_FAIR,
    spin => SPIN,
    token => TOKEN,
    read => READ,
    write => WRITE,
    multi => MULTI,
    semaphore => SEMAPHORE,
    counting => COUNTING,
    latch => LATCH,
    election => ELECTION,
    election_fcfs => ELECTION_FCFS,
}

/// The ways the client makes something to take: each method of `LockClient` that takes a
/// name or names, and each variant its type makes of itself (`election.first_come_first_served`);
/// a type that only holds sides (`read_write_lock`) counts as its sides
/// (`read_write_lock.read`, `read_write_lock.write`).
fn constructors() -> BTreeSet<String> {
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
    let read = |path: &str| std::fs::read_to_string(format!("{src}/{path}")).unwrap();
    let signatures = |source: &str| -> Vec<String> {
        (source.lines())
            .filter_map(|line| line.trim().strip_prefix("pub fn "))
            .map(str::to_owned)
            .collect()
    };
    let mut made = BTreeSet::new();
    for signature in signatures(&read("client/lock_client.rs")) {
        if !(signature.contains("(&self, name") || signature.contains("(&self, names")) {
            continue;
        }
        let method = signature.split(['(', '<']).next().unwrap().to_owned();
        let returned = signature
            .rsplit("-> ")
            .next()
            .unwrap()
            .trim_end_matches(" {");
        // The type's own file, by the crate's naming: `ReadWriteLock` in `read_write_lock.rs`,
        // or `Election` in `election/mod.rs`.
        let mut file = String::new();
        for c in returned.split('<').next().unwrap().chars() {
            if c.is_uppercase() && !file.is_empty() {
                file.push('_');
            }
            file.push(c.to_ascii_lowercase());
        }
        let own = std::fs::read_to_string(format!("{src}/lock/{file}.rs"))
            .or_else(|_| std::fs::read_to_string(format!("{src}/lock/{file}/mod.rs")))
            .unwrap_or_default();
        let (mut sides, mut variants) = (Vec::new(), Vec::new());
        for signature in signatures(&own) {
            let Some((name, rest)) = signature.split_once("(&self) -> ") else {
                continue;
            };
            if rest.starts_with("&Lock<") {
                sides.push(format!("{method}.{name}"));
            } else if rest.trim_end_matches(" {") == returned {
                variants.push(format!("{method}.{name}"));
            }
        }
        if sides.is_empty() {
            made.insert(method);
        }
        made.extend(sides.into_iter().chain(variants));
    }
    made
}

/// Whether `file::function` is a test function under `tests/it`.
fn test_exists(path: &str) -> bool {
    let Some((file, function)) = path.split_once("::") else {
        return false;
    };
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it");
    std::fs::read_to_string(format!("{dir}/{file}.rs"))
        .is_ok_and(|source| source.contains(&format!("#[test]\nfn {function}()")))
}

#[test]
fn the_list_covers_every_kind_and_every_property() {
    let made = constructors();
    assert!(made.len() >= 15, "read the constructors: {made:?}");
    let listed: BTreeSet<String> = ALL.iter().map(|e| e.constructor.to_owned()).collect();
    assert_eq!(made, listed, "kinds the client makes vs kinds on the list");
    let mut wrong = Vec::new();
    for entry in ALL {
        for property in PROPERTIES {
            match (entry.coverage)(property) {
                Coverage::Here => {}
                Coverage::At(test, why) if test_exists(test) && !why.is_empty() => {}
                Coverage::Not(why) if why.len() > 10 => {}
                other => wrong.push(format!("{} / {property:?}: {other:?}", entry.name)),
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "properties neither met nor explained: {wrong:#?}"
    );
}

impl Property {
    /// Its column in the table of `docs/kinds.md`.
    fn column(self) -> &'static str {
        match self {
            Property::Quartet => "takes, waits, is woken",
            Property::Deadline => "deadline",
            Property::Cancel => "cancel",
            Property::Close => "close",
            Property::CutAttempt => "cut attempt",
            Property::LateAttempt => "late attempt",
            Property::CutRelease => "cut release",
            Property::Lapse => "lapse",
            Property::Acl => "ACL",
            Property::Cluster => "Cluster",
            Property::Migration => "migration",
            Property::Failover => "failover",
            Property::Redisson => "Redisson",
            Property::Model => "model",
            Property::Inspect => "inspect",
            Property::Deadlock => "deadlock",
        }
    }
}

/// The table of what every kind guarantees (`docs/kinds.md` and the crate docs), drawn from
/// the list.
fn guarantee_table() -> String {
    let mut table = String::from("| kind |");
    for property in PROPERTIES {
        table += &format!(" {} |", property.column());
    }
    table += "\n|---|";
    table += &"---|".repeat(PROPERTIES.len());
    let mut reasons = Vec::new();
    for entry in ALL {
        table += &format!("\n| `{}` |", entry.constructor);
        for property in PROPERTIES {
            match (entry.coverage)(property) {
                Coverage::Here | Coverage::At(..) => table += " yes |",
                Coverage::Not(why) => {
                    reasons.push(format!("{} ({}): {why}.", entry.name, property.column()));
                    table += &format!(" no ({}) |", reasons.len());
                }
            }
        }
    }
    table += "\n";
    for (i, reason) in reasons.iter().enumerate() {
        table += &format!("\n{}. {reason}", i + 1);
    }
    table + "\n"
}

/// `docs/kinds.md` and the crate docs show the table under "What every kind guarantees", and
/// the README links to it.
#[test]
fn the_docs_and_the_crate_docs_show_what_the_list_checks() {
    let read =
        |file: &str| std::fs::read_to_string(format!("{}/{file}", env!("CARGO_MANIFEST_DIR")));
    let table = guarantee_table();
    let kinds = read("docs/kinds.md").unwrap();
    let section = (kinds.split_once("\n## What every kind guarantees\n"))
        .expect("docs/kinds.md has a section \"What every kind guarantees\"")
        .1;
    assert!(
        section.split("\n## ").next().unwrap().contains(&table),
        "docs/kinds.md should show, under \"What every kind guarantees\":\n\n{table}"
    );
    assert!(
        (read("README.md").unwrap()).contains("](docs/kinds.md#what-every-kind-guarantees)"),
        "the README should link to docs/kinds.md#what-every-kind-guarantees"
    );
    let docs: String = (table.lines())
        .map(|line| match line {
            "" => "//!\n".to_owned(),
            line => format!("//! {line}\n"),
        })
        .collect();
    assert!(
        read("src/lib.rs").unwrap().contains(&docs),
        "src/lib.rs should show, under \"What every kind guarantees\":\n\n{docs}"
    );
}
