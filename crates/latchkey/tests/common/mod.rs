//! Helpers shared by the integration tests. Every test starts its own
//! redis-server(s) through the test kit: never a mock, never port 6379.
#![allow(dead_code)]

use std::time::Duration;

use latchkey::Client;
#[allow(unused_imports)]
pub use latchkey_testkit::{Proxy, ProxyMode, RedisServer};

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

/// Runs the test function `test_name` of this same test binary in a child
/// process with `env` set, and returns the child. The child side of a test
/// recognizes itself by the `LATCHKEY_CHILD` variable.
pub fn spawn_child(test_name: &str, env: &[(&str, String)]) -> std::process::Child {
    let exe = std::env::current_exe().expect("test binary path");
    let mut cmd = std::process::Command::new(exe);
    cmd.args([test_name, "--exact", "--nocapture", "--test-threads=1"])
        .env("LATCHKEY_CHILD", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("spawn child test process")
}

/// True in a child process started by [`spawn_child`].
pub fn is_child() -> bool {
    std::env::var_os("LATCHKEY_CHILD").is_some()
}

/// Polls `check` every 5 ms until it gives a value, and returns it; fails
/// the test after 5 s, naming `what` did not happen. For a state change the
/// test can observe in Redis but is not told about (a waiter subscribed, a
/// key's value changed or gone).
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = std::time::Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "{what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
