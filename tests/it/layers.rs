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

/// The module a path names: the longest start of it that is a module
/// (`lock::election::leader` for `lock::election::leader::Leader`, `kinds::fair` for
/// `kinds::fair::Fair`), if any.
fn module_of(parts: &[&str], modules: &BTreeMap<String, String>) -> Option<String> {
    (1..=parts.len())
        .rev()
        .map(|len| parts[..len].join("::"))
        .find(|module| modules.contains_key(module))
}

/// What lib.rs re-exports at the crate root, and from which module: `Error` from
/// `base::error`, so that `crate::Error` counts as a use of that module.
fn reexports() -> BTreeMap<String, String> {
    let lib = std::fs::read_to_string(Path::new(SRC).join("lib.rs")).unwrap();
    let modules = modules();
    let mut out = BTreeMap::new();
    for line in lib.lines() {
        let Some(rest) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        for path in use_paths(rest.trim_end_matches(';')).0 {
            let parts: Vec<&str> = path.split("::").collect();
            // The module an item is re-exported from; for `pub use folder::module;`, that
            // module itself, under its own name.
            if let (Some(name), Some(module)) = (parts.last(), module_of(&parts, &modules)) {
                out.insert((*name).to_owned(), module);
            }
        }
    }
    out
}

/// The modules of the crate each module names, directly (`crate::folder::module`, and
/// `crate::folder::module::inner` for a module of a module's folder), in a group
/// (`crate::folder::{a, b}`) or through a crate-root re-export (`crate::Error`).
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
                    let module = match (module_of(&parts, &modules), parts.first()) {
                        (Some(module), _) => module,
                        (None, Some(item)) => match reexports.get(*item) {
                            Some(module) => module.clone(),
                            None => panic!("{name} names crate::{path}, which no module declares"),
                        },
                        (None, None) => continue,
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

/// The reading above sees what it must: a grouped import, a crate-root name and a module
/// of a module's folder each count, so that an import against the layers, or a circle,
/// cannot hide in any of these forms.
#[test]
fn grouped_and_crate_root_imports_are_read() {
    let imports = imports();
    assert!(
        imports["lock::election::observer"].contains("lock::election::leader"),
        "`use crate::lock::election::leader::Leader` names lock::election::leader: {:?}",
        imports["lock::election::observer"]
    );
    assert!(
        imports["lock::semaphore"].contains("kinds::permits::scripts"),
        "`use crate::kinds::permits::scripts` names kinds::permits::scripts: {:?}",
        imports["lock::semaphore"]
    );
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
/// folder), beside the re-export in `lib.rs`, its constructor in `client/lock_client.rs`
/// and the bench's raw calls of its scripts (`client/bench_hooks.rs`), and why. Every module of `kinds` is here: the kinds, and the seam they share.
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
        &["kinds::non_reentrant", "lock::election::queue"],
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
            "lock::election::queue",
            "lock::election::observer",
            "lock::election::removal",
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
        let of_kind = |m: &str| m == module || m.starts_with(&format!("{module}::"));
        for (user, used) in &imports {
            let own = of_kind(user);
            // Its constructor, and the bench's raw calls of its scripts.
            let everywhere =
                ["client::lock_client", "client::bench_hooks"].contains(&user.as_str());
            let names = used.iter().any(|m| of_kind(m));
            if names && !own && !everywhere && !places.contains(&user.as_str()) {
                wrong.push(format!("{user} names {module}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "kinds named outside their places: {wrong:#?}"
    );
}

/// Every file under `src` with its path from there (`kinds/fair.rs`), skipping the tool.
fn files(ext: &str) -> Vec<(String, String)> {
    fn walk(dir: &Path, ext: &str, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let from_src = path.strip_prefix(SRC).unwrap().to_str().unwrap().to_owned();
            if path.is_dir() && from_src != "bin" {
                walk(&path, ext, out);
            } else if path.extension().is_some_and(|e| e == ext) {
                out.push((from_src, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(Path::new(SRC), ext, &mut out);
    out
}

/// Whose a file under `src` is: a kind's (`kinds/fair` for `kinds/fair.rs` and everything
/// in `kinds/fair/`), or its layer's (`transport`).
fn home(from_src: &str) -> String {
    let parts: Vec<&str> = from_src.trim_end_matches(".rs").split('/').collect();
    match parts.as_slice() {
        ["kinds", kind, ..] => format!("kinds/{kind}"),
        [layer, ..] => (*layer).to_owned(),
        [] => String::new(),
    }
}

/// A kind is one place: each `.lua` file is included only by the code of the kind whose
/// folder holds it (`kinds/<kind>.rs` and the modules in `kinds/<kind>/`), and what stays
/// in `transport` only by transport, which never names a kind. So no script under
/// `src/transport/` is one kind's, and transport is handed its scripts, never reaches for
/// them.
#[test]
fn a_kinds_scripts_live_with_it_and_transport_names_no_kind() {
    let mut included: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rs, code) in files("rs") {
        let dir = Path::new(&rs).parent().unwrap();
        for (at, _) in code.match_indices("include_str!(\"") {
            let rest = &code[at + "include_str!(\"".len()..];
            let file = &rest[..rest.find('"').unwrap()];
            let mut path = dir.to_path_buf();
            for part in file.split('/') {
                match part {
                    ".." => assert!(path.pop(), "{rs} includes {file}, outside src"),
                    part => path.push(part),
                }
            }
            let lua = path.to_str().unwrap().to_owned();
            included.entry(lua).or_default().insert(rs.clone());
        }
    }
    let scripts = files("lua");
    assert!(scripts.len() > 40, "read {} scripts", scripts.len());
    for (lua, _) in scripts {
        let (home, by) = (home(&lua), included.remove(&lua).unwrap_or_default());
        assert!(
            home.starts_with("kinds/") || home == "transport",
            "{lua} lives neither with a kind nor in transport"
        );
        assert!(!by.is_empty(), "{lua} is included by no code");
        for rs in by {
            assert_eq!(
                self::home(&rs),
                home,
                "{rs} includes {lua}, which is not its own"
            );
        }
    }
    assert!(included.is_empty(), "included, not found: {included:?}");
    for (module, used) in imports() {
        if module.starts_with("transport") {
            let kinds: Vec<_> = used.iter().filter(|m| m.starts_with("kinds")).collect();
            assert!(kinds.is_empty(), "{module} names {kinds:?}");
        }
    }
}

/// Every script is in its file's `SCRIPTS`, and every kind's `SCRIPTS` in the list the
/// client declares (`kinds::scripts`): a server that lost its scripts gets all of them back
/// from one load, not one NOSCRIPT per script that was not yet called.
#[test]
fn every_script_is_declared_before_a_client_sends_one() {
    let kinds = std::fs::read_to_string(Path::new(SRC).join("kinds/mod.rs")).unwrap();
    let mut declared = 0;
    for (rs, code) in files("rs") {
        let code = code.split("#[cfg(test)]").next().unwrap();
        let statics: Vec<&str> = (code.lines())
            .filter_map(|line| line.strip_prefix("static "))
            .filter_map(|rest| rest.split_once(": Lua = "))
            .map(|(name, _)| name)
            .collect();
        if statics.is_empty() {
            continue;
        }
        let list = code
            .split_once("pub(crate) static SCRIPTS: &[&Lua] = &[")
            .and_then(|(_, rest)| rest.split_once("];"))
            .unwrap_or_else(|| panic!("{rs} declares scripts and no SCRIPTS"))
            .0;
        let listed: Vec<&str> = (list.split(','))
            .map(|name| name.trim().trim_start_matches('&'))
            .filter(|name| !name.is_empty())
            .collect();
        assert_eq!(statics, listed, "{rs}: the scripts and SCRIPTS");
        declared += statics.len();
        if let Some(kind) = home(&rs).strip_prefix("kinds/") {
            let path = format!("{kind}::scripts::SCRIPTS");
            assert!(kinds.contains(&path), "kinds::scripts() leaves out {path}");
        }
    }
    assert!(declared > 40, "{declared} scripts declared");
}
