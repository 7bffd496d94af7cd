//! The house's layering, kept: within each crate, no cycle between its top-level modules. A
//! module that reaches another (`crate::other`, or the library's name from its binary) depends
//! on it; comments and unit tests do not count. A cycle is named, so whoever added it sees which
//! paths to move down (docs/architecture.md says what sits where).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use scalebook_e2e::workspace_root;

/// Each crate's sources, and the name its binaries reach its library by.
const CRATES: [(&str, &str); 5] = [
    ("shared/src", "scalebook_shared"),
    ("page/src", "scalebook_page"),
    ("backend/server/src", "scalebook_server"),
    ("backend/trainer/src", "scalebook_trainer"),
    ("frontend/src", "scalebook_frontend"),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A file's code: no comment lines, no unit tests.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
    text.lines().filter(|line| !line.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// The names `text` reaches after each of `prefixes` (`crate::runs::…` gives `runs`, and
/// `crate::{a, b::c}` gives `a` and `b`).
fn reached(text: &str, prefixes: &[String]) -> BTreeSet<String> {
    let ident = |s: &str| -> String { s.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect() };
    let mut names = BTreeSet::new();
    for prefix in prefixes {
        for (at, _) in text.match_indices(prefix.as_str()) {
            let rest = &text[at + prefix.len()..];
            match rest.strip_prefix('{') {
                Some(group) => names.extend(group.split('}').next().unwrap_or_default().split(',').map(ident)),
                None => {
                    names.insert(ident(rest));
                }
            }
        }
    }
    names
}

/// The top-level modules of the crate at `src`, and those each reaches.
fn graph(src: &Path, library: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let module_of = |path: &Path| {
        let relative = path.strip_prefix(src).unwrap();
        let first = relative.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
        first.trim_end_matches(".rs").to_owned()
    };
    let modules: BTreeSet<String> = files.iter().map(|p| module_of(p)).filter(|m| m != "lib" && m != "main").collect();
    let prefixes = ["crate::".to_owned(), format!("{library}::")];
    let mut graph: BTreeMap<String, BTreeSet<String>> = modules.iter().map(|m| (m.clone(), BTreeSet::new())).collect();
    for file in &files {
        let module = module_of(file);
        let Some(edges) = graph.get_mut(&module) else { continue };
        for name in reached(&code(file), &prefixes) {
            if name != module && modules.contains(&name) {
                edges.insert(name);
            }
        }
    }
    graph
}

/// A cycle of `graph`, if it has one, as the modules along it.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            return Some(path[at..].iter().cloned().chain([node.to_owned()]).collect());
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in &graph[node] {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_crate_has_a_cycle_between_its_top_level_modules() {
    for (src, library) in CRATES {
        let graph = graph(&workspace_root().join(src), library);
        assert!(graph.len() > 3, "{src}: too few modules found ({graph:?})");
        if let Some(cycle) = cycle(&graph) {
            panic!("{src}: the modules {} depend on each other in a circle", cycle.join(" -> "));
        }
    }
}

#[test]
fn a_cycle_is_found_and_named() {
    let graph: BTreeMap<String, BTreeSet<String>> = [("a", &["b"][..]), ("b", &["c"]), ("c", &["a"]), ("d", &[])]
        .into_iter()
        .map(|(node, edges)| (node.to_owned(), edges.iter().map(|e| e.to_string()).collect()))
        .collect();
    assert_eq!(cycle(&graph), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
    let names = reached("use crate::{runs::RunManager, state};\nlet x = crate::clock::now();", &["crate::".to_owned()]);
    assert!(["runs", "state", "clock"].iter().all(|n| names.contains(*n)), "{names:?}");
}
