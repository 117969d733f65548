//! The least-privilege ACL rule latchkey needs (layer 1, vocabulary): the
//! commands, key patterns (`~`) and channel patterns (`&`) a Redis user must
//! be granted, per use. `docs/security.md` shows the same rules (a test
//! keeps the two in step, and another that every command the scripts call
//! is in them), and `latchkey doctor` checks the current user against them.
//!
//! ```
//! use latchkey::acl::{rule, Use};
//!
//! let rule = rule(&[Use::Locks], "latchkey:");
//! assert!(rule.starts_with("+ping +info +evalsha"));
//! assert!(rule.ends_with("~latchkey:* ~{latchkey:* &latchkey:* &{latchkey:*"));
//! ```
//!
//! How the uses are cut: [`Use::Locks`] is every plain lock, with all its
//! options (fencing, waiting, the watchdog, Redlock, `with_replicas`), and
//! several locks at once (`Client::lock_all`, whose scripts call the same
//! commands); an option never needs a rule of its own. [`Use::Primitives`] is everything
//! that keeps other data types than strings (fair locks' lists and sorted
//! sets, semaphores, read-write locks, latches, barriers, elections): an
//! application that only takes plain locks need not grant hash, set, list
//! and sorted-set commands. Like [`Use::Inspection`] it is granted *on top
//! of* [`Use::Locks`] (its scripts also call the lock commands, and fair
//! locks are locks) and lists only what it adds. Every key and channel of a
//! primitive is `tag_stem(P + name) + suffix` (`docs/protocol.md`), so the
//! locks' patterns cover them: no use adds patterns.
//!
//! Why each command is there (what the code sends; the scripts run with the
//! user's permissions, so what they call counts too):
//!
//! * `ping`, `info`: connecting (`INFO cluster` tells a cluster from one
//!   server) and the subscriber's health check;
//! * `evalsha`, `script|load`, `eval`: the scripts (`EVALSHA`, `SCRIPT LOAD`
//!   after a `NOSCRIPT`; a release that cleans up after a failure is sent
//!   whole with `EVAL`);
//! * `set` (a plain acquisition is a bare `SET NX PX GET`), and what the
//!   scripts call: `get`, `set`, `del`, `pexpire`, `pttl`, `type`, `time`,
//!   `append` (the waiting mark), `publish` (the release wake-up), and
//!   `exists`, `zadd`, `zrem`, `zcard`, `zpopmin` (a plain lock's waiting
//!   processes, `S:wake`, so that a release wakes one process; each is
//!   `pcall`ed: refused, every waiting process is woken instead, as in
//!   0.3; `exists`: a release looks for a fair queue);
//! * `subscribe`, `unsubscribe`: waiters; `ssubscribe`, `sunsubscribe`,
//!   `spublish`: the same on a cluster (sharded pub/sub);
//! * `wait`: `with_replicas` (`WAIT n timeout` after the acquisition; it
//!   touches no key);
//! * primitives, what their scripts call besides the locks' commands:
//!   `pexpireat` (semaphores, read-write
//!   locks), `hset`, `hget`, `hmget`, `hdel`, `hincrby` (barriers,
//!   elections), `sadd`, `srem`, `scard`, `sismember` (read-write locks),
//!   `zrange`, `zscore`, `zremrangebyscore` (semaphores, read-write locks,
//!   fair locks' leases; with the locks' `exists`, `zadd`, `zrem`,
//!   `zcard`), `rpush`, `lpop`,
//!   `lrem`, `lindex` (fair locks' queue), `lrange` (`Client::inspect` of a
//!   fair lock with waiters reads its queue); and sent plainly:
//!   `zrangebyscore` (`Semaphore::holders`), `hmget` (`Barrier::state`),
//!   `get` (`Latch::count`), `time`;
//! * signals: `publish`, `subscribe`, `unsubscribe`, `psubscribe`,
//!   `punsubscribe` (pattern waits), `pubsub|channels` (counting waiters,
//!   and `signal_one.lua`), `evalsha`, `script|load` (`signal_one.lua`);
//! * revocation: `zcount` (`revoke.lua`, counting the permits or readers
//!   it ends), on top of the locks', primitives' and inspection's rules;
//! * inspection: `scan` (`list`), `pubsub|numsub` (`top`), `config|get`,
//!   `acl|whoami`, `acl|dryrun` (`doctor`), and what `inspect_any.lua`
//!   reads of the kinds other than locks: `zrangebyscore`, `lrange`,
//!   `hmget`, `scard`; the locks' rule for the lock's part and the doctor's
//!   probe lock. `inspect_any.lua` runs a kind's command only on a key of
//!   that kind, so `Client::inspect` of a plain lock needs only the locks'
//!   rule, and of a fair lock the locks' and primitives'.

/// What a user does with latchkey; each adds commands and patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Use {
    /// Locks, fencing tokens, waiting, the watchdog, Redlock, replicated
    /// acquisition (`with_replicas`), several locks at once (`lock_all`).
    Locks,
    /// Signals: `signal`, `signal_one`, `listen`, `wait`, `waiters`.
    Signals,
    /// The CLI's inspection: `status`, `list`, `top`, `exporter`, `doctor`
    /// (on top of [`Use::Locks`], which their probes and the lock's part of
    /// `inspect_any.lua` use).
    Inspection,
    /// Fair locks, semaphores, read-write locks, latches, barriers and
    /// leader elections (on top of [`Use::Locks`], whose commands their
    /// scripts also call).
    Primitives,
    /// An operator's [`Client::revoke`](crate::Client::revoke) and
    /// `latchkey revoke`, on top of [`Use::Locks`], [`Use::Primitives`] and
    /// [`Use::Inspection`] (it finds what a name is, then revokes each kind
    /// with the commands its holders use). ACL cannot tell a revocation from
    /// the holders' own writes (a user that may write a lock's key could
    /// delete it): give this use to the operators' user only, and audit the
    /// revocations by their log line and `latchkey_revocations_total`.
    Revoke,
}

impl Use {
    /// The commands this use needs (`+` omitted; a `|` names a subcommand).
    pub fn commands(self) -> &'static [&'static str] {
        match self {
            Use::Locks => &[
                "ping",
                "info",
                "evalsha",
                "script|load",
                "eval",
                "set",
                "get",
                "del",
                "pexpire",
                "pttl",
                "type",
                "time",
                "append",
                "publish",
                "subscribe",
                "unsubscribe",
                "ssubscribe",
                "sunsubscribe",
                "spublish",
                "wait",
                // A plain lock's waiting processes (`S:wake`): one process
                // woken at a release; without them, all are.
                "exists",
                "zadd",
                "zrem",
                "zcard",
                "zpopmin",
            ],
            Use::Signals => &[
                "ping",
                "info",
                "evalsha",
                "script|load",
                "publish",
                "subscribe",
                "unsubscribe",
                "psubscribe",
                "punsubscribe",
                "pubsub|channels",
                "ssubscribe",
                "sunsubscribe",
                "spublish",
            ],
            Use::Inspection => &[
                "scan",
                "pubsub|numsub",
                "config|get",
                "acl|whoami",
                "acl|dryrun",
                "zrangebyscore",
                // inspect_any.lua: a fair queue, a barrier's and an
                // election's fields, a read-write lock's readers next.
                "lrange",
                "hmget",
                "scard",
            ],
            Use::Primitives => &[
                "pexpireat",
                "hset",
                "hget",
                "hmget",
                "hdel",
                "hincrby",
                "sadd",
                "srem",
                "scard",
                "sismember",
                "zrange",
                "zrangebyscore",
                "zscore",
                "zremrangebyscore",
                "rpush",
                "lpop",
                "lrem",
                "lindex",
                // inspect_any.lua reads a fair queue in order: a fair
                // lock's user may inspect it (`Client::inspect`).
                "lrange",
            ],
            // revoke.lua counts a sorted set's unexpired members.
            Use::Revoke => &["zcount"],
        }
    }

    /// Whether this use needs keys (locks do; signals keep none).
    fn needs_keys(self) -> bool {
        !matches!(self, Use::Signals)
    }
}

/// The key patterns for `prefix`: lock keys (`P…`), counters
/// (`{P…}:fence`) and every primitive's keys (`{P…}:permits`,
/// `{P…}:queue`, …; `P…:…` for a name with its own hash tag).
pub fn key_patterns(prefix: &str) -> [String; 2] {
    let p = escape(prefix);
    [format!("~{p}*"), format!("~{{{p}*")]
}

/// The channel patterns for `prefix`: signals (`P…`; and every channel of
/// a name with its own hash tag), release and Redlock retraction channels
/// (`{P…}:released`, `{P…}:retracted`; locks only) and the primitives'
/// channels (`{P…}:permits:released`, `{P…}:handoff:…`, …).
pub fn channel_patterns(prefix: &str) -> [String; 2] {
    let p = escape(prefix);
    [format!("&{p}*"), format!("&{{{p}*")]
}

/// The rule for `uses` with key prefix `prefix`, as `ACL SETUSER` takes it
/// after the user name: commands (each once, in order), then key and
/// channel patterns. Add `on >password` (and `resetkeys resetchannels -@all`
/// to start from nothing) yourself.
pub fn rule(uses: &[Use], prefix: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    for command in uses.iter().flat_map(|u| u.commands()) {
        let plus = format!("+{command}");
        if !parts.contains(&plus) {
            parts.push(plus);
        }
    }
    let [signals, releases] = channel_patterns(prefix);
    if uses.iter().any(|u| u.needs_keys()) {
        parts.extend(key_patterns(prefix));
        parts.extend([signals, releases]);
    } else {
        parts.push(signals);
    }
    parts.join(" ")
}

/// `prefix` with the glob characters of ACL patterns escaped.
fn escape(prefix: &str) -> String {
    let mut out = String::with_capacity(prefix.len());
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_merge_commands_and_escape_the_prefix() {
        let both = rule(&[Use::Locks, Use::Signals], "app*:");
        assert_eq!(both.matches("+evalsha ").count(), 1);
        assert!(both.contains("+psubscribe"));
        assert!(both.ends_with("~app\\*:* ~{app\\*:* &app\\*:* &{app\\*:*"));
        let signals = rule(&[Use::Signals], "latchkey:");
        assert!(!signals.contains('~'), "signals keep no keys: {signals}");
        assert!(signals.ends_with(" &latchkey:*"), "{signals}");
    }

    #[test]
    fn primitives_list_only_what_they_add_to_locks() {
        let locks = Use::Locks.commands();
        for command in Use::Primitives.commands() {
            assert!(!locks.contains(command), "{command} is a lock command");
        }
        let both = rule(&[Use::Locks, Use::Primitives], "latchkey:");
        assert!(both.starts_with(&rule(&[Use::Locks], "latchkey:")[..60]));
        assert!(both.contains(" +zpopmin +pexpireat +hset "), "{both}");
        assert!(
            both.ends_with(" +lindex +lrange ~latchkey:* ~{latchkey:* &latchkey:* &{latchkey:*")
        );
    }
}
