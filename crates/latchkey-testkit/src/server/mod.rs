//! Private `redis-server` child processes (`launch.rs`: the command line,
//! starting one and waiting until it answers).

mod launch;

use std::fs;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use crate::choice::ServerProgram;
use crate::ports::{free_cluster_port, free_port};
use crate::{resp, spawn};
use launch::launch;

/// How long a fresh or restarted server may take to answer PING. Loading a
/// test-sized AOF takes milliseconds; seconds mean something is wrong.
const READY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a graceful [`RedisServer::stop`] may take before we SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between readiness / exit polls: short enough that startup costs a
/// few milliseconds, long enough not to spin.
const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// Per-probe timeout while waiting for readiness.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// Timeout of [`RedisServer::command`]; bounds a test that talks to a paused
/// server instead of hanging it.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);
/// How often to pick a new port when another process grabbed ours between
/// [`free_port`] and redis binding it.
const PORT_ATTEMPTS: usize = 5;
/// Log lines quoted in startup errors.
const LOG_TAIL_LINES: usize = 20;

const LOG_FILE: &str = "redis.log";
/// Config errors are printed to stderr before the log file is opened.
const STDERR_FILE: &str = "stderr.log";
/// A Sentinel's config file in its data dir.
const SENTINEL_CONF: &str = "sentinel.conf";

/// A private `redis-server` child process on a loopback port.
///
/// Each server has its own port and its own data directory, and is killed
/// (and its directory removed) on drop, also when the test panics. If the
/// whole test process dies, Linux kills the server too (see the crate docs).
///
/// ```
/// let redis = latchkey_testkit::RedisServer::start();
/// assert_eq!(redis.command(&["PING"]).unwrap(), "PONG");
/// ```
#[derive(Debug)]
pub struct RedisServer {
    /// Kept so that [`restart`](Self::restart) launches the same config.
    config: ServerBuilder,
    port: u16,
    dir: PathBuf,
    /// `None` after kill/stop. Behind a mutex so that `&self` methods can
    /// poll it (`Child::try_wait` needs `&mut`) and the server stays `Sync`.
    child: Mutex<Option<Child>>,
}

/// Configures a [`RedisServer`] before starting it; see [`RedisServer::builder`].
#[derive(Clone, Debug, Default)]
#[must_use]
pub struct ServerBuilder {
    aof: bool,
    replica_of: Option<u16>,
    password: Option<String>,
    extra: Vec<(String, String)>,
    /// Directives of several words (`rename-command EVALSHA ""`).
    extra_words: Vec<(String, Vec<String>)>,
    port: Option<u16>,
    /// A Redis Cluster node: `cluster-enabled`, a bus port free as well.
    cluster: bool,
    /// TLS only (see `tls.rs`).
    tls: Option<crate::tls::ServerTls>,
    /// A Sentinel (`--sentinel`) with this config, written to its data dir
    /// on first launch (Sentinel rewrites it; a restart keeps its state).
    sentinel_conf: Option<String>,
    /// The binary; `None`: this run's ([`ServerProgram::of_this_run`]).
    program: Option<ServerProgram>,
}

impl RedisServer {
    /// Starts a server with the default config: no persistence, no password,
    /// a free loopback port.
    ///
    /// # Panics
    ///
    /// If the server cannot be started, with the reason (e.g. `redis-server`
    /// missing from `PATH`) and the tail of its log.
    pub fn start() -> RedisServer {
        Self::builder().start()
    }

    /// Returns a builder for a server with a non-default config.
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// Starts `n` independent default servers (e.g. for Redlock quorums).
    ///
    /// # Panics
    ///
    /// Like [`start`](Self::start); servers started so far are cleaned up.
    pub fn start_many(n: usize) -> Vec<RedisServer> {
        (0..n).map(|_| Self::start()).collect()
    }

    /// The loopback port; stays the same across [`restart`](Self::restart).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// A connection URL: `redis://127.0.0.1:PORT/`, or
    /// `redis://:PASSWORD@127.0.0.1:PORT/` when a password is configured (the
    /// password is percent-encoded as needed).
    pub fn url(&self) -> String {
        if self.config.tls.is_some() {
            let url = self.url_plain();
            return url.replacen("redis://", "rediss://", 1);
        }
        self.url_plain()
    }

    fn url_plain(&self) -> String {
        match &self.config.password {
            None => format!("redis://127.0.0.1:{}/", self.port),
            Some(pw) => format!("redis://:{}@127.0.0.1:{}/", percent_encode(pw), self.port),
        }
    }

    /// The process id while the server process exists (running or paused);
    /// `None` after [`kill`](Self::kill), [`stop`](Self::stop) or a crash.
    pub fn pid(&self) -> Option<u32> {
        self.with_live_child(|child| child.id())
    }

    /// Whether the process exists (a paused server counts as running).
    pub fn is_running(&self) -> bool {
        self.pid().is_some()
    }

    /// Crashes the server: SIGKILL, no chance to flush anything. Waits until
    /// the process is gone. Does nothing if it is not running.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child_slot().take() {
            // Errors mean the child was already reaped; it is gone either way.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Shuts the server down gracefully (SIGTERM, so an AOF server flushes)
    /// and waits for it to exit; SIGKILLs it if that takes longer than 5 s.
    /// Works on a paused server too. Does nothing if it is not running.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child_slot().take() else {
            return;
        };
        if matches!(child.try_wait(), Ok(None)) {
            spawn::signal(child.id(), libc::SIGTERM);
            // A stopped process only acts on SIGTERM once it is continued.
            spawn::signal(child.id(), libc::SIGCONT);
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
            thread::sleep(POLL_INTERVAL);
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Stops the server if it is running, then starts it again on the same
    /// port with the same data dir and config, and waits until it answers
    /// PING. An AOF server comes back with its data; a non-persistent one
    /// comes back empty.
    ///
    /// # Panics
    ///
    /// If the server does not come back (e.g. another process took the port
    /// while it was down), with the tail of its log.
    pub fn restart(&mut self) {
        self.stop();
        let mut attempt = 1;
        let child = loop {
            match launch(&self.config, self.port, &self.dir) {
                Ok(child) => break child,
                // The port should be ours, but a client socket may have been
                // given it as an ephemeral port meanwhile; those are brief.
                Err(e) if e.port_in_use && attempt < PORT_ATTEMPTS => {
                    attempt += 1;
                    thread::sleep(Duration::from_millis(200));
                }
                Err(e) => panic!("latchkey-testkit: restart failed: {}", e.error),
            }
        };
        *self.child_slot() = Some(child);
    }

    /// Freezes the process with SIGSTOP: connections stay open but nothing is
    /// answered, like a server stuck in a long GC pause or a hung VM.
    /// Does nothing if it is not running.
    pub fn pause(&self) {
        self.with_live_child(|child| spawn::signal(child.id(), libc::SIGSTOP));
    }

    /// Undoes [`pause`](Self::pause) with SIGCONT; queued commands are then
    /// answered.
    pub fn resume(&self) {
        self.with_live_child(|child| spawn::signal(child.id(), libc::SIGCONT));
    }

    /// Sends one command over a fresh raw connection and returns the reply as
    /// text, authenticating first if a password is configured. Meant for admin
    /// commands (`CONFIG SET`, `DEBUG SLEEP`, `INFO commandstats`, ...) without
    /// going through the client library under test.
    ///
    /// Rendering: simple and bulk strings as-is, integers in decimal, nil as
    /// `""`, array elements joined by `\n`. An error reply becomes an
    /// [`io::ErrorKind::Other`] error carrying its message (e.g.
    /// `"ERR unknown command ..."`).
    ///
    /// Times out after 10 s; use [`command_with_timeout`](Self::command_with_timeout)
    /// for longer commands such as `DEBUG SLEEP 15`.
    pub fn command(&self, args: &[&str]) -> io::Result<String> {
        self.command_with_timeout(args, COMMAND_TIMEOUT)
    }

    /// [`command`](Self::command) with an explicit bound on connecting and on
    /// each read and write (a timeout yields [`io::ErrorKind::TimedOut`]).
    pub fn command_with_timeout(&self, args: &[&str], timeout: Duration) -> io::Result<String> {
        self.config.command_at(self.addr(), args, timeout)
    }

    /// The server's private data directory (AOF files, `redis.log`), unique
    /// per server under [`std::env::temp_dir`] and removed on drop.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn child_slot(&self) -> std::sync::MutexGuard<'_, Option<Child>> {
        // A panic while holding the lock cannot leave the Option half-updated.
        self.child.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the child if its process still exists. Holding the lock
    /// while `f` runs guarantees nobody reaps the child meanwhile, so its pid
    /// cannot be reused by an unrelated process that `f` would then signal.
    fn with_live_child<T>(&self, f: impl FnOnce(&Child) -> T) -> Option<T> {
        let mut slot = self.child_slot();
        let child = slot.as_mut()?;
        match child.try_wait() {
            Ok(None) => Some(f(child)),
            _ => None,
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

impl ServerBuilder {
    /// Turns on AOF persistence with `appendfsync always`, so every
    /// acknowledged write survives even a [`RedisServer::kill`].
    pub fn aof(mut self, on: bool) -> Self {
        self.aof = on;
        self
    }

    /// Makes the server a replica of `127.0.0.1:primary_port`. If the primary
    /// has a password, also pass `.arg("masterauth", password)`.
    pub fn replica_of(mut self, primary_port: u16) -> Self {
        self.replica_of = Some(primary_port);
        self
    }

    /// Requires clients to authenticate (`requirepass`). [`RedisServer::url`]
    /// and [`RedisServer::command`] then include the password.
    pub fn password(mut self, pw: &str) -> Self {
        self.password = Some(pw.to_owned());
        self
    }

    /// Adds any config directive, e.g. `.arg("maxmemory-policy", "allkeys-lru")`.
    /// It is passed as `--name value` after the built-in defaults, so it can
    /// override them; `value` is a single argument.
    pub fn arg(mut self, name: &str, value: &str) -> Self {
        self.extra.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Runs `program` instead of this run's server (`LATCHKEY_TEST_SERVER`,
    /// by default `redis-server` from `PATH`): for a test that needs one
    /// particular server.
    pub fn program(mut self, program: ServerProgram) -> Self {
        self.program = Some(program);
        self
    }

    /// The server binary this builder starts, or why there is none (see
    /// [`ServerProgram::of_this_run`]).
    pub fn server_program(&self) -> io::Result<ServerProgram> {
        match &self.program {
            Some(program) => Ok(program.clone()),
            None => ServerProgram::of_this_run()
                .cloned()
                .map_err(|why| io::Error::new(io::ErrorKind::NotFound, why)),
        }
    }

    /// Adds a config directive of several words, each its own argument:
    /// `.arg_words("rename-command", &["EVALSHA", ""])` disables `EVALSHA`,
    /// as a managed service or a proxy may.
    pub fn arg_words(mut self, name: &str, values: &[&str]) -> Self {
        let values = values.iter().map(|v| (*v).to_owned()).collect();
        self.extra_words.push((name.to_owned(), values));
        self
    }

    /// Uses a fixed port instead of a free one. Rarely needed, and a port
    /// conflict is then an error instead of a retry on another port.
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    /// Makes the server a Redis Cluster node (`cluster-enabled yes`, its
    /// `nodes.conf` in its data dir) on a port whose bus port (port + 10000)
    /// is free too. [`RedisCluster`](crate::RedisCluster) joins such nodes.
    pub(crate) fn cluster_node(mut self) -> Self {
        self.cluster = true;
        self
    }

    /// The TLS settings (`tls.rs`).
    pub(crate) fn with_tls(mut self, tls: crate::tls::ServerTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// One admin command to this server at `addr`, over TLS if it has it.
    fn command_at(&self, addr: SocketAddr, args: &[&str], timeout: Duration) -> io::Result<String> {
        let password = self.password.as_deref();
        match &self.tls {
            None => resp::command(addr, password, args, timeout),
            Some(tls) => resp::command_tls(addr, Some(&tls.admin()?), password, args, timeout),
        }
    }

    /// Makes the server a Sentinel (`redis-server CONF --sentinel`) whose
    /// config file, in its data dir, starts as `conf`.
    /// [`SentinelSet`](crate::SentinelSet) starts such servers.
    pub(crate) fn sentinel(mut self, conf: String) -> Self {
        self.sentinel_conf = Some(conf);
        self
    }

    /// Starts the server and waits until it answers PING.
    ///
    /// # Panics
    ///
    /// With the reason and the tail of the server's log; see
    /// [`try_start`](Self::try_start) for a non-panicking version.
    pub fn start(self) -> RedisServer {
        self.try_start()
            .unwrap_or_else(|e| panic!("latchkey-testkit: {e}"))
    }

    /// Starts the server and waits until it answers PING. The error explains
    /// what went wrong, including the tail of the server's log.
    pub fn try_start(self) -> io::Result<RedisServer> {
        let dir = create_data_dir()?;
        let attempts = if self.port.is_some() {
            1
        } else {
            PORT_ATTEMPTS
        };
        let mut attempt = 1;
        loop {
            let port = match (self.port, self.cluster) {
                (Some(port), _) => port,
                (None, true) => free_cluster_port(),
                (None, false) => free_port(),
            };
            match launch(&self, port, &dir) {
                Ok(child) => {
                    return Ok(RedisServer {
                        config: self,
                        port,
                        dir,
                        child: Mutex::new(Some(child)),
                    })
                }
                // Lost the race for a free port to another process: pick another.
                Err(e) if e.port_in_use && attempt < attempts => {
                    attempt += 1;
                    // A cluster node may have written its ID and old port.
                    let _ = fs::remove_file(dir.join("nodes.conf"));
                }
                Err(e) => {
                    let _ = fs::remove_dir_all(&dir);
                    return Err(e.error);
                }
            }
        }
    }
}

/// Creates a fresh, empty data directory under the system temp dir.
fn create_data_dir() -> io::Result<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("latchkey-testkit-redis-{}-{n}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            // Left behind by an earlier process that had the same pid and was
            // killed before its drops ran; never reuse its data.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot create a data dir {}: {e}", dir.display()),
                ))
            }
        }
    }
}

/// Percent-encodes everything but RFC 3986 unreserved characters, so any
/// password yields a valid URL.
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_encodes_reserved_characters() {
        assert_eq!(percent_encode("s3cret-_.~"), "s3cret-_.~");
        assert_eq!(percent_encode("p@ss:w/rd é"), "p%40ss%3Aw%2Frd%20%C3%A9");
    }

    #[test]
    fn later_args_follow_the_defaults_so_they_can_override_them() {
        let cmd = RedisServer::builder()
            .aof(true)
            .password("pw")
            .arg("appendfsync", "everysec")
            .command(&ServerProgram::named("").unwrap(), 7000, Path::new("/d"));
        let args: Vec<_> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let pos = |s: &str| args.iter().rposition(|a| a == s).unwrap();
        assert!(pos("everysec") > pos("always"));
        assert_eq!(args[pos("--requirepass") + 1], "pw");
        assert_eq!(args[pos("--save") + 1], "");
    }
}
