//! What the library sends today for each operation of the primitives
//! other than the plain lock, as shapes: the declared side of their
//! conformance check until a model's `Conforms` replaces the table
//! (`latchkey_sim::model::conform`; the semaphore and read-write lock
//! models' requests must each be one the library sent, beside it).
//! Checked against `docs/protocol.md`'s script tables.
//!
//! A word of ARGV: `token`, `ttl` (the hold's TTL in ms), `publish` (the
//! publish command), `int` (another integer), `entry` (a fair waiter
//! entry), `process` (a process id, or `-` for none), `'x'` the literal
//! word `x`; anything else, like every word of KEYS, is a role of the
//! primitive's `Roles`.

use latchkey_sim::model::conform::{Sent, Shape};

use crate::lock::Recorded;

/// One operation: its name, the script, KEYS' roles and ARGV's words.
pub type Entry = (
    &'static str,
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
);

pub const SEMAPHORE: &[Entry] = &[
    (
        "acquire",
        "sem_acquire.lua",
        &["permits", "fence"],
        &["token", "int", "ttl", "'0'", "'1'"],
    ),
    (
        "acquire many",
        "sem_acquire.lua",
        &["permits", "fence"],
        &["token", "int", "ttl", "'0'", "int"],
    ),
    (
        "acquire fenced",
        "sem_acquire.lua",
        &["permits", "fence"],
        &["token", "int", "ttl", "'1'", "'1'"],
    ),
    (
        "issue fencing token",
        "sem_fence.lua",
        &["permits", "fence"],
        &["token"],
    ),
    (
        "release",
        "sem_release.lua",
        &["permits"],
        &["token", "publish", "released channel", "'1'"],
    ),
    (
        "release many",
        "sem_release.lua",
        &["permits"],
        &["token", "publish", "released channel", "int"],
    ),
    (
        "renew",
        "sem_extend.lua",
        &["permits"],
        &["token", "ttl", "'1'"],
    ),
];

/// `rw_acquire.lua`'s keys: a reader's six, a writer's seven.
const RW6: &[&str] = &[
    "writer",
    "readers",
    "writers waiting",
    "readers waiting",
    "readers next",
    "fence",
];
const RW7: &[&str] = &[
    "writer",
    "readers",
    "writers waiting",
    "readers waiting",
    "readers next",
    "fence",
    "writer acquired",
];
const RW_RELEASE: &[&str] = &["writer", "readers waiting", "readers next"];

pub const RWLOCK: &[Entry] = &[
    (
        "read",
        "rw_acquire.lua",
        RW6,
        &["'r'", "token", "ttl", "'0'", "'0'"],
    ),
    (
        "write",
        "rw_acquire.lua",
        RW7,
        &["'w'", "token", "ttl", "'0'", "'0'"],
    ),
    (
        "write waiting",
        "rw_acquire.lua",
        RW7,
        &["'w'", "token", "ttl", "'0'", "'1'"],
    ),
    (
        "write fenced",
        "rw_acquire.lua",
        RW7,
        &["'w'", "token", "ttl", "'1'", "'0'"],
    ),
    (
        "read waiting",
        "rw_acquire.lua",
        RW6,
        &["'r'", "token", "ttl", "'0'", "'1'"],
    ),
    (
        "read waiting fenced",
        "rw_acquire.lua",
        RW6,
        &["'r'", "token", "ttl", "'1'", "'1'"],
    ),
    (
        "write waiting fenced",
        "rw_acquire.lua",
        RW7,
        &["'w'", "token", "ttl", "'1'", "'1'"],
    ),
    (
        "forget",
        "rw_forget.lua",
        &["writers waiting", "readers waiting", "readers next"],
        &["token", "publish", "released channel"],
    ),
    (
        "write release",
        "rw_release_write.lua",
        RW_RELEASE,
        &["token", "ttl", "publish", "released channel"],
    ),
    (
        "read release",
        "sem_release.lua",
        &["readers"],
        &["token", "publish", "released channel", "'1'"],
    ),
    (
        "issue fencing token",
        "issue_fence.lua",
        &["writer", "fence"],
        &["token"],
    ),
    (
        "read renew",
        "sem_extend.lua",
        &["readers"],
        &["token", "ttl", "'1'"],
    ),
    ("write renew", "extend.lua", &["writer"], &["token", "ttl"]),
];

/// A plain lock on a client that has run no script yet (the model's
/// clients are used ones).
pub const FRESH_LOCK: &[Entry] = &[
    (
        "a fresh client's first try",
        "acquire.lua",
        &["lock", "fence"],
        &["token", "ttl", "'0'", "'0'"],
    ),
    (
        "release",
        "release.lua",
        &["lock", "wake set", "queue"],
        &["token", "release channel", "publish"],
    ),
];

fn shape(word: &'static str) -> Shape {
    match word {
        "token" => Shape::Token,
        "ttl" => Shape::TtlMs,
        "publish" => Shape::PublishCommand,
        "int" => Shape::Int,
        "entry" => Shape::WaiterEntry,
        "process" => Shape::ProcessId,
        _ => match word.strip_prefix('\'').and_then(|w| w.strip_suffix('\'')) {
            Some(literal) => Shape::Literal(literal.to_string()),
            None => Shape::Role(word),
        },
    }
}

/// An entry's request shape.
pub fn expected(&(_, script, keys, argv): &Entry) -> Sent {
    Sent {
        script: script.to_string(),
        keys: keys.iter().map(|&k| Shape::Role(k)).collect(),
        argv: argv.iter().map(|&a| shape(a)).collect(),
    }
}

/// Every request of `sent` must be an entry of `table`, and every entry
/// must have been sent: the differences, each a line.
pub fn check(what: &str, table: &[Entry], sent: &[(Sent, Recorded)]) -> Vec<String> {
    let expected: Vec<Sent> = table.iter().map(expected).collect();
    let mut seen = vec![false; table.len()];
    let mut differences = Vec::new();
    for (shape, recorded) in sent {
        match expected.iter().position(|e| e == shape) {
            Some(i) => seen[i] = true,
            None => {
                let words: Vec<String> = recorded
                    .words
                    .iter()
                    .map(|w| String::from_utf8_lossy(w).into_owned())
                    .collect();
                differences.push(format!(
                    "{what}: the library sent {shape:?}, no operation of the table\n  (as {words:?})"
                ));
            }
        }
    }
    for ((entry, shape), seen) in table.iter().zip(&expected).zip(seen) {
        if !seen {
            differences.push(format!(
                "{what}, {}: never sent as the table says: {shape:?}",
                entry.0
            ));
        }
    }
    differences
}
