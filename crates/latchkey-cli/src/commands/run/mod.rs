//! `latchkey run NAME [--ttl D] [--wait D | --no-wait] [--ask] [-E N] [--grace D] -- CMD [ARGS...]`:
//! a distributed `flock(1)`.
//!
//! ```sh
//! # In cron on every machine: at most one report runs at a time; skip if busy.
//! latchkey run nightly-report --no-wait -E 0 -- ./report.sh
//! ```
//!
//! 1. Acquire the lock (waiting up to `--wait`, forever by default; with
//!    `--ask`, asking a busy lock's holder to let go first). A
//!    SIGINT/SIGTERM/SIGHUP while waiting ends the wait: exit 128+signal.
//! 2. Re-check the hold with a round trip; if it ran out or was taken before
//!    CMD could start (we were paused), wait again within `--wait`. Start
//!    CMD under a guardian (`supervise.rs`, `guardian.rs`) in its own
//!    process group with `LATCHKEY_NAME`, `LATCHKEY_TOKEN` and
//!    `LATCHKEY_FENCING_TOKEN` in its environment. The watchdog renews the
//!    lock every `ttl / 3`; the guardian kills the group if `latchkey` dies
//!    or stops renewing, and Ctrl-Z stops the group with `latchkey`.
//! 3. SIGINT, SIGTERM and SIGHUP sent to `latchkey` are forwarded to CMD's
//!    process group (so `sh -c 'a | b'` reaches `a` and `b` too).
//! 4. If the lock is lost while CMD runs (a renewal finds it gone or taken,
//!    or Redis stays unreachable until the lease runs out), the process group
//!    gets SIGTERM, and SIGKILL if anything in it is still alive after
//!    `--grace`; `latchkey` exits 75.
//! 5. When CMD exits, the lock is released and `latchkey` exits with CMD's
//!    code (128+N if a signal N killed it).
//!
//! `run NAME --and NAME2 -- CMD` holds several locks at once, all or
//! nothing (`multi.rs`); `--permits` and `--read`/`--write` hold a
//! semaphore's permit or a read-write lock (`permits.rs`).
//!
//! `run` waits for CMD itself, not for background processes CMD leaves
//! behind (like `flock`). Because CMD has its own process group, it is not in
//! the terminal's foreground group: a CMD that reads from the terminal is
//! stopped (SIGTTIN), so give interactive commands their input another way.

mod multi;
mod permits;

use std::time::{Duration, Instant};

use latchkey::{Lock, LockGuard, Ownership};

use crate::support::duration;
use crate::support::exit::Outcome;
use crate::support::hold_args::HoldArgs;
pub use crate::support::run_args::RunArgs;
use crate::support::run_args::{command_env, ended_outcome};
use crate::support::signals::{interrupted, Signals};
use crate::support::supervise::{self, Leased, Started};
use crate::support::target::Target;

pub async fn run(target: &Target, args: RunArgs) -> Outcome {
    // Installed first, so that a signal while waiting ends the wait cleanly
    // (the acquire future is cancel safe) instead of killing us mid-request.
    let mut signals = Signals::install()?;
    if args.permits.is_some() || args.read || args.write {
        return permits::run(target, &args, signals).await;
    }
    if !args.and.is_empty() {
        return multi::run(target, &args, signals).await;
    }
    // Started while Redis is down: connecting is retried within the wait's
    // budget (`patience.rs`), and a signal ends it as it ends the wait.
    let connected = tokio::select! {
        connected = target.lock_within(&args.name, args.ttl, args.wait.patience()) => connected?,
        signo = signals.recv() => {
            return Err(interrupted(signo, &format!("connecting for lock {:?}", args.name)));
        }
    };
    let mut lock = args
        .wait
        .replicated(args.wait.fair_or_not(connected)?.with_watchdog())?;
    if let Some(cap) = args.max_hold {
        lock = lock.with_max_hold(cap)?;
    }
    if args.ask {
        lock = lock.with_asking();
    }
    // `--wait` counts from the start, connecting included.
    let wait_until = args.wait.deadline();
    loop {
        let acquired = tokio::select! {
            acquired = acquire_until(&lock, &args.wait, wait_until) => acquired,
            signo = signals.recv() => {
                return Err(interrupted(signo, &format!("waiting for lock {:?}", args.name)));
            }
        };
        let guard =
            acquired.map_err(|e| args.wait.failed(&args.name, e, args.conflict_exit_code))?;
        let Some(guard) = guard else {
            return Err(args
                .wait
                .busy(target, &args.name, args.conflict_exit_code)
                .await);
        };
        let env = command_env(&args, guard.token(), guard.issued_fencing_token());
        let lease = Leased {
            guard: &guard,
            ttl: args.ttl,
        };
        let ended = match supervise::start(&lease, &args.command, &env).await {
            Ok(Started::Running(guardian)) => {
                supervise::supervise(guardian, &lease, &mut signals, args.grace).await
            }
            Ok(Started::TooLate) => {
                // Issue 28 item 1: a hold whose deadline passed before CMD
                // could start (we were paused) is no hold: wait again.
                tracing::warn!(lock = %args.name, "the hold ran out before the command could start; waiting again");
                release(guard, &args.name, args.ttl).await;
                continue;
            }
            Err(failure) => Err(failure),
        };
        release(guard, &args.name, args.ttl).await;
        let what = format!("lock {:?}", args.name);
        return ended_outcome(ended, &what);
    }
}

/// One acquisition: at once (`--no-wait`), until `until` (`--wait`), or for
/// as long as it takes. `None` when the lock stayed busy.
async fn acquire_until(
    lock: &Lock,
    wait: &HoldArgs,
    until: Option<Instant>,
) -> latchkey::Result<Option<LockGuard>> {
    if wait.no_wait {
        return lock.try_acquire().await;
    }
    if until.is_some_and(|until| until <= Instant::now()) {
        return Ok(None);
    }
    // An outage is ridden out within the wait's budget (`patience.rs`).
    wait.patiently("waiting for the lock", || async move {
        match until {
            Some(until) => lock.acquire_until(until).await,
            None => lock.acquire().await,
        }
    })
    .await
}

/// Releases the lock after CMD ended. A failure is not CMD's failure: warn,
/// since the lock then frees itself at its TTL.
async fn release(guard: LockGuard, name: &str, ttl: Duration) {
    match guard.release().await {
        Ok(Ownership::Owned) => {}
        Ok(outcome) => tracing::debug!(?outcome, "the lock was no longer ours at release"),
        Err(e) => eprintln!(
            "latchkey: warning: could not release lock {name:?} ({e}); it frees itself within {}",
            duration::human(ttl)
        ),
    }
}
