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
use latchkey::{LockGuard, Ownership};
use tokio::process::Child;
use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::cmd_acquire::WaitArgs;
use crate::connect::Target;
use crate::duration;
use crate::exit::{self, Failure, Outcome};

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
    #[arg(long, value_name = "N", conflicts_with_all = ["read", "write"])]
    pub permits: Option<u64>,

    /// Hold the read-write lock NAME as one of many readers (no writer
    /// runs meanwhile; a waiting writer stops new readers).
    #[arg(long, conflicts_with = "write")]
    pub read: bool,

    /// Hold the read-write lock NAME as its one writer (no reader or other
    /// writer runs meanwhile).
    #[arg(long)]
    pub write: bool,

    /// The command to run and its arguments (after `--`).
    #[arg(
        value_name = "CMD",
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<OsString>,
}

pub async fn run(target: &Target, args: RunArgs) -> Outcome {
    // Installed first, so that a signal while waiting ends the wait cleanly
    // (the acquire future is cancel safe) instead of killing us mid-request.
    let mut signals = Signals::install()?;
    if args.permits.is_some() || args.read || args.write {
        return crate::cmd_permits::run(target, &args, signals).await;
    }
    // Started while Redis is down: connecting is retried within the wait's
    // budget (`patience.rs`), and a signal ends it as it ends the wait.
    let connected = tokio::select! {
        connected = target.lock_within(&args.name, args.ttl, args.wait.patience()) => connected?,
        signo = signals.recv() => {
            return Err(Failure::new(
                128u8.saturating_add(signo as u8),
                format!("{} while connecting for lock {:?}", signal_name(signo), args.name),
            ));
        }
    };
    let lock = args
        .wait
        .replicated(args.wait.fair_or_not(connected)?.with_watchdog())?;

    let acquired = tokio::select! {
        acquired = args.wait.acquire(&lock) => acquired,
        signo = signals.recv() => {
            return Err(Failure::new(
                128u8.saturating_add(signo as u8),
                format!("{} while waiting for lock {:?}", signal_name(signo), args.name),
            ));
        }
    };
    let guard = acquired.map_err(|e| args.wait.failed(&args.name, e, args.conflict_exit_code))?;
    let Some(guard) = guard else {
        return Err(args
            .wait
            .busy(target, &args.name, args.conflict_exit_code)
            .await);
    };

    let ended = match spawn(&args, guard.token(), guard.issued_fencing_token()) {
        Ok(child) => {
            let what = format!("lock {:?}", args.name);
            supervise(child, guard.lost(), &what, &mut signals, args.grace).await
        }
        Err(failure) => Err(failure),
    };
    release(guard, &args.name, args.ttl).await;
    ended
}

/// Starts CMD in a new process group with the lock's (or permit's)
/// environment: its owner token and fencing token (if issued).
pub(crate) fn spawn(
    args: &RunArgs,
    token: &str,
    fencing_token: Option<u64>,
) -> Result<Child, Failure> {
    let (program, rest) = args
        .command
        .split_first()
        .ok_or_else(|| Failure::usage("no command given"))?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(rest)
        .env("LATCHKEY_NAME", &args.name)
        .env("LATCHKEY_TOKEN", token)
        .env(
            "LATCHKEY_FENCING_TOKEN",
            // Issued with the acquisition: `Target::lock` locks are `with_fencing`.
            fencing_token.map_or_else(String::new, |t| t.to_string()),
        )
        .process_group(0);
    die_with_us(&mut cmd);
    cmd.spawn().map_err(|e| {
        let code = match e.kind() {
            std::io::ErrorKind::NotFound => exit::NOT_FOUND,
            _ => exit::CANNOT_EXECUTE,
        };
        Failure::new(
            code,
            format!("cannot run {:?}: {e}", program.to_string_lossy()),
        )
    })
}

/// Makes CMD get SIGKILL when `latchkey` dies (Linux `PR_SET_PDEATHSIG`).
///
/// A `latchkey` killed with SIGKILL (OOM killer, `kill -9`) cannot stop CMD,
/// and its lock expires within the TTL: without this, a second holder would
/// then run beside the first CMD. (`flock(1)` has no such gap: its child
/// inherits the lock itself, which a Redis lock cannot do.)
///
/// The death signal fires when the *thread* that forked the child exits; the
/// runtime is current-thread, so that is the main thread, which lives as long
/// as the process. It is not inherited by CMD's own children (cleared on
/// fork), and other systems have no equivalent: docs/cli.md says so.
#[cfg(target_os = "linux")]
pub(crate) fn die_with_us(cmd: &mut tokio::process::Command) {
    // Recorded before the fork: if we die between fork and prctl, the child
    // is reparented and the death signal would never come.
    // SAFETY: getpid(2) cannot fail and has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: runs in the forked child before exec; prctl, getppid and
    // _exit are async-signal-safe and the closure allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            // Already orphaned: the parent died before prctl took effect.
            // Do not run CMD without anyone holding the lock.
            if libc::getppid() != parent {
                libc::_exit(exit::LOCK_LOST as libc::c_int);
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn die_with_us(_cmd: &mut tokio::process::Command) {}

/// Waits for CMD, forwarding signals, and stops it if the lock is lost
/// (`lost` completes); `what` names the lock (or permit) in the message.
pub(crate) async fn supervise(
    mut child: Child,
    lost: impl std::future::Future<Output = ()>,
    what: &str,
    signals: &mut Signals,
    grace: Duration,
) -> Outcome {
    let mut lost = std::pin::pin!(lost);
    let Some(group) = child.id().and_then(|id| libc::pid_t::try_from(id).ok()) else {
        // Only possible if the child was already reaped, which we have not done.
        return Err(Failure::new(
            exit::INTERNAL,
            "the command has no process id",
        ));
    };
    loop {
        tokio::select! {
            status = child.wait() => {
                let status = status.map_err(|e| Failure::new(exit::INTERNAL, format!("waiting for the command: {e}")))?;
                return Ok(exit_code(status));
            }
            _ = &mut lost => break,
            signo = signals.recv() => {
                tracing::debug!(signal = signal_name(signo), "forwarding to the command's process group");
                kill_group(group, signo);
            }
        }
    }

    // Lost: the command must stop touching whatever the lock protects.
    tracing::warn!("lock lost; sending SIGTERM to the command's process group");
    let how = stop_group(&mut child, group, grace).await;
    Err(Failure::new(
        exit::LOCK_LOST,
        format!("lost {what} while the command ran (expired or taken over); {how} to the command"),
    ))
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

/// The signals `run` catches: while waiting they end the wait, while CMD
/// runs they are forwarded to it.
pub(crate) struct Signals {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
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
        })
    }

    /// The next signal received.
    pub(crate) async fn recv(&mut self) -> libc::c_int {
        tokio::select! {
            Some(()) = self.interrupt.recv() => libc::SIGINT,
            Some(()) = self.terminate.recv() => libc::SIGTERM,
            Some(()) = self.hangup.recv() => libc::SIGHUP,
            // The streams only end when the runtime shuts down.
            else => std::future::pending().await,
        }
    }
}
