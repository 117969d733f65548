//! CMD's process group: signalling it, stopping it, and the shell's
//! convention for how a process ended.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use tokio::process::Child;

use crate::support::duration;
use crate::support::exit;

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
