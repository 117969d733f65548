//! How long a command keeps trying to reach Redis: its budget. A command
//! started while Redis is down (restarting, failing over, stopped) retries
//! transient failures (`latchkey::Error::is_transient`) until then, with
//! backoff; a long wait says once per outage that it does (one line on
//! stderr; a bounded one only with `-v`, so that its failure stays one
//! line):
//!
//! - `--no-wait`, and every command that does not wait: one try;
//! - `run --wait D` (`acquire --wait D`): until D has passed since the
//!   start;
//! - `run` without `--wait`: an outage of up to [`OUTAGE_LIMIT`] (the
//!   library's rule for a wait without a deadline), then exit 69;
//! - `elect`, `leader --watch`: as long as it takes.

use std::future::Future;
use std::time::{Duration, Instant};

/// A command's budget for reaching Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Patience {
    /// One try: a failure is the answer.
    Once,
    /// Transient failures are retried until this instant.
    Until(Instant),
    /// Transient failures are retried while the outage has lasted less
    /// than this.
    Outage(Duration),
    /// Transient failures are retried as long as it takes.
    Forever,
}

/// How long `run` without `--wait` rides out an outage: as long as the
/// library's waits without a deadline do.
pub const OUTAGE_LIMIT: Duration = Duration::from_secs(30);

/// The first delay between tries; it doubles up to [`MAX_DELAY`].
const FIRST_DELAY: Duration = Duration::from_millis(50);
const MAX_DELAY: Duration = Duration::from_secs(1);

impl Patience {
    /// The time left before the budget ends (`None`: no end), in an
    /// outage that began at `outage`.
    fn left(&self, outage: Instant) -> Option<Duration> {
        match self {
            Patience::Once => Some(Duration::ZERO),
            Patience::Until(end) => Some(end.saturating_duration_since(Instant::now())),
            Patience::Outage(limit) => Some(limit.saturating_sub(outage.elapsed())),
            Patience::Forever => None,
        }
    }

    /// Runs `attempt` until it succeeds, fails with an error that is not
    /// transient, or the budget is spent (then its last error). `what`
    /// names the work in the line printed when an outage begins and, for
    /// one without end, when it is over.
    pub async fn retry<T, F, Fut>(&self, what: &str, mut attempt: F) -> latchkey::Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = latchkey::Result<T>>,
    {
        let mut delay = FIRST_DELAY;
        let mut outage: Option<Instant> = None;
        let mut announced = false;
        loop {
            let error = match attempt().await {
                Err(e) if e.is_transient() => e,
                other => {
                    if let Some(since) = outage.filter(|_| *self == Patience::Forever) {
                        eprintln!(
                            "latchkey: {what}: Redis answers again after {}",
                            crate::support::duration::human(since.elapsed())
                        );
                    }
                    return other;
                }
            };
            let began = *outage.get_or_insert_with(Instant::now);
            let left = match self.left(began) {
                Some(left) if left.is_zero() => return Err(error),
                left => left,
            };
            if !std::mem::replace(&mut announced, true) {
                let until = match left {
                    Some(left) => format!("for {} more", crate::support::duration::human(left)),
                    None => "until it answers".to_owned(),
                };
                match self {
                    Patience::Until(_) => {
                        tracing::warn!("{what}: {error}; retrying {until}")
                    }
                    _ => eprintln!("latchkey: warning: {what}: {error}; retrying {until}"),
                }
            }
            let sleep = jitter(delay).min(left.unwrap_or(Duration::MAX));
            tokio::time::sleep(sleep).await;
            delay = (delay * 2).min(MAX_DELAY);
        }
    }
}

/// `d` scaled by a factor in [0.75, 1.25), from the clock's low bits:
/// many processes started together do not retry in step.
fn jitter(d: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.subsec_nanos());
    d.mul_f64(0.75 + f64::from(nanos % 1000) / 2000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outage() -> latchkey::Error {
        latchkey::Error::Timeout {
            op: "connect",
            after: Duration::from_millis(1),
        }
    }

    /// How `patience` ends a call that fails with `error` every time, and
    /// how many tries it made.
    async fn tries(
        patience: Patience,
        error: fn() -> latchkey::Error,
    ) -> (Result<(), latchkey::Error>, u32) {
        let mut tries = 0;
        let ended = patience
            .retry("test", || {
                tries += 1;
                async move { Err::<(), _>(error()) }
            })
            .await;
        (ended, tries)
    }

    #[tokio::test]
    async fn once_tries_once_and_a_budget_retries_until_it_is_spent() {
        let (once, n) = tries(Patience::Once, outage).await;
        assert!(once.is_err());
        assert_eq!(n, 1);

        let started = Instant::now();
        let budget = Patience::Until(started + Duration::from_millis(300));
        let (budget, n) = tries(budget, outage).await;
        assert!(budget.is_err());
        assert!(n > 1, "tried {n} times");
        assert!(started.elapsed() >= Duration::from_millis(300));
    }

    #[tokio::test]
    async fn bad_input_is_not_retried() {
        let (refused, n) = tries(Patience::Forever, || {
            latchkey::Error::InvalidInput("x".into())
        })
        .await;
        assert!(matches!(refused, Err(latchkey::Error::InvalidInput(_))));
        assert_eq!(n, 1);
    }
}
