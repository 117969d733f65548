//! The Lua scripts, loaded once per process. Each `.lua` file starts with a
//! header comment that documents its KEYS, ARGV and replies; the layout they
//! act on is in `docs/protocol.md`.
//!
//! redis-rs sends a script as `EVALSHA` and, on `NOSCRIPT` (after a
//! `SCRIPT FLUSH` or a restart), loads it and retries, so callers never see
//! the script cache.

use std::sync::LazyLock;

use redis::Script;

pub(crate) static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/acquire.lua")));
pub(crate) static ISSUE_FENCE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/issue_fence.lua")));
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_BODY));
/// The release script's text, sent whole (`EVAL`) by releases that clean up
/// after a failure: one round trip whatever the script cache holds, so a
/// lost `NOSCRIPT` reply cannot stop it.
pub(crate) const RELEASE_BODY: &str = include_str!("scripts/release.lua");
pub(crate) static EXTEND: LazyLock<Script> = LazyLock::new(|| Script::new(EXTEND_BODY));
/// The extend script's text, sent whole (`EVAL`) in the pipeline that
/// confirms a hold with its replicas (`backend/replicas.rs`).
pub(crate) const EXTEND_BODY: &str = include_str!("scripts/extend.lua");
pub(crate) static INSPECT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/inspect.lua")));
pub(crate) static FENCED_WRITE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/fenced_write.lua")));
pub(crate) static RAISE_FENCE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/raise_fence.lua")));
pub(crate) static SIGNAL_ONE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/signal_one.lua")));
pub(crate) static LATCH_CREATE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/latch_create.lua")));
pub(crate) static LATCH_COUNT_DOWN: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/latch_count_down.lua")));
pub(crate) static BARRIER_ARRIVE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/barrier_arrive.lua")));
pub(crate) static BARRIER_LEAVE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/barrier_leave.lua")));
pub(crate) static SEM_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/sem_acquire.lua")));
pub(crate) static SEM_EXTEND: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/sem_extend.lua")));
pub(crate) static SEM_RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/sem_release.lua")));
pub(crate) static RW_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/rw_acquire.lua")));
pub(crate) static RW_RELEASE_WRITE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/rw_release_write.lua")));
pub(crate) static RW_FORGET: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/rw_forget.lua")));
pub(crate) static FAIR_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/fair_acquire.lua")));
pub(crate) static FAIR_RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/fair_release.lua")));
pub(crate) static ELECT_CAMPAIGN: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/elect_campaign.lua")));
pub(crate) static ELECT_PROCLAIM: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/elect_proclaim.lua")));
pub(crate) static ELECT_RESIGN: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/elect_resign.lua")));
pub(crate) static ELECT_LEADER: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/elect_leader.lua")));

/// Every script's file name and text, for naming the command a script's
/// line runs when Redis refuses it without saying which (`error_acl.rs`).
pub(crate) const SOURCES: [(&str, &str); 24] = [
    ("acquire.lua", include_str!("scripts/acquire.lua")),
    (
        "barrier_arrive.lua",
        include_str!("scripts/barrier_arrive.lua"),
    ),
    (
        "barrier_leave.lua",
        include_str!("scripts/barrier_leave.lua"),
    ),
    (
        "elect_campaign.lua",
        include_str!("scripts/elect_campaign.lua"),
    ),
    ("elect_leader.lua", include_str!("scripts/elect_leader.lua")),
    (
        "elect_proclaim.lua",
        include_str!("scripts/elect_proclaim.lua"),
    ),
    ("elect_resign.lua", include_str!("scripts/elect_resign.lua")),
    ("extend.lua", include_str!("scripts/extend.lua")),
    ("fair_acquire.lua", include_str!("scripts/fair_acquire.lua")),
    ("fair_release.lua", include_str!("scripts/fair_release.lua")),
    ("fenced_write.lua", include_str!("scripts/fenced_write.lua")),
    ("inspect.lua", include_str!("scripts/inspect.lua")),
    ("issue_fence.lua", include_str!("scripts/issue_fence.lua")),
    (
        "latch_count_down.lua",
        include_str!("scripts/latch_count_down.lua"),
    ),
    ("latch_create.lua", include_str!("scripts/latch_create.lua")),
    ("raise_fence.lua", include_str!("scripts/raise_fence.lua")),
    ("release.lua", include_str!("scripts/release.lua")),
    ("rw_acquire.lua", include_str!("scripts/rw_acquire.lua")),
    ("rw_forget.lua", include_str!("scripts/rw_forget.lua")),
    (
        "rw_release_write.lua",
        include_str!("scripts/rw_release_write.lua"),
    ),
    ("sem_acquire.lua", include_str!("scripts/sem_acquire.lua")),
    ("sem_extend.lua", include_str!("scripts/sem_extend.lua")),
    ("sem_release.lua", include_str!("scripts/sem_release.lua")),
    ("signal_one.lua", include_str!("scripts/signal_one.lua")),
];

#[cfg(test)]
mod tests {
    #[test]
    fn every_script_file_is_in_sources() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/scripts");
        let files = std::fs::read_dir(dir).expect("the scripts").count();
        assert_eq!(
            files,
            super::SOURCES.len(),
            "a script is missing from SOURCES"
        );
    }
}
