//! The arguments of `latchkey run` (a lock, `--permits`, `--read` or
//! `--write`, `--and`), shared by `run` (`commands/run/mod.rs`), `run
//! --permits` (`permits.rs`) and `run --and` (`multi.rs`), and what CMD
//! gets from them.

use std::ffi::OsString;
use std::time::Duration;

use clap::Args;

use crate::support::duration;
use crate::support::exit::{self, Failure, Outcome};
use crate::support::hold_args::HoldArgs;
use crate::support::supervise::Ended;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The lock's name.
    pub name: String,

    /// Lock TTL. The watchdog renews it every third of this while CMD runs;
    /// if latchkey dies, the lock frees itself after at most this long.
    #[arg(long, value_name = "D", value_parser = duration::parse_ttl, default_value = "30s")]
    pub ttl: Duration,

    #[command(flatten)]
    pub wait: HoldArgs,

    /// Exit code when the lock is busy or the wait timed out.
    #[arg(short = 'E', long = "conflict-exit-code", value_name = "N", default_value_t = exit::CONFLICT, allow_negative_numbers = true)]
    pub conflict_exit_code: u8,

    /// A cap on the hold, even with the watchdog renewing it: renewals never
    /// take it past D after it was acquired, so a CMD that is stuck loses
    /// it (SIGTERM, then --grace; exit 75) within max(D, --ttl). Default:
    /// none.
    #[arg(long = "max-hold", value_name = "D", value_parser = duration::parse)]
    pub max_hold: Option<Duration>,

    /// After the lock is lost: time between SIGTERM and SIGKILL to CMD's process group.
    #[arg(long, value_name = "D", value_parser = duration::parse, default_value = "5s")]
    pub grace: Duration,

    /// Take one of N permits of a semaphore called NAME instead of the lock:
    /// at most N commands run at once, across machines (1 to 100000).
    /// Not FIFO and not replicated: refused with --fair and --replicas.
    #[arg(long, value_name = "N", value_parser = crate::support::count::parse, allow_negative_numbers = true, conflicts_with_all = ["read", "write", "fair", "waiter_lease", "replicas"])]
    pub permits: Option<u64>,

    /// With --permits: take K of the N permits at once, all or none (1 to
    /// N): CMD runs while it holds the K, and waits until K are free
    /// together (woken by every release; not protected from smaller
    /// holders that keep taking each permit as it is freed) [default: 1]
    #[arg(long, value_name = "K", value_parser = crate::support::count::parse, allow_negative_numbers = true, requires = "permits")]
    pub take: Option<u64>,

    /// When NAME is busy, ask its holder to let go (as `latchkey
    /// request-release NAME` does: a `run` holder's CMD gets SIGTERM, then
    /// its grace), then wait as usual. Asks each holder once: at the first
    /// wait, and again when someone else holds it by then. Never when NAME
    /// is free.
    #[arg(long)]
    pub ask: bool,

    /// Hold the read-write lock NAME as one of many readers (no writer
    /// runs meanwhile; a waiting writer stops new readers). Refused with
    /// --fair and --replicas.
    #[arg(long, conflicts_with_all = ["write", "fair", "waiter_lease", "replicas"])]
    pub read: bool,

    /// Hold the read-write lock NAME as its one writer (no reader or other
    /// writer runs meanwhile). Refused with --fair and --replicas.
    #[arg(long, conflicts_with_all = ["fair", "waiter_lease", "replicas"])]
    pub write: bool,

    /// Also hold the lock NAME2 (repeatable): CMD runs while it holds NAME
    /// and every --and lock, taken together or not at all, whatever order
    /// other runs name them in (no deadlock). CMD gets one fencing token
    /// per lock (LATCHKEY_FENCING_TOKEN_1 for NAME, _2 for the first --and,
    /// ...). Losing any stops CMD (exit 75). One server or one cluster; not
    /// with --permits, --read, --write, --fair or --replicas.
    #[arg(long = "and", value_name = "NAME2", conflicts_with_all = ["permits", "read", "write", "fair", "waiter_lease", "replicas"])]
    pub and: Vec<String>,

    /// The command to run and its arguments (after `--`).
    #[arg(value_name = "CMD", required = true, trailing_var_arg = true)]
    pub command: Vec<OsString>,
}

/// CMD's environment: the lock's (or permit's) name, its owner token and
/// its fencing token (if issued; `Target::lock` locks are `with_fencing`).
pub(crate) fn command_env(
    args: &RunArgs,
    token: &str,
    fencing_token: Option<u64>,
) -> Vec<(&'static str, String)> {
    vec![
        ("LATCHKEY_NAME", args.name.clone()),
        ("LATCHKEY_TOKEN", token.to_owned()),
        (
            "LATCHKEY_FENCING_TOKEN",
            fencing_token.map_or_else(String::new, |t| t.to_string()),
        ),
    ]
}

/// `run`'s outcome for how CMD ended; `what` names the lock (or permit).
pub(crate) fn ended_outcome(ended: Result<Ended, Failure>, what: &str) -> Outcome {
    match ended? {
        Ended::Exited(code) => Ok(code),
        Ended::Lost(how) => Err(Failure::new(
            exit::LOCK_LOST,
            format!(
                "lost {what} while the command ran (expired or taken over); {how} to the command"
            ),
        )),
    }
}
