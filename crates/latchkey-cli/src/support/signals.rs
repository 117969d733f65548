//! The signals `run`, `elect` and other long-running subcommands catch.

use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::support::exit::{self, Failure};

pub(crate) fn signal_name(signo: libc::c_int) -> &'static str {
    match signo {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// The failure of a command that a SIGINT, SIGTERM or SIGHUP ended before
/// CMD started (exit 128+N): "SIGINT while waiting for lock \"x\"".
pub(crate) fn interrupted(signo: libc::c_int, while_doing: &str) -> Failure {
    Failure::new(
        128u8.saturating_add(signo as u8),
        format!("{} while {while_doing}", signal_name(signo)),
    )
}

/// Runs `work` unless a SIGINT, SIGTERM or SIGHUP comes first: then the
/// failure `interrupted` makes of it (exit 128+N), `what` saying what was
/// being done (`connecting for lock "x"`).
///
/// # Cancel safety
/// As `work`: it is dropped when a signal comes.
pub(crate) async fn unless_interrupted<T>(
    work: impl std::future::Future<Output = Result<T, Failure>>,
    signals: &mut Signals,
    what: impl FnOnce() -> String,
) -> Result<T, Failure> {
    tokio::select! {
        done = work => done,
        signo = signals.recv() => Err(interrupted(signo, &what())),
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
