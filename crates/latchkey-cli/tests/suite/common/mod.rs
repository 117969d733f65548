//! Helpers for driving the real `latchkey` binary against private
//! redis-servers from the test kit (never port 6379, never a mock).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

pub use latchkey_testkit::RedisServer;

/// The key prefix every test uses.
pub const PREFIX: &str = "test:";

/// `latchkey --redis URL --prefix test:` with a clean environment.
pub fn latchkey(server: &RedisServer) -> Command {
    latchkey_at(&server.url())
}

/// `latchkey --redis URL --prefix test:` for any URL.
pub fn latchkey_at(url: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_latchkey"));
    cmd.args(["--redis", url, "--prefix", PREFIX])
        .env_remove("LATCHKEY_REDIS_URL")
        .env_remove("LATCHKEY_PREFIX")
        .env_remove("LATCHKEY_TLS_CA")
        .env_remove("LATCHKEY_TLS_CERT")
        .env_remove("LATCHKEY_TLS_KEY")
        .env_remove("LATCHKEY_TLS_SERVER_NAME")
        .stdin(Stdio::null());
    cmd
}

/// Runs a command to completion, bounded by `limit` (a hung binary fails
/// the test instead of hanging it).
pub fn output(cmd: &mut Command, limit: Duration) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn latchkey");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("wait for latchkey"),
        Err(_) => {
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            panic!("latchkey did not finish within {limit:?}");
        }
    }
}

/// Waits for a spawned child, bounded by `limit` (killed and panics after).
pub fn wait_exit(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("process did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until the file at `path` contains `needle` (written by a child
/// process: there is no other signal to wait on), at most `limit`.
pub fn wait_for_text(path: &Path, needle: &str, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(needle) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{path:?} did not get {needle:?} within {limit:?}; it has {text:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A fresh, empty scratch directory for one test, removed on drop.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("latchkey-cli-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        Scratch(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Exit code of a finished process (panics if it was killed by a signal).
pub fn code(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| panic!("killed by a signal: {status:?}"))
}

/// stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Asserts stderr is exactly one line starting with `latchkey: `.
pub fn assert_one_error_line(out: &Output) {
    let err = stderr(out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "expected one stderr line, got {err:?}");
    assert!(lines[0].starts_with("latchkey: "), "bad error line {err:?}");
}

/// Sends `signal` to a child process.
pub fn send_signal(child: &Child, signal: libc::c_int) {
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    assert_eq!(rc, 0, "kill failed");
}
