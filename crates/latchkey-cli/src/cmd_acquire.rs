//! `latchkey acquire`, `release` and `extend`: a lock held across shell
//! commands, identified by its owner token.
//!
//! ```sh
//! out=$(latchkey acquire deploy --ttl 10m) || exit 1
//! token=$(echo "$out" | sed -n 1p); fence=$(echo "$out" | sed -n 2p)
//! ./deploy.sh --fencing-token "$fence"
//! latchkey extend deploy "$token" --ttl 10m
//! latchkey release deploy "$token"
//! ```
//!
//! `acquire` leaves the lock held until its TTL: nothing renews it (the
//! process exits). `release` and `extend` act only if the token still owns
//! the lock, and exit 1 when it does not (expired, or held by someone else).

use std::time::Duration;

use clap::Args;
use latchkey::{Lock, LockGuard, Ownership};

use crate::connect::Target;
use crate::duration;
use crate::exit::{self, Failure, Outcome};
use crate::patience::Patience;

/// How long to wait for a busy lock; shared by `acquire` and `run`.
#[derive(Args, Debug, Clone)]
pub struct WaitArgs {
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
    #[arg(long, value_name = "D", value_parser = duration::parse, requires = "fair")]
    pub waiter_lease: Option<Duration>,

    /// After taking the lock, wait (at most 500 ms) until N replicas of the
    /// server acknowledge it (WAIT N); fewer: release it and exit 69.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub replicas: usize,

    /// When the command started: `--wait` counts from here, connecting
    /// included.
    #[arg(skip = std::time::Instant::now())]
    pub started: std::time::Instant,
}

impl WaitArgs {
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
    /// [`OUTAGE_LIMIT`](crate::patience::OUTAGE_LIMIT).
    pub fn patience(&self) -> Patience {
        match (self.no_wait, self.wait) {
            (true, _) => Patience::Once,
            (false, Some(wait)) => Patience::Until(self.started + wait),
            (false, None) => Patience::Outage(crate::patience::OUTAGE_LIMIT),
        }
    }

    /// The end of `--wait` (`None`: none).
    pub fn deadline(&self) -> Option<std::time::Instant> {
        self.wait.map(|wait| self.started + wait)
    }

    /// The guard, or `None` when the lock stayed busy. An outage is
    /// ridden out within [`Self::patience`].
    pub async fn acquire(&self, lock: &Lock) -> latchkey::Result<Option<LockGuard>> {
        if self.no_wait {
            return lock.try_acquire().await;
        }
        let deadline = self.deadline();
        let waited = self
            .patience()
            .retry("waiting for the lock", || lock.acquire_until(deadline))
            .await;
        match waited {
            Ok(guard) => Ok(Some(guard)),
            Err(latchkey::Error::WaitTimedOut { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The failure for an acquisition that ended in `error`. `-E` (`code`)
    /// applies to a real conflict only: a wait whose last attempt could not
    /// reach Redis ends in that error, not "busy", and exits 69 saying so.
    pub fn failed(&self, name: &str, error: latchkey::Error, code: u8) -> Failure {
        // A refusal (ACL, TLS, password) is not "could not reach": it says
        // what it is by itself.
        let transient = error.is_transient();
        let mut failure = exit::from_error(error, code);
        if failure.code == exit::UNAVAILABLE && !self.no_wait && transient {
            failure.message = format!(
                "could not reach Redis while waiting for lock {name:?}: {}",
                failure.message
            );
        }
        failure
    }

    /// The failure for a lock that stayed busy, naming the holder if known.
    pub async fn busy(&self, target: &Target, name: &str, code: u8) -> Failure {
        let holder = crate::cmd_status::holder_summary(target, name).await;
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

#[derive(Args, Debug)]
pub struct AcquireArgs {
    /// The lock's name.
    pub name: String,

    /// How long the lock stays held (nothing renews it), e.g. 10m.
    #[arg(long, value_name = "D", value_parser = duration::parse_ttl)]
    pub ttl: Duration,

    #[command(flatten)]
    pub wait: WaitArgs,

    /// Exit code when the lock is busy or the wait timed out.
    #[arg(short = 'E', long = "conflict-exit-code", value_name = "N", default_value_t = exit::CONFLICT)]
    pub conflict_exit_code: u8,
}

#[derive(Args, Debug)]
pub struct ReleaseArgs {
    /// The lock's name.
    pub name: String,
    /// The owner token printed by `acquire`.
    pub token: String,
    /// The lock is fair (`acquire --fair`): hand it straight to the next
    /// waiter (without, the next waiter is woken and takes it).
    #[arg(long)]
    pub fair: bool,
}

#[derive(Args, Debug)]
pub struct ExtendArgs {
    /// The lock's name.
    pub name: String,
    /// The owner token printed by `acquire`.
    pub token: String,
    /// The new TTL, counted from now (replaces what is left).
    #[arg(long, value_name = "D", value_parser = duration::parse_ttl)]
    pub ttl: Duration,
}

/// Prints the token and the fencing token, one per line, and leaves the lock held.
pub async fn acquire(target: &Target, args: AcquireArgs) -> Outcome {
    let lock = args.wait.fair_or_not(
        target
            .lock_within(&args.name, args.ttl, args.wait.patience())
            .await?,
    )?;
    let guard = args
        .wait
        .acquire(&lock)
        .await
        .map_err(|e| args.wait.failed(&args.name, e, args.conflict_exit_code))?;
    let Some(guard) = guard else {
        return Err(args
            .wait
            .busy(target, &args.name, args.conflict_exit_code)
            .await);
    };
    if lock.is_fair() {
        // A hand-off sets the waiter lease as the TTL and the guard extends
        // it in the background, which would die with this process: extend
        // to --ttl now.
        if guard.extend(args.ttl).await? != Ownership::Owned {
            return Err(Failure::new(
                exit::LOCK_LOST,
                format!(
                    "lock {:?} was lost as soon as it was handed over",
                    args.name
                ),
            ));
        }
    }
    println!("{}", guard.token());
    println!("{}", guard.fencing_token().await?);
    // Dropping the guard would release the lock; the whole point is to keep
    // it held (until its TTL, or `latchkey release`) after we exit. No
    // watchdog runs, so forgetting it leaks nothing but a little memory.
    std::mem::forget(guard);
    Ok(exit::OK)
}

pub async fn release(target: &Target, args: ReleaseArgs) -> Outcome {
    // The TTL of this handle is never used: release takes none.
    let mut lock = target.lock(&args.name, Duration::from_secs(1)).await?;
    if args.fair {
        lock = lock.fair()?;
    }
    match lock.release_token(&args.token).await? {
        Ownership::Owned => Ok(exit::OK),
        Ownership::Expired => Err(not_owner(&args.name, "it is not held (it expired?)")),
        Ownership::HeldByOther => Err(not_owner(&args.name, "someone else holds it")),
    }
}

pub async fn extend(target: &Target, args: ExtendArgs) -> Outcome {
    let lock = target.lock(&args.name, args.ttl).await?;
    match lock.extend_token(&args.token, args.ttl).await? {
        Ownership::Owned => Ok(exit::OK),
        Ownership::Expired => Err(not_owner(&args.name, "it is not held (it expired?)")),
        Ownership::HeldByOther => Err(not_owner(&args.name, "someone else holds it")),
    }
}

fn not_owner(name: &str, why: &str) -> Failure {
    Failure::new(
        exit::CONFLICT,
        format!("lock {name:?}: this token does not own it; {why}"),
    )
}
