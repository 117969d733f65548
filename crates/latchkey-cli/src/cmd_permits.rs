//! `latchkey run --permits N NAME -- CMD`: run CMD while holding one of N
//! permits of the semaphore NAME: at most N such commands run at once,
//! across machines. `latchkey run --read NAME -- CMD` and `--write NAME`:
//! run CMD as a reader or the writer of the read-write lock NAME.
//!
//! ```sh
//! # On every build agent: at most 3 deploys at a time.
//! latchkey run --permits 3 deploys --wait 10m -- ./deploy.sh
//! latchkey run --read catalog -- ./export.sh      # many at once
//! latchkey run --write catalog -- ./reindex.sh    # alone
//! ```
//!
//! The same supervision as `run` with a lock (`cmd_run.rs`): the watchdog
//! renews the permit every `ttl / 3`; losing it stops CMD (exit 75); CMD's
//! exit code is `run`'s. The permit is a lease: a `latchkey` killed with
//! SIGKILL gives it back within `--ttl`. Every caller passes N (see
//! `docs/cli.md`); one server only (no Redlock).

use std::time::Duration;

use latchkey::{Ownership, PermitGuard, RwAccess, RwGuard, RwLock, Semaphore};

use crate::cmd_run::{spawn, supervise, RunArgs, Signals};
use crate::connect::Target;
use crate::duration;
use crate::exit::{self, Failure, Outcome};

/// What `run` holds: a permit, or a read-write lock.
enum Hold {
    Permit(PermitGuard),
    Rw(RwGuard),
}

impl Hold {
    fn token(&self) -> &str {
        match self {
            Hold::Permit(p) => p.token(),
            Hold::Rw(g) => g.token(),
        }
    }

    fn fencing_token(&self) -> Option<u64> {
        match self {
            Hold::Permit(p) => p.fencing_token(),
            Hold::Rw(g) => g.fencing_token(),
        }
    }

    async fn lost(&self) {
        match self {
            Hold::Permit(p) => p.lost().await,
            Hold::Rw(g) => g.lost().await,
        }
    }

    async fn release(self) -> latchkey::Result<Ownership> {
        match self {
            Hold::Permit(p) => p.release().await,
            Hold::Rw(g) => g.release().await,
        }
    }
}

pub async fn run(target: &Target, args: &RunArgs, mut signals: Signals) -> Outcome {
    // Started while Redis is down: connecting is retried within the wait's
    // budget (`patience.rs`); a signal ends it.
    let connecting = target.client_within("run --permits/--read/--write", args.wait.patience());
    let client = interruptible(connecting, &mut signals, &args.name).await??;
    let (acquired, what) = match args.permits {
        Some(permits) => {
            let semaphore = client
                .semaphore(&args.name, permits, args.ttl)?
                .with_watchdog()
                .with_fencing();
            let acquiring = async {
                match acquire(&semaphore, args).await {
                    Ok(Some(permit)) => Ok(Ok(Hold::Permit(permit))),
                    Ok(None) => Ok(Err(busy(&semaphore, args).await)),
                    Err(e) => Err(e),
                }
            };
            let what = format!("its permit of semaphore {:?}", args.name);
            (
                interruptible(acquiring, &mut signals, &args.name).await?,
                what,
            )
        }
        None => {
            let access = if args.write {
                RwAccess::Write
            } else {
                RwAccess::Read
            };
            let rw = client
                .rwlock(&args.name, args.ttl)?
                .with_watchdog()
                .with_fencing();
            let acquiring = async {
                match acquire_rw(&rw, access, args).await {
                    Ok(Some(guard)) => Ok(Ok(Hold::Rw(guard))),
                    Ok(None) => Ok(Err(rw_busy(access, args))),
                    Err(e) => Err(e),
                }
            };
            let side = if args.write { "write" } else { "read" };
            let what = format!("its {side} hold of {:?}", args.name);
            (
                interruptible(acquiring, &mut signals, &args.name).await?,
                what,
            )
        }
    };
    // An error while acquiring, or a hold that stayed unavailable.
    let hold = acquired.map_err(|e| args.wait.failed(&args.name, e, args.conflict_exit_code))??;
    let ended = match spawn(args, hold.token(), hold.fencing_token()) {
        Ok(child) => supervise(child, hold.lost(), &what, &mut signals, args.grace).await,
        Err(failure) => Err(failure),
    };
    release(hold, &args.name, args.ttl).await;
    ended
}

/// Runs `acquiring` unless a SIGINT/SIGTERM/SIGHUP comes first (exit 128+N).
async fn interruptible<T>(
    acquiring: impl std::future::Future<Output = T>,
    signals: &mut Signals,
    name: &str,
) -> Result<T, Failure> {
    tokio::select! {
        acquired = acquiring => Ok(acquired),
        signo = signals.recv() => Err(Failure::new(
            128u8.saturating_add(signo as u8),
            format!("{} while waiting for {name:?}", crate::cmd_run::signal_name(signo)),
        )),
    }
}

/// The hold, or `None` when it stayed unavailable (`--no-wait`, `--wait D`).
async fn acquire_rw(
    rw: &RwLock,
    access: RwAccess,
    args: &RunArgs,
) -> latchkey::Result<Option<RwGuard>> {
    if args.wait.no_wait {
        return match access {
            RwAccess::Read => rw.try_read().await,
            RwAccess::Write => rw.try_write().await,
        };
    }
    let deadline = args.wait.deadline();
    let waited = args
        .wait
        .patience()
        .retry("waiting for the read-write lock", || {
            rw.acquire_until(access, deadline)
        })
        .await;
    match waited {
        Ok(guard) => Ok(Some(guard)),
        Err(latchkey::Error::WaitTimedOut { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

fn rw_busy(access: RwAccess, args: &RunArgs) -> Failure {
    let (side, others) = match access {
        RwAccess::Read => ("read", "a writer holds it or waits"),
        RwAccess::Write => ("write", "readers or a writer hold it"),
    };
    let message = format!("cannot {side} {:?}: {others}", args.name);
    if args.conflict_exit_code == exit::OK {
        tracing::info!("{message}");
        return Failure::new(exit::OK, "");
    }
    Failure::new(args.conflict_exit_code, message)
}

/// The permit, or `None` when all stayed taken (`--no-wait`, `--wait D`).
async fn acquire(semaphore: &Semaphore, args: &RunArgs) -> latchkey::Result<Option<PermitGuard>> {
    if args.wait.no_wait {
        return semaphore.try_acquire().await;
    }
    let deadline = args.wait.deadline();
    let waited = args
        .wait
        .patience()
        .retry("waiting for a permit", || semaphore.acquire_until(deadline))
        .await;
    match waited {
        Ok(permit) => Ok(Some(permit)),
        Err(latchkey::Error::WaitTimedOut { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// All permits taken: a conflict (or `-E`), naming the holders.
async fn busy(semaphore: &Semaphore, args: &RunArgs) -> Failure {
    let holders = match semaphore.holders().await {
        Ok(holders) => {
            let named: Vec<String> = holders
                .iter()
                .map(|h| match &h.holder {
                    Some(who) => format!("pid {} on {}", who.pid, who.host),
                    None => "a foreign holder".to_owned(),
                })
                .collect();
            format!(" (held by {})", named.join(", "))
        }
        Err(_) => String::new(),
    };
    let waited = match (args.wait.no_wait, args.wait.wait) {
        (false, Some(wait)) => format!(" after waiting {}", duration::human(wait)),
        _ => String::new(),
    };
    let message = format!(
        "all {} permits of {:?} are taken{waited}{holders}",
        semaphore.permits(),
        args.name
    );
    if args.conflict_exit_code == exit::OK {
        tracing::info!("{message}");
        return Failure::new(exit::OK, "");
    }
    Failure::new(args.conflict_exit_code, message)
}

async fn release(hold: Hold, name: &str, ttl: Duration) {
    match hold.release().await {
        Ok(Ownership::Owned) => {}
        Ok(outcome) => tracing::debug!(?outcome, "the hold was no longer ours at release"),
        Err(e) => eprintln!(
            "latchkey: warning: could not release {name:?} ({e}); it frees itself within {}",
            duration::human(ttl)
        ),
    }
}
