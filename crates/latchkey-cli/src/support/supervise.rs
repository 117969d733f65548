//! How `run` and `elect` supervise CMD while they hold something (any
//! [`latchkey::Guard`]: a lock, locks, a permit, a read-write hold, a
//! leadership): CMD runs under a guardian process (`guardian.rs`) that
//! leads CMD's process group; this side feeds it the hold's deadline,
//! forwards signals, handles Ctrl-Z, and stops the group when the hold is
//! lost: SIGTERM when the library's `lost` fires (the stop margin, which
//! `run` sets to `--grace`, before the hold could end), SIGKILL when the
//! margin is over. See "Supervision" in docs/cli.md.

use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::time::{Duration, Instant};

use latchkey::{Guard, LostReason, Ownership};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Child;

use crate::support::exit::{self, Failure};
use crate::support::guardian;
use crate::support::process_group::{exit_code, kill_group, stop_group};
use crate::support::signals::{signal_name, Caught, Signals};

/// The instant the guardian kills CMD's group unless told a later one: half
/// the drift allowance past our deadline, so that while `latchkey` runs its
/// own `lost` (the stop margin before the deadline) comes first and the
/// grace applies, and still before Redis expires the key (at `sent + ttl`,
/// a whole drift later).
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
    /// CMD exited (this code) after a release request made us stop it.
    Requested(u8),
    /// The hold was lost (why, when known); CMD was stopped as described.
    Lost {
        reason: Option<LostReason>,
        how: String,
    },
}

/// Starts CMD (`command`, with `env`) under a guardian, unless the hold is
/// no longer held. The guardian refuses to exec CMD past the hold's stop
/// margin (`margin` before its deadline) too.
///
/// # Cancel safety
/// Nothing leaks: dropped after the guardian started, its socket closes and
/// the guardian kills CMD's group (if CMD had started at all).
pub(crate) async fn start<G: Guard + ?Sized>(
    lease: &G,
    margin: Duration,
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
    // Re-check with a round trip sent now: a hold handed to a process that
    // was paused may have been taken by the next waiter meanwhile, whatever
    // its deadline says.
    if !still_ours(lease).await {
        return Ok(Started::TooLate);
    }
    if !lease.is_held() {
        return Ok(Started::TooLate);
    }
    // The guardian refuses to exec CMD once the hold's stop margin came.
    let deadline = lease.deadline();
    let exec_before = deadline.checked_sub(margin).unwrap_or(deadline);
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
        .arg(guardian::instant_ns(exec_before).to_string())
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
    /// Tells the guardian the hold's new deadline, if it moved.
    async fn tell<G: Guard + ?Sized>(&mut self, lease: &G) {
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
/// `ttl / 3`, so the guardian hears of one long before its old time, and
/// within a fraction of the `grace` (the stop margin) of any move.
fn tick_every(ttl: Duration, grace: Duration) -> Duration {
    (ttl / 20)
        .min(grace / 4)
        .clamp(Duration::from_millis(10), Duration::from_millis(500))
}

/// Waits for CMD, forwarding signals and Ctrl-Z, passing renewals to the
/// guardian, and stops CMD's group if the lease is lost.
///
/// # Cancel safety
/// Dropped, it drops the guardian's socket: the guardian kills CMD's group
/// at once. Never a CMD left running without a supervisor.
pub(crate) async fn supervise<G: Guard + ?Sized>(
    mut guardian: Box<Guardian>,
    lease: &G,
    signals: &mut Signals,
    grace: Duration,
) -> Result<Ended, Failure> {
    let group = guardian.group;
    let mut tick = tokio::time::interval(tick_every(lease.ttl(), grace));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut lost = std::pin::pin!(lease.lost());
    // A release request (`latchkey request-release`): SIGTERM to CMD's
    // group, then SIGKILL after the grace; the lease is released once CMD
    // has exited, as at any exit.
    let mut requested = std::pin::pin!(lease.release_requested());
    let mut listening = true;
    let mut was_asked = false;
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
                        was_asked = true;
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
                    return Ok(Ended::Lost {
                        reason: lease.lost_reason(),
                        how: "the guardian sent SIGKILL".to_owned(),
                    });
                }
                return Ok(match was_asked {
                    true => Ended::Requested(exit_code(status)),
                    false => Ended::Exited(exit_code(status)),
                });
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
    let reason = lease.lost_reason();
    tracing::warn!(
        reason = reason.map(LostReason::as_str),
        "hold lost; sending SIGTERM to the command's process group"
    );
    guardian.disarm().await;
    // SIGKILL once the hold can end (or the margin after a sudden loss):
    // what the margin before `lost` left, never more than the grace.
    let left = lease
        .deadline()
        .saturating_duration_since(Instant::now())
        .min(grace);
    let how = stop_group(&mut guardian.child, group, left).await;
    Ok(Ended::Lost { reason, how })
}

/// Ctrl-Z (SIGTSTP): stop CMD's group, then ourselves. Once continued,
/// CMD's group is continued only after a renewal answered after the resume
/// proved the lease ours (and the guardian was told its new deadline);
/// otherwise the group is killed: `Some(Lost)`.
async fn suspend<G: Guard + ?Sized>(guardian: &mut Guardian, lease: &G) -> Option<Ended> {
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
    Some(Ended::Lost {
        reason: lease.lost_reason(),
        how: "it was stopped (Ctrl-Z) meanwhile; sent SIGKILL".to_owned(),
    })
}

/// Whether a round trip sent now proves the hold ours: a renewal for its
/// TTL, or, when that would pass its cap, a check that leaves its expiry.
async fn still_ours<G: Guard + ?Sized>(lease: &G) -> bool {
    match lease.extend(lease.ttl()).await {
        Ok(found) => found == Ownership::Owned,
        Err(latchkey::Error::MaxHoldReached { .. }) => {
            matches!(lease.confirm().await, Ok(Ownership::Owned))
        }
        Err(_) => false,
    }
}

/// Whether a renewal answered after `resumed` proves the hold ours (one
/// round trip), unless the hold is lost first.
async fn confirm_after<G: Guard + ?Sized>(lease: &G, resumed: Instant) -> bool {
    let confirmed = async { still_ours(lease).await && lease.is_held() };
    tokio::select! {
        biased;
        () = lease.lost() => false,
        held = confirmed => held && lease.deadline() > resumed,
    }
}
