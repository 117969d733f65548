//! The layer rule of `crates/latchkey/ARCHITECTURE.md`, checked on the
//! source tree: every file of `src/` belongs to the layer of its folder
//! (`vocab/` 1, `transport/` 2, `backend/` 3, `primitives/` 4, the facades
//! `client/` and `redlock.rs` 5) and may name only modules of its own
//! layer or those below; and no files import each other, directly or round
//! a longer circle. `lib.rs` (the flat re-exports) is exempt, and a file
//! naming a folder it sits in (`super::` from a child of a `mod.rs`) is no
//! circle: that is the module tree.
//!
//! What counts as an import: every `crate::`, `super::` and `self::` path
//! in code, `use` groups expanded (`crate::{a::B, c}`), and a `mod.rs`'s
//! paths that start with one of its child modules. Comments, doc comments,
//! string literals, `#[cfg(test)]` and `#[cfg(doc)]` items are left out: a
//! test module may reach wherever it needs to, and a doc link is no import.
//! A name `lib.rs` re-exports flat (`crate::Error`) counts as the module it
//! comes from.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

// Not a test target of its own: cargo builds only top-level files.
mod source;

use source::{code_only, flat_exports, references, resolve};

/// A module path inside the crate, `["primitives", "lock", "spec"]`.
type ModPath = Vec<String>;

fn layer_of(module: &[String]) -> Option<u8> {
    match module.first().map(String::as_str) {
        Some("vocab") => Some(1),
        Some("transport") => Some(2),
        Some("backend") => Some(3),
        Some("primitives") => Some(4),
        Some("client") | Some("redlock") => Some(5),
        _ => None,
    }
}

/// Every `.rs` file under `dir`, keyed by its module path (`lib.rs` is `[]`).
fn modules(dir: &Path, prefix: &ModPath, out: &mut BTreeMap<ModPath, String>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .expect("read src dir")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            let mut sub = prefix.clone();
            sub.push(name.to_string());
            modules(&path, &sub, out);
        } else if let Some(stem) = name.strip_suffix(".rs") {
            let mut module = prefix.clone();
            if stem != "mod" && !(prefix.is_empty() && stem == "lib") {
                module.push(stem.to_string());
            }
            out.insert(module, fs::read_to_string(&path).expect("read source"));
        }
    }
}

/// (layer violations, import circles) of a source tree given as files.
fn check(
    files: &BTreeMap<ModPath, String>,
    mod_rs: &BTreeSet<ModPath>,
) -> (Vec<String>, Vec<String>) {
    let flat = flat_exports(
        files.get(&Vec::new()).map(String::as_str).unwrap_or(""),
        files,
    );
    let mut graph: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    let mut violations = Vec::new();
    for (module, src) in files {
        if module.is_empty() {
            continue;
        }
        let children: BTreeSet<String> = files
            .keys()
            .filter(|k| k.len() == module.len() + 1 && k.starts_with(module))
            .map(|k| k[module.len()].clone())
            .collect();
        let own = layer_of(module);
        for path in references(module, mod_rs.contains(module), &code_only(src), &children) {
            let Some(target) = resolve(&path, files, &flat) else {
                continue;
            };
            if let (Some(own), Some(theirs)) = (own, layer_of(&target)) {
                if theirs > own {
                    violations.push(format!(
                        "{} (layer {own}) names {} (layer {theirs})",
                        module.join("::"),
                        path.join("::")
                    ));
                }
            }
            // A file may name the folder it sits in (`super::Shared` from a
            // mod.rs's child): that is Rust's module tree, not a circle.
            if !module.starts_with(&target) {
                graph.entry(module.clone()).or_default().insert(target);
            }
        }
    }
    (violations, circles(&graph))
}

/// Every strongly connected group of more than one file (Tarjan).
fn circles(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<String> {
    struct Walk<'g> {
        graph: &'g BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'g ModPath, (usize, usize)>,
        stack: Vec<&'g ModPath>,
        found: Vec<String>,
    }
    fn visit<'g>(w: &mut Walk<'g>, v: &'g ModPath) {
        let n = w.index.len();
        w.index.insert(v, (n, n));
        w.stack.push(v);
        for t in w.graph.get(v).into_iter().flatten() {
            if !w.index.contains_key(t) {
                visit(w, t);
                let low = w.index[t].1.min(w.index[v].1);
                w.index.get_mut(v).expect("visited").1 = low;
            } else if w.stack.contains(&t) {
                let low = w.index[t].0.min(w.index[v].1);
                w.index.get_mut(v).expect("visited").1 = low;
            }
        }
        if w.index[v].0 == w.index[v].1 {
            let mut group = Vec::new();
            while let Some(t) = w.stack.pop() {
                group.push(t.join("::"));
                if t == v {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort();
                w.found.push(group.join(" <-> "));
            }
        }
    }
    let mut w = Walk {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !w.index.contains_key(v) {
            visit(&mut w, v);
        }
    }
    w.found
}

#[test]
fn no_file_imports_from_a_layer_above_and_none_import_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    modules(&src, &Vec::new(), &mut files);
    assert!(
        files.len() > 40,
        "found only {} source files under {}",
        files.len(),
        src.display()
    );
    let mod_rs = mod_rs_files(&src);
    let (violations, circles) = check(&files, &mod_rs);
    assert!(
        violations.is_empty(),
        "imports from a layer above:\n{}",
        violations.join("\n")
    );
    assert!(
        circles.is_empty(),
        "files that import each other:\n{}",
        circles.join("\n")
    );
}

fn mod_rs_files(src: &Path) -> BTreeSet<ModPath> {
    let mut files = BTreeMap::new();
    modules(src, &Vec::new(), &mut files);
    files
        .into_keys()
        .filter(|m| src.join(m.join("/")).join("mod.rs").is_file())
        .collect()
}

/// The checker itself finds what it should: a layer-2 file naming a
/// layer-4 one (directly, in a group, through a flat re-export), and two
/// files naming each other, while comments and test modules do not count.
#[test]
fn the_checker_catches_upward_imports_and_circles() {
    let m = |p: &str| p.split("::").map(String::from).collect::<ModPath>();
    let tree = |entries: &[(&str, &str)]| -> BTreeMap<ModPath, String> {
        entries
            .iter()
            .map(|(p, s)| (if p.is_empty() { Vec::new() } else { m(p) }, s.to_string()))
            .collect()
    };
    let mod_rs: BTreeSet<ModPath> = [m("primitives"), m("transport"), m("vocab")].into();
    let base = [
        ("", "mod vocab; pub use primitives::lock::Lock;"),
        ("vocab", "pub(crate) mod names;"),
        ("vocab::names", "pub fn check() {}"),
        ("transport", "pub(crate) mod session;"),
        ("primitives", "pub(crate) mod lock; pub(crate) mod latch;"),
        (
            "primitives::lock",
            "use crate::transport::session::Session;",
        ),
        (
            "primitives::latch",
            "use crate::{vocab::names, transport::session};",
        ),
    ];

    let clean = tree(&[&base[..], &[("transport::session", "/// crate::primitives::lock\nuse crate::vocab::names;\n#[cfg(test)]\nmod tests { use crate::Lock; }")]].concat());
    assert_eq!(check(&clean, &mod_rs), (vec![], vec![]));

    for upward in [
        "use crate::primitives::lock::Lock;",
        "use crate::{vocab::names, primitives::latch};",
        "fn f(_: crate::Lock) {}",
    ] {
        let bad = tree(&[&base[..], &[("transport::session", upward)]].concat());
        assert_eq!(check(&bad, &mod_rs).0.len(), 1, "not caught: {upward}");
    }

    let circle = tree(
        &[
            &base[..],
            &[
                ("transport::session", ""),
                ("primitives::latch", "use super::lock::X;"),
                ("primitives::lock", "use crate::primitives::latch::Y;"),
            ],
        ]
        .concat(),
    );
    assert_eq!(
        check(&circle, &mod_rs).1,
        vec!["primitives::latch <-> primitives::lock".to_string()]
    );
}
