//! The arguments of `latchkey run` (a lock, `--permits`, `--read` or
//! `--write`, `--and`), shared by `run` (`commands/run/mod.rs`), `run
//! --permits` (`permits.rs`) and `run --and` (`multi.rs`), and what CMD
//! gets from them.

use std::ffi::OsString;
use std::time::Duration;

use clap::Args;

use crate::support::duration;
use crate::support::exit::{self, Failure};
use crate::support::hold_args::HoldArgs;

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
    /// take it past D after it was acquired; CMD gets SIGTERM --grace before
    /// D (at most D/2 before) and SIGKILL at D; exit 75. At least 100ms.
    /// Default: none.
    #[arg(long = "max-hold", value_name = "D", value_parser = duration::parse_max_hold, allow_hyphen_values = true)]
    pub max_hold: Option<Duration>,

    /// Keep the lock at least D from when it was taken: when CMD ends
    /// sooner, the lock stays until then (extended to the time left, then
    /// left to expire), so that a job another machine starts a moment
    /// later does not run it again. CMD's exit code is still run's. Within
    /// the TTL's bounds. Default: none.
    #[arg(long = "hold-at-least", value_name = "D", value_parser = duration::parse_ttl, allow_hyphen_values = true)]
    pub hold_at_least: Option<Duration>,

    /// How long CMD has to stop: when the lock can no longer be proven
    /// ours, CMD gets SIGTERM this long before the lock could end (at most
    /// half the --ttl, half the --max-hold), and SIGKILL at the end; after
    /// a release request or a forwarded signal, SIGKILL this long after
    /// SIGTERM.
    #[arg(long, value_name = "D", value_parser = duration::parse, default_value = "5s", allow_hyphen_values = true)]
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
    #[arg(long, value_name = "K", value_parser = crate::support::count::parse, allow_negative_numbers = true)]
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

impl RunArgs {
    /// The usage errors no argument parser can see (combinations and
    /// bounds), before anything connects: exit 2 even with Redis down.
    pub(crate) fn check(&self) -> Result<(), Failure> {
        if let Some(k) = self.take {
            let mode = [
                (self.read, "--read"),
                (self.write, "--write"),
                (self.wait.fair, "--fair"),
                (!self.and.is_empty(), "--and"),
            ]
            .into_iter()
            .find_map(|(on, flag)| on.then_some(flag));
            if let Some(flag) = mode {
                return Err(Failure::usage(format!(
                    "--take {k} is for --permits only, not {flag}: it takes K of a semaphore's permits"
                )));
            }
            match self.permits {
                None => {
                    return Err(Failure::usage(format!(
                        "--take {k} needs --permits N: it takes K of a semaphore's N permits"
                    )))
                }
                Some(n) if k > n => {
                    return Err(Failure::usage(format!(
                    "--take {k} is more than --permits {n}: at most N permits can be taken at once"
                )))
                }
                Some(_) => {}
            }
        }
        let mut seen = std::collections::HashSet::new();
        for name in std::iter::once(&self.name).chain(&self.and) {
            if !seen.insert(name) {
                return Err(Failure::usage(format!(
                    "{name:?} is given twice (NAME and --and): name each lock once"
                )));
            }
        }
        if self.ask && self.wait.no_wait {
            return Err(Failure::usage(
                "--ask asks a busy lock's holder while waiting, and --no-wait does not wait; use `latchkey request-release NAME` to only ask",
            ));
        }
        Ok(())
    }
}

/// CMD's environment: the lock's (or permit's) name, its owner token and
/// its fencing token (if issued; `Target::lock` locks are `with_fencing`).
pub(crate) fn command_env(
    args: &RunArgs,
    token: &str,
    fencing_token: Option<u64>,
) -> Vec<(String, String)> {
    vec![
        ("LATCHKEY_NAME".to_owned(), args.name.clone()),
        ("LATCHKEY_TOKEN".to_owned(), token.to_owned()),
        (
            "LATCHKEY_FENCING_TOKEN".to_owned(),
            fencing_token.map_or_else(String::new, |t| t.to_string()),
        ),
    ]
}
