//! The house's layering, kept: within each crate, no cycle between its top-level modules. A
//! module that reaches another (`crate::other`, or the library's name from its binary, or a name
//! the crate's root re-exports from it: `crate::Error` reaches `error`) depends on it; comments
//! and unit tests do not count. A cycle is named, so whoever added it sees which
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

/// The modules directly in `dir` (the crate's `src`, or a module's directory below it), and
/// those each reaches: by its path from the crate's root (`crate::train::step::…`), or from a
/// file below `dir` by as many `super::` as it is deep (`super::step::…` from `train/lanes.rs`).
fn graph(src: &Path, dir: &Path, library: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(dir, &mut files);
    let names = |path: &Path| -> Vec<String> {
        let mut names: Vec<String> =
            path.components().map(|c| c.as_os_str().to_string_lossy().trim_end_matches(".rs").to_owned()).collect();
        if names.last().is_some_and(|n| n == "mod" || n == "lib" || n == "main") {
            names.pop();
        }
        names
    };
    let scope = names(dir.strip_prefix(src).unwrap()).join("::");
    let absolute = |root: &str| if scope.is_empty() { format!("{root}::") } else { format!("{root}::{scope}::") };
    let re_exported = re_exports(dir);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let below = names(file.strip_prefix(dir).unwrap());
        let Some(module) = below.first() else { continue };
        let prefixes = [absolute("crate"), absolute(library), "super::".repeat(below.len())];
        let reached = reached(&code(file), &prefixes).into_iter().map(|name| re_exported.get(&name).cloned().unwrap_or(name));
        graph.entry(module.clone()).or_default().extend(reached.filter(|name| name != module));
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    graph.values_mut().for_each(|edges| edges.retain(|name| modules.contains(name)));
    graph
}

/// The names `dir`'s own module file (`lib.rs`, `main.rs` or `mod.rs`) re-exports from its
/// modules, each with the module it comes from (`pub use error::{Error, Problems};` gives
/// `Error` and `Problems` from `error`; `X as Y` gives `Y`).
fn re_exports(dir: &Path) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    for root in ["lib.rs", "main.rs", "mod.rs"].map(|name| dir.join(name)).iter().filter(|path| path.is_file()) {
        for statement in code(root).split(';') {
            let Some(path) = statement.trim().strip_prefix("pub use ") else { continue };
            let Some((module, items)) = path.trim_start_matches("self::").split_once("::") else { continue };
            for item in items.trim_start_matches('{').trim_end_matches('}').split(',') {
                let name = item.rsplit([':', ' ']).next().unwrap_or_default().trim_matches(|c: char| !c.is_alphanumeric() && c != '_');
                if !name.is_empty() {
                    found.insert(name.to_owned(), module.to_owned());
                }
            }
        }
    }
    found
}

/// Every directory of modules under `src`, `src` included.
fn module_dirs(src: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![src.to_owned()];
    let mut at = 0;
    while at < dirs.len() {
        let children = std::fs::read_dir(&dirs[at]).unwrap().flatten().map(|e| e.path()).filter(|p| p.is_dir());
        dirs.extend(children.collect::<Vec<_>>());
        at += 1;
    }
    dirs
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
        let src = workspace_root().join(src);
        let graph = graph(&src, &src, library);
        assert!(graph.len() > 3, "{}: too few modules found ({graph:?})", src.display());
        if let Some(cycle) = cycle(&graph) {
            panic!("{}: the modules {} depend on each other in a circle", src.display(), cycle.join(" -> "));
        }
    }
}

/// The same one level down and further: the files of a module's directory (`train/lanes.rs`,
/// `train/step.rs`) never reach each other in a circle either.
#[test]
fn no_module_has_a_cycle_between_its_files() {
    let mut checked = 0;
    for (src, library) in CRATES {
        let src = workspace_root().join(src);
        for dir in module_dirs(&src).iter().skip(1) {
            let graph = graph(&src, dir, library);
            if let Some(cycle) = cycle(&graph) {
                panic!("{}: the files {} depend on each other in a circle", dir.display(), cycle.join(" -> "));
            }
            checked += graph.len();
        }
    }
    assert!(checked > 100, "only {checked} files found in modules' directories");
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
    let names = reached("use super::super::step::run;\nuse super::lanes::Lanes;", &["super::super::".to_owned()]);
    assert_eq!(names, BTreeSet::from(["step".to_owned()]), "a deeper file's `super::super::` reaches its directory's siblings");
    let server = workspace_root().join("backend/server/src");
    assert_eq!(re_exports(&server).get("Error").map(String::as_str), Some("error"), "`crate::Error` reaches `error`");
}
