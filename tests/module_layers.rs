//! The crate's top-level modules import each other without cycles, `tensor` imports nothing of
//! the crate, and `cli` never opens a backend: read from the sources, so a new import that
//! breaks the layering fails here. Unit-test modules (`#[cfg(test)] mod tests`) are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The library source of a file: everything before its unit-test module.
fn library_source(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// Which top-level modules each top-level module names through `crate::`.
fn module_graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![];
    rust_files(&src, &mut files);
    let mut graph = Graph::new();
    for file in files {
        let rel = file.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let top = first.trim_end_matches(".rs").to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        let text = library_source(&file);
        let used = graph.entry(top.clone()).or_default();
        for (i, _) in text.match_indices("crate::") {
            let name: String = text[i + 7..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && name != top {
                used.insert(name);
            }
        }
    }
    graph
}

/// A cycle through `graph`, if there is one, as the modules along it.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut vec![], &mut done))
}

#[test]
fn top_level_modules_have_no_import_cycle() {
    let graph = module_graph();
    assert!(graph.len() >= 10, "{graph:?}");
    assert_eq!(find_cycle(&graph), None, "{graph:#?}");
    assert!(
        graph["tensor"].is_empty(),
        "tensor imports {:?}",
        graph["tensor"]
    );
    assert!(graph["onnx"]
        .iter()
        .all(|m| m == "tensor" || m == "atomic_file"));
}

#[test]
fn the_cycle_finder_finds_cycles() {
    let mut g = Graph::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    assert_eq!(find_cycle(&g), None);
    g.entry("c".into()).or_default().insert("a".into());
    assert_eq!(find_cycle(&g).unwrap().len(), 4);
}

#[test]
fn cli_never_opens_a_backend() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cli");
    let mut files = vec![];
    rust_files(&dir, &mut files);
    for file in files {
        let text = library_source(&file);
        for opener in [
            "select::open",
            "open_backend",
            "open_model",
            "TractBackend",
            "OrtBackend",
        ] {
            assert!(!text.contains(opener), "{} uses {opener}", file.display());
        }
    }
}

/// The library source of a file without its comment lines: a doc link is not an import.
fn code_lines(path: &Path) -> String {
    library_source(path)
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// For one folder of `src/` (as `module::path`), which of its files name which of its other
/// files (through `super::` or the folder's full `crate::` path).
fn file_graph(dir: &Path, module: &str) -> Graph {
    let entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let name = |p: &Path| p.file_stem().unwrap().to_string_lossy().to_string();
    let siblings: BTreeSet<String> = entries
        .iter()
        .filter(|p| p.is_dir() || p.extension().is_some_and(|e| e == "rs"))
        .map(|p| name(p))
        .filter(|n| n != "mod")
        .collect();
    let mut graph = Graph::new();
    for file in entries
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
    {
        let me = name(file);
        let text = code_lines(file);
        let mut prefixes = vec![format!("crate::{module}::")];
        if me != "mod" {
            prefixes.push("super::".to_string());
        }
        let used = graph.entry(me.clone()).or_default();
        for prefix in &prefixes {
            for (i, _) in text.match_indices(prefix.as_str()) {
                let next: String = text[i + prefix.len()..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if siblings.contains(&next) && next != me {
                    used.insert(next);
                }
            }
        }
    }
    graph
}

#[test]
fn files_of_a_module_import_each_other_without_cycles() {
    fn folders(dir: &Path, module: &str, out: &mut Vec<(std::path::PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                let name = path.file_name().unwrap().to_string_lossy().to_string();
                let inner = if module.is_empty() {
                    name
                } else {
                    format!("{module}::{name}")
                };
                out.push((path.clone(), inner.clone()));
                folders(&path, &inner, out);
            }
        }
    }
    let mut all = vec![];
    folders(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        "",
        &mut all,
    );
    assert!(all.len() >= 10, "{all:?}");
    for (dir, module) in all {
        let graph = file_graph(&dir, &module);
        assert_eq!(find_cycle(&graph), None, "files of {module}: {graph:#?}");
    }
}

#[test]
fn the_file_graph_sees_super_and_full_paths() {
    let dir = std::env::temp_dir().join(format!("trtkit-layers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.rs"), "use super::b::B;\n").unwrap();
    std::fs::write(
        dir.join("b.rs"),
        "//! see [`super::a`]\nuse crate::m::c::C;\n",
    )
    .unwrap();
    std::fs::write(dir.join("c.rs"), "fn f() {}\n").unwrap();
    let graph = file_graph(&dir, "m");
    assert_eq!(find_cycle(&graph), None, "{graph:?}");
    assert!(
        graph["a"].contains("b") && graph["b"].contains("c"),
        "{graph:?}"
    );
    std::fs::write(dir.join("c.rs"), "use crate::m::a::A;\n").unwrap();
    assert!(find_cycle(&file_graph(&dir, "m")).is_some());
    std::fs::remove_dir_all(&dir).unwrap();
}
