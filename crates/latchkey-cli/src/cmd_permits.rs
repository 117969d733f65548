//! `latchkey run --permits N NAME -- CMD`: run CMD while holding one of N
//! permits of the semaphore NAME: at most N such commands run at once,
//! across machines.
//!
//! ```sh
//! # On every build agent: at most 3 deploys at a time.
//! latchkey run --permits 3 deploys --wait 10m -- ./deploy.sh
//! ```
//!
//! The same supervision as `run` with a lock (`cmd_run.rs`): the watchdog
//! renews the permit every `ttl / 3`; losing it stops CMD (exit 75); CMD's
//! exit code is `run`'s. The permit is a lease: a `latchkey` killed with
//! SIGKILL gives it back within `--ttl`. Every caller passes N (see
//! `docs/cli.md`); one server only (no Redlock).

use std::time::Duration;

use latchkey::{Ownership, PermitGuard, Semaphore};

use crate::cmd_run::{spawn, supervise, RunArgs, Signals};
use crate::connect::Target;
use crate::duration;
use crate::exit::{self, Failure, Outcome};

pub async fn run(target: &Target, args: &RunArgs, permits: u64, mut signals: Signals) -> Outcome {
    let client = target.client("run --permits").await?;
    let semaphore = client
        .semaphore(&args.name, permits, args.ttl)?
        .with_watchdog()
        .with_fencing();
    let acquired = tokio::select! {
        acquired = acquire(&semaphore, args) => acquired,
        signo = signals.recv() => {
            return Err(Failure::new(
                128u8.saturating_add(signo as u8),
                format!("{} while waiting for a permit of {:?}", crate::cmd_run::signal_name(signo), args.name),
            ));
        }
    };
    let permit = acquired.map_err(|e| args.wait.failed(&args.name, e, args.conflict_exit_code))?;
    let Some(permit) = permit else {
        return Err(busy(&semaphore, args).await);
    };
    let ended = match spawn(args, permit.token(), permit.fencing_token()) {
        Ok(child) => {
            let what = format!("its permit of semaphore {:?}", args.name);
            supervise(child, permit.lost(), &what, &mut signals, args.grace).await
        }
        Err(failure) => Err(failure),
    };
    release(permit, &args.name, args.ttl).await;
    ended
}

/// The permit, or `None` when all stayed taken (`--no-wait`, `--wait D`).
async fn acquire(semaphore: &Semaphore, args: &RunArgs) -> latchkey::Result<Option<PermitGuard>> {
    if args.wait.no_wait {
        return semaphore.try_acquire().await;
    }
    let waited = match args.wait.wait {
        Some(wait) => semaphore.acquire_timeout(wait).await,
        None => semaphore.acquire().await,
    };
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

async fn release(permit: PermitGuard, name: &str, ttl: Duration) {
    match permit.release().await {
        Ok(Ownership::Owned) => {}
        Ok(outcome) => tracing::debug!(?outcome, "the permit was no longer ours at release"),
        Err(e) => eprintln!(
            "latchkey: warning: could not give back the permit of {name:?} ({e}); it frees itself within {}",
            duration::human(ttl)
        ),
    }
}
