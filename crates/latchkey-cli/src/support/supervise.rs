//! How `run` and `elect` supervise CMD while they hold a lease (a lock, a
//! permit, a read-write hold, a leadership): CMD runs under a guardian
//! process (`guardian.rs`) that leads CMD's process group; this side feeds
//! it the lease's deadline, forwards signals, handles Ctrl-Z, and stops the
//! group when the lease is lost. See "Supervision" in docs/cli.md.

use std::ffi::OsString;
use std::future::Future;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::time::{Duration, Instant};

use latchkey::Ownership;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Child;

use crate::support::exit::{self, Failure};
use crate::support::guardian;
use crate::support::process_group::{exit_code, kill_group, stop_group};
use crate::support::signals::{signal_name, Caught, Signals};

/// What supervision needs of a held lease.
pub(crate) trait Lease {
    /// Until when the lease is proven ours (monotonic).
    fn deadline(&self) -> Instant;
    /// The lease's TTL (sets how far past the deadline the guardian waits).
    fn ttl(&self) -> Duration;
    /// Completes once the lease is lost (cancel safe).
    fn lost(&self) -> impl Future<Output = ()>;
    /// Completes when another process asks for the lease
    /// (`latchkey request-release`); an error when it cannot listen.
    fn release_requested(&self) -> impl Future<Output = latchkey::Result<()>>;
    /// One renewal round trip now, where the lease has one; `None` where only
    /// its watchdog renews it.
    fn renew_now(&self) -> impl Future<Output = Option<latchkey::Result<Ownership>>>;
    /// Held now: not lost and the deadline ahead.
    fn is_held(&self) -> bool;
}

/// The instant the guardian kills CMD's group unless told a later one: half
/// the drift allowance past our deadline, so that while `latchkey` runs its
/// own `lost` (at the deadline) comes first and `--grace` applies, and still
/// before Redis expires the key (at `sent + ttl`, a whole drift later).
fn kill_at(deadline: Instant, ttl: Duration) -> Instant {
    deadline + latchkey::protocol::drift(ttl) / 2
}

/// CMD under its guardian.
pub(crate) struct Guardian {
    pub(crate) child: Child,
    /// CMD's process group: the guardian's pid.
    pub(crate) group: libc::pid_t,
    socket: tokio::net::UnixStream,
    /// The last kill time sent.
    told: Instant,
}

/// What starting CMD came to.
pub(crate) enum Started {
    Running(Box<Guardian>),
    /// The lease's deadline passed before CMD could be started: not started.
    TooLate,
}

/// How a supervised CMD ended.
pub(crate) enum Ended {
    /// CMD exited with this code (128+N for signal N).
    Exited(u8),
    /// The lease was lost; CMD was stopped as described.
    Lost(String),
}

/// Starts CMD (`command`, with `env`) under a guardian, unless the lease is
/// no longer held. The guardian refuses to exec CMD past the deadline too.
///
/// # Cancel safety
/// Nothing leaks: dropped after the guardian started, its socket closes and
/// the guardian kills CMD's group (if CMD had started at all).
pub(crate) async fn start<L: Lease>(
    lease: &L,
    command: &[OsString],
    env: &[(&str, String)],
) -> Result<Started, Failure> {
    let internal = |what: &str, e: std::io::Error| {
        Failure::new(
            exit::INTERNAL,
            format!("cannot start the command's guardian: {what}: {e}"),
        )
    };
    if command.is_empty() {
        return Err(Failure::usage("no command given"));
    }
    // Re-check with a round trip sent now, where the lease has one: a hold
    // handed to a process that was paused (issue 28 item 1) may have been
    // taken by the next waiter meanwhile, whatever its deadline says.
    if let Some(renewed) = lease.renew_now().await {
        if !matches!(renewed, Ok(Ownership::Owned)) {
            return Ok(Started::TooLate);
        }
    }
    if !lease.is_held() {
        return Ok(Started::TooLate);
    }
    let deadline = lease.deadline();
    let told = kill_at(deadline, lease.ttl());
    // The running image itself, even if its file was replaced (an upgrade
    // while CMD runs): guardian and supervisor always speak one protocol.
    let exe = if cfg!(target_os = "linux") {
        std::path::PathBuf::from("/proc/self/exe")
    } else {
        std::env::current_exe().map_err(|e| internal("own executable", e))?
    };
    let (ours, theirs) = UnixStream::pair().map_err(|e| internal("socket pair", e))?;
    let fd = theirs.as_raw_fd();
    let mut cmd = std::process::Command::new(exe);
    cmd.arg(guardian::SUBCOMMAND)
        .arg(fd.to_string())
        .arg(guardian::instant_ns(deadline).to_string())
        .arg(guardian::instant_ns(told).to_string())
        .args(command)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .process_group(0);
    // SAFETY: runs in the forked child before exec; fcntl is
    // async-signal-safe. Our end stays close-on-exec: only we hold it.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = tokio::process::Command::from(cmd)
        .spawn()
        .map_err(|e| internal("spawn", e))?;
    drop(theirs);
    let group = child
        .id()
        .and_then(|id| libc::pid_t::try_from(id).ok())
        .ok_or_else(|| Failure::new(exit::INTERNAL, "the guardian has no process id"))?;
    ours.set_nonblocking(true)
        .map_err(|e| internal("socket", e))?;
    let socket = tokio::net::UnixStream::from_std(ours).map_err(|e| internal("socket", e))?;
    let mut guardian = Guardian {
        child,
        group,
        socket,
        told,
    };
    let mut first = [0u8; 1];
    match guardian.socket.read(&mut first).await {
        Ok(1) if first[0] == guardian::STARTED => Ok(Started::Running(Box::new(guardian))),
        Ok(1) if first[0] == guardian::TOO_LATE => {
            let _ = guardian.child.wait().await;
            Ok(Started::TooLate)
        }
        // The guardian ended without starting CMD; it said why on stderr
        // ("cannot run …": 126 or 127).
        _ => {
            let status = guardian
                .child
                .wait()
                .await
                .map_err(|e| internal("wait", e))?;
            Err(Failure::new(exit_code(status), ""))
        }
    }
}

impl Guardian {
    /// Tells the guardian the lease's new deadline, if it moved.
    async fn tell<L: Lease>(&mut self, lease: &L) {
        let at = kill_at(lease.deadline(), lease.ttl());
        if at == self.told {
            return;
        }
        let mut message = [0u8; 9];
        message[0] = guardian::DEADLINE;
        message[1..].copy_from_slice(&guardian::instant_ns(at).to_be_bytes());
        // A failed write means the guardian is gone: `child.wait` says how.
        if self.socket.write_all(&message).await.is_ok() {
            self.told = at;
        }
    }

    /// From now on we stop CMD ourselves (SIGTERM, `--grace`, SIGKILL).
    async fn disarm(&mut self) {
        let _ = self.socket.write_all(&[guardian::DISARM]).await;
    }
}

/// How often the deadline is re-read and passed on: renewals come every
/// `ttl / 3`, so the guardian hears of one long before its old time.
fn tick_every(ttl: Duration) -> Duration {
    (ttl / 20).clamp(Duration::from_millis(10), Duration::from_millis(500))
}

/// Waits for CMD, forwarding signals and Ctrl-Z, passing renewals to the
/// guardian, and stops CMD's group if the lease is lost.
///
/// # Cancel safety
/// Dropped, it drops the guardian's socket: the guardian kills CMD's group
/// at once. Never a CMD left running without a supervisor.
pub(crate) async fn supervise<L: Lease>(
    mut guardian: Box<Guardian>,
    lease: &L,
    signals: &mut Signals,
    grace: Duration,
) -> Result<Ended, Failure> {
    let group = guardian.group;
    let mut tick = tokio::time::interval(tick_every(lease.ttl()));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut lost = std::pin::pin!(lease.lost());
    // A release request (`latchkey request-release`): SIGTERM to CMD's
    // group, then SIGKILL after the grace; the lease is released once CMD
    // has exited, as at any exit.
    let mut requested = std::pin::pin!(lease.release_requested());
    let mut listening = true;
    let mut grace_over: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
    loop {
        tokio::select! {
            biased;
            _ = &mut lost => break,
            asked = &mut requested, if listening => {
                listening = false;
                match asked {
                    Ok(()) => {
                        tracing::warn!("release requested; sending SIGTERM to the command's process group");
                        kill_group(group, libc::SIGTERM);
                        grace_over = Some(Box::pin(tokio::time::sleep(grace)));
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot listen for release requests; only a revocation stops the command"),
                }
            }
            _ = async { grace_over.as_mut().expect("guarded").await }, if grace_over.is_some() => {
                grace_over = None;
                tracing::warn!("the command outlived its grace after a release request; sending SIGKILL");
                kill_group(group, libc::SIGKILL);
            }
            status = guardian.child.wait() => {
                let status = status.map_err(|e| Failure::new(exit::INTERNAL, format!("waiting for the command: {e}")))?;
                // The guardian kills its group (and itself) only once the
                // lease is past vouching for: then that is what happened.
                if status.signal() == Some(libc::SIGKILL) && !lease.is_held() {
                    return Ok(Ended::Lost("the guardian sent SIGKILL".to_owned()));
                }
                return Ok(Ended::Exited(exit_code(status)));
            }
            caught = signals.recv_supervised() => match caught {
                Caught::Forward(signo) => {
                    tracing::debug!(signal = signal_name(signo), "forwarding to the command's process group");
                    kill_group(group, signo);
                }
                Caught::Suspend => {
                    if let Some(ended) = suspend(&mut guardian, lease).await {
                        return Ok(ended);
                    }
                }
            },
            _ = tick.tick() => guardian.tell(lease).await,
        }
    }
    tracing::warn!("lease lost; sending SIGTERM to the command's process group");
    guardian.disarm().await;
    let how = stop_group(&mut guardian.child, group, grace).await;
    Ok(Ended::Lost(how))
}

/// Ctrl-Z (SIGTSTP): stop CMD's group, then ourselves. Once continued,
/// CMD's group is continued only after a renewal answered after the resume
/// proved the lease ours (and the guardian was told its new deadline);
/// otherwise the group is killed: `Some(Lost)`.
async fn suspend<L: Lease>(guardian: &mut Guardian, lease: &L) -> Option<Ended> {
    let group = guardian.group;
    tracing::debug!("SIGTSTP: stopping the command's process group, then latchkey");
    kill_group(group, libc::SIGSTOP);
    // SAFETY: kill(2) on ourselves; SIGSTOP cannot be caught, and the call
    // returns once we are continued (SIGCONT, `fg`).
    unsafe {
        libc::kill(libc::getpid(), libc::SIGSTOP);
    }
    let resumed = Instant::now();
    if confirm_after(lease, resumed).await {
        guardian.tell(lease).await;
        kill_group(group, libc::SIGCONT);
        return None;
    }
    tracing::warn!("the lease was lost while stopped; killing the command's process group");
    guardian.disarm().await;
    kill_group(group, libc::SIGKILL);
    let _ = guardian.child.wait().await;
    Some(Ended::Lost(
        "it was stopped (Ctrl-Z) meanwhile; sent SIGKILL".to_owned(),
    ))
}

/// Whether a renewal answered after `resumed` proves the lease ours: an
/// explicit round trip where the lease has one, else the watchdog's next
/// renewal (a deadline that moved after `resumed`), whichever comes before
/// the lease is lost.
async fn confirm_after<L: Lease>(lease: &L, resumed: Instant) -> bool {
    let before = lease.deadline();
    let confirmed = async {
        if let Some(renewed) = lease.renew_now().await {
            return matches!(renewed, Ok(Ownership::Owned)) && lease.is_held();
        }
        loop {
            if lease.deadline() != before {
                return lease.is_held();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::select! {
        biased;
        () = lease.lost() => false,
        held = confirmed => held && lease.deadline() > resumed,
    }
}

/// A held lease and its TTL, as supervision sees it.
pub(crate) struct Leased<'a, G> {
    pub(crate) guard: &'a G,
    pub(crate) ttl: Duration,
}

/// Every hold has the same surface (one lease under all of them), so one
/// impl serves each: `leased!(Guard, ...)`, for any type with the guards'
/// `deadline`, `lost`, `extend` and `is_held`.
macro_rules! leased {
    ($($guard:ty),*) => {$(
        impl $crate::support::supervise::Lease for $crate::support::supervise::Leased<'_, $guard> {
            fn deadline(&self) -> std::time::Instant {
                self.guard.deadline()
            }
            fn ttl(&self) -> std::time::Duration {
                self.ttl
            }
            fn lost(&self) -> impl std::future::Future<Output = ()> {
                self.guard.lost()
            }
            fn release_requested(&self) -> impl std::future::Future<Output = latchkey::Result<()>> {
                self.guard.release_requested()
            }
            async fn renew_now(&self) -> Option<latchkey::Result<latchkey::Ownership>> {
                Some(self.guard.extend(self.ttl).await)
            }
            fn is_held(&self) -> bool {
                self.guard.is_held()
            }
        }
    )*};
}
pub(crate) use leased;

leased!(latchkey::LockGuard, latchkey::Leadership);
