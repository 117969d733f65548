//! Launching and signalling child processes that never outlive the test process.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::thread;

/// Spawns `cmd` so that the child cannot outlive this process.
///
/// `Drop` cleans up after passing and panicking tests, but not when the test
/// process itself is killed (a CI timeout, `kill -9`, an abort in another
/// test). A leaked `redis-server` keeps its port and data dir forever, so on
/// Linux the child asks the kernel to SIGKILL it when its parent goes away
/// (`PR_SET_PDEATHSIG`).
///
/// The child is also put in its own process group: a Ctrl-C in the terminal
/// then goes to the test process only (whose `Drop`s or death signal clean up
/// the child), and stopping the child with SIGSTOP cannot affect anything else.
pub(crate) fn spawn(mut cmd: Command) -> io::Result<Child> {
    cmd.process_group(0);
    #[cfg(target_os = "linux")]
    die_with_parent(&mut cmd);

    // The kernel's "parent" for PR_SET_PDEATHSIG is the *thread* that forked,
    // not the process. Test harnesses run every test on its own short-lived
    // thread, and a server may be started on one (say, inside a `OnceLock`
    // shared by several tests) and used long after that thread has ended. So
    // all forks happen on one thread that lives as long as the process.
    let (reply_tx, reply_rx) = mpsc::channel();
    spawner()
        .send((cmd, reply_tx))
        .map_err(|_| io::Error::other("latchkey-testkit spawner thread is gone"))?;
    reply_rx
        .recv()
        .map_err(|_| io::Error::other("latchkey-testkit spawner thread is gone"))?
}

/// Sends `signal` to `pid`. Callers must guarantee `pid` is a child that has
/// not been reaped yet, so the pid cannot have been reused by another process.
pub(crate) fn signal(pid: u32, signal: libc::c_int) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) has no memory-safety preconditions. Failure (the child
    // has already exited and is a zombie) is harmless and deliberately ignored.
    unsafe {
        libc::kill(pid, signal);
    }
}

type SpawnRequest = (Command, mpsc::Sender<io::Result<Child>>);

/// The long-lived thread that performs every fork (see [`spawn`]).
fn spawner() -> &'static mpsc::Sender<SpawnRequest> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnRequest>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        thread::Builder::new()
            .name("latchkey-testkit-spawner".into())
            .spawn(move || {
                // Never returns: the sender lives in a static.
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .unwrap_or_else(|e| panic!("latchkey-testkit: cannot start spawner thread: {e}"));
        tx
    })
}

#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Command) {
    let parent = libc::pid_t::try_from(std::process::id()).expect("pid fits in pid_t");
    // SAFETY: the closure runs between fork and exec, where only
    // async-signal-safe functions may be called; prctl(2) and getppid(2) are
    // plain system calls, and the closure does not allocate.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died before prctl took effect; then no
            // signal will ever come, so give up instead of leaking.
            if libc::getppid() != parent {
                return Err(io::Error::other("parent exited during spawn"));
            }
            Ok(())
        });
    }
}
