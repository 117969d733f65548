//! `latchkey run`: mutual exclusion between processes, conflicts, losing the
//! lock, signal forwarding, and the child's environment.

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

/// Generous bound for commands that should finish quickly: catches a hang,
/// not a slow machine.
const QUICK: Duration = Duration::from_secs(15);

#[test]
fn runs_on_one_name_never_overlap() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("overlap");
    let marks = scratch.path("marks");
    // Each critical section appends a start and an end mark with a timestamp
    // in nanoseconds; O_APPEND keeps each line whole.
    let section = format!(
        "echo \"start $(date +%s%N)\" >> {m}; sleep 0.2; echo \"end $(date +%s%N)\" >> {m}",
        m = marks.display()
    );
    let mut runs: Vec<_> = (0..3)
        .map(|_| {
            latchkey(&redis)
                .args(["run", "shared", "--", "sh", "-c", &section])
                .spawn()
                .expect("spawn latchkey run")
        })
        .collect();
    for run in &mut runs {
        assert_eq!(code(wait_exit(run, QUICK)), 0);
    }

    let text = std::fs::read_to_string(&marks).expect("marks");
    let mut intervals = Vec::new();
    let mut open: Option<u128> = None;
    for line in text.lines() {
        let (kind, at) = line.split_once(' ').expect("mark");
        let at: u128 = at.parse().expect("timestamp");
        match (kind, open) {
            ("start", None) => open = Some(at),
            ("end", Some(start)) => {
                intervals.push((start, at));
                open = None;
            }
            _ => panic!("sections interleaved: {text}"),
        }
    }
    assert_eq!(intervals.len(), 3, "every run ran once: {text}");
    for pair in intervals.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "sections overlap: {pair:?}");
    }
}

#[test]
fn no_wait_on_a_held_lock_exits_with_the_conflict_code_at_once() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("nowait");
    let ran = scratch.path("ran");
    let held = output(
        latchkey(&redis).args(["acquire", "busy", "--ttl", "30s"]),
        QUICK,
    );
    assert_eq!(code(held.status), 0);

    for (extra, expected) in [(vec![], 1), (vec!["-E", "42"], 42)] {
        let started = Instant::now();
        let out = output(
            latchkey(&redis)
                .args(["run", "busy", "--no-wait"])
                .args(&extra)
                .args(["--", "touch", ran.to_str().unwrap()]),
            QUICK,
        );
        // "At once": no waiting for the 30 s TTL. 5 s only absorbs a loaded machine.
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "took {:?}",
            started.elapsed()
        );
        assert_eq!(code(out.status), expected, "{}", stderr(&out));
        assert_one_error_line(&out);
        assert!(stderr(&out).contains("busy"), "{}", stderr(&out));
    }
    assert!(!ran.exists(), "the command must not run without the lock");

    // `-E 0`: a busy lock is fine, and says nothing (cron mails any output).
    let out = output(
        latchkey(&redis).args(["run", "busy", "--no-wait", "-E", "0", "--", "true"]),
        QUICK,
    );
    assert_eq!(code(out.status), 0);
    assert_eq!(stderr(&out), "");
}

#[test]
fn a_bounded_wait_times_out_with_the_conflict_code() {
    let redis = RedisServer::start();
    let held = output(
        latchkey(&redis).args(["acquire", "slow", "--ttl", "30s"]),
        QUICK,
    );
    assert_eq!(code(held.status), 0);
    let started = Instant::now();
    let out = output(
        latchkey(&redis).args(["run", "slow", "--wait", "300ms", "--", "true"]),
        QUICK,
    );
    assert_eq!(code(out.status), 1);
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "gave up early"
    );
    assert_one_error_line(&out);
}

#[test]
fn losing_the_lock_terminates_the_command_and_exits_75() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("lost");
    let marks = scratch.path("marks");
    let script = format!(
        "trap 'echo TERM >> {m}; exit 0' TERM; echo started >> {m}; while :; do sleep 0.05; done",
        m = marks.display()
    );
    // A 1 s TTL: the watchdog renews every 333 ms, so it notices soon.
    let mut run = latchkey(&redis)
        .args(["run", "doomed", "--ttl", "1s", "--", "sh", "-c", &script])
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn latchkey run");
    wait_for_text(&marks, "started", QUICK);

    redis.command(&["DEL", &format!("{PREFIX}doomed")]).unwrap();

    let status = wait_exit(&mut run, QUICK);
    assert_eq!(code(status), 75);
    wait_for_text(&marks, "TERM", QUICK);
    let mut err = String::new();
    std::io::Read::read_to_string(run.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(err.contains("lost lock \"doomed\""), "{err}");
}

#[test]
fn a_command_ignoring_sigterm_is_killed_after_the_grace_period() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("grace");
    let marks = scratch.path("marks");
    let script = format!(
        "trap '' TERM; echo started >> {}; while :; do sleep 0.05; done",
        marks.display()
    );
    let mut run = latchkey(&redis)
        .args([
            "run", "stubborn", "--ttl", "1s", "--grace", "300ms", "--", "sh", "-c", &script,
        ])
        .spawn()
        .expect("spawn latchkey run");
    wait_for_text(&marks, "started", QUICK);
    redis
        .command(&["DEL", &format!("{PREFIX}stubborn")])
        .unwrap();
    // Exiting at all proves the SIGKILL: the command ignores SIGTERM forever.
    assert_eq!(code(wait_exit(&mut run, QUICK)), 75);
}

#[test]
fn sigterm_reaches_the_command_and_the_lock_is_released() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("sigterm");
    let marks = scratch.path("marks");
    let script = format!(
        "trap 'echo TERM >> {m}; exit 4' TERM; echo started >> {m}; while :; do sleep 0.05; done",
        m = marks.display()
    );
    let mut run = latchkey(&redis)
        .args(["run", "job", "--", "sh", "-c", &script])
        .spawn()
        .expect("spawn latchkey run");
    wait_for_text(&marks, "started", QUICK);
    assert_eq!(
        redis.command(&["EXISTS", &format!("{PREFIX}job")]).unwrap(),
        "1"
    );

    send_signal(&run, libc::SIGTERM);

    assert_eq!(
        code(wait_exit(&mut run, QUICK)),
        4,
        "latchkey exits with the command's code"
    );
    wait_for_text(&marks, "TERM", QUICK);
    assert_eq!(
        redis.command(&["EXISTS", &format!("{PREFIX}job")]).unwrap(),
        "0",
        "released"
    );
}

#[test]
fn the_command_gets_the_lock_in_its_environment() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("env");
    let (env, go) = (scratch.path("env"), scratch.path("go"));
    // Writes its environment, then holds on until the test has compared it
    // with what Redis holds.
    let script = format!(
        "echo \"$LATCHKEY_NAME $LATCHKEY_TOKEN $LATCHKEY_FENCING_TOKEN\" > {e}.tmp; mv {e}.tmp {e}; \
         while [ ! -e {g} ]; do sleep 0.02; done",
        e = env.display(),
        g = go.display()
    );
    let mut run = latchkey(&redis)
        .args(["run", "envy", "--", "sh", "-c", &script])
        .spawn()
        .expect("spawn latchkey run");
    let text = wait_for_text(&env, "envy", QUICK);
    let fields: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(fields.len(), 3, "{text:?}");
    assert_eq!(fields[0], "envy");
    assert_eq!(
        redis.command(&["GET", &format!("{PREFIX}envy")]).unwrap(),
        fields[1],
        "token is the lock's value"
    );
    assert_eq!(
        redis
            .command(&["GET", &format!("{{{PREFIX}envy}}:fence")])
            .unwrap(),
        fields[2],
        "fencing token is the one just issued"
    );
    std::fs::write(&go, "").unwrap();
    assert_eq!(code(wait_exit(&mut run, QUICK)), 0);
}

#[test]
fn exit_codes_of_the_command_pass_through() {
    let redis = RedisServer::start();
    let cases: [(&[&str], i32); 3] = [
        (&["sh", "-c", "exit 3"], 3),
        (&["sh", "-c", "kill -KILL $$"], 128 + 9),
        (&["/nonexistent/command"], 127),
    ];
    for (command, expected) in cases {
        let out = output(
            latchkey(&redis).args(["run", "codes", "--"]).args(command),
            QUICK,
        );
        assert_eq!(code(out.status), expected, "{command:?}: {}", stderr(&out));
    }
    // Every run released the lock, whatever the command did.
    assert_eq!(
        redis
            .command(&["EXISTS", &format!("{PREFIX}codes")])
            .unwrap(),
        "0"
    );
}

/// Every flag of `run` and `elect` against every mode (plain, fair,
/// permits, read, write, Redlock): it does what it says (0, or 69 for
/// replicas a server without replicas cannot give) or is refused with exit
/// 2 and one line naming what clashes, before anything connects. `N` (and
/// `N2`) is replaced by a fresh name per row.
#[test]
fn every_flag_of_run_and_elect_works_in_every_mode_or_is_refused() {
    let redis = RedisServer::start();
    let more = [RedisServer::start(), RedisServer::start()];
    let redlock = format!("{},{},{}", redis.url(), more[0].url(), more[1].url());
    // Nothing listens there: a row that reached Redis would exit 69.
    let nowhere = "redis://127.0.0.1:1";
    let one = redis.url();
    #[rustfmt::skip]
    let table: &[(&str, &[&str], i32, &[&str])] = &[
        // Accepted, and doing what they say.
        (&one, &["run", "N", "--", "true"], 0, &[]),
        (&one, &["run", "--fair", "--waiter-lease", "1s", "N", "--", "true"], 0, &[]),
        (&one, &["run", "--permits", "2", "N", "--", "true"], 0, &[]),
        (&one, &["run", "--read", "N", "--", "true"], 0, &[]),
        (&one, &["run", "--write", "N", "--", "true"], 0, &[]),
        (&one, &["run", "--ttl", "5s", "--grace", "1s", "--wait", "2s", "-E", "3", "N", "--", "true"], 0, &[]),
        (&one, &["run", "--fair", "--no-wait", "-E", "3", "--grace", "1s", "N", "--", "true"], 0, &[]),
        (&one, &["run", "--permits", "2", "--ttl", "5s", "--no-wait", "-E", "3", "--grace", "1s", "N", "--", "true"], 0, &[]),
        (&one, &["run", "--read", "--ttl", "5s", "--wait", "2s", "-E", "3", "--grace", "1s", "N", "--", "true"], 0, &[]),
        (&one, &["run", "--write", "--ttl", "5s", "--no-wait", "N", "--", "true"], 0, &[]),
        (&one, &["run", "--replicas", "1", "--no-wait", "N", "--", "true"], 69, &["replicas"]),
        (&one, &["run", "--fair", "--replicas", "1", "--no-wait", "N", "--", "true"], 69, &["replicas"]),
        (&one, &["elect", "N", "--ttl", "2s", "--grace", "1s", "--once", "--value", "v", "--", "true"], 0, &[]),
        (&one, &["elect", "N", "--max-hold", "5s", "--once", "--", "true"], 0, &[]),
        (&one, &["run", "--max-hold", "5s", "N", "--", "true"], 0, &[]),
        (&one, &["run", "--fair", "--max-hold", "5s", "N", "--", "true"], 0, &[]),
        (&one, &["run", "--permits", "2", "--max-hold", "5s", "N", "--", "true"], 0, &[]),
        (&one, &["run", "--read", "--max-hold", "5s", "N", "--", "true"], 0, &[]),
        (&one, &["run", "--write", "--max-hold", "5s", "N", "--", "true"], 0, &[]),
        (&one, &["run", "N", "--and", "N2", "--max-hold", "5s", "--", "true"], 0, &[]),
        (&one, &["run", "--ask", "--wait", "2s", "N", "--", "true"], 0, &[]),
        (&one, &["run", "--fair", "--ask", "--wait", "2s", "N", "--", "true"], 0, &[]),
        (&one, &["run", "--permits", "2", "--ask", "--wait", "2s", "N", "--", "true"], 0, &[]),
        (&one, &["run", "--read", "--ask", "--wait", "2s", "N", "--", "true"], 0, &[]),
        (&one, &["run", "--write", "--ask", "--wait", "2s", "N", "--", "true"], 0, &[]),
        (&one, &["run", "N", "--and", "N2", "--ask", "--wait", "2s", "--", "true"], 0, &[]),
        (&one, &["run", "N", "--and", "N2", "--ttl", "5s", "--grace", "0s", "--no-wait", "-E", "3", "--", "true"], 0, &[]),
        (&one, &["run", "--permits", "3", "--take", "2", "N", "--", "true"], 0, &[]),
        (&redlock, &["run", "--ttl", "5s", "--no-wait", "-E", "3", "--grace", "1s", "N", "--", "true"], 0, &[]),
        // Refused before touching Redis: clashing flags, unknown flags.
        (nowhere, &["run", "--permits", "2", "--fair", "N", "--", "true"], 2, &["--permits", "--fair"]),
        (nowhere, &["run", "--read", "--fair", "N", "--", "true"], 2, &["--read", "--fair"]),
        (nowhere, &["run", "--write", "--fair", "N", "--", "true"], 2, &["--write", "--fair"]),
        (nowhere, &["run", "--permits", "2", "--replicas", "1", "N", "--", "true"], 2, &["--permits", "--replicas"]),
        (nowhere, &["run", "--read", "--replicas", "1", "N", "--", "true"], 2, &["--read", "--replicas"]),
        (nowhere, &["run", "--write", "--replicas", "3", "N", "--", "true"], 2, &["--write", "--replicas"]),
        (nowhere, &["run", "--permits", "2", "--waiter-lease", "1s", "N", "--", "true"], 2, &["--permits", "--waiter-lease"]),
        (nowhere, &["run", "--read", "--waiter-lease", "1s", "N", "--", "true"], 2, &["--read", "--waiter-lease"]),
        (nowhere, &["run", "--write", "--waiter-lease", "1s", "N", "--", "true"], 2, &["--write", "--waiter-lease"]),
        (nowhere, &["run", "--waiter-lease", "1s", "N", "--", "true"], 2, &["--fair"]),
        (nowhere, &["run", "--permits", "2", "--read", "N", "--", "true"], 2, &["--permits", "--read"]),
        (nowhere, &["run", "--permits", "2", "--write", "N", "--", "true"], 2, &["--permits", "--write"]),
        (nowhere, &["run", "--read", "--write", "N", "--", "true"], 2, &["--read", "--write"]),
        (nowhere, &["run", "--wait", "1s", "--no-wait", "N", "--", "true"], 2, &["--wait", "--no-wait"]),
        (nowhere, &["run", "N", "--tll", "5s", "--", "echo", "hi"], 2, &["--tll"]),
        (nowhere, &["run", "N", "-x", "--", "echo", "hi"], 2, &["-x"]),
        (nowhere, &["elect", "N", "--bogus", "--", "true"], 2, &["--bogus"]),
        (nowhere, &["run", "--read", "--take", "2", "N", "--", "true"], 2, &["--take", "--read"]),
        (nowhere, &["run", "--write", "--take", "2", "N", "--", "true"], 2, &["--take", "--write"]),
        (nowhere, &["run", "--fair", "--take", "2", "N", "--", "true"], 2, &["--take", "--fair"]),
        (nowhere, &["run", "N", "--and", "N2", "--take", "2", "--", "true"], 2, &["--take", "--and"]),
        (nowhere, &["run", "--take", "2", "N", "--", "true"], 2, &["--take", "--permits"]),
        (nowhere, &["run", "--permits", "2", "--take", "3", "N", "--", "true"], 2, &["--take 3", "--permits 2"]),
        (nowhere, &["run", "N", "--and", "N2", "--fair", "--", "true"], 2, &["--and", "--fair"]),
        (nowhere, &["run", "N", "--and", "N2", "--permits", "2", "--", "true"], 2, &["--and", "--permits"]),
        (nowhere, &["run", "N", "--and", "N2", "--read", "--", "true"], 2, &["--and", "--read"]),
        (nowhere, &["run", "N", "--and", "N2", "--write", "--", "true"], 2, &["--and", "--write"]),
        (nowhere, &["run", "N", "--and", "N2", "--replicas", "1", "--", "true"], 2, &["--and", "--replicas"]),
        (nowhere, &["run", "N", "--and", "N", "--", "true"], 2, &["twice"]),
        (nowhere, &["run", "--ask", "--no-wait", "N", "--", "true"], 2, &["--ask", "--no-wait"]),
        (nowhere, &["run", "--max-hold", "0s", "N", "--", "true"], 2, &["max hold", "0s"]),
        (nowhere, &["elect", "N", "--max-hold", "50ms", "--", "true"], 2, &["max hold", "50ms"]),
        (nowhere, &["run", "--grace", "-1s", "N", "--", "true"], 2, &["negative"]),
        // Refused: what a Redlock (several --redis) cannot do.
        (&redlock, &["run", "--fair", "N", "--", "true"], 2, &["fair", "Redlock"]),
        (&redlock, &["run", "--replicas", "1", "N", "--", "true"], 2, &["replicated", "Redlock"]),
        (&redlock, &["run", "--permits", "2", "N", "--", "true"], 2, &["--permits", "single --redis"]),
        (&redlock, &["run", "--read", "N", "--", "true"], 2, &["--read", "single --redis"]),
        (&redlock, &["run", "--write", "N", "--", "true"], 2, &["--write", "single --redis"]),
        (&redlock, &["elect", "N", "--", "true"], 2, &["elect", "single --redis"]),
    ];
    for (i, (url, args, expected, says)) in table.iter().enumerate() {
        let name = format!("flags{i}");
        let second = format!("flags{i}b");
        let args: Vec<&str> = args
            .iter()
            .map(|a| match *a {
                "N" => &name,
                "N2" => &second,
                a => a,
            })
            .collect();
        eprintln!("row {i}: {args:?}");
        let out = output(latchkey_at(url).args(&args), QUICK);
        let err = stderr(&out);
        assert_eq!(code(out.status), *expected, "{args:?}: {err}");
        if *expected != 0 {
            assert_one_error_line(&out);
        }
        for word in *says {
            assert!(err.contains(word), "{args:?}: {err:?} does not name {word}");
        }
    }
}

#[cfg(target_os = "linux")]
/// The guardian as `run` starts it (`latchkey __guardian FD EXEC_BEFORE
/// KILL_AT CMD...`), with `exec_before` in CLOCK_MONOTONIC ns; returns its
/// exit code and the first byte it sent back.
fn guardian(exec_before: u64, kill_at: u64, cmd: &[&str]) -> (i32, Option<u8>) {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let (mut ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let fd = theirs.as_raw_fd();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_latchkey"));
    command
        .args([
            "__guardian",
            &fd.to_string(),
            &exec_before.to_string(),
            &kill_at.to_string(),
        ])
        .args(cmd)
        .process_group(0);
    unsafe {
        command.pre_exec(move || {
            if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    drop(theirs);
    let mut first = [0u8; 1];
    let said = match ours.read(&mut first) {
        Ok(1) => Some(first[0]),
        _ => None,
    };
    let status = wait_exit(&mut child, QUICK);
    drop(ours);
    (code(status), said)
}

#[cfg(target_os = "linux")]
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(target_os = "linux")]
#[test]
fn the_guardian_never_execs_the_command_past_the_deadline_and_passes_its_code_on() {
    let dir = Scratch::new("guardian");
    let ran = dir.path("ran");
    let script = format!("touch {}; exit 7", ran.display());
    let now = monotonic_ns();
    let later = now + 60_000_000_000;

    // A deadline that has passed: CMD is not started ('P'), exit 75.
    let (code, said) = guardian(now, later, &["sh", "-c", &script]);
    assert_eq!((code, said), (75, Some(b'P')));
    assert!(!ran.exists(), "CMD ran past the deadline");

    // In time: started ('X'), and CMD's own code comes back.
    let (code, said) = guardian(later, later, &["sh", "-c", &script]);
    assert_eq!((code, said), (7, Some(b'X')));
    assert!(ran.exists());
}
