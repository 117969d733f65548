//! Tests of `RedisServer` against a real redis-server.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use latchkey_testkit::{eventually_blocking, RedisServer};

/// Sends one inline command on a fresh connection and returns the first reply
/// line; deliberately independent of `RedisServer::command`.
fn raw_command(addr: SocketAddr, line: &str) -> io::Result<String> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(format!("{line}\r\n").as_bytes())?;
    let mut reply = String::new();
    BufReader::new(stream).read_line(&mut reply)?;
    Ok(reply)
}

fn process_exists(pid: u32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

#[test]
fn stop_and_restart_keep_the_port_and_lose_unpersisted_data() {
    let mut redis = RedisServer::start();
    let port = redis.port();
    assert_ne!(port, 6379);
    assert_eq!(redis.addr().to_string(), format!("127.0.0.1:{port}"));
    assert_eq!(redis.url(), format!("redis://127.0.0.1:{port}/"));
    assert_eq!(redis.command(&["SET", "k", "v"]).unwrap(), "OK");
    let first_pid = redis.pid().expect("running server has a pid");

    redis.stop();
    assert!(!redis.is_running());
    assert_eq!(redis.pid(), None);
    assert!(
        TcpStream::connect(redis.addr()).is_err(),
        "port still open after stop"
    );

    redis.restart();
    assert_eq!(redis.port(), port);
    assert!(redis.is_running());
    assert_ne!(redis.pid(), Some(first_pid));
    assert_eq!(redis.command(&["EXISTS", "k"]).unwrap(), "0");

    // Restarting a running server works too.
    let second_pid = redis.pid();
    redis.restart();
    assert_ne!(redis.pid(), second_pid);
    assert_eq!(redis.command(&["PING"]).unwrap(), "PONG");
}

#[test]
fn aof_server_keeps_data_across_graceful_and_crash_restarts() {
    let mut redis = RedisServer::builder().aof(true).start();
    assert_eq!(
        redis.command(&["CONFIG", "GET", "appendfsync"]).unwrap(),
        "appendfsync\nalways"
    );
    redis.command(&["SET", "graceful", "1"]).unwrap();
    redis.restart();
    assert_eq!(redis.command(&["GET", "graceful"]).unwrap(), "1");

    redis.command(&["SET", "crash", "2"]).unwrap();
    redis.kill();
    assert!(!redis.is_running());
    redis.restart();
    assert_eq!(redis.command(&["GET", "crash"]).unwrap(), "2");
    assert!(redis.dir().join("appendonlydir").is_dir());
}

#[test]
fn pause_makes_commands_time_out_until_resume() {
    let redis = RedisServer::start();
    let mut conn = TcpStream::connect(redis.addr()).unwrap();
    conn.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();

    redis.pause();
    assert!(redis.is_running(), "a paused server still exists");
    conn.write_all(b"PING\r\n").unwrap();
    let mut reply = BufReader::new(conn.try_clone().unwrap());
    let mut line = String::new();
    let err = reply.read_line(&mut line).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ),
        "expected a timeout, got {err:?}"
    );
    let err = redis
        .command_with_timeout(&["PING"], Duration::from_millis(200))
        .unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);

    redis.resume();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    reply.read_line(&mut line).unwrap();
    assert_eq!(
        line, "+PONG\r\n",
        "the queued PING is answered after resume"
    );
    assert_eq!(redis.command(&["PING"]).unwrap(), "PONG");
}

#[test]
fn stop_works_on_a_paused_server() {
    let mut redis = RedisServer::start();
    redis.pause();
    let started = Instant::now();
    redis.stop();
    assert!(!redis.is_running());
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "stop fell back to the SIGKILL timeout"
    );
}

#[test]
fn replica_follows_its_primary() {
    let primary = RedisServer::start();
    let replica = RedisServer::builder().replica_of(primary.port()).start();
    assert_eq!(
        primary.command(&["SET", "k", "from-primary"]).unwrap(),
        "OK"
    );

    eventually_blocking("the replica saw the primary's write", || {
        replica
            .command(&["GET", "k"])
            .is_ok_and(|v| v == "from-primary")
    });
    assert!(replica.command(&["ROLE"]).unwrap().starts_with("slave\n"));
    let err = replica.command(&["SET", "k", "x"]).unwrap_err();
    assert!(err.to_string().starts_with("READONLY"), "{err}");
}

#[test]
fn password_is_required_and_handled_by_command() {
    let redis = RedisServer::builder().password("s3cret").start();
    assert_eq!(
        redis.url(),
        format!("redis://:s3cret@127.0.0.1:{}/", redis.port())
    );
    assert_eq!(redis.command(&["PING"]).unwrap(), "PONG");
    let reply = raw_command(redis.addr(), "PING").unwrap();
    assert!(
        reply.starts_with("-NOAUTH"),
        "unauthenticated PING got {reply:?}"
    );
}

#[test]
fn start_many_gives_independent_servers() {
    let servers = RedisServer::start_many(3);
    assert_eq!(servers.len(), 3);
    let mut ports: Vec<_> = servers.iter().map(RedisServer::port).collect();
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), 3, "ports not distinct: {ports:?}");
    assert_ne!(servers[0].dir(), servers[1].dir());

    servers[0].command(&["SET", "only-here", "1"]).unwrap();
    assert_eq!(servers[1].command(&["EXISTS", "only-here"]).unwrap(), "0");
    assert_eq!(servers[2].command(&["EXISTS", "only-here"]).unwrap(), "0");
}

#[test]
fn drop_kills_the_process_and_removes_the_data_dir() {
    let redis = RedisServer::start();
    let pid = redis.pid().unwrap();
    let dir = redis.dir().to_owned();
    assert!(process_exists(pid));
    assert!(dir.join("redis.log").is_file());

    drop(redis);
    assert!(!process_exists(pid), "redis-server {pid} survived drop");
    assert!(!dir.exists(), "{} survived drop", dir.display());
}

#[test]
fn command_renders_replies_and_errors() {
    let redis = RedisServer::start();
    assert_eq!(redis.command(&["INCR", "n"]).unwrap(), "1");
    assert_eq!(redis.command(&["RPUSH", "l", "a", "b c"]).unwrap(), "2");
    assert_eq!(
        redis.command(&["LRANGE", "l", "0", "-1"]).unwrap(),
        "a\nb c"
    );
    assert_eq!(redis.command(&["GET", "missing"]).unwrap(), "");
    assert!(redis
        .command(&["INFO", "server"])
        .unwrap()
        .contains("redis_version:"));
    let err = redis.command(&["NO-SUCH-COMMAND"]).unwrap_err();
    assert!(err.to_string().contains("unknown command"), "{err}");
}

#[test]
fn start_failures_explain_themselves() {
    let err = RedisServer::builder()
        .arg("maxmemory-policy", "bogus")
        .try_start()
        .unwrap_err();
    assert!(err.to_string().contains("maxmemory-policy"), "{err}");

    // A fixed port is never swapped for another one.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let err = RedisServer::builder().port(port).try_start().unwrap_err();
    assert!(err.to_string().contains("Address already in use"), "{err}");
}

#[test]
fn extra_args_reach_the_server() {
    let redis = RedisServer::builder()
        .arg("maxmemory-policy", "allkeys-lru")
        .start();
    assert_eq!(
        redis
            .command(&["CONFIG", "GET", "maxmemory-policy"])
            .unwrap(),
        "maxmemory-policy\nallkeys-lru"
    );
}

/// Set when this test binary runs itself as the helper process below.
const HELPER_ENV: &str = "LATCHKEY_TESTKIT_PDEATHSIG_HELPER";

/// `Drop` cannot run when the test process is SIGKILLed; the kernel's parent
/// death signal must take the server down instead. Runs this same test binary
/// as a helper that starts a server, then kills the helper.
#[cfg(target_os = "linux")]
#[test]
fn server_dies_with_a_killed_test_process() {
    if std::env::var_os(HELPER_ENV).is_some() {
        // Start the server on a short-lived thread: the death signal must
        // follow the process, not the thread that started the server. Give
        // a signal tied to the thread time to arrive before checking.
        let redis = thread::spawn(RedisServer::start).join().unwrap();
        thread::sleep(Duration::from_millis(200));
        assert_eq!(
            redis.command(&["PING"]).unwrap(),
            "PONG",
            "server died with its thread"
        );
        println!(
            "redis-pid={} redis-dir={}",
            redis.pid().unwrap(),
            redis.dir().display()
        );
        io::stdout().flush().unwrap();
        // Safety net should the parent fail: exit once stdin is closed.
        let _ = io::stdin().read_line(&mut String::new());
        return;
    }

    // Become the reaper of orphaned descendants, so the server is reparented
    // to us when the helper dies and we can see exactly how it ended (and
    // leave no zombie behind where init does not reap).
    // SAFETY: prctl with these arguments only sets a process attribute.
    assert_eq!(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) }, 0);

    let mut helper = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            // The whole path: `--exact` matches nothing else, and the
            // kit's tests are modules of one binary.
            "server::server_dies_with_a_killed_test_process",
            "--nocapture",
        ])
        .env(HELPER_ENV, "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let report = BufReader::new(helper.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .find_map(|line| line.strip_prefix("redis-pid=").map(str::to_owned))
        .expect("helper did not report a live redis (see its output above)");
    let (pid, dir) = report.split_once(" redis-dir=").unwrap();
    let pid: libc::pid_t = pid.parse().unwrap();
    // The killed helper cannot remove its server's data dir; do it here.
    struct RemoveOnDrop(std::path::PathBuf);
    impl Drop for RemoveOnDrop {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _dir_cleanup = RemoveOnDrop(dir.into());

    helper.kill().unwrap();
    helper.wait().unwrap();
    let mut status = 0;
    eventually_blocking(&format!("redis-server {pid} is reaped"), || {
        // Fails with ECHILD until the server has been reparented to us.
        // SAFETY: waitpid writes only to `status`.
        unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) == pid }
    });
    assert!(
        libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL,
        "status {status:#x}"
    );
}
