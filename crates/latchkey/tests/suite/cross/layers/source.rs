//! Reading Rust source well enough to see which modules a file names: the
//! code without comments, literals and test items, its `crate::`/`super::`/
//! `self::` paths with `use` groups expanded, and where each path lives.

use std::collections::{BTreeMap, BTreeSet};

use super::ModPath;

/// The code of one file without comments, string and char literals and
/// `#[cfg(test)]` items.
pub(super) fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let (mut depth, mut j) = (0, i);
            while j < b.len() {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            i = j;
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && i + 2 < b.len() && (b[i + 2] == b'\'' || b[i + 1] == b'\\') {
            // a char literal ('x', '\n', '\''); a lifetime ('a) has no closing quote
            let mut j = i + 2;
            while j < b.len() && b[j] != b'\'' {
                j += 1;
            }
            i = j + 1;
            out.push_str("' '");
        } else {
            let c = src[i..].chars().next().expect("char boundary");
            out.push(c);
            i += c.len_utf8();
        }
    }
    strip_test_items(&out)
}

fn strip_test_items(code: &str) -> String {
    let mut out = code.to_string();
    while let Some(at) = ["#[cfg(test)]", "#[cfg(doc)]"]
        .iter()
        .filter_map(|a| out.find(a))
        .min()
    {
        let rest = &out[at..];
        let end = match (rest.find('{'), rest.find(';')) {
            (Some(brace), semi) if semi.is_none_or(|s| brace < s) => {
                let mut depth = 0;
                let mut end = rest.len();
                for (k, ch) in rest[brace..].char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = brace + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (_, Some(semi)) => semi + 1,
            _ => rest.len(),
        };
        out.replace_range(at..at + end, "");
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths a `use` tree or expression path names, from just after its
/// first `::`: `a::{b::C, d as e}` gives `[a, b, C]` and `[a, d]`. Returns
/// how many chars it read.
pub(super) fn expand(s: &[char], prefix: ModPath, out: &mut Vec<ModPath>) -> usize {
    let skip_ws = |mut i: usize| {
        while s.get(i).is_some_and(|c| c.is_whitespace()) {
            i += 1;
        }
        i
    };
    let mut path = prefix;
    let mut i = 0;
    loop {
        i = skip_ws(i);
        if s.get(i) == Some(&'{') {
            i += 1;
            loop {
                i = skip_ws(i);
                if s.get(i) == Some(&'}') {
                    return i + 1;
                }
                i += expand(&s[i..], path.clone(), out);
                i = skip_ws(i);
                match s.get(i) {
                    Some(',') => i += 1,
                    Some('}') => return i + 1,
                    _ => return i,
                }
            }
        }
        let start = i;
        while s.get(i).is_some_and(|&c| is_ident(c)) {
            i += 1;
        }
        if i > start {
            path.push(s[start..i].iter().collect());
        }
        if s.get(i..i + 2) == Some(&[':', ':'][..]) {
            i += 2;
            continue;
        }
        if s.get(i) == Some(&'*') {
            i += 1;
        }
        out.push(path);
        // `name as alias`
        let j = skip_ws(i);
        if s.get(j..j + 2) == Some(&['a', 's'][..])
            && s.get(j + 2).is_some_and(|c| c.is_whitespace())
        {
            i = skip_ws(j + 2);
            while s.get(i).is_some_and(|&c| is_ident(c)) {
                i += 1;
            }
        }
        return i;
    }
}

/// Every module path one file's code names, made absolute.
pub(super) fn references(
    module: &ModPath,
    is_mod_rs: bool,
    code: &str,
    children: &BTreeSet<String>,
) -> Vec<ModPath> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !is_ident(chars[i]) || (i > 0 && is_ident(chars[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && is_ident(chars[i]) {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        let mid_path = start >= 2 && chars[start - 2..start] == [':', ':'];
        if chars.get(i..i + 2) != Some(&[':', ':'][..]) || mid_path {
            continue;
        }
        // (the module the path starts from, where its remaining segments begin)
        let (base, from) = match word.as_str() {
            "crate" => (Vec::new(), i + 2),
            "self" => (module.clone(), i + 2),
            "super" => {
                let mut base = module.clone();
                base.pop();
                let mut j = i + 2;
                while chars
                    .get(j..j + 7)
                    .is_some_and(|w| w.iter().collect::<String>() == "super::")
                {
                    base.pop();
                    j += 7;
                }
                (base, j)
            }
            w if is_mod_rs && children.contains(w) => (module.clone(), start),
            _ => continue,
        };
        i = from + expand(&chars[from..], base, &mut out);
    }
    out
}

/// Where a named path lives: the longest module prefix, or for a name
/// `lib.rs` re-exports (`crate::Error`), the module it is re-exported from.
pub(super) fn resolve(
    path: &[String],
    files: &BTreeMap<ModPath, String>,
    flat: &BTreeMap<String, ModPath>,
) -> Option<ModPath> {
    if !path.is_empty() && !files.contains_key(&path[..1].to_vec()) {
        if let Some(from) = flat.get(&path[0]) {
            return Some(from.clone());
        }
    }
    (1..=path.len())
        .rev()
        .map(|k| path[..k].to_vec())
        .find(|p| files.contains_key(p))
}

/// Names `lib.rs` re-exports flat, with the module each comes from.
pub(super) fn flat_exports(
    lib: &str,
    files: &BTreeMap<ModPath, String>,
) -> BTreeMap<String, ModPath> {
    let mut flat = BTreeMap::new();
    for stmt in code_only(lib).split(';') {
        let Some(tree) = stmt.trim().strip_prefix("pub use ") else {
            continue;
        };
        let mut paths = Vec::new();
        expand(&tree.chars().collect::<Vec<_>>(), Vec::new(), &mut paths);
        for path in paths {
            let name = path.last().cloned().unwrap_or_default();
            let from = (1..=path.len())
                .rev()
                .map(|k| path[..k].to_vec())
                .find(|p| files.contains_key(p));
            if let Some(from) = from {
                flat.insert(name, from);
            }
        }
    }
    flat
}
