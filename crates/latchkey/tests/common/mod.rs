//! Helpers shared by the integration tests. Every test starts its own
//! redis-server(s) through the test kit: never a mock, never port 6379.
#![allow(dead_code)]

use std::time::Duration;

use latchkey::Client;
#[allow(unused_imports)]
pub use latchkey_testkit::{eventually, Proxy, ProxyMode, RedisServer};

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
pub fn child_command(helper: &str) -> std::process::Command {
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
