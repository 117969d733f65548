//! Waiting in a test for something that happens on its own: a waiter
//! subscribed, a key changed, a background release counted, a process
//! reaped. Polled, because nothing tells the test; bounded, so that a
//! condition that never comes fails the test (naming it) instead of hanging.

use std::future::Future;
use std::time::{Duration, Instant};

/// How long [`eventually`] and [`eventually_blocking`] wait before failing
/// the test. Generous (hosts running tests are shared and slow); a passing
/// test never waits it out. A test that must bound *how soon* something
/// happens measures that itself.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// How often the condition is checked.
const EVERY: Duration = Duration::from_millis(5);

/// What a check returns: `bool` (done or not) or `Option<T>` (the value,
/// once there is one).
pub trait Check {
    /// What [`eventually`] returns.
    type Value;
    /// `Some` once the condition holds.
    fn ready(self) -> Option<Self::Value>;
}

impl Check for bool {
    type Value = ();
    fn ready(self) -> Option<()> {
        self.then_some(())
    }
}

impl<T> Check for Option<T> {
    type Value = T;
    fn ready(self) -> Option<T> {
        self
    }
}

/// Runs `check` every 5 ms until it is true (or `Some`), and returns its
/// value; panics with "timed out waiting until {what}" after [`PATIENCE`].
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let redis = latchkey_testkit::RedisServer::start();
/// redis.command(&["SET", "k", "v"]).unwrap();
/// let value = latchkey_testkit::eventually("k is set", || async {
///     let value = redis.command(&["GET", "k"]).unwrap();
///     (!value.is_empty()).then_some(value)
/// })
/// .await;
/// assert_eq!(value, "v");
/// # });
/// ```
pub async fn eventually<C, F, Fut>(what: &str, mut check: F) -> C::Value
where
    C: Check,
    F: FnMut() -> Fut,
    Fut: Future<Output = C>,
{
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(value) = check().await.ready() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(EVERY).await;
    }
}

/// [`eventually`] for a test without an async runtime (it sleeps the thread).
pub fn eventually_blocking<C: Check>(what: &str, mut check: impl FnMut() -> C) -> C::Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(value) = check().ready() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(EVERY);
    }
}
