//! Supervision of CMD by `run` and `elect`: CMD's
//! whole process group dies with `latchkey` (`kill -9`), stops with it
//! (Ctrl-Z) and is never continued once the lease is lost, is killed before
//! the deadline when `latchkey` alone is stopped, and a fair waiter paused
//! while queued does not start CMD beside the real holder.
//!
//! Process states come from /proc (Linux): `T` stopped, `Z` dead (a zombie
//! whose parent went first counts as gone).
#![cfg(target_os = "linux")]

use crate::common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;
use latchkey_testkit::eventually_blocking;

const QUICK: Duration = Duration::from_secs(20);

/// State letter and process group of `pid`, from /proc; `None` once reaped.
fn stat(pid: i32) -> Option<(char, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ppid pgrp ...": comm may hold spaces; split after ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

fn gone(pid: i32) -> bool {
    matches!(stat(pid), None | Some(('Z' | 'X', _)))
}

/// Every live (not zombie) process in process group `group`.
fn members(group: i32) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        if matches!(stat(pid), Some((s, g)) if g == group && s != 'Z' && s != 'X') {
            pids.push(pid);
        }
    }
    pids
}

/// CMD: a shell that starts a background `sleep` (the kind of descendant
/// PR_SET_PDEATHSIG never reached) and waits for it (no loop of short
/// children: a shell in vfork for a stopped child shows `D`, not `T`); it
/// writes both pids.
fn group_script(dir: &Scratch) -> String {
    let pids = dir.path("pids");
    format!(
        "sleep 100 & echo \"$$ $!\" > {p}.tmp; mv {p}.tmp {p}; wait",
        p = pids.display()
    )
}

/// The shell's and the background sleep's pids, once CMD wrote them, and
/// CMD's process group.
fn started(dir: &Scratch) -> (i32, i32, i32) {
    let text = wait_for_text(&dir.path("pids"), "\n", QUICK);
    let mut it = text
        .split_whitespace()
        .map(|p| p.parse::<i32>().expect("pid"));
    let (sh, bg) = (it.next().expect("sh pid"), it.next().expect("bg pid"));
    let (_, group) = stat(sh).expect("CMD runs");
    (sh, bg, group)
}

fn spawn_run(redis: &RedisServer, name: &str, ttl: &str, script: &str) -> Child {
    latchkey(redis)
        .args(["run", name, "--ttl", ttl, "--", "sh", "-c", script])
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn latchkey run")
}

/// Kills whatever is left of `group` (a failed test must not leak it).
fn cleanup(group: i32) {
    unsafe { libc::kill(-group, libc::SIGKILL) };
}

/// `kill -9` of `latchkey` at `leader`; how long until every process of
/// CMD's group is gone.
fn time_group_death(leader: &mut Child, group: i32) -> Duration {
    let before = members(group);
    assert!(
        before.len() >= 2,
        "CMD's group has its shell and sleep: {before:?}"
    );
    send_signal(leader, libc::SIGKILL);
    let killed = Instant::now();
    while !before.iter().all(|&pid| gone(pid)) {
        if killed.elapsed() > QUICK {
            cleanup(group);
            panic!(
                "CMD's group outlived latchkey: {:?} still run",
                members(group)
            );
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let took = killed.elapsed();
    let _ = wait_exit(leader, QUICK);
    took
}

fn summary(label: &str, mut times: Vec<Duration>) {
    times.sort();
    eprintln!(
        "{label}: kill -9 to CMD's whole group gone, {} runs: median {:?}, max {:?}",
        times.len(),
        times[times.len() / 2],
        times[times.len() - 1]
    );
}

#[test]
fn kill_9_of_run_kills_the_commands_whole_process_group() {
    let redis = RedisServer::start();
    let mut times = Vec::new();
    // A lock (twice), a permit, a read hold and a write hold.
    let modes: [&[&str]; 5] = [&[], &[], &["--permits", "2"], &["--read"], &["--write"]];
    for (i, mode) in modes.iter().enumerate() {
        let dir = Scratch::new(&format!("kill9-run-{i}"));
        let mut run = latchkey(&redis)
            .arg("run")
            .args(*mode)
            .args([&format!("k9-{i}"), "--ttl", "30s", "--", "sh", "-c"])
            .arg(group_script(&dir))
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn latchkey run");
        let (_, bg, group) = started(&dir);
        times.push(time_group_death(&mut run, group));
        assert!(gone(bg), "the background sleep died with the group");
    }
    summary("run", times);
}

#[test]
fn kill_9_of_elect_kills_the_commands_whole_process_group() {
    let redis = RedisServer::start();
    let mut times = Vec::new();
    for i in 0..3 {
        let dir = Scratch::new(&format!("kill9-elect-{i}"));
        let mut elect = latchkey(&redis)
            .args([
                "elect",
                &format!("k9e{i}"),
                "--ttl",
                "10s",
                "--",
                "sh",
                "-c",
            ])
            .arg(group_script(&dir))
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn latchkey elect");
        let (_, _, group) = started(&dir);
        times.push(time_group_death(&mut elect, group));
    }
    summary("elect", times);
}

fn all_in_state(pids: &[i32], state: char) -> bool {
    let ok = pids
        .iter()
        .all(|&pid| matches!(stat(pid), Some((s, _)) if s == state));
    if !ok {
        let states: Vec<_> = pids.iter().map(|&pid| (pid, stat(pid))).collect();
        eprintln!("states {states:?}");
    }
    ok
}

#[test]
fn ctrl_z_stops_the_group_and_a_lock_lost_meanwhile_kills_it_with_75() {
    let redis = RedisServer::start();
    let dir = Scratch::new("tstp");
    let mut run = spawn_run(&redis, "tstp", "2s", &group_script(&dir));
    let (sh, bg, group) = started(&dir);
    let run_pid = run.id() as i32;

    // Ctrl-Z with the lock intact: stopped together, continued together.
    send_signal(&run, libc::SIGTSTP);
    eventually_blocking("latchkey and CMD's group stopped", || {
        all_in_state(&[run_pid, sh, bg], 'T')
    });
    send_signal(&run, libc::SIGCONT);
    eventually_blocking("CMD's group continued", || {
        [sh, bg]
            .iter()
            .all(|&pid| matches!(stat(pid), Some((s, _)) if s != 'T'))
    });

    // Ctrl-Z, then the lock is taken by someone else while we are stopped.
    send_signal(&run, libc::SIGTSTP);
    eventually_blocking("stopped again", || all_in_state(&[run_pid, sh, bg], 'T'));
    redis
        .command(&[
            "SET",
            &format!("{PREFIX}tstp"),
            "someone-else",
            "PX",
            "60000",
        ])
        .unwrap();
    send_signal(&run, libc::SIGCONT);
    let status = wait_exit(&mut run, QUICK);
    let left = members(group);
    cleanup(group);
    assert_eq!(code(status), 75, "a lock lost while stopped is exit 75");
    assert!(
        left.is_empty(),
        "CMD's group was killed, not continued: {left:?}"
    );
    let mut err = String::new();
    std::io::Read::read_to_string(run.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(err.contains("lost lock \"tstp\""), "{err}");
}

#[test]
fn sigstop_of_latchkey_alone_kills_the_group_before_the_lock_expires() {
    let redis = RedisServer::start();
    let dir = Scratch::new("sigstop");
    let ttl = Duration::from_secs(2);
    let mut run = spawn_run(&redis, "sigstop", "2s", &group_script(&dir));
    let (sh, bg, group) = started(&dir);
    // The next holder, the moment it gets the lock, records what is left
    // of the first CMD's processes: the real test of "before the lock's
    // deadline", whatever the scheduling delays.
    let next = spawn_run(&redis, "sigstop", "2s", &probe_script(&dir, &[sh, bg]));

    send_signal(&run, libc::SIGSTOP);
    let stopped = Instant::now();
    // The whole group, the guardian too: it dies of its own SIGKILL a
    // moment after CMD's processes on a loaded machine.
    while !(gone(sh) && gone(bg) && members(group).is_empty()) && stopped.elapsed() < QUICK {
        std::thread::sleep(Duration::from_micros(200));
    }
    let took = stopped.elapsed();
    let left = members(group);
    cleanup(group);
    let _ = run.kill();
    let _ = run.wait();
    assert!(left.is_empty(), "CMD's group outlived the lease: {left:?}");
    eprintln!("SIGSTOP of latchkey (ttl {ttl:?}) to CMD's group killed: {took:?}");
    assert_next_holder_saw_nothing_left(&dir, next);
}

/// CMD of the next holder: the state of each of `pids` (empty if reaped)
/// into `probe`, then `done`.
fn probe_script(dir: &Scratch, pids: &[i32]) -> String {
    let probe = dir.path("probe");
    let each: Vec<String> = pids
        .iter()
        .map(|pid| {
            format!(
                "echo \"{pid} $(cut -d' ' -f3 /proc/{pid}/stat 2>/dev/null)\" >> {}",
                probe.display()
            )
        })
        .collect();
    format!("{}; echo done >> {}", each.join("; "), probe.display())
}

fn assert_next_holder_saw_nothing_left(dir: &Scratch, mut next: Child) {
    let text = wait_for_text(&dir.path("probe"), "done", QUICK);
    assert_eq!(code(wait_exit(&mut next, QUICK)), 0);
    for line in text.lines().filter(|l| *l != "done") {
        let state = line.split_whitespace().nth(1).unwrap_or("");
        assert!(
            matches!(state, "" | "Z" | "X"),
            "the next holder started while the first CMD ran: {text:?}"
        );
    }
}

/// `run --fair` whose CMD appends "LABEL start", sleeps, "LABEL end".
fn fair_runner(redis: &RedisServer, label: &str, sleep: &str, marks: &Path) -> Child {
    let script = format!(
        "echo '{label} start' >> {m}; sleep {sleep}; echo '{label} end' >> {m}",
        m = marks.display()
    );
    latchkey(redis)
        .args([
            "run",
            "--fair",
            "f4",
            "--wait",
            "60s",
            "--waiter-lease",
            "600ms",
        ])
        .args(["--", "sh", "-c", &script])
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn latchkey run --fair")
}

fn queue_len(redis: &RedisServer) -> usize {
    redis
        .command(&["LLEN", &format!("{{{PREFIX}f4}}:queue")])
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_fair_waiter_paused_while_queued_never_starts_beside_the_holder() {
    let redis = RedisServer::start();
    let dir = Scratch::new("fair-paused");
    let marks = dir.path("marks");
    let out = output(
        latchkey(&redis).args(["acquire", "--fair", "f4", "--ttl", "30s"]),
        QUICK,
    );
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    let token = stdout(&out).lines().next().expect("token").to_owned();

    let mut w1 = fair_runner(&redis, "W1", "0.3", &marks);
    eventually_blocking("W1 queued", || queue_len(&redis) == 1);
    let mut w2 = fair_runner(&redis, "W2", "2", &marks);
    eventually_blocking("W2 queued", || queue_len(&redis) == 2);

    // W1 is stopped at the head of the queue when the holder hands over.
    send_signal(&w1, libc::SIGSTOP);
    let out = output(
        latchkey(&redis).args(["release", "--fair", "f4", &token]),
        QUICK,
    );
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    // W1's hand-off runs out; W2 takes the lock. Then W1 goes on.
    wait_for_text(&marks, "W2 start", QUICK);
    send_signal(&w1, libc::SIGCONT);

    assert_eq!(code(wait_exit(&mut w2, QUICK)), 0);
    assert_eq!(code(wait_exit(&mut w1, QUICK)), 0);
    let lines: Vec<String> = std::fs::read_to_string(&marks)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(
        lines,
        ["W2 start", "W2 end", "W1 start", "W1 end"],
        "W1 ran inside W2's hold"
    );
}

#[test]
fn sigstop_of_elect_kills_the_group_and_ctrl_z_after_a_lost_term_exits_75() {
    let redis = RedisServer::start();
    let ttl = Duration::from_secs(2);
    let spawn = |name: &str, dir: &Scratch| {
        latchkey(&redis)
            .args(["elect", name, "--once", "--ttl", "2s", "--", "sh", "-c"])
            .arg(group_script(dir))
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn latchkey elect")
    };

    // SIGSTOP of elect alone: the group is killed within the lease.
    let dir = Scratch::new("elect-stop");
    let mut elect = spawn("es", &dir);
    let (sh, bg, group) = started(&dir);
    let standby = latchkey(&redis)
        .args(["elect", "es", "--once", "--ttl", "2s", "--", "sh", "-c"])
        .arg(probe_script(&dir, &[sh, bg]))
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the standby");
    send_signal(&elect, libc::SIGSTOP);
    let stopped = Instant::now();
    // The whole group, the guardian too: it dies of its own SIGKILL a
    // moment after CMD's processes on a loaded machine.
    while !(gone(sh) && gone(bg) && members(group).is_empty()) && stopped.elapsed() < QUICK {
        std::thread::sleep(Duration::from_micros(200));
    }
    let took = stopped.elapsed();
    let left = members(group);
    cleanup(group);
    let _ = elect.kill();
    let _ = elect.wait();
    assert!(left.is_empty(), "CMD's group outlived the lease: {left:?}");
    eprintln!("SIGSTOP of elect (ttl {ttl:?}) to CMD's group killed: {took:?}");
    assert_next_holder_saw_nothing_left(&dir, standby);

    // Ctrl-Z, the lease deleted meanwhile, fg: killed, never continued; 75.
    let dir = Scratch::new("elect-tstp");
    let mut elect = spawn("et", &dir);
    let (sh, bg, group) = started(&dir);
    send_signal(&elect, libc::SIGTSTP);
    let elect_pid = elect.id() as i32;
    eventually_blocking("elect and CMD's group stopped", || {
        all_in_state(&[elect_pid, sh, bg], 'T')
    });
    redis.command(&["DEL", "{test:et}:leader"]).unwrap();
    send_signal(&elect, libc::SIGCONT);
    let status = wait_exit(&mut elect, QUICK);
    let left = members(group);
    cleanup(group);
    assert_eq!(
        code(status),
        75,
        "a term lost while stopped is exit 75 with --once"
    );
    assert!(
        left.is_empty(),
        "CMD's group was killed, not continued: {left:?}"
    );
}
