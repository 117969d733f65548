//! The least-privilege ACL rule latchkey needs (layer 1, vocabulary): the
//! commands, key patterns (`~`) and channel patterns (`&`) a Redis user must
//! be granted, per use. `docs/security.md` shows the same rules (a test
//! keeps the two in step), and `latchkey doctor` checks the current user
//! against them.
//!
//! ```
//! use latchkey::acl::{rule, Use};
//!
//! let rule = rule(&[Use::Locks], "latchkey:");
//! assert!(rule.starts_with("+ping +info +evalsha"));
//! assert!(rule.ends_with("~latchkey:* ~{latchkey:* &latchkey:* &{latchkey:*"));
//! ```
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
//!   `append` (the waiting mark), `publish` (the release wake-up);
//! * `subscribe`, `unsubscribe`: waiters; `ssubscribe`, `sunsubscribe`,
//!   `spublish`: the same on a cluster (sharded pub/sub);
//! * signals: `publish`, `subscribe`, `unsubscribe`, `psubscribe`,
//!   `punsubscribe` (pattern waits), `pubsub|channels` (counting waiters,
//!   and `signal_one.lua`), `evalsha`, `script|load` (`signal_one.lua`);
//! * inspection: `scan` (`list`), `pubsub|numsub` (`top`), `config|get`,
//!   `acl|whoami`, `acl|dryrun` (`doctor`), and the locks' rule for
//!   `inspect.lua` and the doctor's probe lock.

/// What a user does with latchkey; each adds commands and patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Use {
    /// Locks, fencing tokens, waiting, the watchdog, Redlock.
    Locks,
    /// Signals: `signal`, `signal_one`, `listen`, `wait`, `waiters`.
    Signals,
    /// The CLI's inspection: `status`, `list`, `top`, `exporter`, `doctor`
    /// (on top of [`Use::Locks`], which their probes and `inspect.lua` use).
    Inspection,
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
            ],
        }
    }

    /// Whether this use needs keys (locks do; signals keep none).
    fn needs_keys(self) -> bool {
        !matches!(self, Use::Signals)
    }
}

/// The key patterns for `prefix`: lock keys and layout 2 counters
/// (`P…`), layout 3 counters (`{P…}:fence`).
pub fn key_patterns(prefix: &str) -> [String; 2] {
    let p = escape(prefix);
    [format!("~{p}*"), format!("~{{{p}*")]
}

/// The channel patterns for `prefix`: signals, layout 2 release and
/// Redlock retraction channels (`P…`), layout 3 release channels
/// (`{P…}:released`; locks only).
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
}
