//! Helpers shared by the integration tests. Every test starts its own
//! redis-server(s) through the test kit: never a mock, never port 6379.
#![allow(dead_code)]

pub mod recorded;
pub mod sentinel;

use std::future::Future;
use std::time::{Duration, Instant};

use latchkey::{Client, Ownership};
#[allow(unused_imports)]
pub use latchkey_testkit::{eventually, Proxy, ProxyMode, RedisServer};

/// A task waiting up to `wait` for `lock`, with when it got it. The wait is
/// polled once before it is spawned: behind a guard of this client it then
/// waits for that guard's release without any I/O, so it is waiting when
/// this returns (a signal, not a sleep).
pub async fn spawn_waiting(
    lock: latchkey::Lock,
    wait: Duration,
) -> tokio::task::JoinHandle<latchkey::Result<(Instant, latchkey::LockGuard)>> {
    let mut waiting = Box::pin(async move {
        let guard = lock.acquire_until(wait).await?;
        Ok((Instant::now(), guard))
    });
    let first = std::future::poll_fn(|cx| std::task::Poll::Ready(waiting.as_mut().poll(cx))).await;
    assert!(first.is_pending(), "the lock is held: the waiter waits");
    tokio::spawn(waiting)
}

/// A client with a short command timeout, so failure tests end quickly.
pub async fn client(url: &str) -> Client {
    Client::builder(url)
        .prefix("test:")
        .command_timeout(Duration::from_millis(500))
        .pubsub_ping_every(Duration::from_millis(200))
        .connect()
        .await
        .expect("connect to the test server")
}

/// Creates the ACL user `user` (password `pw`) with nothing but `rule`.
pub fn create_user(server: &RedisServer, user: &str, rule: &str) {
    let mut args = vec!["ACL", "SETUSER", user, "reset", "on", ">pw"];
    args.extend(rule.split_whitespace());
    server.command(&args).expect("ACL SETUSER");
}

/// The URL that logs in to `server` as `user` (password `pw`).
pub fn user_url(server: &RedisServer, user: &str) -> String {
    format!("redis://{user}:pw@127.0.0.1:{}/", server.port())
}

/// A plain redis-rs connection for checking what is stored in Redis.
pub async fn raw(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("raw connection")
}

/// The command that runs the helper test `helper` of this same test binary
/// in a child process. Helpers are marked
/// `#[ignore = "helper process: run by its parent test"]`, so a normal run
/// neither runs nor counts them; the child runs just that one with
/// `--ignored --exact`. A parent must check in Redis that its child did its
/// work (a child that ran no test would exit 0 too).
///
/// `helper` is the helper's path from the crate, as
/// `concat!(module_path!(), "::helper")` spells it; the harness names tests
/// without the crate's own name.
pub fn child_command(helper: &str) -> std::process::Command {
    let helper = helper.strip_prefix("suite::").unwrap_or(helper);
    let exe = std::env::current_exe().expect("test binary path");
    let mut cmd = std::process::Command::new(exe);
    cmd.args([
        helper,
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    cmd
}

/// A helper process that talks over pipes: [`child_command`]`(helper)` with
/// `LATCHKEY_TEST_URL` set to `url`, its stdin and stdout piped; returns it
/// and its stdout's lines once one starting with `ready` came (what it
/// prints when it holds what the parent tests).
pub fn child_talking(
    helper: &str,
    url: &str,
    ready: &str,
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStdout>,
    String,
) {
    use std::io::BufRead;
    use std::process::Stdio;
    let mut child = child_command(helper)
        .arg("--quiet")
        .env("LATCHKEY_TEST_URL", url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn child test process");
    let mut out = std::io::BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    while !line.starts_with(ready) {
        line.clear();
        assert!(
            out.read_line(&mut line).expect("read") > 0,
            "the child exited early"
        );
    }
    (child, out, line)
}

/// Spawns [`child_command`]`(helper)` with `env` set.
pub fn spawn_child(helper: &str, env: &[(&str, String)]) -> std::process::Child {
    let mut cmd = child_command(helper);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("spawn child test process")
}

/// The variable `name` its parent set for a helper; a helper run by hand
/// (`--ignored`) fails here, saying so, rather than passing without work.
pub fn helper_env(name: &str) -> String {
    std::env::var(name)
        .unwrap_or_else(|_| panic!("{name} is not set: a helper process, run by its parent test"))
}

/// Waits until `channel` has at least `n` subscribers (`PUBSUB NUMSUB`): the
/// sign that a waiter is listening, so that a release from now on is one it
/// must hear. Instead of sleeping "to let the waiter subscribe".
pub async fn until_subscribed(server: &RedisServer, channel: &str, n: u64) {
    eventually(
        &format!("{n} waiter(s) subscribed to {channel}"),
        || async { server.subscribers(channel) >= n },
    )
    .await
}

/// Lock, fencing token, contention, release, waiting (on `b`, woken by
/// `a`'s release) and signals, between clients `a` and `b` of `server`;
/// `name` names the lock and the signal.
pub async fn core_paths(server: &RedisServer, a: &Client, b: &Client, name: &str) {
    // A lock and its fencing token.
    let lock = a.lock(name, Duration::from_secs(30)).unwrap();
    let guard = lock.try_acquire().await.unwrap().expect("free lock");
    assert!(guard.fencing_token().await.unwrap() > 0);
    let other = b.lock(name, Duration::from_secs(30)).unwrap();
    assert!(other.try_acquire().await.unwrap().is_none(), "held twice");

    // A waiter on the other client wakes at the release (pub/sub).
    let waiter = tokio::spawn(async move {
        let g = other.acquire_until(Duration::from_secs(20)).await.unwrap();
        (Instant::now(), g)
    });
    until_subscribed(server, &format!("{{test:{name}}}:released"), 1).await;
    let released_at = Instant::now();
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    let (acquired_at, g) = waiter.await.unwrap();
    // Woken by the release, not by the 30 s TTL.
    assert!(acquired_at - released_at < Duration::from_secs(5));
    assert_eq!(g.release().await.unwrap(), Ownership::Owned);

    // A signal from one client reaches the other's listener.
    let mut listener = b.listen([name]).await.unwrap();
    assert_eq!(a.signal(name, b"signalled").await.unwrap(), 1);
    let signal = listener
        .recv_timeout(latchkey_testkit::PATIENCE)
        .await
        .expect("signal");
    assert_eq!(signal.payload, b"signalled");
}

/// A 3-primary Redis Cluster whose nodes (bus and all) speak TLS only,
/// with `certs`.
pub async fn tls_cluster(certs: &latchkey_testkit::TlsCerts) -> latchkey_testkit::RedisCluster {
    let certs = certs.clone();
    tokio::task::spawn_blocking(move || {
        latchkey_testkit::RedisCluster::builder()
            .primaries(3)
            .replicas_per_primary(0)
            .tls(&certs)
            .start()
    })
    .await
    .unwrap()
}
