//! The library's folders are layers, declared in `src/lib.rs` from the top down: a module
//! uses modules of its own folder and of the folders below it, never of one above. Within a
//! folder, modules import each other in no circle. Read from the sources, so that an import
//! against the order fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");

/// The layers in the order `src/lib.rs` declares them, top first.
fn declared_layers() -> Vec<String> {
    let lib = std::fs::read_to_string(Path::new(SRC).join("lib.rs")).unwrap();
    lib.lines()
        .filter_map(|line| line.trim().strip_prefix("mod "))
        .map(|rest| rest.split(';').next().unwrap().trim().to_owned())
        .collect()
}

/// Each module as `folder::module` (`folder` for a folder's `mod.rs`), with its code
/// without comments.
fn modules() -> BTreeMap<String, String> {
    fn walk(dir: &Path, prefix: &str, out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
            if path.is_dir() && prefix.is_empty() && name == "bin" {
                // The command-line tool is a crate of its own, on the public API.
                continue;
            } else if path.is_dir() {
                walk(&path, &format!("{prefix}{name}::"), out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let module = match name.as_str() {
                    "mod" => prefix.trim_end_matches("::").to_owned(),
                    _ => format!("{prefix}{name}"),
                };
                let code: Vec<String> = std::fs::read_to_string(&path)
                    .unwrap()
                    .lines()
                    .filter(|line| !line.trim_start().starts_with("//"))
                    .map(str::to_owned)
                    .collect();
                out.insert(module, code.join("\n"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(Path::new(SRC), "", &mut out);
    out.remove("lib");
    out
}

/// The paths a use tree names, flattened: `layout::{names, owner::x}` gives `layout::names`
/// and `layout::owner::x`. `tree` starts right after `crate::`; `end` is where it stopped.
fn use_paths(tree: &str) -> (Vec<String>, usize) {
    let mut paths = Vec::new();
    let mut prefix = String::new();
    let mut at = 0;
    let bytes = tree.as_bytes();
    while at < bytes.len() {
        let c = bytes[at] as char;
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            prefix.push(c);
            at += 1;
        } else if c == '{' {
            // A group: each member continues the prefix.
            at += 1;
            loop {
                while at < bytes.len() && (bytes[at] as char).is_whitespace() {
                    at += 1;
                }
                if at >= bytes.len() || bytes[at] == b'}' {
                    at += 1;
                    break;
                }
                let (inner, used) = use_paths(&tree[at..]);
                paths.extend(inner.into_iter().map(|p| format!("{prefix}{p}")));
                at += used;
                while at < bytes.len() && matches!(bytes[at], b',' | b' ' | b'\n' | b'\t') {
                    at += 1;
                }
            }
            return (paths, at);
        } else {
            break;
        }
    }
    paths.push(prefix);
    (paths, at)
}

/// What lib.rs re-exports at the crate root, and from which module: `Error` from
/// `base::error`, so that `crate::Error` counts as a use of that module.
fn reexports() -> BTreeMap<String, String> {
    let lib = std::fs::read_to_string(Path::new(SRC).join("lib.rs")).unwrap();
    let mut out = BTreeMap::new();
    for line in lib.lines() {
        let Some(rest) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        for path in use_paths(rest.trim_end_matches(';')).0 {
            let parts: Vec<&str> = path.split("::").collect();
            if parts.len() >= 3 {
                let name = parts.last().unwrap().to_string();
                out.insert(name, format!("{}::{}", parts[0], parts[1]));
            } else if parts.len() == 2 {
                // `pub use folder::module;` re-exports a module under its own name.
                out.insert(parts[1].to_owned(), path.clone());
            }
        }
    }
    out
}

/// The modules of the crate each module names, directly (`crate::folder::module`), in a
/// group (`crate::folder::{a, b}`) or through a crate-root re-export (`crate::Error`).
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules();
    let reexports = reexports();
    modules
        .iter()
        .map(|(name, code)| {
            let mut used = BTreeSet::new();
            for (at, _) in code.match_indices("crate::") {
                for path in use_paths(&code[at + "crate::".len()..]).0 {
                    let parts: Vec<&str> = path.split("::").filter(|p| !p.is_empty()).collect();
                    let module = match parts.as_slice() {
                        [folder, module, ..]
                            if modules.contains_key(&format!("{folder}::{module}")) =>
                        {
                            format!("{folder}::{module}")
                        }
                        [folder, ..] if modules.contains_key(*folder) => (*folder).to_owned(),
                        [item, ..] => match reexports.get(*item) {
                            Some(module) => module.clone(),
                            None => panic!("{name} names crate::{path}, which no module declares"),
                        },
                        [] => continue,
                    };
                    if module != *name {
                        used.insert(module);
                    }
                }
            }
            (name.clone(), used)
        })
        .collect()
}

/// The reading above sees what it must: a grouped import and a crate-root name each count,
/// so that an import against the layers cannot hide in either form.
#[test]
fn grouped_and_crate_root_imports_are_read() {
    let imports = imports();
    assert!(
        imports["kinds::election"].contains("layout::owner"),
        "`use crate::layout::{{names, owner}}` names layout::owner: {:?}",
        imports["kinds::election"]
    );
    assert!(
        imports["client::bench_hooks"].contains("client::lock_client"),
        "`use crate::LockClient` names client::lock_client: {:?}",
        imports["client::bench_hooks"]
    );
    let (paths, _) = use_paths("a::{b, c::{d, e}, f}; g");
    assert_eq!(paths, ["a::b", "a::c::d", "a::c::e", "a::f"]);
}

#[test]
fn every_module_lives_in_a_declared_layer() {
    let layers = declared_layers();
    assert!(layers.len() >= 6, "layers declared in lib.rs: {layers:?}");
    let modules = modules();
    assert!(modules.len() > 30, "read {} modules", modules.len());
    for module in modules.keys() {
        let folder = module.split("::").next().unwrap();
        assert!(
            layers.iter().any(|layer| layer == folder),
            "{module} is in no layer that lib.rs declares"
        );
    }
}

#[test]
fn a_module_uses_only_its_own_layer_and_those_below() {
    let layers = declared_layers();
    let rank = |module: &str| {
        let folder = module.split("::").next().unwrap();
        layers.iter().position(|layer| layer == folder).unwrap()
    };
    let mut wrong = Vec::new();
    for (module, used) in imports() {
        for target in used {
            if rank(&target) < rank(&module) {
                wrong.push(format!("{module} uses {target}, a layer above it"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{wrong:#?}\nlayers, top first: {layers:?}"
    );
}

#[test]
fn modules_import_each_other_in_no_circle() {
    let graph = imports();
    // Depth-first search for a path back to where it started.
    fn visit<'a>(
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        module: &'a str,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<&'a str>> {
        if let Some(at) = path.iter().position(|m| *m == module) {
            return Some(path[at..].to_vec());
        }
        if !done.insert(module) {
            return None;
        }
        path.push(module);
        for next in &graph[module] {
            if let Some(cycle) = visit(graph, next, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        let cycle = visit(&graph, module, &mut Vec::new(), &mut done);
        assert!(
            cycle.is_none(),
            "modules import each other in a circle: {cycle:?}"
        );
    }
}

/// Where each kind may be named outside its own place (`src/kinds/<kind>.rs` and its
/// folder), beside the re-export in `lib.rs` and its constructor in `client/lock_client.rs`,
/// and why. Every module of `kinds` is here: the kinds, and the seam they share.
const KIND_PLACES: &[(&str, &[&str], &str)] = &[
    ("spin", &[], "the generic lock machine serves it"),
    ("non_reentrant", &[], "the generic lock machine serves it"),
    (
        "token",
        &["lock::guard"],
        "a token guard's own calls: its token, extend",
    ),
    ("fenced", &["lock::guard"], "a fenced guard's token"),
    (
        "fair",
        &["kinds::non_reentrant", "lock::election_queue"],
        "the non-reentrant fair lock and the first-come-first-served election build on it",
    ),
    (
        "read_write",
        &["lock::read_write_lock"],
        "its handle of two sides",
    ),
    ("permits", &["lock::semaphore"], "its handle"),
    (
        "counted",
        &["lock::counting_semaphore", "lock::semaphore"],
        "its handle; the leased semaphore shares its bound on a count",
    ),
    ("latch", &["lock::count_down_latch"], "its handle"),
    (
        "election",
        &[
            "lock::election",
            "lock::election_queue",
            "lock::observer",
            "lock::removal",
        ],
        "its handle, its queue, its observers, and the removal of a leader by the tool",
    ),
    ("multi", &["lock::multi_lock"], "its handle"),
];

/// The modules of `kinds` that are the seam every kind uses, not kinds.
const SEAM: &[&str] = &[
    "call",
    "candidacy",
    "holding",
    "kind",
    "renewal",
    "reentrant",
    "slot",
    "undo",
];

/// A new kind is its own place, one constructor and one re-export: every module of `kinds`
/// is a kind listed above with where else it is named (and why), or part of the seam; a
/// kind named anywhere else fails here.
#[test]
fn a_kind_is_named_outside_its_place_only_where_listed() {
    let modules = modules();
    let imports = imports();
    let kinds: BTreeSet<&str> = (modules.keys())
        .filter_map(|m| m.strip_prefix("kinds::"))
        .filter(|m| !m.contains("::"))
        .collect();
    let listed: BTreeSet<&str> = (KIND_PLACES.iter().map(|(k, ..)| *k))
        .chain(SEAM.iter().copied())
        .collect();
    assert_eq!(
        kinds, listed,
        "modules of kinds vs the kinds and seam listed here"
    );
    let mut wrong = Vec::new();
    for (kind, places, _why) in KIND_PLACES {
        let module = format!("kinds::{kind}");
        for (user, used) in &imports {
            let own = user == &module || user.starts_with(&format!("{module}::"));
            let constructor = user == "client::lock_client";
            if used.contains(&module) && !own && !constructor && !places.contains(&user.as_str()) {
                wrong.push(format!("{user} names {module}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "kinds named outside their places: {wrong:#?}"
    );
}
