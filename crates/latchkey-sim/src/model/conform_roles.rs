//! The conformance check's roles ([`Roles`]): the values one side used
//! (a primitive's TTL, its keys and channels by role), by which a
//! request's words are read as shapes ([`Roles::shape`]).

use latchkey::protocol::{
    fence_key, primitive_key, release_channel, tag_stem, ACQUIRED_SUFFIX, ALIVE_SUFFIX,
    BARRIER_RELEASED_SUFFIX, BARRIER_SUFFIX, ELECTION_CHANGES_SUFFIX, ELECTION_LEASE_SUFFIX,
    ELECTION_STATE_SUFFIX, HANDOFF_SUFFIX, LATCH_OPENED_SUFFIX, LATCH_SUFFIX, LEASES_SUFFIX,
    PERMITS_FENCE_SUFFIX, PERMITS_RELEASED_SUFFIX, PERMITS_SUFFIX, RWLOCK_SUFFIXES,
    RWLOCK_WRITER_ACQUIRED_SUFFIX, TOKEN_MARKER,
};

use crate::model::conform::Shape;
use crate::model::lock_request::{fair_queue, wake_set};

/// A plain lock's names' roles, in the order `Roles::locks_as` names them.
const LOCK_ROLES: [&str; 5] = ["lock", "fence", "release channel", "wake set", "queue"];

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
    /// counter, release channel, waiting processes and the fair queue its
    /// release looks at (`docs/protocol.md`,
    /// "Locks").
    pub fn lock(key: &[u8], ttl_ms: i64) -> Roles {
        Roles::locks_as(&[key.to_vec()], ttl_ms, &[LOCK_ROLES])
    }

    /// Several locks' (a `lock_all`'s, or one lock's of a client beside
    /// it): each lock key (prefix included, in key order, at most 3) and
    /// the names that go with it, as `lock 1`, `fence 1`, `release
    /// channel 1`, `wake set 1`, `queue 1`, `lock 2`, ….
    pub fn locks(keys: &[Vec<u8>], ttl_ms: i64) -> Roles {
        const ROLES: [[&str; 5]; 3] = [
            [
                "lock 1",
                "fence 1",
                "release channel 1",
                "wake set 1",
                "queue 1",
            ],
            [
                "lock 2",
                "fence 2",
                "release channel 2",
                "wake set 2",
                "queue 2",
            ],
            [
                "lock 3",
                "fence 3",
                "release channel 3",
                "wake set 3",
                "queue 3",
            ],
        ];
        Roles::locks_as(keys, ttl_ms, &ROLES)
    }

    /// `keys`' names with `roles` (one row a key): the lock, its fencing
    /// counter, release channel, waiting processes, fair queue.
    fn locks_as(keys: &[Vec<u8>], ttl_ms: i64, roles: &[[&'static str; 5]]) -> Roles {
        let mut names = Vec::new();
        for (key, row) in keys.iter().zip(roles) {
            let named = [
                key.clone(),
                fence_key(key),
                release_channel(key),
                wake_set(key),
                fair_queue(key),
            ];
            names.extend(named.into_iter().zip(row.iter().copied()));
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
        // (The queue is a plain lock's name too: its release looks at it.)
        roles.names.extend([
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
            // `*`: a waiter registered as listening on the release
            // channel only (`shared/mark.lua`).
            "0" | "1" | "*" => return Shape::Literal(text.into_owned()),
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
        assert_eq!(shape("{p:x}:queue"), Shape::Role("queue"));
        assert_eq!(shape("{p:x}:wake"), Shape::Role("wake set"));
        assert_eq!(shape("*"), Shape::Literal("*".into()));
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
