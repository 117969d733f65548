//! [`Client::list_all`](crate::Client::list_all): every primitive whose
//! name matches a glob. Names are found from their keys (a lock key
//! `P + name`, or any primitive's `S + suffix`), then each is described
//! with one script call, pipelined.

use std::collections::BTreeSet;

use futures_util::{StreamExt, TryStreamExt};

use super::kinds::PrimitiveInfo;
use super::{escape_glob, is_lock, INSPECT_IN_FLIGHT};
use crate::vocab::error::{Error, Result};
use crate::vocab::protocol::{
    primitive_key, BARRIER_SUFFIX, ELECTION_LEASE_SUFFIX, ELECTION_STATE_SUFFIX, FENCE_SUFFIX,
    LATCH_SUFFIX, LEASES_SUFFIX, PERMITS_SUFFIX, QUEUE_SUFFIX, RWLOCK_SUFFIXES,
};

/// The suffixes whose key alone tells that a name is in use (a channel
/// keeps no key; a waiting-readers set is never alone).
const KEY_SUFFIXES: [&[u8]; 12] = [
    FENCE_SUFFIX,
    QUEUE_SUFFIX,
    LEASES_SUFFIX,
    PERMITS_SUFFIX,
    RWLOCK_SUFFIXES[0],
    RWLOCK_SUFFIXES[1],
    RWLOCK_SUFFIXES[2],
    RWLOCK_SUFFIXES[3],
    LATCH_SUFFIX,
    BARRIER_SUFFIX,
    ELECTION_LEASE_SUFFIX,
    ELECTION_STATE_SUFFIX,
];

impl super::Inspector<'_> {
    /// See [`Client::list_all`](crate::Client::list_all).
    pub(crate) async fn list_all(&self, pattern: &[u8]) -> Result<Vec<PrimitiveInfo>> {
        let prefix = self.prefix();
        let glob: Vec<u8> = [&escape_glob(prefix)[..], pattern].concat();
        let mut keys = self.scan_keys(&glob, None).await?;
        // Layout 3 stems, `{P + name}:…`.
        let braced: Vec<u8> = [b"{", &glob[..], b"}:*"].concat();
        keys.extend(self.scan_keys(&braced, None).await?);
        // Names with their own hash tag, `P + name:…` (already in the first scan when the pattern ends with `*`).
        if !pattern.ends_with(b"*") || pattern.ends_with(b"\\*") {
            let suffixed: Vec<u8> = [&glob[..], b":*"].concat();
            keys.extend(self.scan_keys(&suffixed, None).await?);
        }
        let names: BTreeSet<Vec<u8>> = keys
            .iter()
            .flat_map(|key| candidate_names(prefix, key))
            .filter(|name| glob_matches(pattern, name))
            .collect();
        let described: Vec<Vec<PrimitiveInfo>> = futures_util::stream::iter(names)
            .map(|name| async move {
                match self.describe_key(&name).await {
                    // A key changed type under us: report what can be read.
                    Err(Error::WrongType { .. }) => Ok(Vec::new()),
                    other => other,
                }
            })
            .buffered(INSPECT_IN_FLIGHT)
            .try_collect()
            .await?;
        Ok(described
            .into_iter()
            .flatten()
            // Another program's string key under the prefix is no lock of ours.
            .filter(|info| match info {
                PrimitiveInfo::Lock(lock) => is_lock(lock),
                _ => true,
            })
            .collect())
    }
}

/// The names `key` may belong to: itself minus the prefix (a lock key), and
/// the name whose primitive key it is, for each suffix it ends with (checked
/// by recomputing the key).
fn candidate_names(prefix: &[u8], key: &[u8]) -> Vec<Vec<u8>> {
    let mut names = Vec::new();
    if let Some(name) = key.strip_prefix(prefix) {
        if !name.is_empty() {
            names.push(name.to_vec());
        }
    }
    for suffix in KEY_SUFFIXES {
        let Some(stem) = key.strip_suffix(suffix) else {
            continue;
        };
        let inner = stem
            .strip_prefix(b"{")
            .and_then(|s| s.strip_suffix(b"}"))
            .unwrap_or(stem);
        for candidate in [inner, stem] {
            if let Some(name) = candidate.strip_prefix(prefix) {
                if !name.is_empty() && primitive_key(prefix, name, suffix) == key {
                    names.push(name.to_vec());
                }
            }
        }
    }
    names
}

/// Whether `text` matches the Redis glob `pattern` (`*`, `?`, `[abc]`,
/// `[^a-z]`, `\x`), as `SCAN … MATCH` does: names found under a suffix are
/// matched here, since the scan matched their keys, not their names.
pub(crate) fn glob_matches(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|i| glob_matches(rest, &text[i..])),
        Some((b'?', rest)) => !text.is_empty() && glob_matches(rest, &text[1..]),
        Some((b'[', rest)) => {
            let Some((&c, text_rest)) = text.split_first() else {
                return false;
            };
            let (negated, mut p) = match rest.split_first() {
                Some((b'^', r)) => (true, r),
                _ => (false, rest),
            };
            let mut hit = false;
            loop {
                match p {
                    [] => break,
                    [b']', r @ ..] => {
                        p = r;
                        break;
                    }
                    [b'\\', x, r @ ..] => {
                        hit |= *x == c;
                        p = r;
                    }
                    [lo, b'-', hi, r @ ..] if *hi != b']' => {
                        let (lo, hi) = if lo <= hi { (*lo, *hi) } else { (*hi, *lo) };
                        hit |= (lo..=hi).contains(&c);
                        p = r;
                    }
                    [x, r @ ..] => {
                        hit |= *x == c;
                        p = r;
                    }
                }
            }
            hit != negated && glob_matches(p, text_rest)
        }
        Some((b'\\', [x, rest @ ..])) => text.first() == Some(x) && glob_matches(rest, &text[1..]),
        Some((x, rest)) => text.first() == Some(x) && glob_matches(rest, &text[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_redis_does() {
        assert!(glob_matches(b"*", b"anything"));
        assert!(glob_matches(b"job-?", b"job-1"));
        assert!(!glob_matches(b"job-?", b"job-12"));
        assert!(glob_matches(b"job-[0-9]", b"job-7"));
        assert!(!glob_matches(b"job-[^0-9]", b"job-7"));
        assert!(glob_matches(b"a\\*b", b"a*b"));
        assert!(!glob_matches(b"a\\*b", b"axb"));
        assert!(glob_matches(b"nightly-*", b"nightly-report"));
        assert!(!glob_matches(b"nightly-*", b"daily"));
    }

    #[test]
    fn keys_name_their_primitive() {
        let names = |key: &[u8]| candidate_names(b"lk:", key);
        assert!(names(b"{lk:jobs}:permits").contains(&b"jobs".to_vec()));
        assert!(names(b"{lk:cfg}:rw:writer").contains(&b"cfg".to_vec()));
        assert!(names(b"{lk:go}:latch").contains(&b"go".to_vec()));
        assert!(names(b"{lk:a}:election").contains(&b"a".to_vec()));
        // A name with its own hash tag keeps it: `P + name + suffix`.
        assert!(names(b"lk:{u}:x:barrier").contains(&b"{u}:x".to_vec()));
        // A lock key; `P + name:fence` is no counter of `name` (it has no
        // hash tag of its own: its counter is `{P + name}:fence`).
        assert!(names(b"lk:plain").contains(&b"plain".to_vec()));
        assert!(!names(b"lk:old:fence").contains(&b"old".to_vec()));
        // Not ours: another prefix.
        assert!(names(b"{other:x}:permits").is_empty());
    }
}
