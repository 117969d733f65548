//! The options of taking a lock that `acquire` and `run` share: how long
//! to wait for it, fair or not, how many replicas must have it.

use std::time::Duration;

use clap::Args;
use latchkey::{Lock, LockGuard};

use crate::support::duration;
use crate::support::exit::{self, Failure};
use crate::support::patience::Patience;
use crate::support::target::Target;

/// How to wait for a busy lock (and how it is taken: fair, replicated);
/// shared by `acquire` and `run`. Not `WaitArgs`: that is `latchkey wait`'s.
#[derive(Args, Debug, Clone)]
pub struct HoldArgs {
    /// Wait at most D for a busy lock (e.g. 30s) [default: as long as it takes]
    #[arg(long, value_name = "D", value_parser = duration::parse, conflicts_with = "no_wait")]
    pub wait: Option<Duration>,

    /// Fail at once if the lock is busy.
    #[arg(long)]
    pub no_wait: bool,

    /// Wait in line: waiters get the lock in arrival order, across
    /// processes, and a release hands it straight to the next one. With
    /// --no-wait: take it only if it is free and nobody waits.
    #[arg(long)]
    pub fair: bool,

    /// With --fair: how long a waiter keeps its place in the queue without
    /// renewing it; a waiter that dies delays the queue by about this long
    /// at most [default: 2s]
    #[arg(long, value_name = "D", value_parser = duration::parse_waiter_lease, requires = "fair")]
    pub waiter_lease: Option<Duration>,

    /// After taking the lock, wait (at most 500 ms) until N replicas of the
    /// server acknowledge it (WAIT N); fewer: release it and exit 69.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = crate::support::count::parse_replicas, allow_negative_numbers = true)]
    pub replicas: usize,

    /// When the command started: `--wait` counts from here, connecting
    /// included.
    #[arg(skip = std::time::Instant::now())]
    pub started: std::time::Instant,
}

impl HoldArgs {
    /// `lock`, made fair if `--fair` says so.
    pub fn fair_or_not(&self, lock: Lock) -> latchkey::Result<Lock> {
        match (self.fair, self.waiter_lease) {
            (false, _) => Ok(lock),
            (true, None) => lock.fair(),
            (true, Some(lease)) => lock.fair_with_lease(lease),
        }
    }

    /// `lock`, made to wait for `--replicas` (a Redlock refuses: exit 2).
    pub fn replicated(&self, lock: Lock) -> Result<Lock, Failure> {
        if self.replicas == 0 {
            return Ok(lock);
        }
        lock.with_replicas(self.replicas).map_err(Failure::from)
    }

    /// The budget for reaching Redis (`patience.rs`): `--no-wait` one try,
    /// `--wait D` until D after the start, else an outage of up to
    /// [`OUTAGE_LIMIT`](crate::support::patience::OUTAGE_LIMIT).
    pub fn patience(&self) -> Patience {
        match (self.no_wait, self.wait) {
            (true, _) => Patience::Once,
            (false, Some(wait)) => Patience::Until(self.started + wait),
            (false, None) => Patience::Outage(crate::support::patience::OUTAGE_LIMIT),
        }
    }

    /// The end of `--wait` (`None`: none).
    pub fn deadline(&self) -> Option<std::time::Instant> {
        self.wait.map(|wait| self.started + wait)
    }

    /// The guard, or `None` when the lock stayed busy. An outage is
    /// ridden out within [`Self::patience`].
    ///
    /// # Cancel safety
    ///
    /// As the library's `Lock::acquire`: dropped, nothing stays held.
    pub async fn acquire(&self, lock: &Lock) -> latchkey::Result<Option<LockGuard>> {
        if self.no_wait {
            return lock.try_acquire().await;
        }
        let deadline = self.deadline();
        self.patiently("waiting for the lock", || async move {
            match deadline {
                Some(deadline) => lock.acquire_until(deadline).await,
                None => lock.acquire().await,
            }
        })
        .await
    }

    /// Runs a wait (`attempt`, which ends at `--wait`'s deadline or not at
    /// all) with [`Self::patience`]: an outage is ridden out within it. The
    /// hold, or `None` when the wait timed out.
    ///
    /// # Cancel safety
    ///
    /// As `attempt`: dropped between attempts, nothing is held.
    pub async fn patiently<G, F, Fut>(&self, what: &str, attempt: F) -> latchkey::Result<Option<G>>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = latchkey::Result<G>>,
    {
        match self.patience().retry(what, attempt).await {
            Ok(held) => Ok(Some(held)),
            Err(latchkey::Error::WaitTimedOut { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The failure for an acquisition that ended in `error`. `-E` (`code`)
    /// applies to a real conflict only: a wait whose last attempt could not
    /// reach Redis ends in that error, not "busy", and exits 69 saying so.
    /// `what` names what was waited for: `lock "x"`, `its permit of …`.
    pub fn failed(&self, what: &str, error: latchkey::Error, code: u8) -> Failure {
        // A refusal (ACL, TLS, password) is not "could not reach": it says
        // what it is by itself.
        let transient = error.is_transient();
        let mut failure = exit::from_error(error, code);
        if failure.code == exit::UNAVAILABLE && !self.no_wait && transient {
            failure.message = format!(
                "could not reach Redis while waiting for {what}: {}",
                failure.message
            );
        }
        failure
    }

    /// The failure for a lock that stayed busy, naming the holder if known.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads.
    pub async fn busy(&self, target: &Target, name: &str, code: u8) -> Failure {
        let holder = crate::support::describe::holder_summary(target, name).await;
        let waited = match (self.no_wait, self.wait) {
            (false, Some(wait)) => format!(" after waiting {}", duration::human(wait)),
            _ => String::new(),
        };
        let message = format!("lock {name:?} is busy{waited}{holder}");
        if code == exit::OK {
            // `-E 0` says a busy lock is fine (cron: "skip quietly"); any
            // output would only make cron send mail.
            tracing::info!("{message}");
            return Failure::new(exit::OK, "");
        }
        Failure::new(code, message)
    }
}
