//! The guardian: a small process between `latchkey run`/`elect` and CMD
//! that owns CMD's process group and kills it when `latchkey` can no longer
//! vouch for the lease (see "Supervision" in docs/cli.md).
//!
//! `latchkey` starts it by re-executing itself as
//! `latchkey __guardian FD EXEC_BEFORE_NS KILL_AT_NS CMD [ARGS...]`
//! (hidden: not a clap subcommand, never typed by users), as the leader of a
//! new process group; the guardian starts CMD in that group. FD is one end of
//! a socket pair whose other end only `latchkey` holds. The times are
//! CLOCK_MONOTONIC nanoseconds, which on Linux is system-wide, so both
//! processes read the same clock.
//!
//! What the guardian does:
//! - It refuses to exec CMD once EXEC_BEFORE (the lease's deadline) has
//!   passed: the check runs in the forked child right before exec, so a
//!   guardian paused between "check" and "spawn" cannot start CMD late.
//! - It kills the whole group (SIGKILL) when the socket ends (`latchkey`
//!   died, even by SIGKILL) or when KILL_AT passes before `latchkey` sent a
//!   later one (`latchkey` stopped or stuck: its renewals would not be
//!   seen either, so the lock may expire).
//! - SIGINT, SIGTERM and SIGHUP sent to the group reach CMD; the guardian
//!   catches them (handlers, not SIG_IGN, so CMD starts with the default
//!   dispositions) and waits for CMD.
//! - When CMD ends it exits the same way (its code, or the same signal), so
//!   `latchkey` reports what it always did.
//!
//! Messages from `latchkey`: `D` + 8 bytes big-endian (a new KILL_AT), `L`
//! (the lease is lost and `latchkey` stops CMD itself with `--grace`: stop
//! watching the clock). To `latchkey`: `X` once CMD is started, `P` if it
//! was not because EXEC_BEFORE had passed.

use std::ffi::OsString;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::signal::unix::{signal, SignalKind};

use crate::support::exit;

/// The hidden first argument that makes `latchkey` a guardian.
pub const SUBCOMMAND: &str = "__guardian";

/// Sent to `latchkey`: CMD started.
pub const STARTED: u8 = b'X';
/// Sent to `latchkey`: CMD was not started, the lease's deadline had passed.
pub const TOO_LATE: u8 = b'P';
/// From `latchkey`: a new kill time follows (8 bytes, big-endian ns).
pub const DEADLINE: u8 = b'D';
/// From `latchkey`: the lease is lost; `latchkey` stops CMD itself.
pub const DISARM: u8 = b'L';

/// CLOCK_MONOTONIC now, in nanoseconds (what `Instant` reads on Linux).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec; it is async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// `at` as CLOCK_MONOTONIC nanoseconds.
pub fn instant_ns(at: Instant) -> u64 {
    let now_ns = monotonic_ns();
    let now = Instant::now();
    match at.checked_duration_since(now) {
        Some(ahead) => now_ns.saturating_add(ahead.as_nanos() as u64),
        None => now_ns.saturating_sub(now.duration_since(at).as_nanos() as u64),
    }
}

/// CLOCK_MONOTONIC nanoseconds as an `Instant`.
fn ns_instant(ns: u64) -> Instant {
    let now_ns = monotonic_ns();
    let now = Instant::now();
    if ns >= now_ns {
        now + Duration::from_nanos(ns - now_ns)
    } else {
        now.checked_sub(Duration::from_nanos(now_ns - ns))
            .unwrap_or(now)
    }
}

/// The guardian's `main`: never returns.
pub fn main(args: Vec<OsString>) -> ! {
    let code = match parse(&args) {
        Some((fd, exec_before, kill_at, command)) => guard(fd, exec_before, kill_at, command),
        None => {
            eprintln!("latchkey: {SUBCOMMAND} is internal to `latchkey run` and `elect`");
            exit::USAGE as i32
        }
    };
    std::process::exit(code)
}

type Parsed<'a> = (RawFd, u64, u64, &'a [OsString]);

fn parse(args: &[OsString]) -> Option<Parsed<'_>> {
    let number = |i: usize| args.get(i)?.to_str()?.parse::<u64>().ok();
    let fd = RawFd::try_from(number(0)?).ok()?;
    let command = args.get(3..).filter(|rest| !rest.is_empty())?;
    Some((fd, number(1)?, number(2)?, command))
}

fn guard(fd: RawFd, exec_before: u64, kill_at: u64, command: &[OsString]) -> i32 {
    // CMD must not inherit the socket (its end would keep it open).
    // SAFETY: fcntl on a descriptor number; a bad one fails with EBADF.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
        eprintln!("latchkey: guardian: bad descriptor {fd}");
        return exit::INTERNAL as i32;
    }
    // SAFETY: the descriptor is open (fcntl succeeded) and nothing else in
    // this process owns it.
    let socket = unsafe { std::os::unix::net::UnixStream::from_raw_fd(fd) };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let Ok(runtime) = runtime else {
        return exit::INTERNAL as i32;
    };
    runtime.block_on(watch(socket, exec_before, kill_at, command))
}

async fn watch(
    socket: std::os::unix::net::UnixStream,
    exec_before: u64,
    kill_at: u64,
    command: &[OsString],
) -> i32 {
    let internal = |what: &str, e: std::io::Error| {
        eprintln!("latchkey: guardian: {what}: {e}");
        exit::INTERNAL as i32
    };
    let socket = match socket
        .set_nonblocking(true)
        .and_then(|()| tokio::net::UnixStream::from_std(socket))
    {
        Ok(socket) => socket,
        Err(e) => return internal("socket", e),
    };
    let (mut from_latchkey, mut to_latchkey) = socket.into_split();
    // Installed before CMD exists: a group-directed signal must never find
    // the guardian with its default (fatal) disposition.
    let mut caught = Vec::new();
    for kind in [
        SignalKind::interrupt(),
        SignalKind::terminate(),
        SignalKind::hangup(),
    ] {
        match signal(kind) {
            Ok(s) => caught.push(s),
            Err(e) => return internal("signal handlers", e),
        }
    }
    let mut child = match spawn(command, exec_before) {
        Ok(child) => child,
        Err(e) if e.raw_os_error() == Some(libc::ETIME) => {
            let _ = to_latchkey.write_all(&[TOO_LATE]).await;
            return exit::LOCK_LOST as i32;
        }
        Err(e) => {
            let code = match e.kind() {
                std::io::ErrorKind::NotFound => exit::NOT_FOUND,
                _ => exit::CANNOT_EXECUTE,
            };
            eprintln!(
                "latchkey: cannot run {:?}: {e}",
                command[0].to_string_lossy()
            );
            return i32::from(code);
        }
    };
    if to_latchkey.write_all(&[STARTED]).await.is_err() {
        kill_own_group();
    }
    let mut kill_at = Some(ns_instant(kill_at));
    let mut inbox = Vec::with_capacity(9);
    let mut buf = [0u8; 64];
    let [a, b, c] = &mut caught[..] else {
        unreachable!("three handlers were installed")
    };
    loop {
        let timer = async {
            match kill_at {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            status = child.wait() => return match status {
                Ok(status) => end_like(status),
                Err(e) => internal("waiting for the command", e),
            },
            read = from_latchkey.read(&mut buf) => match read {
                // `latchkey` is gone (exited or killed): nobody holds the lease.
                Ok(0) | Err(_) => kill_own_group(),
                Ok(n) => {
                    inbox.extend_from_slice(&buf[..n]);
                    take_messages(&mut inbox, &mut kill_at);
                }
            },
            _ = a.recv() => {}
            _ = b.recv() => {}
            _ = c.recv() => {}
            () = timer => kill_own_group(),
        }
    }
}

/// Applies the complete messages in `inbox` (a partial one stays).
fn take_messages(inbox: &mut Vec<u8>, kill_at: &mut Option<Instant>) {
    loop {
        match inbox.first() {
            Some(&DISARM) => {
                *kill_at = None;
                inbox.drain(..1);
            }
            Some(&DEADLINE) if inbox.len() >= 9 => {
                let mut ns = [0u8; 8];
                ns.copy_from_slice(&inbox[1..9]);
                // Once disarmed, stays disarmed: `latchkey` is stopping CMD.
                if kill_at.is_some() {
                    *kill_at = Some(ns_instant(u64::from_be_bytes(ns)));
                }
                inbox.drain(..9);
            }
            Some(&DEADLINE) | None => return,
            // Not our protocol: treat as the end of supervision.
            Some(_) => kill_own_group(),
        }
    }
}

/// Starts CMD in our process group, unless `exec_before` has passed by
/// the instant before exec (then spawn fails with ETIME).
fn spawn(command: &[OsString], exec_before: u64) -> std::io::Result<tokio::process::Child> {
    let mut cmd = tokio::process::Command::new(&command[0]);
    cmd.args(&command[1..]);
    // SAFETY: runs in the forked child before exec; clock_gettime, prctl
    // and getppid are async-signal-safe and nothing allocates.
    let parent = unsafe { libc::getpid() };
    unsafe {
        cmd.pre_exec(move || {
            // CMD's first process dies with the guardian, should the
            // guardian itself be killed alone.
            #[cfg(target_os = "linux")]
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
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ECHILD));
            }
            if monotonic_ns() >= exec_before {
                return Err(std::io::Error::from_raw_os_error(libc::ETIME));
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// SIGKILL to the whole group, the guardian included: nothing of CMD may
/// run once the lease is not vouched for.
fn kill_own_group() -> ! {
    // SAFETY: kill(2) on our own process group (we are its leader).
    unsafe {
        libc::kill(0, libc::SIGKILL);
    }
    // Not reached: SIGKILL to our own group includes us.
    std::process::exit(exit::LOCK_LOST as i32)
}

/// Ends the guardian the way CMD ended: its code, or the same signal.
fn end_like(status: std::process::ExitStatus) -> i32 {
    if let Some(code) = status.code() {
        return code;
    }
    let Some(signo) = status.signal() else {
        return exit::INTERNAL as i32;
    };
    // SAFETY: resetting a disposition and raising a signal on ourselves; no
    // core file of the guardian for CMD's crash.
    unsafe {
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::signal(signo, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signo);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(signo);
    }
    128 + signo
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked_not_trusted() {
        let args = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        assert!(parse(&args(&["7", "1", "2", "true"])).is_some());
        assert!(parse(&args(&["7", "1", "2"])).is_none(), "no CMD");
        assert!(parse(&args(&["x", "1", "2", "true"])).is_none());
        assert!(parse(&args(&["7", "-1", "2", "true"])).is_none());
        assert!(parse(&args(&[])).is_none());
    }

    #[test]
    fn a_deadline_split_across_reads_is_applied_once_whole() {
        let at = Instant::now() + Duration::from_secs(5);
        let message = [&[DEADLINE][..], &instant_ns(at).to_be_bytes()].concat();
        let mut kill_at = Some(Instant::now());
        let mut inbox = message[..4].to_vec();
        take_messages(&mut inbox, &mut kill_at);
        assert_eq!(inbox.len(), 4, "a partial message waits for the rest");
        inbox.extend_from_slice(&message[4..]);
        take_messages(&mut inbox, &mut kill_at);
        assert!(inbox.is_empty());
        let told = kill_at.expect("armed");
        let off = if told > at { told - at } else { at - told };
        assert!(off < Duration::from_millis(1), "{off:?}");
    }

    #[test]
    fn once_disarmed_a_later_deadline_does_not_rearm() {
        let mut kill_at = Some(Instant::now());
        let mut inbox = [&[DISARM, DEADLINE][..], &1u64.to_be_bytes()].concat();
        take_messages(&mut inbox, &mut kill_at);
        assert!(inbox.is_empty());
        assert_eq!(kill_at, None);
    }

    #[test]
    fn instants_survive_the_trip_through_the_monotonic_clock() {
        let at = Instant::now() + Duration::from_millis(1500);
        let back = ns_instant(instant_ns(at));
        let off = if back > at { back - at } else { at - back };
        assert!(off < Duration::from_millis(1), "{off:?}");
    }
}
