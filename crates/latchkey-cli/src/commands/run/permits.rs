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

use latchkey::RwAccess;

use crate::support::exit::{Failure, Outcome};
use crate::support::hold_run::{hold_and_run, Supervision};
use crate::support::run_args::{command_env, RunArgs};
use crate::support::signals::{interrupted, Signals};
use crate::support::take::{Permits, RwHold};
use crate::support::target::Target;

pub async fn run(
    target: &Target,
    args: &RunArgs,
    how: &Supervision<'_>,
    mut signals: Signals,
) -> Outcome {
    let what = if args.permits.is_some() {
        "run --permits"
    } else if args.write {
        "run --write"
    } else {
        "run --read"
    };
    // Started while Redis is down: connecting is retried within the wait's
    // budget (`patience.rs`); a signal ends it.
    let client = tokio::select! {
        client = target.client_within(what, args.wait.patience()) => client?,
        signo = signals.recv() => {
            return Err(interrupted(signo, &format!("connecting for {:?}", args.name)));
        }
    };
    let env = |token: &str, fencing: Option<u64>| command_env(args, token, fencing);
    match args.permits {
        Some(permits) => {
            let mut semaphore = client
                .semaphore(&args.name, permits, args.ttl)?
                .with_watchdog()
                .with_fencing()
                .with_stop_margin(how.margin)
                .map_err(Failure::from)?;
            if let Some(cap) = args.max_hold {
                semaphore = semaphore.with_max_hold(cap)?;
            }
            if args.ask {
                semaphore = semaphore.with_asking();
            }
            // `--take K`: 1 to 100000 (clap), at most N (`RunArgs::check`).
            let take = u32::try_from(args.take.unwrap_or(1)).unwrap_or(u32::MAX);
            let take = Permits { semaphore, take };
            let env = |g: &latchkey::PermitGuard| env(g.token(), g.issued_fencing_token());
            hold_and_run(
                &take,
                &args.wait,
                args.conflict_exit_code,
                how,
                &mut signals,
                env,
            )
            .await
        }
        None => {
            let access = match args.write {
                true => RwAccess::Write,
                false => RwAccess::Read,
            };
            let mut rw = client
                .rwlock(&args.name, args.ttl)?
                .with_watchdog()
                .with_fencing()
                .with_stop_margin(how.margin)
                .map_err(Failure::from)?;
            if let Some(cap) = args.max_hold {
                rw = rw.with_max_hold(cap)?;
            }
            if args.ask {
                rw = rw.with_asking();
            }
            let take = RwHold { rw, access };
            let env = |g: &latchkey::RwGuard| env(g.token(), g.issued_fencing_token());
            hold_and_run(
                &take,
                &args.wait,
                args.conflict_exit_code,
                how,
                &mut signals,
                env,
            )
            .await
        }
    }
}
