//! The import graph inside each crate: which module uses which (`crate::` and `super::`
//! paths, root re-exports resolved to the module that defines the item), printed, and checked
//! for cycles. A module and its own ancestors or descendants may use each other (parent/child
//! pairs); any other cycle fails, except the pairs listed in [`ALLOWED`] (with the reason).
//!
//! `cargo test --release --test module_graph -- --nocapture` prints the graphs;
//! `scripts/module-graph.sh` does the same.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates checked, by source directory.
const CRATES: &[&str] = &["host", "types", "device", "macros", "builder"];

/// Cycles accepted on purpose: (crate, module, module, why).
const ALLOWED: &[(&str, &str, &str, &str)] = &[
    ("host", "stream", "graph", "a stream's capture makes a graph; a graph is launched on a stream"),
    ("builder", "arch", "error", "a build error names the architecture it failed for; parsing an architecture fails with a build error"),
];

/// Crates whose cycles are printed but do not fail the test yet, with who removes them.
/// Remove an entry as soon as that crate's untangling is merged.
const PENDING: &[(&str, &str)] = &[];

/// One crate's modules, keyed by path (`""` is the crate root, `"memory::usage"` ...).
struct Crate {
    modules: BTreeMap<String, String>,
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/a/b.rs` -> `a::b`, `src/a/mod.rs` -> `a`, `src/lib.rs` -> ``.
fn module_path(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().expect("a file name");
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "lib" | "mod" | "main") {
        parts.push(stem.to_string());
    }
    parts.join("::")
}

/// The text without `#[cfg(test)]` modules and comments (test helpers import freely).
fn production_text(text: &str) -> String {
    let mut out = String::new();
    let mut skipping_depth: Option<i32> = None;
    let mut pending_cfg_test = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(depth) = skipping_depth.as_mut() {
            *depth += line.matches('{').count() as i32 - line.matches('}').count() as i32;
            if *depth <= 0 {
                skipping_depth = None;
            }
            continue;
        }
        if trimmed.starts_with("#[cfg(test)]") || trimmed.starts_with("#[cfg(all(test") {
            pending_cfg_test = true;
            continue;
        }
        if pending_cfg_test && trimmed.starts_with("mod ") && line.contains('{') {
            let depth = line.matches('{').count() as i32 - line.matches('}').count() as i32;
            if depth > 0 {
                skipping_depth = Some(depth);
            }
            pending_cfg_test = false;
            continue;
        }
        pending_cfg_test = false;
        if trimmed.starts_with("//") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Every path after `prefix` (`crate::` or `super::`), group imports expanded.
fn paths_after(text: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().last();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') && prefix == "crate::" {
            continue; // `$crate::`, `ferrocuda_x::crate::` and the like
        }
        parse_tree(rest, Vec::new(), &mut out);
    }
    out
}

/// Parses `a::b::{c, d::e}` at the start of `text` into paths.
fn parse_tree(text: &str, base: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut path = base;
    loop {
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        if i > start {
            path.push(text[start..i].to_string());
        }
        if text[i..].starts_with("::{") {
            i += 3;
            loop {
                while i < bytes.len() && (bytes[i] as char).is_whitespace() {
                    i += 1;
                }
                if i >= bytes.len() || bytes[i] == b'}' {
                    return i + 1;
                }
                i += parse_tree(&text[i..], path.clone(), out);
                while i < bytes.len() && ((bytes[i] as char).is_whitespace() || bytes[i] == b',') {
                    i += 1;
                }
            }
        } else if text[i..].starts_with("::") {
            i += 2;
        } else {
            out.push(path);
            return i;
        }
    }
}

impl Crate {
    fn load(dir: &str) -> Self {
        let src = workspace().join(dir).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let mut modules = BTreeMap::new();
        for file in files {
            let text = std::fs::read_to_string(&file).expect("readable");
            let mut path = module_path(&src, &file);
            // `#[path = "private.rs"] pub mod __private;`: named after the file, good enough.
            if path == "main" {
                path = String::new();
            }
            modules.insert(path, production_text(&text));
        }
        Crate { modules }
    }

    /// The longest known module that `path` starts with (`""`, the root, if none).
    fn resolve(&self, path: &[String]) -> String {
        for len in (1..=path.len()).rev() {
            let candidate = path[..len].join("::");
            if self.modules.contains_key(&candidate) {
                return candidate;
            }
        }
        String::new()
    }

    /// Root re-exports: `pub use a::b::{X, Y}` in the root maps `X` and `Y` to module `a::b`.
    fn root_exports(&self) -> BTreeMap<String, String> {
        let mut map = BTreeMap::new();
        let Some(root) = self.modules.get("") else { return map };
        for statement in root.split(';') {
            let Some(at) = statement.find("pub use ") else { continue };
            let mut paths = Vec::new();
            parse_tree(statement[at + 8..].trim_start(), Vec::new(), &mut paths);
            for path in paths {
                let module = self.resolve(&path);
                if !module.is_empty()
                    && let Some(name) = path.last()
                {
                    map.insert(name.clone(), module);
                }
            }
        }
        map
    }

    fn edges(&self) -> BTreeMap<String, BTreeSet<String>> {
        let exports = self.root_exports();
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (module, text) in &self.modules {
            let mut targets = BTreeSet::new();
            for path in paths_after(text, "crate::") {
                let mut target = self.resolve(&path);
                if target.is_empty()
                    && let Some(first) = path.first()
                    && let Some(defined) = exports.get(first)
                {
                    target = defined.clone();
                }
                targets.insert(target);
            }
            let parent: Vec<String> = module.split("::").filter(|s| !s.is_empty()).map(String::from).collect();
            let parent = &parent[..parent.len().saturating_sub(1)];
            for path in paths_after(text, "super::") {
                let mut full = parent.to_vec();
                full.extend(path);
                targets.insert(self.resolve(&full));
            }
            targets.retain(|t| !related(module, t));
            edges.insert(module.clone(), targets);
        }
        edges
    }
}

/// True for a module and itself, its ancestors or its descendants (the crate root included:
/// it declares every module).
fn related(a: &str, b: &str) -> bool {
    a.is_empty() || b.is_empty() || a == b || b.starts_with(&format!("{a}::")) || a.starts_with(&format!("{b}::"))
}

/// Strongly connected components with more than one module (Tarjan).
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        let targets: Vec<&'a str> = s.edges.get(v).map(|t| t.iter().map(String::as_str).collect()).unwrap_or_default();
        for w in targets {
            if !s.edges.contains_key(w) {
                continue;
            }
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut state = State { edges, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), on_stack: BTreeSet::new(), next: 0, out: Vec::new() };
    for v in edges.keys() {
        if !state.index.contains_key(v.as_str()) {
            visit(&mut state, v);
        }
    }
    state.out
}

#[test]
fn no_import_cycles_inside_crates() {
    let mut failures = Vec::new();
    for dir in CRATES {
        let krate = Crate::load(dir);
        let mut edges = krate.edges();
        for (c, a, b, _) in ALLOWED.iter().filter(|(c, ..)| c == dir) {
            let _ = c;
            if let Some(t) = edges.get_mut(*a) {
                t.remove(*b);
            }
            if let Some(t) = edges.get_mut(*b) {
                t.remove(*a);
            }
        }
        println!("== {dir}: module -> modules it uses (parent/child uses omitted)");
        for (module, targets) in &edges {
            let name = if module.is_empty() { "(root)" } else { module };
            let list: Vec<&str> = targets.iter().map(|t| if t.is_empty() { "(root)" } else { t.as_str() }).collect();
            println!("  {name} -> {}", if list.is_empty() { "-".to_string() } else { list.join(", ") });
        }
        for (c, a, b, why) in ALLOWED.iter().filter(|(c, ..)| c == dir) {
            println!("  allowed: {c}::{a} <-> {c}::{b} ({why})");
        }
        for cycle in cycles(&edges) {
            let text = format!("{dir}: cycle between {}", cycle.join(", "));
            match PENDING.iter().find(|(c, _)| c == dir) {
                Some((_, owner)) => println!("  KNOWN (pending, {owner}): {text}"),
                None => {
                    println!("  CYCLE: {text}");
                    failures.push(text);
                }
            }
        }
    }
    assert!(failures.is_empty(), "import cycles inside crates:\n{}", failures.join("\n"));
}

#[test]
fn the_parser_reads_grouped_imports_and_finds_cycles() {
    let mut paths = Vec::new();
    parse_tree("a::{b, c::{D, e}}, f", Vec::new(), &mut paths);
    assert_eq!(paths, vec![vec!["a", "b"], vec!["a", "c", "D"], vec!["a", "c", "e"]]);
    let edges: BTreeMap<String, BTreeSet<String>> =
        [("x", "y"), ("y", "z"), ("z", "x"), ("w", "x")].iter().map(|(a, b)| (a.to_string(), BTreeSet::from([b.to_string()]))).collect();
    let mut edges = edges;
    edges.insert("w".into(), BTreeSet::from(["x".to_string()]));
    assert_eq!(cycles(&edges), vec![vec!["x".to_string(), "y".to_string(), "z".to_string()]]);
    assert!(related("memory", "memory::usage") && !related("memory", "stream"));
    assert_eq!(module_path(Path::new("/s"), Path::new("/s/a/mod.rs")), "a");
    assert_eq!(module_path(Path::new("/s"), Path::new("/s/a/b.rs")), "a::b");
}
