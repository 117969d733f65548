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

use crate::support::exit::Outcome;
use crate::support::hold_run::{hold_and_run, stop_margin, supervised, Supervision};
pub use crate::support::run_args::RunArgs;
use crate::support::signals::{unless_interrupted, Signals};
use crate::support::target::Target;

pub async fn run(target: &Target, args: RunArgs) -> Outcome {
    // Usage errors first: they need no Redis (exit 2 even with Redis down).
    args.check()?;
    // Installed first, so that a signal while waiting ends the wait cleanly
    // (the acquire future is cancel safe) instead of killing us mid-request.
    let mut signals = Signals::install()?;
    let margin = stop_margin(args.grace, args.ttl, args.max_hold);
    let how = Supervision {
        target,
        command: &args.command,
        grace: args.grace,
        margin,
    };
    if args.permits.is_some() || args.read || args.write {
        return permits::run(&args, &how, signals).await;
    }
    if !args.and.is_empty() {
        return multi::run(&args, &how, signals).await;
    }
    // Started while Redis is down: connecting is retried within the wait's
    // budget (`patience.rs`), and a signal ends it as it ends the wait.
    let connecting = target.lock_within(&args.name, args.ttl, args.wait.patience());
    let connected = unless_interrupted(connecting, &mut signals, || {
        format!("connecting for lock {:?}", args.name)
    })
    .await?;
    let lock = args.wait.replicated(args.wait.fair_or_not(connected)?)?;
    let lock = supervised(lock, &how, &args)?;
    hold_and_run(&lock, &args, &how, &mut signals, |_| Vec::new()).await
}
