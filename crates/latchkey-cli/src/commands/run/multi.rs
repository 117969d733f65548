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
//! Redlock); not with `--fair`, `--replicas`, `--permits`, `--take`,
//! `--read` or `--write`, nor with a name given twice (refused before
//! anything connects, exit 2).

use crate::support::exit::Outcome;
use crate::support::hold_run::{hold_and_run, supervised, Supervision};
use crate::support::holdable::Locks;
use crate::support::run_args::RunArgs;
use crate::support::signals::{unless_interrupted, Signals};

pub async fn run(args: &RunArgs, how: &Supervision<'_>, mut signals: Signals) -> Outcome {
    let target = how.target;
    let names: Vec<String> = std::iter::once(args.name.clone())
        .chain(args.and.iter().cloned())
        .collect();
    // Started while Redis is down: connecting is retried within the wait's
    // budget (`patience.rs`); a signal ends it.
    let connecting = target.client_within("run --and", args.wait.patience());
    let connected = unless_interrupted(connecting, &mut signals, || {
        let listed: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
        format!("connecting for locks {}", listed.join(", "))
    })
    .await?;
    let locks = connected.lock_all(&names, args.ttl)?;
    let locks = supervised(locks, how, args)?;
    let take = Locks { locks, names };
    let per_lock = |guard: &dyn latchkey::Guard| {
        let tokens = guard
            .as_any()
            .downcast_ref::<latchkey::MultiGuard>()
            .and_then(latchkey::MultiGuard::issued_fencing_tokens)
            .unwrap_or_default();
        let names: Vec<&str> = take.names.iter().map(String::as_str).collect();
        per_lock_env(&names, &tokens)
    };
    hold_and_run(&take, args, how, &mut signals, per_lock).await
}

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
