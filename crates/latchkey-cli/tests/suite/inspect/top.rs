//! `latchkey top` in a real pseudo-terminal (80×24): it draws the held
//! locks, quits on `q` with exit 0 and leaves the alternate screen. The
//! layout itself is tested on a fixed buffer in `src/commands/top/view.rs`.

use crate::common;

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;

const QUICK: Duration = Duration::from_secs(15);

/// A pseudo-terminal of 80 columns and 24 rows: (master, slave).
fn pty() -> (File, OwnedFd) {
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize {
        ws_row: 24,
        ws_col: 80,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    unsafe { (File::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

/// Waits until what the program wrote contains `needle` `times` times, at
/// most 10 s. (Ratatui moves the cursor over blanks: match single words.)
fn wait_for_screen(screen: &Mutex<Vec<u8>>, needle: &str, times: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = String::from_utf8_lossy(&screen.lock().unwrap()).into_owned();
        if text.matches(needle).count() >= times {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no {needle:?} ×{times} on the screen: {text:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn top_draws_the_held_locks_and_quits_on_q() {
    let redis = RedisServer::start();
    let out = output(
        latchkey(&redis).args(["acquire", "report-job", "--ttl", "60s"]),
        QUICK,
    );
    assert_eq!(code(out.status), 0, "{}", stderr(&out));

    let (mut master, slave) = pty();
    let mut child = latchkey(&redis)
        .args(["top", "--long-held", "1m"])
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave))
        .spawn()
        .unwrap();

    let screen = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let screen = screen.clone();
        let mut master = master.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // Ends with EIO once the child (the last holder of the slave) exits.
            while let Ok(n) = master.read(&mut buf) {
                if n == 0 {
                    break;
                }
                screen.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        })
    };

    wait_for_screen(&screen, "report-job", 1);
    wait_for_screen(&screen, "1m00s", 2); // the summary and the footer
                                          // Every frame ends by hiding the cursor: a second one is a refresh.
    wait_for_screen(&screen, "\x1b[?25l", 2);
    master.write_all(b"q").unwrap();
    assert_eq!(code(wait_exit(&mut child, QUICK)), 0);
    drop(master);
    let _ = reader.join();
    let text = String::from_utf8_lossy(&screen.lock().unwrap()).into_owned();
    assert!(text.contains("\x1b[?1049h"), "entered the alternate screen");
    assert!(
        text.contains("\x1b[?1049l"),
        "left the alternate screen: {text:?}"
    );
}

#[test]
fn top_without_a_terminal_is_a_usage_error() {
    let redis = RedisServer::start();
    let out = output(latchkey(&redis).arg("top"), QUICK);
    assert_eq!(code(out.status), 2);
    assert_one_error_line(&out);
    assert!(stderr(&out).contains("latchkey list"), "{}", stderr(&out));
}

/// Every kind is a row, with its KIND: a latch not yet open and a
/// semaphore with a permit held (before 0.4, `top` showed locks only).
#[test]
fn top_shows_every_kind_with_its_kind() {
    let redis = RedisServer::start();
    let out = output(
        latchkey(&redis).args(["latch", "gate", "--count", "3"]),
        QUICK,
    );
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    let mut holder = latchkey(&redis)
        .args(["run", "--permits", "2", "jobs", "--", "sleep", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + QUICK;
    while redis
        .command(&["ZCARD", "{test:jobs}:permits"])
        .unwrap_or_default()
        .trim()
        != "1"
    {
        assert!(Instant::now() < deadline, "the permit was not taken");
        std::thread::sleep(Duration::from_millis(20));
    }

    let (mut master, slave) = pty();
    let mut child = latchkey(&redis)
        .arg("top")
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave))
        .spawn()
        .unwrap();
    let screen = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let screen = screen.clone();
        let mut master = master.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = master.read(&mut buf) {
                if n == 0 {
                    break;
                }
                screen.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        })
    };
    for word in ["KIND", "gate", "latch", "jobs", "semaphore", "active"] {
        wait_for_screen(&screen, word, 1);
    }
    wait_for_screen(&screen, "count", 1);
    master.write_all(b"q").unwrap();
    assert_eq!(code(wait_exit(&mut child, QUICK)), 0);
    drop(master);
    let _ = reader.join();
    let _ = holder.kill();
    let _ = holder.wait();
}
