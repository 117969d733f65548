//! The data layout in Redis as constants, for tools that read or write it
//! beside latchkey (the whole layout is in `docs/protocol.md`). Most
//! programs never need this module.

pub(crate) mod scripts;

use std::time::Duration;

/// The marker every latchkey owner token starts with; `latchkey list` uses
/// it to tell our locks from other keys under the same prefix.
pub const TOKEN_MARKER: &str = "lk2:";

/// Appended to a holder's token by a waiter (in the acquire script) so that
/// the holder's release publishes the wake-up. No token contains a `+`: the
/// host field is cleaned of everything but letters, digits, `.`, `-`, `_`.
pub const WAITING_MARK: &str = "+w";

/// Suffix of the fencing-counter key. A lock name may not end with it, so a
/// lock key can never be another lock's counter key.
pub const FENCE_SUFFIX: &[u8] = b":fence";

/// Suffix of the per-lock release channel.
pub const RELEASE_SUFFIX: &[u8] = b":released";

/// Suffix of the channel a Redlock publishes on when it takes back a failed
/// attempt's keys (waiters listen there too).
pub const RETRACTED_SUFFIX: &[u8] = b":retracted";

/// Suffix of an election's lease key (`{P+name}:leader`, a string holding
/// the leader's owner token, with the lease's TTL).
pub const ELECTION_LEASE_SUFFIX: &[u8] = b":leader";

/// Suffix of an election's state hash (`{P+name}:election`: the leader's
/// token, value, term and since, and the counters `last_term` and `change`).
pub const ELECTION_STATE_SUFFIX: &[u8] = b":election";

/// Suffix of an election's change channel (`{P+name}:election:changes`).
pub const ELECTION_CHANGES_SUFFIX: &[u8] = b":election:changes";

/// How much of a TTL latchkey does not trust: the clock-drift allowance of
/// the Redlock algorithm, `ttl / 100 + 2 ms`. A holder considers its lock
/// valid until `sent + ttl - drift(ttl)`, where `sent` is when the acquiring
/// (or extending) request was sent, on the monotonic clock.
pub fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// Whether `key` carries a Redis Cluster hash tag: a `{`, later a `}`, and
/// at least one byte between them (then only those bytes pick the slot).
pub fn has_hash_tag(key: &[u8]) -> bool {
    let Some(open) = key.iter().position(|&b| b == b'{') else {
        return false;
    };
    matches!(key[open + 1..].iter().position(|&b| b == b'}'), Some(len) if len > 0)
}

/// The stem of every auxiliary key and channel of the lock at `lock_key`
/// (layout 3): the lock key itself when it carries its own hash tag (a name
/// such as `{user42}:cart`), else the lock key in braces, `{P + name}`,
/// whose slot is the lock key's. Either way the lock key, its fencing
/// counter and its channels share one Redis Cluster slot. A key with a `}`
/// and no tag cannot be put in braces; its stem is the key itself (layout
/// 2), and on a cluster its counter may land in another slot.
pub fn tag_stem(lock_key: &[u8]) -> Vec<u8> {
    if has_hash_tag(lock_key) || lock_key.contains(&b'}') {
        lock_key.to_vec()
    } else {
        [b"{", lock_key, b"}"].concat()
    }
}

/// The fencing counter of the lock at `lock_key`: [`tag_stem`] + [`FENCE_SUFFIX`].
pub fn fence_key(lock_key: &[u8]) -> Vec<u8> {
    [&tag_stem(lock_key)[..], FENCE_SUFFIX].concat()
}

/// The release channel of the lock at `lock_key`: [`tag_stem`] + [`RELEASE_SUFFIX`].
pub fn release_channel(lock_key: &[u8]) -> Vec<u8> {
    [&tag_stem(lock_key)[..], RELEASE_SUFFIX].concat()
}

/// Suffix of a count-down latch's key, after the stem of `P + name`
/// ([`tag_stem`]): the key holds the count left, `0` once open.
pub const LATCH_SUFFIX: &[u8] = b":latch";

/// Suffix of the channel a latch's opening is published on.
pub const LATCH_OPENED_SUFFIX: &[u8] = b":latch:opened";

/// Suffix of a barrier's key (a hash: `parties`, `gen`, `arrived`).
pub const BARRIER_SUFFIX: &[u8] = b":barrier";

/// Suffix of the channel a barrier's release is published on (the message
/// is the generation released).
pub const BARRIER_RELEASED_SUFFIX: &[u8] = b":barrier:released";

/// Suffix of a semaphore's key (a sorted set: holder token → expiry in
/// server milliseconds).
pub const PERMITS_SUFFIX: &[u8] = b":permits";

/// Suffix of a semaphore's fencing counter.
pub const PERMITS_FENCE_SUFFIX: &[u8] = b":permits:fence";

/// Suffix of the channel a semaphore's releases are published on.
pub const PERMITS_RELEASED_SUFFIX: &[u8] = b":permits:released";

/// The message [`Client::request_release`](crate::Client::request_release)
/// (and a waiter made `with_asking`, e.g. [`Lock::with_asking`](crate::Lock::with_asking))
/// publishes on a primitive's release channel (a lock's, a semaphore's, a
/// read-write lock's; an election's changes channel): its holders'
/// `release_requested()` completes. Waiters take it as any wake-up (they
/// try again and find the primitive still held), so older clients are
/// unaffected (see `docs/protocol.md`, "Release requests").
pub const RELEASE_REQUESTED: &[u8] = b"release-requested";

/// The message a revocation ([`Client::revoke`](crate::Client::revoke))
/// publishes on the revoked primitive's release channel: waiters take it
/// as any wake-up, and a holder that hears it checks its hold at once (one
/// round trip), finds it gone and fires `lost` with
/// [`LostReason::Revoked`](crate::LostReason::Revoked).
pub const REVOKED: &[u8] = b"revoked";

/// Ends the owner token of a hold kept while idle
/// ([`Lock::with_caching`](crate::Lock::with_caching)): `lk2:…:<host>:c`.
/// The acquire script of a waiter that marks such a token publishes
/// [`WANTED`] on the lock's release channel, so the idle holder lets go at
/// once. An older parser reads it as part of the host name.
pub const CACHING_MARK: &str = ":c";

/// The message a waiter's acquire script publishes on a lock's release
/// channel when it first marks a [caching](CACHING_MARK) holder's token:
/// the holder releases a hold it keeps idle at once, and one in use at its
/// next local release. Waiters of this version ignore it (older ones take
/// it as a wake-up, try once and wait again).
pub const WANTED: &[u8] = b"wanted";

/// Suffixes of a read-write lock's keys and channel, in this order: the
/// writer (string), the readers (sorted set: token → expiry), the writers
/// waiting and the readers waiting (sorted sets: token → expiry of the
/// intent), the readers let in before the next writer (set), the writers'
/// fencing counter, and the released channel.
pub const RWLOCK_SUFFIXES: [&[u8]; 7] = [
    b":rw:writer",
    b":rw:readers",
    b":rw:writers-waiting",
    b":rw:readers-waiting",
    b":rw:readers-next",
    b":rw:fence",
    b":rw:released",
];

/// The key or channel `suffix` of the primitive `name` under `prefix`:
/// [`tag_stem`]`(prefix + name) + suffix`, so all of one primitive's keys
/// and channels share one Redis Cluster slot.
pub fn primitive_key(prefix: &[u8], name: &[u8], suffix: &[u8]) -> Vec<u8> {
    [&tag_stem(&[prefix, name].concat())[..], suffix].concat()
}

/// Suffix of a lock's acquired record (new in 0.4): a string
/// `<server ms>:<owner token>`, written when a waiter that was queued gets
/// the lock (a fair hand-off, or a queued waiter taking it), with a 24 h
/// TTL. A waiter's token is made when it starts waiting, so its time is not
/// when the hold began; inspection counts the hold's age from this record
/// while it names the holder's token (see `docs/protocol.md`, "Inspection").
pub const ACQUIRED_SUFFIX: &[u8] = b":acquired";

/// Suffix of a read-write lock's writer's acquired record (new in 0.4), as
/// [`ACQUIRED_SUFFIX`]: written when a writer that waited gets the lock.
pub const RWLOCK_WRITER_ACQUIRED_SUFFIX: &[u8] = b":rw:writer-acquired";

/// Suffix of a fair lock's queue: a list of waiter entries in arrival order
/// (see `docs/protocol.md`, "Fair locks").
pub const QUEUE_SUFFIX: &[u8] = b":queue";

/// Suffix of a fair lock's waiter leases: a sorted set, entry → lease
/// deadline in server milliseconds.
pub const LEASES_SUFFIX: &[u8] = b":leases";

/// Suffix of a fair lock's process records (new in 0.4): a sorted set, the
/// 16 hex digits every queue entry of one process starts with → that
/// process's deadline in server milliseconds. An entry is live while its own
/// lease runs and its process's record, if any, has not run out (see
/// `docs/protocol.md`, "Fair locks").
pub const ALIVE_SUFFIX: &[u8] = b":alive";

/// Suffix of a plain lock's waiting processes (new in 0.4): a sorted set,
/// the 16 hex digits naming one waiting process's subscriber connection →
/// when it first asked, in server milliseconds. A release of a marked
/// token wakes the first of them that still listens on its wake channel,
/// `S + ":wake:" + those 16 digits`, instead of every waiting process (see
/// `docs/protocol.md`, "Waking one process").
pub const WAKE_SUFFIX: &[u8] = b":wake";

/// Suffix of a fair lock's hand-off channels: `S + ":handoff:" + 16 hex
/// digits` naming one subscriber connection (all the waiters of one process
/// for one lock share it).
pub const HANDOFF_SUFFIX: &[u8] = b":handoff:";

/// The Redis Cluster slot of `key` (CRC16/XMODEM of its hash tag, or of the
/// whole key without one, modulo 16384): whether several locks can be
/// taken by one script on a cluster (`Client::lock_all`).
pub(crate) fn key_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    let mut crc: u16 = 0;
    for &byte in hashed {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 == 0 {
                crc << 1
            } else {
                (crc << 1) ^ 0x1021
            };
        }
    }
    crc % 16384
}

/// The text of the script `file` (as `src/scripts/` names it, e.g.
/// `"release.lua"`) exactly as the library sends it, its shared preludes
/// included; `None` for a name that is no script. For the bench's
/// baselines and the tests that run a script by hand: a copy of a file
/// would miss the preludes.
#[doc(hidden)]
pub fn script_text(file: &str) -> Option<&'static str> {
    scripts::SOURCES
        .iter()
        .find(|(name, _)| *name == file)
        .map(|(_, text)| *text)
}

#[cfg(test)]
mod tests {
    #[test]
    fn key_slots_are_redis_cluster_slots() {
        use super::key_slot;
        // The examples of the Redis Cluster specification.
        assert_eq!(key_slot(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
    }
}
