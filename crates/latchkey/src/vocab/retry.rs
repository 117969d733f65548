//! The one failure policy of every wait (layer 1): what a waiter does when
//! Redis cannot answer. Every blocking call of every primitive (lock, fair
//! lock, semaphore, read-write lock, latch, barrier, campaign, observer)
//! goes through [`Retry`], so that one rule decides for all of them:
//!
//! - **What is transient** is [`Error::is_transient`]: a dropped or refused
//!   connection, a command timeout, a Redis Cluster failover in progress
//!   (MOVED/ASK the cluster client could not follow, TRYAGAIN, CLUSTERDOWN,
//!   MASTERDOWN: [`Error::Unavailable`]), a server loading its data
//!   (LOADING), a read-only replica being promoted, out of memory, no
//!   Redlock majority. Anything else is returned at once.
//! - **How long**: a transient error is retried until the caller's deadline
//!   (the caller then returns that error, not "timed out": an outage is not
//!   a conflict); without a deadline, until the failures have lasted
//!   [`GIVE_UP_AFTER`] without a break.
//! - **How often**: [`Backoff`], from [`MIN_POLL`] doubling to
//!   [`MAX_POLL`], each delay scaled by a random factor in [0.5, 1.5) so
//!   that the waiters of many processes do not retry in step.
//! - **What is said**: one warning when an outage starts, one line when
//!   the waiter gets an answer again (not one per retry).

use std::time::{Duration, Instant};

use crate::vocab::error::{Error, Result};

/// How long a wait without a deadline goes on retrying an error that
/// persists before it returns it.
pub(crate) const GIVE_UP_AFTER: Duration = Duration::from_secs(30);
/// The first delay of a [`Backoff`].
pub(crate) const MIN_POLL: Duration = Duration::from_millis(10);
/// The longest delay of a [`Backoff`] (before jitter).
pub(crate) const MAX_POLL: Duration = Duration::from_millis(500);

/// `d` scaled by a random factor in [0.5, 1.5): spreads out reconnects and
/// polls of many processes.
pub(crate) fn jitter(d: Duration) -> Duration {
    let mut byte = [0u8; 1];
    let r = if getrandom::fill(&mut byte).is_ok() {
        byte[0]
    } else {
        128
    };
    d.mul_f64(0.5 + f64::from(r) / 256.0)
}

/// Delays that double from [`MIN_POLL`] to [`MAX_POLL`], jittered.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { next: MIN_POLL }
    }
}

impl Backoff {
    /// The next delay (jittered); the one after is twice as long, up to
    /// [`MAX_POLL`].
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = jitter(self.next);
        self.next = (self.next * 2).min(MAX_POLL);
        delay
    }

    /// Back to [`MIN_POLL`] (the state changed: look again soon).
    pub(crate) fn reset(&mut self) {
        self.next = MIN_POLL;
    }
}

/// The failure policy of one wait (see the module docs).
#[derive(Debug)]
pub(crate) struct Retry {
    deadline: Option<Instant>,
    /// Set while attempts fail: when the first of them failed.
    failing_since: Option<Instant>,
    backoff: Backoff,
}

impl Retry {
    /// The policy of a wait that ends at `deadline` (`None`: no deadline).
    pub(crate) fn until(deadline: Option<Instant>) -> Retry {
        Retry {
            deadline,
            failing_since: None,
            backoff: Backoff::default(),
        }
    }

    /// An attempt failed with `error`: `Ok(delay)` to try again after
    /// `delay` (never past the deadline), or `Err` to give up with it: it
    /// is not transient, the deadline has passed, or (without a deadline)
    /// the failures have lasted [`GIVE_UP_AFTER`]. `what`: the wait, for
    /// the log line.
    pub(crate) fn failed(
        &mut self,
        error: Error,
        what: &(dyn std::fmt::Display + Sync),
    ) -> Result<Duration> {
        if !error.is_transient() {
            return Err(error);
        }
        let now = Instant::now();
        let first = self.failing_since.is_none();
        let since = *self.failing_since.get_or_insert(now);
        let out_of_time = match self.deadline {
            Some(deadline) => now >= deadline,
            None => now - since >= GIVE_UP_AFTER,
        };
        if out_of_time {
            return Err(error);
        }
        if first {
            tracing::warn!(wait = %what, error = %error, "Redis cannot answer; retrying until the wait's deadline");
        } else {
            tracing::debug!(wait = %what, error = %error, "still retrying");
        }
        // What a bound that ends the wait mid-retry says (`noting_retried`).
        let _ = RETRIED.try_with(|last| *last.borrow_mut() = Some(error));
        let mut delay = self.backoff.next_delay();
        if let Some(deadline) = self.deadline {
            delay = delay.min(deadline.saturating_duration_since(now));
        }
        Ok(delay)
    }

    /// An attempt got an answer: the next failure starts a new outage.
    pub(crate) fn answered(&mut self, what: &(dyn std::fmt::Display + Sync)) {
        let _ = RETRIED.try_with(|last| last.borrow_mut().take());
        if let Some(since) = self.failing_since.take() {
            tracing::info!(wait = %what, after = ?since.elapsed(), "Redis answers again");
        }
        self.backoff.reset();
    }

    /// [`Retry::failed`], then the sleep it asks for.
    pub(crate) async fn after_failure(
        &mut self,
        error: Error,
        what: &(dyn std::fmt::Display + Sync),
    ) -> Result<()> {
        let delay = self.failed(error, what)?;
        tokio::time::sleep(delay).await;
        Ok(())
    }
}

/// `attempt`, tried again on transient errors until `until` (at least
/// once), by [`Retry`]: how a release or a resign left to the background
/// still lands after an outage or a failover, within the hold's deadline
/// (after it the hold ends by itself).
pub(crate) async fn until_deadline<T, F, Fut>(
    until: Instant,
    what: &(dyn std::fmt::Display + Sync),
    mut attempt: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut retry = Retry::until(Some(until));
    loop {
        match attempt().await {
            Err(e) if e.is_transient() => retry.after_failure(e, what).await?,
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outage() -> Error {
        Error::Timeout {
            op: "command",
            after: Duration::from_millis(1),
        }
    }

    #[test]
    fn a_failover_error_is_transient_and_retried() {
        let moved = redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::Moved),
            "MOVED",
            "775 127.0.0.1:17106".to_owned(),
        ));
        let error = Error::from_redis(moved, &[], Duration::from_secs(1));
        assert!(matches!(error, Error::Unavailable(_)), "{error:?}");
        let mut retry = Retry::until(Some(Instant::now() + Duration::from_secs(5)));
        assert!(retry.failed(error, &"test").is_ok());
        assert!(retry.failing_since.is_some());
    }

    #[test]
    fn bad_input_is_never_retried() {
        let mut retry = Retry::until(None);
        let refused = retry.failed(Error::InvalidInput("x".into()), &"test");
        assert!(matches!(refused, Err(Error::InvalidInput(_))));
    }

    #[test]
    fn a_passed_deadline_gives_up_and_delays_stop_at_it() {
        let mut retry = Retry::until(Some(Instant::now()));
        assert!(retry.failed(outage(), &"test").is_err());
        let deadline = Instant::now() + Duration::from_millis(3);
        let mut retry = Retry::until(Some(deadline));
        for _ in 0..10 {
            match retry.failed(outage(), &"test") {
                Ok(delay) => assert!(delay <= Duration::from_millis(3)),
                Err(_) => break,
            }
        }
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let mut backoff = Backoff::default();
        let delays: Vec<Duration> = (0..12).map(|_| backoff.next_delay()).collect();
        assert!(delays[0] < MIN_POLL * 2);
        assert!(delays.iter().all(|d| *d < MAX_POLL.mul_f64(1.5)));
        assert!(delays[11] >= MAX_POLL / 2);
    }
}

tokio::task_local! {
    /// The last transient error a retry policy of this task retried, while
    /// [`noting_retried`] runs it.
    static RETRIED: std::cell::RefCell<Option<Error>>;
}

/// Runs `call`, giving `ended` (called when `call` did not finish) the
/// last transient error a [`Retry`] inside it retried and that no answer
/// followed: a wait ended by a bound while an outage lasted says what the
/// outage was, not only that time ran out.
pub(crate) async fn noting_retried<T>(
    call: impl std::future::Future<Output = Option<Result<T>>>,
    ended: impl FnOnce(Option<Error>) -> Error,
) -> Result<T> {
    RETRIED
        .scope(std::cell::RefCell::new(None), async move {
            match call.await {
                Some(result) => result,
                None => Err(ended(RETRIED.with(|last| last.borrow_mut().take()))),
            }
        })
        .await
}
