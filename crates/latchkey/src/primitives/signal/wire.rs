//! The wire format of signals: channel names and the message envelope, as
//! documented in `docs/protocol.md` (section "Signals").
//!
//! ```text
//! broadcast channel   P + "signal:" + name
//! waiter channel      P + "signal-one:" + len(name) + ":" + name + ":" + 32 hex digits
//! message             "lksig1:" + 16 hex digits (id) + ":" + payload
//! ```
//!
//! The waiter channels are found with `PUBSUB CHANNELS <pattern>`, so their
//! names are built to make that pattern exact: the length prefix ends the
//! name unambiguously (`job` never matches the waiters of `jobs` or of
//! `job:x`), the name is glob-escaped (a name may contain `*?[]\`), and the
//! id is a fixed number of hex digits (so no longer channel, such as a lock's
//! release channel, can match).

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::vocab::error::{Error, Result};
use crate::vocab::names::{MAX_NAME_LEN, RELEASE_SUFFIX};

/// Namespace (after the key prefix) of the broadcast channels.
pub(crate) const BROADCAST_NS: &[u8] = b"signal:";
/// Namespace (after the key prefix) of the per-waiter channels.
pub(crate) const WAITER_NS: &[u8] = b"signal-one:";
/// What an enveloped message starts with.
pub(crate) const ENVELOPE_MARKER: &[u8] = b"lksig1:";
/// Marker, 16 hex digits, and the `:` before the payload.
const ENVELOPE_LEN: usize = ENVELOPE_MARKER.len() + 16 + 1;
/// Hex digits in a waiter id (see `Subscriber::new_waiter_id`).
pub(crate) const WAITER_ID_LEN: usize = 32;

/// Suffixes of the channels locks publish on (`S + suffix`, which is
/// `P + lock name + suffix` for a lock name with its own hash tag: the
/// release channel, and Redlock's retraction channel in `redlock/rounds.rs`).
const LOCK_CHANNEL_SUFFIXES: [&[u8]; 2] =
    [RELEASE_SUFFIX, crate::vocab::protocol::RETRACTED_SUFFIX];

/// A signal name is 1 to [`MAX_NAME_LEN`] bytes of anything, except that it
/// must not end with a lock channel suffix (`:released`, `:retracted`): with
/// the key prefix, `signal:` + such a name can be a channel of the lock
/// called `signal:` + the rest (one with its own hash tag). (A pattern listener skips such channels.)
pub(crate) fn check_name(name: &[u8]) -> Result<()> {
    crate::vocab::names::check_length("a signal name", name)?;
    if let Some(suffix) = LOCK_CHANNEL_SUFFIXES.iter().find(|s| name.ends_with(s)) {
        return Err(Error::InvalidName {
            reason: format!(
                "a signal name must not end with {:?} (reserved for lock channels)",
                String::from_utf8_lossy(suffix)
            ),
        });
    }
    Ok(())
}

/// A pattern is a Redis glob over signal names, 1 to [`MAX_NAME_LEN`] bytes.
pub(crate) fn check_pattern(pattern: &[u8]) -> Result<()> {
    if pattern.is_empty() || pattern.len() > MAX_NAME_LEN {
        return Err(Error::InvalidName {
            reason: format!("a signal pattern must be 1 to {MAX_NAME_LEN} bytes"),
        });
    }
    Ok(())
}

/// `P + "signal:" + name`.
pub(crate) fn broadcast_channel(prefix: &[u8], name: &[u8]) -> Vec<u8> {
    [prefix, BROADCAST_NS, name].concat()
}

/// `P + "signal-one:" + len + ":" + name + ":"`: what every waiter channel
/// of `name` starts with.
pub(crate) fn waiter_channel_prefix(prefix: &[u8], name: &[u8]) -> Vec<u8> {
    [
        prefix,
        WAITER_NS,
        name.len().to_string().as_bytes(),
        b":",
        name,
        b":",
    ]
    .concat()
}

/// The channel of one waiter on `name`.
pub(crate) fn waiter_channel(prefix: &[u8], name: &[u8], waiter_id: &str) -> Vec<u8> {
    let mut channel = waiter_channel_prefix(prefix, name);
    channel.extend_from_slice(waiter_id.as_bytes());
    channel
}

/// The glob that matches exactly the waiter channels of `name`.
pub(crate) fn waiters_pattern(prefix: &[u8], name: &[u8]) -> Vec<u8> {
    let mut pattern = escape_glob(&waiter_channel_prefix(prefix, name));
    for _ in 0..WAITER_ID_LEN {
        pattern.extend_from_slice(b"[0-9a-f]");
    }
    pattern
}

/// The glob that matches the broadcast channels of the names `pattern`
/// matches. The prefix is escaped; the pattern is the caller's.
pub(crate) fn broadcast_pattern(prefix: &[u8], pattern: &[u8]) -> Vec<u8> {
    let mut glob = escape_glob(&[prefix, BROADCAST_NS].concat());
    glob.extend_from_slice(pattern);
    glob
}

/// The signal name a broadcast channel is for, or `None` for a channel that
/// is not one (a lock's release channel matched by a broad pattern).
pub(crate) fn name_of_broadcast_channel<'a>(prefix: &[u8], channel: &'a [u8]) -> Option<&'a [u8]> {
    let name = channel.strip_prefix(prefix)?.strip_prefix(BROADCAST_NS)?;
    (check_name(name).is_ok()).then_some(name)
}

/// Escapes the glob characters of Redis (`*?[]\`) with a backslash.
pub(crate) fn escape_glob(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + 8);
    for &b in bytes {
        if matches!(b, b'*' | b'?' | b'[' | b']' | b'\\') {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

/// Wraps `payload` in an envelope with `id`.
pub(crate) fn seal(id: u64, payload: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(ENVELOPE_LEN + payload.len());
    message.extend_from_slice(ENVELOPE_MARKER);
    message.extend_from_slice(format!("{id:016x}:").as_bytes());
    message.extend_from_slice(payload);
    message
}

/// The id and payload of an enveloped message; `None` and the whole message
/// for anything else (published by another tool).
pub(crate) fn open(message: &[u8]) -> (Option<u64>, &[u8]) {
    let parsed = message.strip_prefix(ENVELOPE_MARKER).and_then(|rest| {
        let (hex, rest) = (rest.get(..16)?, rest.get(16..)?);
        let payload = rest.strip_prefix(b":")?;
        let lowercase_hex = hex.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let id = u64::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
        lowercase_hex.then_some((id, payload))
    });
    match parsed {
        Some((id, payload)) => (Some(id), payload),
        None => (None, message),
    }
}

/// A hash of a message that carries no id, to pair up its copies.
pub(crate) fn fingerprint(channel: &[u8], message: &[u8]) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    channel.hash(&mut hasher);
    message.hash(&mut hasher);
    hasher.finish()
}

/// 64 random bits for ids and picks. From the OS; should it have none to
/// give, the clock mixed with a counter (ids need uniqueness, not secrecy).
pub(crate) fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_ok() {
        return u64::from_le_bytes(bytes);
    }
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut hasher = std::hash::DefaultHasher::new();
    (
        nanos,
        COUNTER.fetch_add(1, Ordering::Relaxed),
        std::process::id(),
    )
        .hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_round_trip_and_foreign_messages_pass() {
        let sealed = seal(0xdead_beef, b"payload:with:colons");
        assert_eq!(
            open(&sealed),
            (Some(0xdead_beef), &b"payload:with:colons"[..])
        );
        assert_eq!(open(&seal(7, b"")), (Some(7), &b""[..]));
        for foreign in [
            &b"hello"[..],
            b"lksig1:",
            b"lksig1:0123456789abcdefX",
            b"lksig1:0123456789ABCDEF:x",
        ] {
            assert_eq!(open(foreign), (None, foreign));
        }
    }

    #[test]
    fn waiter_channels_of_different_names_never_share_a_pattern() {
        let id = "0123456789abcdef0123456789abcdef";
        let job = waiter_channel(b"p:", b"job", id);
        assert_eq!(job, b"p:signal-one:3:job:0123456789abcdef0123456789abcdef");
        assert!(waiter_channel(b"p:", b"jobs", id).starts_with(b"p:signal-one:4:jobs:"));
        assert_eq!(
            waiters_pattern(b"p*", b"a?[b]\\"),
            [
                &b"p\\*signal-one:6:a\\?\\[b\\]\\\\:"[..],
                &b"[0-9a-f]".repeat(32)
            ]
            .concat()
        );
    }

    #[test]
    fn names_are_checked_and_recovered_from_channels() {
        assert!(check_name(b"").is_err());
        assert!(check_name(b"x:released").is_err());
        assert!(check_name(b"x:retracted").is_err());
        assert!(check_name(b"job*?[]:\0\xff").is_ok());
        assert!(check_pattern(b"").is_err());
        let channel = broadcast_channel(b"p:", b"job:1");
        assert_eq!(
            name_of_broadcast_channel(b"p:", &channel),
            Some(&b"job:1"[..])
        );
        assert_eq!(
            name_of_broadcast_channel(b"p:", b"p:signal:lock:released"),
            None
        );
        assert_eq!(name_of_broadcast_channel(b"p:", b"q:signal:x"), None);
    }
}
