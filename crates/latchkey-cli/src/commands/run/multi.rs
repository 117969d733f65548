//! `latchkey run NAME --and NAME2 [--and NAME3 ...] -- CMD`: run CMD while
//! holding every one of the locks, taken together or not at all
//! (`Client::lock_all`): deadlock-free whatever order the callers name them
//! in, and each the ordinary lock of its name to everyone else (a plain
//! `latchkey run NAME2 -- ...` excludes it).
//!
//! ```sh
//! # Moves between two accounts, in either direction, never deadlock.
//! latchkey run account:7 --and account:3 -- ./transfer 7 3 100
//! latchkey run account:3 --and account:7 -- ./transfer 3 7 50
//! ```
//!
//! The same supervision as `run` with one lock (`mod.rs`): one watchdog
//! renews every lock every `ttl / 3`; losing any of them stops CMD (exit
//! 75); CMD's exit code is `run`'s. CMD gets `LATCHKEY_NAME`,
//! `LATCHKEY_TOKEN` (the one owner token, in every lock's key) and
//! `LATCHKEY_FENCING_TOKEN` (NAME's), and for the i-th lock (NAME is 1,
//! the `--and`s follow in order) `LATCHKEY_NAME_i` and
//! `LATCHKEY_FENCING_TOKEN_i`, and all tokens in that order, space
//! separated, in `LATCHKEY_FENCING_TOKENS`. One server or one cluster (no
//! Redlock); not with `--fair`, `--replicas`, `--permits`, `--read` or
//! `--write` (refused by the argument parser).

use std::time::{Duration, Instant};

use latchkey::{MultiGuard, MultiLock, Ownership};

use crate::support::duration;
use crate::support::exit::{self, Failure, Outcome};
use crate::support::run_args::{command_env, ended_outcome, RunArgs};
use crate::support::signals::{interrupted, Signals};
use crate::support::supervise::{self, Leased, Started};
use crate::support::target::Target;

pub async fn run(target: &Target, args: &RunArgs, mut signals: Signals) -> Outcome {
    let names: Vec<&str> = std::iter::once(args.name.as_str())
        .chain(args.and.iter().map(String::as_str))
        .collect();
    let listed = names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    // Started while Redis is down: connecting is retried within the wait's
    // budget (`patience.rs`); a signal ends it.
    let connected = tokio::select! {
        connected = target.client_within("run --and", args.wait.patience()) => connected?,
        signo = signals.recv() => return Err(interrupted(signo, &format!("connecting for locks {listed}"))),
    };
    let mut locks = connected
        .lock_all(&names, args.ttl)?
        .with_watchdog()
        .with_fencing();
    if let Some(cap) = args.max_hold {
        locks = locks.with_max_hold(cap)?;
    }
    if args.ask {
        locks = locks.with_asking();
    }
    // `--wait` counts from the start, connecting included.
    let wait_until = args.wait.deadline();
    loop {
        let acquired = tokio::select! {
            acquired = acquire(&locks, args, wait_until) => acquired,
            signo = signals.recv() => return Err(interrupted(signo, &format!("waiting for locks {listed}"))),
        };
        let guard =
            acquired.map_err(|e| args.wait.failed(&args.name, e, args.conflict_exit_code))?;
        let Some(guard) = guard else {
            return Err(busy(args, &listed));
        };
        let tokens = guard.issued_fencing_tokens().unwrap_or_default();
        let per_lock = per_lock_env(&names, &tokens);
        let mut env: Vec<(&str, String)> =
            command_env(args, guard.token(), tokens.first().copied());
        env.extend(per_lock.iter().map(|(k, v)| (k.as_str(), v.clone())));
        let lease = Leased {
            guard: &guard,
            ttl: args.ttl,
        };
        let ended = match supervise::start(&lease, &args.command, &env).await {
            Ok(Started::Running(guardian)) => {
                supervise::supervise(guardian, &lease, &mut signals, args.grace).await
            }
            Ok(Started::TooLate) => {
                // As in `run` with one lock: a hold that ran out before CMD
                // could start is no hold; wait again.
                tracing::warn!(locks = %listed, "the hold ran out before the command could start; waiting again");
                release(guard, &listed, args.ttl).await;
                continue;
            }
            Err(failure) => Err(failure),
        };
        release(guard, &listed, args.ttl).await;
        return ended_outcome(ended, &format!("one of the locks {listed}"));
    }
}

crate::support::supervise::leased!(MultiGuard);

/// The i-th lock's name and fencing token (1: NAME, then the `--and`s),
/// and all the tokens in `LATCHKEY_FENCING_TOKENS`.
fn per_lock_env(names: &[&str], tokens: &[u64]) -> Vec<(String, String)> {
    let mut env = Vec::with_capacity(2 * names.len() + 1);
    for (i, name) in names.iter().enumerate() {
        let token = tokens.get(i).map_or_else(String::new, u64::to_string);
        env.push((format!("LATCHKEY_NAME_{}", i + 1), (*name).to_owned()));
        env.push((format!("LATCHKEY_FENCING_TOKEN_{}", i + 1), token));
    }
    let all: Vec<String> = tokens.iter().map(u64::to_string).collect();
    env.push(("LATCHKEY_FENCING_TOKENS".to_owned(), all.join(" ")));
    env
}

/// Every lock, or `None` when one stayed busy (`--no-wait`, `--wait D`).
async fn acquire(
    locks: &MultiLock,
    args: &RunArgs,
    until: Option<Instant>,
) -> latchkey::Result<Option<MultiGuard>> {
    if args.wait.no_wait {
        return locks.try_acquire().await;
    }
    if until.is_some_and(|until| until <= Instant::now()) {
        return Ok(None);
    }
    // An outage is ridden out within the wait's budget (`patience.rs`).
    args.wait
        .patiently("waiting for the locks", || async move {
            match until {
                Some(until) => locks.acquire_until(until).await,
                None => locks.acquire().await,
            }
        })
        .await
}

/// One of the locks stayed busy: a conflict (or `-E`).
fn busy(args: &RunArgs, listed: &str) -> Failure {
    let waited = match (args.wait.no_wait, args.wait.wait) {
        (false, Some(wait)) => format!(" after waiting {}", duration::human(wait)),
        _ => String::new(),
    };
    let message = format!("one of the locks {listed} is busy{waited}");
    if args.conflict_exit_code == exit::OK {
        tracing::info!("{message}");
        return Failure::new(exit::OK, "");
    }
    Failure::new(args.conflict_exit_code, message)
}

/// Releases every lock after CMD ended; a failure is not CMD's (warn: each
/// lock then frees itself at its TTL).
async fn release(guard: MultiGuard, listed: &str, ttl: Duration) {
    match guard.release().await {
        Ok(Ownership::Owned) => {}
        Ok(outcome) => tracing::debug!(?outcome, "a lock was no longer ours at release"),
        Err(e) => eprintln!(
            "latchkey: warning: could not release locks {listed} ({e}); they free themselves within {}",
            duration::human(ttl)
        ),
    }
}
