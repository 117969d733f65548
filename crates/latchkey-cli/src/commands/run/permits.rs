//! `latchkey run --permits N [--take K] NAME -- CMD`: run CMD while holding
//! one (or K at once) of N permits of the semaphore NAME: at most N such
//! commands run at once (N permits' worth), across machines. `latchkey run --read NAME -- CMD` and `--write NAME`:
//! run CMD as a reader or the writer of the read-write lock NAME.
//!
//! ```sh
//! # On every build agent: at most 3 deploys at a time.
//! latchkey run --permits 3 deploys --wait 10m -- ./deploy.sh
//! latchkey run --permits 3 --take 2 deploys -- ./big-deploy.sh   # two of the three
//! latchkey run --read catalog -- ./export.sh      # many at once
//! latchkey run --write catalog -- ./reindex.sh    # alone
//! ```
//!
//! The same supervision as `run` with a lock (`mod.rs`): the watchdog
//! renews the permit every `ttl / 3`; losing it stops CMD (exit 75); CMD's
//! exit code is `run`'s. The permit is a lease: a `latchkey` killed with
//! SIGKILL gives it back within `--ttl`. Every caller passes N (see
//! `docs/cli.md`); one server only (no Redlock).

use std::time::{Duration, Instant};

use latchkey::{Ownership, PermitGuard, RwAccess, RwGuard, RwLock, Semaphore};

use crate::support::duration;
use crate::support::exit::{self, Failure, Outcome};
use crate::support::run_args::{command_env, ended_outcome, RunArgs};
use crate::support::signals::Signals;
use crate::support::supervise::{self, Leased, Started};
use crate::support::target::Target;

/// What `run` holds: a permit, or a read-write lock.
pub(crate) enum Hold {
    Permit(PermitGuard),
    Rw(RwGuard),
}

/// A permit and a read-write hold have one surface (one lease under both):
/// call `$call` on whichever this is.
macro_rules! on_each {
    ($hold:expr, $h:ident => $call:expr) => {
        match $hold {
            Hold::Permit($h) => $call,
            Hold::Rw($h) => $call,
        }
    };
}

impl Hold {
    fn token(&self) -> &str {
        on_each!(self, h => h.token())
    }

    fn fencing_token(&self) -> Option<u64> {
        on_each!(self, h => h.issued_fencing_token())
    }

    async fn lost(&self) {
        on_each!(self, h => h.lost().await)
    }

    fn deadline(&self) -> Instant {
        on_each!(self, h => h.deadline())
    }

    async fn release_requested(&self) -> latchkey::Result<()> {
        on_each!(self, h => h.release_requested().await)
    }

    async fn extend(&self, ttl: Duration) -> latchkey::Result<Ownership> {
        on_each!(self, h => h.extend(ttl).await)
    }

    fn is_held(&self) -> bool {
        on_each!(self, h => h.is_held())
    }

    async fn release(self) -> latchkey::Result<Ownership> {
        on_each!(self, h => h.release().await)
    }
}

pub async fn run(target: &Target, args: &RunArgs, mut signals: Signals) -> Outcome {
    // Before anything connects, as every usage error.
    if let (Some(n), Some(k)) = (args.permits, args.take) {
        if k > n {
            return Err(Failure::usage(format!(
                "--take {k} is more than --permits {n}: at most N permits can be taken at once"
            )));
        }
    }
    let what = if args.permits.is_some() {
        "run --permits"
    } else if args.write {
        "run --write"
    } else {
        "run --read"
    };
    // Started while Redis is down: connecting is retried within the wait's
    // budget (`patience.rs`); a signal ends it.
    let connecting = target.client_within(what, args.wait.patience());
    let client = interruptible(connecting, &mut signals, &args.name).await??;
    // `--wait` counts from the start, connecting included.
    let wait_until = args.wait.deadline();
    loop {
        let (acquired, what) = match args.permits {
            Some(permits) => {
                let mut semaphore = client
                    .semaphore(&args.name, permits, args.ttl)?
                    .with_watchdog()
                    .with_fencing();
                if let Some(cap) = args.max_hold {
                    semaphore = semaphore.with_max_hold(cap)?;
                }
                if args.ask {
                    semaphore = semaphore.with_asking();
                }
                let acquiring = async {
                    match acquire(&semaphore, args, wait_until).await {
                        Ok(Some(permit)) => Ok(Ok(Hold::Permit(permit))),
                        Ok(None) => Ok(Err(busy(&semaphore, args).await)),
                        Err(e) => Err(e),
                    }
                };
                let what = match args.take {
                    Some(k) if k > 1 => format!("its {k} permits of semaphore {:?}", args.name),
                    _ => format!("its permit of semaphore {:?}", args.name),
                };
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
                let mut rw = client
                    .rwlock(&args.name, args.ttl)?
                    .with_watchdog()
                    .with_fencing();
                if let Some(cap) = args.max_hold {
                    rw = rw.with_max_hold(cap)?;
                }
                if args.ask {
                    rw = rw.with_asking();
                }
                let acquiring = async {
                    match acquire_rw(&rw, access, args, wait_until).await {
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
        let hold =
            acquired.map_err(|e| args.wait.failed(&args.name, e, args.conflict_exit_code))??;
        let env = command_env(args, hold.token(), hold.fencing_token());
        let lease = Leased {
            guard: &hold,
            ttl: args.ttl,
        };
        let ended = match supervise::start(&lease, &args.command, &env).await {
            Ok(Started::Running(guardian)) => {
                supervise::supervise(guardian, &lease, &mut signals, args.grace).await
            }
            Ok(Started::TooLate) => {
                // As in `run` with a lock: a hold that ran out before CMD
                // could start is no hold; wait again.
                tracing::warn!(name = %args.name, "the hold ran out before the command could start; waiting again");
                release(hold, &args.name, args.ttl).await;
                continue;
            }
            Err(failure) => Err(failure),
        };
        release(hold, &args.name, args.ttl).await;
        return ended_outcome(ended, &what);
    }
}

crate::support::supervise::leased!(Hold);

/// Runs `acquiring` unless a SIGINT/SIGTERM/SIGHUP comes first (exit 128+N).
async fn interruptible<T>(
    acquiring: impl std::future::Future<Output = T>,
    signals: &mut Signals,
    name: &str,
) -> Result<T, Failure> {
    tokio::select! {
        acquired = acquiring => Ok(acquired),
        signo = signals.recv() => Err(crate::support::signals::interrupted(
            signo,
            &format!("waiting for {name:?}"),
        )),
    }
}

/// The hold, or `None` when it stayed unavailable (`--no-wait`, `--wait D`).
async fn acquire_rw(
    rw: &RwLock,
    access: RwAccess,
    args: &RunArgs,
    wait_until: Option<Instant>,
) -> latchkey::Result<Option<RwGuard>> {
    if args.wait.no_wait {
        return match access {
            RwAccess::Read => rw.try_read().await,
            RwAccess::Write => rw.try_write().await,
        };
    }
    if wait_until.is_some_and(|until| until <= Instant::now()) {
        return Ok(None);
    }
    // An outage is ridden out within the wait's budget (`patience.rs`).
    args.wait
        .patiently("waiting for the read-write lock", || {
            rw_wait(rw, access, wait_until)
        })
        .await
}

/// A read or a write, until `until` (`None`: as long as it takes).
async fn rw_wait(
    rw: &RwLock,
    access: RwAccess,
    until: Option<Instant>,
) -> latchkey::Result<RwGuard> {
    match (access, until) {
        (access, Some(until)) => rw.acquire_until(access, until).await,
        (RwAccess::Read, None) => rw.read().await,
        (RwAccess::Write, None) => rw.write().await,
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
async fn acquire(
    semaphore: &Semaphore,
    args: &RunArgs,
    wait_until: Option<Instant>,
) -> latchkey::Result<Option<PermitGuard>> {
    // `--take K`: a whole number from 1 to 100000 (clap); above N, the
    // library refuses it (exit 2) before anything is sent.
    let k = u32::try_from(args.take.unwrap_or(1)).unwrap_or(u32::MAX);
    if args.wait.no_wait {
        return semaphore.try_acquire_many(k).await;
    }
    if wait_until.is_some_and(|until| until <= Instant::now()) {
        return Ok(None);
    }
    // An outage is ridden out within the wait's budget (`patience.rs`).
    args.wait
        .patiently("waiting for a permit", || async move {
            match wait_until {
                Some(until) => semaphore.acquire_many_until(k, until).await,
                None => semaphore.acquire_many(k).await,
            }
        })
        .await
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
    let message = match args.take {
        Some(k) if k > 1 => format!(
            "fewer than {k} of the {} permits of {:?} are free{waited}{holders}",
            semaphore.permits(),
            args.name
        ),
        _ => format!(
            "all {} permits of {:?} are taken{waited}{holders}",
            semaphore.permits(),
            args.name
        ),
    };
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
