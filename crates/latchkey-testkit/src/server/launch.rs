//! Starting a server process: its command line, and waiting until it
//! answers PING (or saying, with its log's tail, why it never will).

use std::fmt::Write as _;
use std::fs::{self, File};
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Instant;

use super::{
    ServerBuilder, LOG_FILE, LOG_TAIL_LINES, POLL_INTERVAL, PROBE_TIMEOUT, READY_TIMEOUT,
    SENTINEL_CONF, STDERR_FILE,
};
use crate::choice::ServerProgram;
use crate::spawn;

impl ServerBuilder {
    /// The full `redis-server` command line for `port` and `dir`.
    pub(super) fn command(&self, server: &ServerProgram, port: u16, dir: &Path) -> Command {
        let mut cmd = Command::new(server.program());
        if self.sentinel_conf.is_some() {
            // The config file must come first.
            cmd.arg(dir.join(SENTINEL_CONF)).arg("--sentinel");
        }
        cmd.arg("--port").arg(port.to_string());
        cmd.args(["--bind", "127.0.0.1", "--protected-mode", "no"]);
        // No RDB snapshots: they fork and write in the background at
        // unpredictable times, and nothing here wants them.
        cmd.args(["--save", "", "--appendonly", "no"]);
        cmd.arg("--dir").arg(dir);
        cmd.args(["--daemonize", "no"]);
        cmd.arg("--logfile").arg(dir.join(LOG_FILE));
        // Redis 7 waits 5 s before a diskless full sync to batch replicas;
        // tests want their replica in sync right away.
        cmd.args(["--repl-diskless-sync-delay", "0"]);
        if self.aof {
            cmd.args(["--appendonly", "yes", "--appendfsync", "always"]);
        }
        if self.cluster {
            cmd.args(["--cluster-enabled", "yes", "--cluster-config-file"]);
            cmd.arg(dir.join("nodes.conf"));
        }
        if let Some(primary) = self.replica_of {
            cmd.args(["--replicaof", "127.0.0.1"])
                .arg(primary.to_string());
        }
        if let Some(pw) = &self.password {
            cmd.arg("--requirepass").arg(pw);
        }
        if let Some(tls) = &self.tls {
            cmd.args(tls.args(port));
        }
        for (name, value) in &self.extra {
            cmd.arg(format!("--{name}")).arg(value);
        }
        for (name, values) in &self.extra_words {
            cmd.arg(format!("--{name}"));
            // Redis reads an empty word only when it is written `""`.
            cmd.args(values.iter().map(|v| if v.is_empty() { "\"\"" } else { v }));
        }
        cmd
    }
}

/// Why a launch failed.
pub(super) struct LaunchError {
    pub(super) error: io::Error,
    /// Redis could not bind its port; worth retrying.
    pub(super) port_in_use: bool,
}

/// Starts `redis-server` and waits until it answers PING. On failure the
/// process is gone and the error quotes the log of this attempt.
pub(super) fn launch(config: &ServerBuilder, port: u16, dir: &Path) -> Result<Child, LaunchError> {
    let fail = |message: String| LaunchError {
        port_in_use: message.contains("Address already in use"),
        error: io::Error::other(message),
    };
    // Redis appends to its log across restarts; only this attempt's part is
    // relevant to what goes wrong now.
    let log_path = dir.join(LOG_FILE);
    let log_start = fs::metadata(&log_path).map_or(0, |m| m.len());
    let stderr = File::create(dir.join(STDERR_FILE)).map_err(|e| LaunchError {
        error: io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display())),
        port_in_use: false,
    })?;

    if let Some(conf) = &config.sentinel_conf {
        let path = dir.join(SENTINEL_CONF);
        if !path.exists() {
            fs::write(&path, conf).map_err(|e| LaunchError {
                error: io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display())),
                port_in_use: false,
            })?;
        }
    }
    let server = config.server_program().map_err(|error| LaunchError {
        error,
        port_in_use: false,
    })?;
    let mut cmd = config.command(&server, port, dir);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    let mut child = spawn::spawn(cmd).map_err(|e| LaunchError {
        error: if e.kind() == io::ErrorKind::NotFound {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{} not found ({}): install redis-server with `apt-get install \
                     redis-server`, or fetch the others with `./dev servers`",
                    server.program().display(),
                    server.name()
                ),
            )
        } else {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot run {} ({}): {e}",
                    server.program().display(),
                    server.name()
                ),
            )
        },
        port_in_use: false,
    })?;

    match wait_ready(&mut child, port, config) {
        Ok(()) => Ok(child),
        Err(reason) => {
            let _ = child.kill();
            let _ = child.wait();
            let mut message = format!("{} on port {port} {reason}", server.name());
            append_tail(&mut message, &dir.join(STDERR_FILE), 0);
            append_tail(&mut message, &log_path, log_start);
            Err(fail(message))
        }
    }
}

/// Polls until the server answers PING, or says why it never will.
fn wait_ready(child: &mut Child, port: u16, config: &ServerBuilder) -> Result<(), String> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("exited during startup ({status})"));
        }
        // PING answers "-LOADING" until an AOF is loaded, so PONG means ready.
        if config
            .command_at(addr, &["PING"], PROBE_TIMEOUT)
            .is_ok_and(|r| r == "PONG")
        {
            // Whoever took the port before our redis could bind it (making
            // ours exit) might be a redis too and answer PONG; make sure the
            // answer came from our child.
            let info = config.command_at(addr, &["INFO", "server"], PROBE_TIMEOUT);
            let ours = format!("process_id:{}", child.id());
            if info.is_ok_and(|info| info.lines().any(|line| line == ours)) {
                return Ok(());
            }
            return Err("could not bind its port: Address already in use".into());
        }
        if Instant::now() >= deadline {
            return Err(format!("did not answer PING within {READY_TIMEOUT:?}"));
        }
        thread::sleep(POLL_INTERVAL);
    }
}

/// Appends the last lines of `path` from byte `from` on, if there are any.
fn append_tail(message: &mut String, path: &Path, from: u64) {
    let Ok(bytes) = fs::read(path) else { return };
    let start = usize::try_from(from).unwrap_or(usize::MAX).min(bytes.len());
    let text = String::from_utf8_lossy(&bytes[start..]);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return;
    }
    let _ = write!(message, "\n--- last lines of {} ---", path.display());
    for line in &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..] {
        let _ = write!(message, "\n{line}");
    }
}
