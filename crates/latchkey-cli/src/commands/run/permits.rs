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

use crate::support::exit::Outcome;
use crate::support::hold_run::{hold_and_run, supervised, Supervision};
use crate::support::holdable::{Permits, RwHold};
use crate::support::run_args::RunArgs;
use crate::support::signals::{unless_interrupted, Signals};

pub async fn run(args: &RunArgs, how: &Supervision<'_>, mut signals: Signals) -> Outcome {
    let target = how.target;
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
    let client = unless_interrupted(connecting, &mut signals, || {
        format!("connecting for {:?}", args.name)
    })
    .await?;
    match args.permits {
        Some(permits) => {
            let semaphore = client.semaphore(&args.name, permits, args.ttl)?;
            let semaphore = supervised(semaphore, how, args)?;
            // `--take K`: 1 to 100000 (clap), at most N (`RunArgs::check`).
            let take = u32::try_from(args.take.unwrap_or(1)).unwrap_or(u32::MAX);
            let take = Permits::new(semaphore, take);
            hold_and_run(&take, args, how, &mut signals, |_| Vec::new()).await
        }
        None => {
            let access = match args.write {
                true => RwAccess::Write,
                false => RwAccess::Read,
            };
            let rw = client.rwlock(&args.name, args.ttl)?;
            let rw = supervised(rw, how, args)?;
            let take = RwHold::new(rw, access);
            hold_and_run(&take, args, how, &mut signals, |_| Vec::new()).await
        }
    }
}
