//! Validation of lock names and TTLs, and the keys and channels derived from
//! a name (the layout is documented in `docs/protocol.md`).

use std::time::Duration;

use crate::vocab::error::{Error, Result};

/// The longest name accepted, in bytes. Redis allows far longer keys, but a
/// lock name of more than 1 KiB is almost certainly a bug (a payload passed
/// as a name), and every command carries the name.
pub const MAX_NAME_LEN: usize = 1024;

/// The shortest TTL accepted. A lease is only valid for `ttl - drift`
/// where `drift = ttl / 100 + 2 ms` (see [`drift`](crate::vocab::protocol::drift)); below 10 ms almost
/// nothing of it would be left.
pub const MIN_TTL: Duration = Duration::from_millis(10);

/// The longest TTL accepted: one day. A lock that must live longer should be
/// kept alive by the watchdog instead, so that it frees itself when its
/// holder dies.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The largest count accepted for a latch, the most parties of a barrier
/// and the most permits of a semaphore. Far above any sensible use; below
/// it, every count is exact in the scripts' Lua numbers and a semaphore's
/// sorted set stays small enough to scan in one script call.
pub const MAX_COUNT: u32 = 100_000;
// The refusal below spells the number out (a reason is a `&'static str`);
// this keeps the two from drifting apart.
const _: () = assert!(MAX_COUNT == 100_000);

pub(crate) fn check_count(what: &'static str, count: u64) -> Result<u32> {
    if count == 0 {
        return Err(Error::InvalidCount {
            what,
            count,
            reason: "it must be at least 1",
        });
    }
    match u32::try_from(count) {
        Ok(n) if n <= MAX_COUNT => Ok(n),
        _ => Err(Error::InvalidCount {
            what,
            count,
            reason: "it must be at most 100000",
        }),
    }
}

pub(crate) use crate::vocab::protocol::{drift, FENCE_SUFFIX, RELEASE_SUFFIX};

pub(crate) fn check_name(name: &[u8]) -> Result<()> {
    check_length("a name", name)?;
    if name.ends_with(FENCE_SUFFIX) {
        return Err(Error::InvalidName {
            reason: "a lock name must not end with \":fence\" (reserved for fencing counters)"
                .into(),
        });
    }
    Ok(())
}

/// That `name` (of the kind `what`: "a name", "a signal name") is 1 to
/// [`MAX_NAME_LEN`] bytes long.
pub(crate) fn check_length(what: &str, name: &[u8]) -> Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidName {
            reason: format!("{what} must not be empty"),
        });
    }
    if name.len() > MAX_NAME_LEN {
        return Err(Error::InvalidName {
            reason: format!(
                "{what} may be at most {MAX_NAME_LEN} bytes, this one is {}",
                name.len()
            ),
        });
    }
    Ok(())
}

/// What every primitive checks of its name and TTL before it is made: a
/// valid name ([`check_name`]), usable on a cluster ([`check_cluster_name`]),
/// and a valid TTL ([`check_ttl`]).
pub(crate) fn check_primitive(
    prefix: &[u8],
    cluster: bool,
    name: &[u8],
    ttl: Duration,
) -> Result<()> {
    check_name(name)?;
    check_cluster_name(prefix, name, cluster)?;
    check_ttl(ttl)
}

/// A name that cannot be used on a Redis Cluster: one whose key
/// (`prefix + name`) has a `}` but no hash tag (Redis's rule: the first
/// `{`, then the first `}` after it, with at least one byte between).
/// Every key and channel of a primitive shares one slot because its stem
/// is the key in braces (`docs/protocol.md`); such a key cannot be put in
/// braces (its `}` would end the tag early), so its keys would land in
/// different slots and every command would fail with CROSSSLOT. Refused
/// with the reason instead; a standalone server takes it (`cluster`
/// false). Giving it its own tag (`{x}y}`, `{job}}`) makes it work.
pub(crate) fn check_cluster_name(prefix: &[u8], name: &[u8], cluster: bool) -> Result<()> {
    let key = [prefix, name].concat();
    if !cluster || !key.contains(&b'}') || crate::vocab::protocol::has_hash_tag(&key) {
        return Ok(());
    }
    Err(Error::InvalidName {
        reason: format!(
            "{:?} has a `}}` but no hash tag, so on a Redis Cluster its keys cannot \
             share one slot; drop the `}}`, or give the name a hash tag of its own \
             (e.g. \"{{job}}:x\": the part in braces picks the slot)",
            String::from_utf8_lossy(name)
        ),
    })
}

pub(crate) fn check_ttl(ttl: Duration) -> Result<()> {
    if ttl < MIN_TTL {
        return Err(Error::InvalidTtl {
            ttl,
            reason: "a lock TTL must be at least 10ms",
        });
    }
    if ttl > MAX_TTL {
        return Err(Error::InvalidTtl {
            ttl,
            reason: "a lock TTL must be at most 24h; keep longer holds alive with the watchdog",
        });
    }
    Ok(())
}

/// Checks a hold's renewal interval (`with_renewal_every` of every
/// primitive): positive and shorter than `ttl` minus the drift allowance,
/// else [`Error::InvalidInput`] (a renewal that late finds the lease gone).
pub(crate) fn check_renewal_every(every: Duration, ttl: Duration) -> Result<Duration> {
    if every.is_zero() || every >= ttl - drift(ttl) {
        return Err(Error::InvalidInput(format!(
            "renewal interval {every:?}: it must be positive and shorter than the TTL ({ttl:?}) minus the drift allowance"
        )));
    }
    Ok(every)
}

/// Checks a cap on a hold (`with_max_hold` of every primitive whose holds
/// are leases): at least [`MIN_TTL`], else [`Error::InvalidInput`].
pub(crate) fn check_max_hold(max_hold: Duration) -> Result<Duration> {
    if max_hold < MIN_TTL {
        return Err(Error::InvalidInput(format!(
            "max hold {max_hold:?}: it must be at least {MIN_TTL:?}"
        )));
    }
    Ok(max_hold)
}

/// Until when a hold acquired (or extended) for `ttl` by a request sent at
/// `sent` may be assumed ours: `sent + ttl - drift(ttl)` on the monotonic
/// clock (see [`drift`](crate::vocab::protocol::drift)). Every deadline of
/// every hold is computed here, from a send time, never from a reply's arrival.
pub(crate) fn valid_until(sent: std::time::Instant, ttl: Duration) -> std::time::Instant {
    sent + ttl - drift(ttl)
}

/// TTL in whole milliseconds, as Redis wants it (sub-millisecond parts are
/// dropped; `check_ttl` guarantees at least 10).
pub(crate) fn ttl_ms(ttl: Duration) -> u64 {
    ttl.as_millis() as u64
}

/// Keys and channels of one lock (layout 3, `docs/protocol.md`), computed
/// once per [`Lock`](crate::Lock): all share the lock key's hash slot.
#[derive(Debug, Clone)]
pub(crate) struct LockKeys {
    pub(crate) key: Vec<u8>,
    pub(crate) fence_key: Vec<u8>,
    pub(crate) channel: Vec<u8>,
    /// `S:wake:S:queue`: the stem of the wake channels, `S:wake:` (without
    /// its last byte, the waiting processes' key `S:wake`), then the fair
    /// queue's key, which a plain release looks at; one allocation for the
    /// three (a `Lock` made for each use pays for it). Empty: its releases
    /// wake no process alone (a Redlock's retraction, an election's lease).
    pub(crate) wake: Vec<u8>,
    /// Where the fair queue's key starts in `wake`.
    pub(crate) wake_len: usize,
    /// A fair lock's queue keys (`Lock::fair`): its releases hand the lock
    /// to the first live waiter instead of freeing it.
    pub(crate) fair: Option<FairKeys>,
}

/// A fair lock's queue, leases, process records and hand-off channel stem
/// (under the lock's tag stem, so in its slot).
#[derive(Debug, Clone)]
pub(crate) struct FairKeys {
    pub(crate) queue: Vec<u8>,
    pub(crate) leases: Vec<u8>,
    /// The process records: one deadline per process, which keeps all its
    /// entries live.
    pub(crate) alive: Vec<u8>,
    /// The acquired record a hand-off writes (inspection's age of a holder
    /// that was queued).
    pub(crate) acquired: Vec<u8>,
    /// `S:handoff:`; a subscriber's channel is this + its 16 hex digits.
    pub(crate) handoff_prefix: Vec<u8>,
}

impl LockKeys {
    pub(crate) fn new(prefix: &[u8], name: &[u8]) -> LockKeys {
        let key: Vec<u8> = [prefix, name].concat();
        let stem = crate::vocab::protocol::tag_stem(&key);
        LockKeys {
            fence_key: [&stem[..], FENCE_SUFFIX].concat(),
            channel: [&stem[..], RELEASE_SUFFIX].concat(),
            wake: [
                &stem[..],
                crate::vocab::protocol::WAKE_SUFFIX,
                b":",
                &stem[..],
                crate::vocab::protocol::QUEUE_SUFFIX,
            ]
            .concat(),
            wake_len: stem.len() + crate::vocab::protocol::WAKE_SUFFIX.len() + 1,
            key,
            fair: None,
        }
    }

    /// The same keys, with a fair lock's queue keys.
    pub(crate) fn with_fair(&self) -> LockKeys {
        let stem = crate::vocab::protocol::tag_stem(&self.key);
        let under = |suffix: &[u8]| [&stem[..], suffix].concat();
        LockKeys {
            fair: Some(FairKeys {
                queue: under(crate::vocab::protocol::QUEUE_SUFFIX),
                leases: under(crate::vocab::protocol::LEASES_SUFFIX),
                alive: under(crate::vocab::protocol::ALIVE_SUFFIX),
                acquired: under(crate::vocab::protocol::ACQUIRED_SUFFIX),
                handoff_prefix: under(crate::vocab::protocol::HANDOFF_SUFFIX),
            }),
            ..self.clone()
        }
    }

    /// The script keys of an attempt or a token: the lock and its counter.
    /// On the stack: this is on every waiter's attempt.
    pub(crate) fn counted(&self) -> [&[u8]; 2] {
        [&self.key, &self.fence_key]
    }

    /// The wake channels' stem, `S:wake:` (see [`LockKeys::wake`]).
    pub(crate) fn wake_stem(&self) -> &[u8] {
        &self.wake[..self.wake_len]
    }

    /// The waiting processes' key, `S:wake` (see [`LockKeys::wake`]).
    pub(crate) fn waiting(&self) -> &[u8] {
        &self.wake[..self.wake_len.saturating_sub(1)]
    }

    /// The release script's keys: the lock and, unless it wakes nobody
    /// alone (an empty `wake`), its waiting processes and its fair queue.
    /// On the stack: this is on every release.
    pub(crate) fn release_keys(&self) -> ([&[u8]; 3], usize) {
        let n = if self.wake.is_empty() { 1 } else { 3 };
        ([&self.key, self.waiting(), &self.wake[self.wake_len..]], n)
    }

    /// The release script's arguments: `token`, the channel and the
    /// publish command (`PUBLISH`, or `SPUBLISH` on a cluster). On the
    /// stack: this is on every release.
    pub(crate) fn release_args<'a>(
        &'a self,
        token: &'a [u8],
        publish: &'static [u8],
    ) -> [&'a [u8]; 3] {
        [token, &self.channel, publish]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(check_name(b"").is_err());
        assert!(check_name(&[b'x'; MAX_NAME_LEN + 1]).is_err());
        assert!(check_name(&[b'x'; MAX_NAME_LEN]).is_ok());
        assert!(check_name(b"orders:fence").is_err());
        assert!(check_name(b"\0binary\xff ok").is_ok());
    }

    #[test]
    fn a_brace_without_a_tag_is_refused_on_a_cluster_only() {
        for name in [&b"x}y"[..], b"job}", b"a{}b}"] {
            assert!(matches!(
                check_cluster_name(b"p:", name, true),
                Err(Error::InvalidName { .. })
            ));
            assert!(check_cluster_name(b"p:", name, false).is_ok());
        }
        for name in [&b"{a}b}"[..], b"job", b"{x}y"] {
            assert!(check_cluster_name(b"p:", name, true).is_ok());
        }
    }

    #[test]
    fn ttls_are_checked() {
        assert!(check_ttl(Duration::ZERO).is_err());
        assert!(check_ttl(Duration::from_micros(999)).is_err());
        assert!(check_ttl(Duration::from_millis(10)).is_ok());
        assert!(check_ttl(MAX_TTL).is_ok());
        assert!(check_ttl(MAX_TTL + Duration::from_millis(1)).is_err());
    }

    #[test]
    fn keys_do_not_collide() {
        let a = LockKeys::new(b"p:", b"job");
        let b = LockKeys::new(b"p:", b"jobs");
        assert_ne!(a.key, b.key);
        assert_eq!(a.fence_key, b"{p:job}:fence");
        assert_eq!(a.channel, b"{p:job}:released");
    }

    #[test]
    fn a_name_with_its_own_hash_tag_keeps_it() {
        for name in [&b"{user42}:cart"[..], b"cart:{user42}", b"a{b}c{d}"] {
            let keys = LockKeys::new(b"p:", name);
            assert_eq!(keys.fence_key, [b"p:", name, b":fence"].concat());
            assert_eq!(keys.channel, [b"p:", name, b":released"].concat());
        }
        // Not tags: an empty one, a lone brace. Braced whole.
        for name in [&b"a{}b"[..], b"a{b", b"}{"] {
            let keys = LockKeys::new(b"p:", name);
            let expected: &[u8] = if name.contains(&b'}') { b"" } else { b"{" };
            assert!(
                keys.fence_key.starts_with(expected),
                "{:?}",
                String::from_utf8_lossy(name)
            );
        }
        assert_eq!(LockKeys::new(b"", b"a{b").fence_key, b"{a{b}:fence");
    }
}
