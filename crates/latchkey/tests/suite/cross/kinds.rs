//! Every kind of primitive (`latchkey::Kind`) is known everywhere a kind
//! must be named: the one inspection script and its parser, the scan that
//! finds names, the command's views and exporter, and the docs. A kind
//! missed in one of them compiles (`Kind` and `PrimitiveInfo` are
//! `#[non_exhaustive]`, the views end in `_` arms) but is silently absent
//! there, so this test reads the sources. The places are the checklist "A
//! new kind of hold or primitive" in `crates/latchkey/ARCHITECTURE.md`.

use std::fs;
use std::path::Path;

use latchkey::protocol;

/// Where each kind is named besides `vocab/kind.rs`: (the `Kind` variant,
/// its part of `inspect_any.lua`'s reply and of `any.rs`'s parse, a key of
/// its own: the constant `scan.rs` finds names by, and its suffix, which
/// the script's header lists as `S` + suffix).
const KINDS: &[(&str, &str, &str, &[u8])] = &[
    ("Lock", "lock", "FENCE_SUFFIX", protocol::FENCE_SUFFIX),
    ("FairLock", "fair", "QUEUE_SUFFIX", protocol::QUEUE_SUFFIX),
    (
        "Semaphore",
        "permits",
        "PERMITS_SUFFIX",
        protocol::PERMITS_SUFFIX,
    ),
    (
        "RwLock",
        "rw",
        "RWLOCK_SUFFIXES[0]",
        protocol::RWLOCK_SUFFIXES[0],
    ),
    ("Latch", "latch", "LATCH_SUFFIX", protocol::LATCH_SUFFIX),
    (
        "Barrier",
        "barrier",
        "BARRIER_SUFFIX",
        protocol::BARRIER_SUFFIX,
    ),
    (
        "Election",
        "election",
        "ELECTION_LEASE_SUFFIX",
        protocol::ELECTION_LEASE_SUFFIX,
    ),
];

/// A file of the repository, by its path from the root.
fn read(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The variants of `pub enum Kind` in `vocab/kind.rs`, and each one's
/// `as_str`, in order.
fn variants() -> Vec<(String, String)> {
    let src = read("crates/latchkey/src/vocab/kind.rs");
    let body = src
        .lines()
        .map(str::trim)
        .skip_while(|line| *line != "pub enum Kind {")
        .skip(1)
        .take_while(|line| *line != "}");
    body.filter_map(|line| line.strip_suffix(','))
        .filter(|v| v.chars().all(|c| c.is_alphanumeric() || c == '_'))
        .map(|variant| {
            let arm = format!("Kind::{variant} => \"");
            let name = src
                .split(&arm)
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .unwrap_or_else(|| panic!("Kind::{variant} has no `as_str` arm"));
            (variant.to_string(), name.to_string())
        })
        .collect()
}

/// The words of `text`'s first line that starts with `start` (a Lua
/// `return {…}`, a Rust `let (…) = reply;`).
fn words_of_line(text: &str, start: &str) -> Vec<String> {
    let line = text
        .lines()
        .map(str::trim)
        .find(|line| line.starts_with(start))
        .unwrap_or_else(|| panic!("no line starts with `{start}`"));
    line.split(|c: char| !c.is_alphanumeric() && c != '_')
        .map(str::to_string)
        .collect()
}

#[test]
fn every_kind_is_named_wherever_kinds_are_listed() {
    let script = protocol::script_text("inspect_any.lua").expect("inspect_any.lua is registered");
    let reply = words_of_line(script, "return {now,");
    let any = read("crates/latchkey/src/primitives/inspect/any.rs");
    let parsed = words_of_line(&any, "let (now,");
    let info = read("crates/latchkey/src/primitives/inspect/kinds.rs");
    let scan = read("crates/latchkey/src/primitives/inspect/scan.rs");
    let view = read("crates/latchkey-cli/src/support/kind_view.rs");
    let exporter = read("crates/latchkey-cli/src/commands/exporter/kinds.rs");
    let cli_doc = read("docs/cli.md");
    let monitoring = read("docs/monitoring.md");

    let kinds = variants();
    let mut missing: Vec<String> = KINDS
        .iter()
        .filter(|k| !kinds.iter().any(|(variant, _)| variant == k.0))
        .map(|k| format!("KINDS names {}, which vocab/kind.rs does not declare", k.0))
        .collect();
    for (variant, name) in kinds {
        let Some(&(_, part, key, suffix)) = KINDS.iter().find(|k| k.0 == variant) else {
            missing.push(format!(
                "Kind::{variant}: not in this test's KINDS (its reply part and key), \
                 nor perhaps anywhere else on the checklist"
            ));
            continue;
        };
        let header_key = format!("S{}", String::from_utf8_lossy(suffix));
        let checks = [
            (
                reply.iter().any(|w| w == part),
                format!("inspect_any.lua returns no `{part}` part"),
            ),
            (
                script.contains(&header_key),
                format!("inspect_any.lua's header lists no key {header_key}"),
            ),
            (
                parsed.iter().any(|w| w == part)
                    && any.contains(&format!("PrimitiveInfo::{variant}(")),
                format!("inspect/any.rs does not parse `{part}` into PrimitiveInfo::{variant}"),
            ),
            (
                info.contains(&format!("PrimitiveInfo::{variant}(_) => Kind::{variant}")),
                format!("inspect/kinds.rs: PrimitiveInfo::{variant} is not Kind::{variant}"),
            ),
            (
                scan.contains(key),
                format!("inspect/scan.rs does not find names by {key}"),
            ),
            (
                view.contains(&format!("PrimitiveInfo::{variant}(")),
                format!("the CLI's support/kind_view.rs does not show PrimitiveInfo::{variant}"),
            ),
            (
                exporter.contains(&format!("Kind::{variant},")),
                format!("the CLI's commands/exporter/kinds.rs does not export Kind::{variant}"),
            ),
            (
                cli_doc.contains(&format!("| `{name}` |")),
                format!("docs/cli.md's JSON table has no row `{name}`"),
            ),
            (
                monitoring.contains(&format!("`{name}`")),
                format!("docs/monitoring.md does not name the kind label `{name}`"),
            ),
        ];
        for (ok, what) in checks {
            if !ok {
                missing.push(format!("Kind::{variant}: {what}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "a kind is missing (see \"A new kind of hold or primitive\" in \
         crates/latchkey/ARCHITECTURE.md):\n{}",
        missing.join("\n")
    );
}
