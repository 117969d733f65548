//! The conformance check's half in the models: what each model sends, per
//! operation, reduced to a *shape* that can be compared with what the real
//! library sends to a real server (`tests/conformance.rs` records that with
//! `MONITOR`).
//!
//! A request's shape is the script it runs (named by the SHA-1 of the text
//! sent, mapped to its file in `crates/latchkey/src/scripts/`; a plain
//! command by its name), then for each of KEYS and ARGV a [`Shape`]: an
//! owner token, the TTL in ms, one of the primitive's keys or channels by
//! its role, the publish command, a literal word (a flag `"0"`/`"1"`,
//! `"NX"`, a mode), a fair waiter's entry, another integer. Values differ between the two sides (tokens
//! are random, the model's TTL is a few ms, its key has no prefix);
//! shapes do not, unless one side sends something the other does not.
//!
//! The model's half is derived from the code its steps run: a model
//! implements [`Conforms`] by calling the same function that builds the
//! requests its steps send, so a change there that the library does not
//! make, or the reverse, fails the check. Plugged in: the plain lock
//! (`lock_request.rs`, compared operation by operation), the semaphore and
//! the read-write lock (`sem_request.rs`, `rw_request.rs`: each request
//! the model declares must be one the library sent, beside the library's
//! table), and, compared both ways with everything the library sent on
//! the primitive's keys (`tests/conformance/models.rs`), the fair lock
//! (`fair_request.rs`), several locks at once with a plain lock, a lock
//! kept while idle and a request to release (`multi_request.rs`), the
//! election (`elect_request.rs`), the latch and the barrier
//! (`count_request.rs`), and signals (`signal_request.rs`: no key or
//! channel of theirs is named by role, the library's names being its own,
//! so their words compare as values).
//!
//! # Plugging in another model
//!
//! 1. Build the model's requests in one function, `fn request(&Model, op,
//!    …) -> Request` ([`Request`] is not the lock's own: a script's file
//!    and text, or a command's name, with KEYS and ARGV), and have its
//!    steps send what it returns (as `fair_client.rs` does through
//!    `fair_request::call`).
//! 2. `impl Conforms for TheModel`: for each operation that sends
//!    something, a [`Declared`] with the operation's name, the request, and
//!    the [`Roles`] of the model's values (its TTL, its keys and channels:
//!    [`Roles::semaphore`], [`Roles::rwlock`], [`Roles::fair`],
//!    [`Roles::locks`], [`Roles::election`], [`Roles::latch`] and
//!    [`Roles::barrier`] are there already). Values that must read as
//!    different shapes must differ (a TTL and a lease, a count and a flag
//!    `"1"`).
//! 3. In `tests/conformance.rs`: drive the library's side of each operation
//!    with a `Log` (`tests/conformance/others.rs`), which records every
//!    request on the primitive's keys, and compare it with the model's
//!    `declared()` by `models::check` (its configuration in
//!    `tests/conformance/configs.rs`), naming the operations the library's
//!    side does not drive.

use std::collections::HashMap;

use latchkey::protocol::script_text;

use crate::lua::sha1_hex;
use crate::model::lock_request::Request;

pub use crate::model::conform_roles::Roles;

/// What one argument (or key) of a request is, whatever its value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Shape {
    /// An owner token (`lk2:…`, marked or not).
    Token,
    /// The hold's TTL in ms.
    TtlMs,
    /// One of the primitive's keys or channels, by role (`"lock"`,
    /// `"fence"`, `"release channel"`, …).
    Role(&'static str),
    /// The publish command, `PUBLISH` or `SPUBLISH` (`SPUBLISH` on a
    /// cluster).
    PublishCommand,
    /// A word compared as it is: a flag (`"0"`, `"1"`) or a keyword
    /// (`"NX"`, `"PX"`, `"GET"`, a mode like `"wait"` or `"r"`).
    Literal(String),
    /// Another integer (a count, a time).
    Int,
    /// A fair lock's waiter entry, `<32 hex digits>:<ms>:<0|1>:<token>`.
    WaiterEntry,
    /// A process id: the 16 hex digits naming a process's subscriber
    /// connection, which all the entries of one fair waiter's process
    /// start with, and which names a plain lock's waiting process; or `-`,
    /// a releasing process that has no subscriber connection (the models'
    /// clients always name themselves: see `lock_request.rs`).
    ProcessId,
    /// Anything else (a key or value the roles do not name).
    Other,
}

/// A request reduced to its shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sent {
    /// The script's file name (`"acquire.lua"`), a command's name (`"SET"`),
    /// or `unknown script <sha1>` for a text that is no script of the
    /// library's.
    pub script: String,
    /// KEYS' shapes.
    pub keys: Vec<Shape>,
    /// ARGV's shapes.
    pub argv: Vec<Shape>,
}

/// The library's scripts by SHA-1 of the text it sends
/// ([`script_text`]): the name `EVALSHA` sends, and the hash of a body
/// `EVAL` sends or a model evaluates.
pub struct Scripts {
    by_sha: HashMap<String, String>,
}

/// How many of a plain command's first words (after its name) are keys.
fn command_keys(name: &str) -> usize {
    match name {
        "SET" | "GET" | "DEL" | "PEXPIRE" | "PTTL" | "EXISTS" | "TYPE" | "HMGET" | "HGET" => 1,
        _ => 0,
    }
}

impl Scripts {
    /// The scripts named `files` (file names in `src/scripts/`); a name
    /// that is no script is left out.
    pub fn new<'a>(files: impl IntoIterator<Item = &'a str>) -> Scripts {
        let by_sha = files
            .into_iter()
            .filter_map(|f| script_text(f).map(|t| (sha1_hex(t.as_bytes()), f.to_string())))
            .collect();
        Scripts { by_sha }
    }

    /// The file whose text hashes to `sha` (lower-case hex).
    pub fn name_of_sha(&self, sha: &str) -> String {
        match self.by_sha.get(&sha.to_ascii_lowercase()) {
            Some(name) => name.clone(),
            None => format!("unknown script {sha}"),
        }
    }

    /// The shape of a model's request, its values read with `roles`.
    pub fn shape(&self, request: &Request, roles: &Roles) -> Sent {
        let script = match request.text {
            Some(text) => self.name_of_sha(&sha1_hex(text.as_bytes())),
            None => request.name.to_string(),
        };
        Sent {
            script,
            keys: request.keys.iter().map(|k| roles.shape(k)).collect(),
            argv: request
                .args
                .iter()
                .map(|a| roles.shape(a.as_bytes()))
                .collect(),
        }
    }

    /// The shape of a command as a client sent it (its words, the name
    /// first: `EVALSHA sha numkeys keys… args…`, `EVAL body …`, `FCALL`,
    /// or a plain command), its values read with `roles`; `None` when it
    /// is no well-formed call.
    pub fn shape_words(&self, words: &[Vec<u8>], roles: &Roles) -> Option<Sent> {
        let name = String::from_utf8_lossy(words.first()?).to_ascii_uppercase();
        let (script, rest) = match name.as_str() {
            "EVALSHA" | "EVALSHA_RO" => {
                let sha = String::from_utf8_lossy(words.get(1)?).into_owned();
                (self.name_of_sha(&sha), &words[2..])
            }
            "EVAL" | "EVAL_RO" => (self.name_of_sha(&sha1_hex(words.get(1)?)), &words[2..]),
            "FCALL" | "FCALL_RO" => {
                let function = String::from_utf8_lossy(words.get(1)?).into_owned();
                (format!("FCALL {function}"), &words[2..])
            }
            _ => {
                let keys = command_keys(&name).min(words.len() - 1);
                let (keys, argv) = words[1..].split_at(keys);
                return Some(Sent {
                    script: name,
                    keys: keys.iter().map(|k| roles.shape(k)).collect(),
                    argv: argv.iter().map(|a| roles.shape(a)).collect(),
                });
            }
        };
        let count: usize = String::from_utf8_lossy(rest.first()?).parse().ok()?;
        let (keys, argv) = rest.get(1..)?.split_at_checked(count)?;
        Some(Sent {
            script,
            keys: keys.iter().map(|k| roles.shape(k)).collect(),
            argv: argv.iter().map(|a| roles.shape(a)).collect(),
        })
    }
}

/// One operation of a model and the request it sends.
pub struct Declared<'a> {
    /// The operation, by the name the conformance test gives the library's.
    pub op: &'static str,
    /// What the model sends for it.
    pub request: Request<'a>,
    /// The model's values, to read the request's shapes.
    pub roles: Roles,
}

/// A model that says what it sends, per operation, from the code its
/// steps send with.
pub trait Conforms {
    /// Every operation that sends something, under the model's
    /// configuration, with its request.
    fn declared(&self) -> Vec<Declared<'_>>;
}
