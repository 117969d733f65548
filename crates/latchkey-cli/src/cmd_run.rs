//! `latchkey run NAME [--ttl D] [--wait D | --no-wait] [-E N] [--grace D] -- CMD [ARGS...]`:
//! a distributed `flock(1)`.
//!
//! ```sh
//! # In cron on every machine: at most one report runs at a time; skip if busy.
//! latchkey run nightly-report --no-wait -E 0 -- ./report.sh
//! ```
//!
//! 1. Acquire the lock (waiting up to `--wait`, forever by default). A
//!    SIGINT/SIGTERM/SIGHUP while waiting ends the wait: exit 128+signal.
//! 2. Start CMD in its own process group with `LATCHKEY_NAME`,
//!    `LATCHKEY_TOKEN` and `LATCHKEY_FENCING_TOKEN` in its environment. The
//!    watchdog renews the lock every `ttl / 3`.
//! 3. SIGINT, SIGTERM and SIGHUP sent to `latchkey` are forwarded to CMD's
//!    process group (so `sh -c 'a | b'` reaches `a` and `b` too).
//! 4. If the lock is lost while CMD runs (a renewal finds it gone or taken,
//!    or Redis stays unreachable until the lease runs out), the process group
//!    gets SIGTERM, and SIGKILL if anything in it is still alive after
//!    `--grace`; `latchkey` exits 75.
//! 5. When CMD exits, the lock is released and `latchkey` exits with CMD's
//!    code (128+N if a signal N killed it).
//!
//! `run` waits for CMD itself, not for background processes CMD leaves
//! behind (like `flock`). Because CMD has its own process group, it is not in
//! the terminal's foreground group: a CMD that reads from the terminal is
//! stopped (SIGTTIN), so give interactive commands their input another way.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use clap::Args;
use latchkey::{Lock, LockGuard, Ownership};
use tokio::process::Child;
use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::cmd_acquire::WaitArgs;
use crate::connect::Target;
use crate::duration;
use crate::exit::{self, Failure, Outcome};
use crate::supervise::{self, Ended, Leased, Started};

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The lock's name.
    pub name: String,

    /// Lock TTL. The watchdog renews it every third of this while CMD runs;
    /// if latchkey dies, the lock frees itself after at most this long.
    #[arg(long, value_name = "D", value_parser = duration::parse_ttl, default_value = "30s")]
    pub ttl: Duration,

    #[command(flatten)]
    pub wait: WaitArgs,

    /// Exit code when the lock is busy or the wait timed out.
    #[arg(short = 'E', long = "conflict-exit-code", value_name = "N", default_value_t = exit::CONFLICT)]
    pub conflict_exit_code: u8,

    /// After the lock is lost: time between SIGTERM and SIGKILL to CMD's process group.
    #[arg(long, value_name = "D", value_parser = duration::parse, default_value = "5s")]
    pub grace: Duration,

    /// Take one of N permits of a semaphore called NAME instead of the lock:
    /// at most N commands run at once, across machines (1 to 100000).
    /// Not FIFO and not replicated: refused with --fair and --replicas.
    #[arg(long, value_name = "N", conflicts_with_all = ["read", "write", "fair", "waiter_lease", "replicas"])]
    pub permits: Option<u64>,

    /// Hold the read-write lock NAME as one of many readers (no writer
    /// runs meanwhile; a waiting writer stops new readers). Refused with
    /// --fair and --replicas.
    #[arg(long, conflicts_with_all = ["write", "fair", "waiter_lease", "replicas"])]
    pub read: bool,

    /// Hold the read-write lock NAME as its one writer (no reader or other
    /// writer runs meanwhile). Refused with --fair and --replicas.
    #[arg(long, conflicts_with_all = ["fair", "waiter_lease", "replicas"])]
    pub write: bool,

    /// The command to run and its arguments (after `--`).
    #[arg(value_name = "CMD", required = true, trailing_var_arg = true)]
    pub command: Vec<OsString>,
}

pub async fn run(target: &Target, args: RunArgs) -> Outcome {
    // Installed first, so that a signal while waiting ends the wait cleanly
    // (the acquire future is cancel safe) instead of killing us mid-request.
    let mut signals = Signals::install()?;
    if args.permits.is_some() || args.read || args.write {
        return crate::cmd_permits::run(target, &args, signals).await;
    }
    let lock = args.wait.replicated(
        args.wait
            .fair_or_not(target.lock(&args.name, args.ttl).await?)?
            .with_watchdog(),
    )?;
    let wait_until = args.wait.wait.map(|wait| Instant::now() + wait);
    loop {
        let acquired = tokio::select! {
            acquired = acquire_until(&lock, &args.wait, wait_until) => acquired,
            signo = signals.recv() => {
                return Err(Failure::new(
                    128u8.saturating_add(signo as u8),
                    format!("{} while waiting for lock {:?}", signal_name(signo), args.name),
                ));
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
    wait: &WaitArgs,
    until: Option<Instant>,
) -> latchkey::Result<Option<LockGuard>> {
    let waited = match (wait.no_wait, until) {
        (true, _) => return lock.try_acquire().await,
        (false, None) => lock.acquire().await,
        (false, Some(until)) => {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            lock.acquire_timeout(left).await
        }
    };
    match waited {
        Ok(guard) => Ok(Some(guard)),
        Err(latchkey::Error::WaitTimedOut { .. }) => Ok(None),
        Err(e) => Err(e),
    }
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

/// Stops CMD's process group: SIGTERM, then SIGKILL if anything in it is
/// still alive after `grace`. Says what it sent.
pub(crate) async fn stop_group(child: &mut Child, group: libc::pid_t, grace: Duration) -> String {
    kill_group(group, libc::SIGTERM);
    let give_up = Instant::now() + grace;
    let leader = tokio::select! {
        status = child.wait() => status.ok(),
        _ = tokio::time::sleep_until(give_up.into()) => None,
    };
    // CMD itself is gone (or out of time); its background children may
    // linger in the group. Polling is the only way to see a group empty.
    while leader.is_some() && group_alive(group) && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let killed = leader.is_none() || group_alive(group);
    if killed {
        kill_group(group, libc::SIGKILL);
        let _ = child.wait().await;
    }
    if killed {
        format!(
            "sent SIGTERM, then SIGKILL after {}",
            duration::human(grace)
        )
    } else {
        "sent SIGTERM".to_owned()
    }
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

/// Shell convention: the exit code, or 128+N for death by signal N.
pub(crate) fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(signo)) => 128u8.saturating_add(signo as u8),
        (None, None) => exit::INTERNAL,
    }
}

pub(crate) fn kill_group(group: libc::pid_t, signo: libc::c_int) {
    // SAFETY: kill(2) has no memory-safety preconditions. `group` is the
    // process group of our unreaped child (or of its remaining members), so
    // it cannot have been reused. ESRCH (group empty) is fine to ignore.
    unsafe {
        libc::kill(-group, signo);
    }
}

fn group_alive(group: libc::pid_t) -> bool {
    // SAFETY: as in `kill_group`; signal 0 only checks for existence.
    unsafe { libc::kill(-group, 0) == 0 }
}

pub(crate) fn signal_name(signo: libc::c_int) -> &'static str {
    match signo {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// What a supervising `run` caught.
pub(crate) enum Caught {
    /// SIGINT, SIGTERM or SIGHUP: forward it to CMD's group.
    Forward(libc::c_int),
    /// SIGTSTP (Ctrl-Z): stop CMD's group, then ourselves.
    Suspend,
}

/// The signals `run` catches: while waiting they end the wait, while CMD
/// runs they are forwarded to it; SIGTSTP stops CMD's group with us.
pub(crate) struct Signals {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
    suspend: Signal,
}

impl Signals {
    pub(crate) fn install() -> Result<Signals, Failure> {
        let install = |kind| {
            signal(kind).map_err(|e| {
                Failure::new(
                    exit::INTERNAL,
                    format!("cannot install signal handlers: {e}"),
                )
            })
        };
        Ok(Signals {
            interrupt: install(SignalKind::interrupt())?,
            terminate: install(SignalKind::terminate())?,
            hangup: install(SignalKind::hangup())?,
            suspend: install(SignalKind::from_raw(libc::SIGTSTP))?,
        })
    }

    /// The next SIGINT, SIGTERM or SIGHUP received. A SIGTSTP meanwhile (no
    /// CMD runs) stops us, as if it were not caught.
    pub(crate) async fn recv(&mut self) -> libc::c_int {
        loop {
            match self.recv_supervised().await {
                Caught::Forward(signo) => return signo,
                // SAFETY: kill(2) on ourselves; returns once continued.
                Caught::Suspend => unsafe {
                    libc::kill(libc::getpid(), libc::SIGSTOP);
                },
            }
        }
    }

    /// The next signal received, SIGTSTP included.
    pub(crate) async fn recv_supervised(&mut self) -> Caught {
        tokio::select! {
            Some(()) = self.interrupt.recv() => Caught::Forward(libc::SIGINT),
            Some(()) = self.terminate.recv() => Caught::Forward(libc::SIGTERM),
            Some(()) = self.hangup.recv() => Caught::Forward(libc::SIGHUP),
            Some(()) = self.suspend.recv() => Caught::Suspend,
            // The streams only end when the runtime shuts down.
            else => std::future::pending().await,
        }
    }
}
