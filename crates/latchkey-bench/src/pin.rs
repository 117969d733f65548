//! Pinning processes to CPUs for the uncontended scenario.
//!
//! On this 2-core VM the speed of a request–reply loop depends on where the
//! guest's scheduler puts the client and redis-server: on one CPU a round
//! trip is a context switch (an uncontended cycle ≈ 50 µs), on two it wakes
//! an idle CPU (≈ 150–200 µs). Measured: after a pause the first ~60 ms of
//! a loop run fast, then the scheduler spreads the two and it slows down;
//! a Python or Node peer running in between resets that, so the latchkey
//! chunks right after a peer's ran up to 3× faster than the rest, which
//! inflated the peers' ratios (python-redis-lock read 7.7× unpinned, 2.5×
//! pinned, where its cycle rate says 2.5×). Pinned — redis-server to the
//! first CPU, every client to the others — each cycle crosses CPUs, for
//! every library alike, as it does when Redis runs on its own machine.

use std::path::Path;

/// CPUs this process may use, by number.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: `set` is a plain bitmask that sched_getaffinity fills in.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    if unsafe { libc::sched_getaffinity(0, size, &mut set) } != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// Sets the CPUs of every thread of process `pid` (0: this process).
fn set_process(pid: u32, cpus: &[usize]) -> Result<(), String> {
    // SAFETY: as above; CPU_SET only writes bits below CPU_SETSIZE.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    let tasks = match pid {
        0 => Path::new("/proc/self/task").to_path_buf(),
        pid => Path::new("/proc").join(pid.to_string()).join("task"),
    };
    let entries = std::fs::read_dir(&tasks).map_err(|e| format!("{}: {e}", tasks.display()))?;
    for entry in entries.flatten() {
        let Some(tid) = entry
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<i32>().ok())
        else {
            continue;
        };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // A thread that ended meanwhile (ESRCH) is not an error worth reporting.
        if unsafe { libc::sched_setaffinity(tid, size, &set) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ESRCH) {
                return Err(format!("thread {tid}: {e}"));
            }
        }
    }
    Ok(())
}

/// redis-server on one CPU, this process and the client processes on the
/// others, until dropped (then all of them may use every CPU again).
pub struct Pinned {
    pids: Vec<u32>,
    all: Vec<usize>,
    /// What the report says about it.
    pub note: String,
}

impl Pinned {
    pub fn new(server: Option<u32>, clients: &[u32]) -> Pinned {
        let all = allowed_cpus();
        let mut pinned = Pinned {
            pids: Vec::new(),
            all: all.clone(),
            note: String::new(),
        };
        let Some(server) = server else {
            pinned.note = "not pinned (redis-server's pid unknown)".into();
            return pinned;
        };
        let Some((&first, rest)) = all.split_first().filter(|(_, rest)| !rest.is_empty()) else {
            pinned.note = "not pinned (one CPU)".into();
            return pinned;
        };
        let mut result = set_process(server, &[first]);
        pinned.pids.push(server);
        for &pid in std::iter::once(&0).chain(clients) {
            if result.is_ok() {
                result = set_process(pid, rest);
                pinned.pids.push(pid);
            }
        }
        pinned.note = match result {
            Ok(()) => format!(
                "redis-server pinned to CPU {first}, the clients (this process and the peers' drivers) to CPU {}",
                rest.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
            ),
            Err(e) => format!("pinning failed ({e}); processes left where the scheduler puts them"),
        };
        pinned
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        for &pid in &self.pids {
            let _ = set_process(pid, &self.all);
        }
    }
}
