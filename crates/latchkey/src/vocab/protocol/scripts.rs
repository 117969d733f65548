//! The Lua scripts, loaded once per process. Each `.lua` file starts with a
//! header comment that documents its KEYS, ARGV and replies; the layout they
//! act on is in `docs/protocol.md`.
//!
//! redis-rs sends a script as `EVALSHA` and, on `NOSCRIPT` (after a
//! `SCRIPT FLUSH` or a restart), loads it and retries, so callers never see
//! the script cache.

use std::sync::LazyLock;

use redis::Script;

/// A script's text: its file after the idioms every script shares
/// (`scripts/shared/lib.lua`: the clock, publishing, the owner check); for
/// the scripts that issue or raise tokens, after the shared
/// fencing-counter rules too (`scripts/shared/fence.lua`); for the scripts
/// a waiter marks a busy lock with (and the release that wakes it), after
/// those and the waiter's mark and wake-up (`scripts/shared/mark.lua`); for the scripts that read a fair queue,
/// after the fencing rules and a fair waiter's liveness
/// (`scripts/shared/live.lua`), and for those that end a fair hold, after
/// those and the hand-on to the next waiter (`scripts/shared/hand_on.lua`).
/// One text is both sent and kept in [`SOURCES`], so a line number in an
/// error names the line Redis ran.
macro_rules! text {
    (file $file:literal) => {
        include_str!(concat!("../../scripts/", $file))
    };
    (plain $file:literal) => {
        concat!(text!(file "shared/lib.lua"), text!(file $file))
    };
    (fence $file:literal) => {
        concat!(
            text!(file "shared/lib.lua"),
            text!(file "shared/fence.lua"),
            text!(file $file)
        )
    };
    (queued $file:literal) => {
        concat!(
            text!(file "shared/lib.lua"),
            text!(file "shared/fence.lua"),
            text!(file "shared/live.lua"),
            text!(file $file)
        )
    };
    (fair $file:literal) => {
        concat!(
            text!(file "shared/lib.lua"),
            text!(file "shared/fence.lua"),
            text!(file "shared/live.lua"),
            text!(file "shared/hand_on.lua"),
            text!(file $file)
        )
    };
    (mark $file:literal) => {
        concat!(
            text!(file "shared/lib.lua"),
            text!(file "shared/fence.lua"),
            text!(file "shared/mark.lua"),
            text!(file $file)
        )
    };
}

/// Declares each script's static (loaded once, its hash computed once) and
/// [`SOURCES`], every script's file name and text, from one list: each
/// script is `plain` (after the shared idioms), `fence` (after those and
/// the shared counter rules), `mark` (after those and the shared mark),
/// `queued` (after the counter rules and a fair waiter's liveness) or
/// `fair` (after those and the shared fair hand-on).
macro_rules! scripts {
    ($($name:ident = $prelude:ident $file:literal;)*) => {
        $(
            pub(crate) static $name: LazyLock<Script> =
                LazyLock::new(|| Script::new(text!($prelude $file)));
        )*
        /// Every script's file name and text, for naming the command a
        /// script's line runs when Redis refuses it without saying which
        /// (`vocab/error/acl.rs`).
        pub(crate) const SOURCES: &[(&str, &str)] = &[$(($file, text!($prelude $file))),*];
    };
}

scripts! {
    ACQUIRE = mark "acquire.lua";
    ISSUE_FENCE = fence "issue_fence.lua";
    RELEASE = mark "release.lua";
    EXTEND = plain "extend.lua";
    MULTI_ACQUIRE = mark "multi_acquire.lua";
    MULTI_EXTEND = plain "multi_extend.lua";
    MULTI_RELEASE = plain "multi_release.lua";
    INSPECT_ANY = plain "inspect_any.lua";
    FENCED_WRITE = plain "fenced_write.lua";
    FENCED_RAISE = plain "fenced_raise.lua";
    REVOKE = fence "revoke.lua";
    RAISE_FENCE = fence "raise_fence.lua";
    SIGNAL_ONE = plain "signal_one.lua";
    LATCH_CREATE = plain "latch_create.lua";
    LATCH_COUNT_DOWN = plain "latch_count_down.lua";
    BARRIER_ARRIVE = plain "barrier_arrive.lua";
    BARRIER_LEAVE = plain "barrier_leave.lua";
    SEM_ACQUIRE = fence "sem_acquire.lua";
    SEM_EXTEND = plain "sem_extend.lua";
    SEM_FENCE = fence "sem_fence.lua";
    SEM_RELEASE = plain "sem_release.lua";
    RW_ACQUIRE = fence "rw_acquire.lua";
    RW_RELEASE_WRITE = plain "rw_release_write.lua";
    RW_FORGET = plain "rw_forget.lua";
    FAIR_ACQUIRE = queued "fair_acquire.lua";
    FAIR_RELEASE = fair "fair_release.lua";
    FAIR_LEAVE = fair "fair_leave.lua";
    FAIR_REVOKE = fair "fair_revoke.lua";
    FAIR_RENEW = queued "fair_renew.lua";
    ELECT_CAMPAIGN = plain "elect_campaign.lua";
    ELECT_PROCLAIM = plain "elect_proclaim.lua";
    ELECT_RESIGN = plain "elect_resign.lua";
    ELECT_LEADER = plain "elect_leader.lua";
}

/// The release script's text, sent whole (`EVAL`) by releases that clean up
/// after a failure: one round trip whatever the script cache holds, so a
/// lost `NOSCRIPT` reply cannot stop it.
pub(crate) const RELEASE_BODY: &str = text!(mark "release.lua");
/// The extend script's text, sent whole (`EVAL`) in the pipeline that
/// confirms a hold with its replicas (`backend/replicas.rs`).
pub(crate) const EXTEND_BODY: &str = text!(plain "extend.lua");

#[cfg(test)]
mod tests {
    #[test]
    fn every_script_file_is_in_sources() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/scripts");
        let files = std::fs::read_dir(dir)
            .expect("the scripts")
            .filter(|entry| entry.as_ref().is_ok_and(|e| e.path().is_file()))
            .count();
        assert_eq!(
            files,
            super::SOURCES.len(),
            "a script is missing from SOURCES"
        );
    }

    /// Proxies and managed services that parse scripts (to route them, or
    /// to check them against an ACL) need every command named literally;
    /// a script that runs whatever command its caller names is also a wider
    /// door than it needs.
    #[test]
    fn every_command_a_script_runs_is_named_literally() {
        let mut bad = Vec::new();
        for (file, text) in super::SOURCES {
            for (n, line) in text.lines().enumerate() {
                let code = line.split("--").next().unwrap_or_default();
                for call in ["redis.call(", "redis.pcall("] {
                    for (at, _) in code.match_indices(call) {
                        let rest = code[at + call.len()..].trim_start();
                        if !rest.starts_with('\'') {
                            bad.push(format!("{file}:{}: {}", n + 1, line.trim()));
                        }
                    }
                }
            }
        }
        assert!(
            bad.is_empty(),
            "commands named through a variable:\n{}",
            bad.join("\n")
        );
    }
}
