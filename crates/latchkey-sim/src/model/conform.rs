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

use latchkey::protocol::{
    fence_key, primitive_key, release_channel, script_text, tag_stem, ACQUIRED_SUFFIX,
    ALIVE_SUFFIX, BARRIER_RELEASED_SUFFIX, BARRIER_SUFFIX, ELECTION_CHANGES_SUFFIX,
    ELECTION_LEASE_SUFFIX, ELECTION_STATE_SUFFIX, HANDOFF_SUFFIX, LATCH_OPENED_SUFFIX,
    LATCH_SUFFIX, LEASES_SUFFIX, PERMITS_FENCE_SUFFIX, PERMITS_RELEASED_SUFFIX, PERMITS_SUFFIX,
    QUEUE_SUFFIX, RWLOCK_SUFFIXES, RWLOCK_WRITER_ACQUIRED_SUFFIX, TOKEN_MARKER,
};

use crate::lua::sha1_hex;
use crate::model::lock_request::Request;

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
    /// A fair lock's process id: the 16 hex digits all the entries of one
    /// process start with (its subscriber's id).
    ProcessId,
    /// Anything else (a key or value the roles do not name).
    Other,
}

/// The values one side used, so that its arguments can be told apart: the
/// TTL, and the keys and channels of the primitive by role.
#[derive(Clone, Debug, Default)]
pub struct Roles {
    /// The TTL in ms, if the primitive has one.
    pub ttl_ms: Option<i64>,
    /// Each key or channel, with its role.
    pub names: Vec<(Vec<u8>, &'static str)>,
}

impl Roles {
    /// A plain lock's: lock key `key` (prefix included), its fencing
    /// counter and release channel (`docs/protocol.md`, "Locks").
    pub fn lock(key: &[u8], ttl_ms: i64) -> Roles {
        Roles {
            ttl_ms: Some(ttl_ms),
            names: vec![
                (key.to_vec(), "lock"),
                (fence_key(key), "fence"),
                (release_channel(key), "release channel"),
            ],
        }
    }

    /// Several locks' (a `lock_all`'s, or one lock's of a client beside
    /// it): each lock key (prefix included, in key order, at most 3), its
    /// fencing counter and release channel, as `lock 1`, `fence 1`,
    /// `release channel 1`, `lock 2`, ….
    pub fn locks(keys: &[Vec<u8>], ttl_ms: i64) -> Roles {
        const ROLES: [[&str; 3]; 3] = [
            ["lock 1", "fence 1", "release channel 1"],
            ["lock 2", "fence 2", "release channel 2"],
            ["lock 3", "fence 3", "release channel 3"],
        ];
        let mut names = Vec::new();
        for (key, [lock, fence, channel]) in keys.iter().zip(ROLES) {
            names.push((key.clone(), lock));
            names.push((fence_key(key), fence));
            names.push((release_channel(key), channel));
        }
        Roles {
            ttl_ms: Some(ttl_ms),
            names,
        }
    }

    /// An election's, `name` under `prefix`: its lease, its state hash
    /// and its changes channel (`docs/protocol.md`, "Elections").
    pub fn election(prefix: &[u8], name: &[u8], ttl_ms: i64) -> Roles {
        let key = |suffix| primitive_key(prefix, name, suffix);
        Roles {
            ttl_ms: Some(ttl_ms),
            names: vec![
                (key(ELECTION_LEASE_SUFFIX), "lease"),
                (key(ELECTION_STATE_SUFFIX), "state"),
                (key(ELECTION_CHANGES_SUFFIX), "changes channel"),
            ],
        }
    }

    /// A latch's, `name` under `prefix`: its key and opened channel.
    pub fn latch(prefix: &[u8], name: &[u8], ttl_ms: i64) -> Roles {
        let key = |suffix| primitive_key(prefix, name, suffix);
        Roles {
            ttl_ms: Some(ttl_ms),
            names: vec![
                (key(LATCH_SUFFIX), "latch"),
                (key(LATCH_OPENED_SUFFIX), "opened channel"),
            ],
        }
    }

    /// A barrier's, `name` under `prefix`: its key and released channel.
    pub fn barrier(prefix: &[u8], name: &[u8], ttl_ms: i64) -> Roles {
        let key = |suffix| primitive_key(prefix, name, suffix);
        Roles {
            ttl_ms: Some(ttl_ms),
            names: vec![
                (key(BARRIER_SUFFIX), "barrier"),
                (key(BARRIER_RELEASED_SUFFIX), "released channel"),
            ],
        }
    }

    /// A semaphore's, `name` under `prefix`: its permits, their fencing
    /// counter and released channel (`docs/protocol.md`, "Semaphores").
    pub fn semaphore(prefix: &[u8], name: &[u8], ttl_ms: i64) -> Roles {
        let key = |suffix| primitive_key(prefix, name, suffix);
        Roles {
            ttl_ms: Some(ttl_ms),
            names: vec![
                (key(PERMITS_SUFFIX), "permits"),
                (key(PERMITS_FENCE_SUFFIX), "fence"),
                (key(PERMITS_RELEASED_SUFFIX), "released channel"),
            ],
        }
    }

    /// A read-write lock's, `name` under `prefix` (`docs/protocol.md`,
    /// "Read-write locks").
    pub fn rwlock(prefix: &[u8], name: &[u8], ttl_ms: i64) -> Roles {
        const ROLES: [&str; 7] = [
            "writer",
            "readers",
            "writers waiting",
            "readers waiting",
            "readers next",
            "fence",
            "released channel",
        ];
        let mut names: Vec<(Vec<u8>, &'static str)> = RWLOCK_SUFFIXES
            .iter()
            .zip(ROLES)
            .map(|(suffix, role)| (primitive_key(prefix, name, suffix), role))
            .collect();
        let acquired = primitive_key(prefix, name, RWLOCK_WRITER_ACQUIRED_SUFFIX);
        names.push((acquired, "writer acquired"));
        Roles {
            ttl_ms: Some(ttl_ms),
            names,
        }
    }

    /// A fair lock's, lock key `key` (prefix included), waiters' lease
    /// `lease_ms` (`docs/protocol.md`, "Fair locks"): a plain lock's, and
    /// the queue, the leases, the process records, the acquired record,
    /// the hand-off channels' stem, the lease (a process record's) as a
    /// number and an entry's own lease
    /// ([`ENTRY_LEASES`](crate::model::fair::ENTRY_LEASES) times it).
    pub fn fair(key: &[u8], ttl_ms: i64, lease_ms: i64) -> Roles {
        let mut roles = Roles::lock(key, ttl_ms);
        let stem = tag_stem(key);
        let at = |suffix: &[u8]| [&stem[..], suffix].concat();
        let entry_lease = lease_ms * crate::model::fair::ENTRY_LEASES;
        roles.names.extend([
            (at(QUEUE_SUFFIX), "queue"),
            (at(LEASES_SUFFIX), "leases"),
            (at(ALIVE_SUFFIX), "process records"),
            (at(ACQUIRED_SUFFIX), "acquired"),
            (at(HANDOFF_SUFFIX), "hand-off stem"),
            (lease_ms.to_string().into_bytes(), "lease ms"),
            (entry_lease.to_string().into_bytes(), "entry lease ms"),
        ]);
        roles
    }

    /// `arg`'s shape. A role comes first (a key is never mistaken for a
    /// word), then the token, the publish command, the TTL; `"0"` and `"1"`
    /// are flags (compared as they are); other integers are `Int`.
    pub fn shape(&self, arg: &[u8]) -> Shape {
        if let Some((_, role)) = self.names.iter().find(|(name, _)| name == arg) {
            return Shape::Role(role);
        }
        if arg.starts_with(TOKEN_MARKER.as_bytes()) {
            return Shape::Token;
        }
        if is_waiter_entry(arg) {
            return Shape::WaiterEntry;
        }
        // Before the integers: a process id may be all decimal digits.
        if arg.len() == 16 && arg.iter().all(u8::is_ascii_hexdigit) {
            return Shape::ProcessId;
        }
        let text = String::from_utf8_lossy(arg);
        match text.as_ref() {
            "PUBLISH" | "SPUBLISH" => return Shape::PublishCommand,
            "0" | "1" => return Shape::Literal(text.into_owned()),
            _ => {}
        }
        if let Ok(n) = text.parse::<i64>() {
            return match self.ttl_ms == Some(n) {
                true => Shape::TtlMs,
                false => Shape::Int,
            };
        }
        // The empty word too: a fair first try's entry.
        let word = text.bytes().all(|b| b.is_ascii_alphabetic());
        match word {
            true => Shape::Literal(text.into_owned()),
            false => Shape::Other,
        }
    }
}

/// `<32 hex digits>:<ms>:<0|1>:<owner token>` (`docs/protocol.md`, "Fair
/// locks").
fn is_waiter_entry(arg: &[u8]) -> bool {
    let mut parts = arg.splitn(4, |&b| b == b':');
    let id = parts.next().unwrap_or_default();
    let ms = parts.next().unwrap_or_default();
    let fenced = parts.next().unwrap_or_default();
    let token = parts.next().unwrap_or_default();
    id.len() == 32
        && id.iter().all(u8::is_ascii_hexdigit)
        && !ms.is_empty()
        && ms.iter().all(u8::is_ascii_digit)
        && (fenced == b"0" || fenced == b"1")
        && token.starts_with(TOKEN_MARKER.as_bytes())
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

#[cfg(test)]
mod tests {
    use super::{Roles, Shape};

    #[test]
    fn arguments_are_told_apart_by_shape() {
        let roles = Roles::fair(b"p:x", 3000, 2000);
        let shape = |arg: &str| roles.shape(arg.as_bytes());
        assert_eq!(shape("lk2:0123:5:9:host+w"), Shape::Token);
        assert_eq!(shape("3000"), Shape::TtlMs);
        assert_eq!(shape("2000"), Shape::Role("lease ms"));
        assert_eq!(shape("p:x"), Shape::Role("lock"));
        assert_eq!(shape("{p:x}:fence"), Shape::Role("fence"));
        assert_eq!(shape("{p:x}:released"), Shape::Role("release channel"));
        assert_eq!(shape("{p:x}:handoff:"), Shape::Role("hand-off stem"));
        assert_eq!(shape("SPUBLISH"), Shape::PublishCommand);
        assert_eq!(shape("1"), Shape::Literal("1".into()));
        assert_eq!(shape("wait"), Shape::Literal("wait".into()));
        assert_eq!(shape(""), Shape::Literal(String::new()));
        assert_eq!(shape("42"), Shape::Int);
        let entry = format!("{}:3000:1:lk2:ab:1:2:h", "0123456789abcdef".repeat(2));
        assert_eq!(shape(&entry), Shape::WaiterEntry);
        assert_eq!(shape("30000"), Shape::Role("entry lease ms"));
        assert_eq!(shape("{p:x}:alive"), Shape::Role("process records"));
        assert_eq!(shape("0123456789abcdef"), Shape::ProcessId);
        assert_eq!(shape("0000000000000001"), Shape::ProcessId);
        assert_eq!(shape("p:y"), Shape::Other);
    }
}
