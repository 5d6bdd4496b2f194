//! The library's modules form layers: no module reaches, through the modules it uses, back
//! to itself. Read from the sources, so that a new import cycle fails here.

use std::collections::{BTreeMap, BTreeSet};

/// Each module of `src/` and the modules of the crate it names.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
    let sources: BTreeMap<String, String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name()?.to_str()?.strip_suffix(".rs")?.to_owned();
            (name != "lib").then(|| (name, std::fs::read_to_string(&path).unwrap()))
        })
        .collect();
    let modules: BTreeSet<&str> = sources.keys().map(String::as_str).collect();
    sources
        .iter()
        .map(|(name, source)| {
            let code: String = source
                .lines()
                .filter(|line| !line.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            let mut used = BTreeSet::new();
            for (at, _) in code.match_indices("crate::") {
                let rest = &code[at + "crate::".len()..];
                let words: Vec<&str> = match rest.strip_prefix('{') {
                    Some(group) => group[..group.find('}').unwrap_or(0)]
                        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .collect(),
                    None => vec![
                        rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                            .next()
                            .unwrap_or(""),
                    ],
                };
                for word in words {
                    if modules.contains(word) && word != name {
                        used.insert(word.to_owned());
                    }
                }
            }
            (name.clone(), used)
        })
        .collect()
}

#[test]
fn modules_import_each_other_in_no_circle() {
    let graph = imports();
    assert!(graph.len() > 20, "read {} modules", graph.len());
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
