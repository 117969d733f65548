//! The data layout in Redis as constants, for tools that read or write it
//! beside latchkey (the whole layout is in `docs/protocol.md`). Most
//! programs never need this module.

use std::time::Duration;

/// The marker every latchkey owner token starts with; `latchkey list` uses
/// it (and version 1's, `lk1:`) to tell our locks from other keys under the
/// same prefix.
pub const TOKEN_MARKER: &str = "lk2:";

/// The prefix of version 1 tokens (latchkey 0.1), which are never marked.
pub(crate) const TOKEN_MARKER_V1: &str = "lk1:";

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

/// How much of a TTL latchkey does not trust: the clock-drift allowance of
/// the Redlock algorithm, `ttl / 100 + 2 ms`. A holder considers its lock
/// valid until `sent + ttl - drift(ttl)`, where `sent` is when the acquiring
/// (or extending) request was sent, on the monotonic clock.
pub fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}
