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
use latchkey::Ownership;

use crate::support::duration;
use crate::support::exit::{self, Failure, Outcome};
use crate::support::hold_args::HoldArgs;
use crate::support::target::Target;

#[derive(Args, Debug)]
pub struct AcquireArgs {
    /// The lock's name.
    pub name: String,

    /// How long the lock stays held (nothing renews it), e.g. 10m.
    #[arg(long, value_name = "D", value_parser = duration::parse_ttl)]
    pub ttl: Duration,

    #[command(flatten)]
    pub wait: HoldArgs,

    /// Exit code when the lock is busy or the wait timed out.
    #[arg(short = 'E', long = "conflict-exit-code", value_name = "N", default_value_t = exit::CONFLICT, allow_negative_numbers = true)]
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
    let guard = args.wait.acquire(&lock).await.map_err(|e| {
        let what = format!("lock {:?}", args.name);
        args.wait.failed(&what, e, args.conflict_exit_code)
    })?;
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
    // it held (until its TTL, or `latchkey release`) after we exit.
    let _token = guard.forget();
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
