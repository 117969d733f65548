//! The one way `run` (a lock, several locks, permits, a read or write hold)
//! and `elect` (a leadership) hold something while CMD runs: wait for it
//! (a signal ends the wait), start CMD under the guardian, supervise it,
//! release, and say how it ended: CMD's exit code, or why the hold ended
//! (`exit.rs` has the codes). A hold that ran out before CMD could start
//! is taken again, backing off, within the wait's budget.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use latchkey::{Guard, HoldOptions, LostReason, Ownership};

use crate::support::duration;
use crate::support::exit::{self, Failure, Outcome};
use crate::support::hold_args::HoldArgs;
use crate::support::holdable::Holdable;
use crate::support::run_args::{command_env, RunArgs};
use crate::support::signals::{interrupted, Signals};
use crate::support::supervise::{self, Ended, Started};
use crate::support::target::Target;

/// How CMD is run and stopped.
pub(crate) struct Supervision<'a> {
    pub(crate) target: &'a Target,
    pub(crate) command: &'a [OsString],
    /// SIGTERM to SIGKILL, when CMD must stop while the hold is ours (a
    /// release request, a forwarded signal) and at most when it is lost.
    pub(crate) grace: Duration,
    /// The hold's stop margin (see [`stop_margin`]).
    pub(crate) margin: Duration,
}

/// The stop margin of a hold `run`/`elect` supervises: `--grace`, so that
/// CMD gets SIGTERM that long before its hold could end and SIGKILL at the
/// end; never more than half the TTL nor half the cap (the library's
/// bounds), so a grace longer than those is cut to them.
pub(crate) fn stop_margin(grace: Duration, ttl: Duration, max_hold: Option<Duration>) -> Duration {
    let mut margin = grace.min(ttl / 2);
    if let Some(cap) = max_hold {
        margin = margin.min(cap / 2);
    }
    margin
}

/// What `run` gives every kind of hold: the watchdog, fencing tokens with
/// the hold (CMD's environment has them), the stop margin, and the
/// `--max-hold`, `--hold-at-least` and `--ask` of `args`.
pub(crate) fn supervised<P: HoldOptions>(
    primitive: P,
    how: &Supervision<'_>,
    args: &RunArgs,
) -> Result<P, Failure> {
    let mut primitive = primitive
        .with_watchdog()
        .with_fencing()
        .with_stop_margin(how.margin)?;
    if let Some(cap) = args.max_hold {
        primitive = primitive.with_max_hold(cap)?;
    }
    if let Some(least) = args.hold_at_least {
        primitive = primitive.with_hold_at_least(least)?;
    }
    let ask = args.ask;
    Ok(match ask {
        true => primitive.with_asking(),
        false => primitive,
    })
}

/// How one hold of CMD ended.
pub(crate) enum Ran {
    /// CMD exited with this code; the hold was released.
    Exited(u8),
    /// CMD was asked to stop by a release request and exited with this code.
    Requested(u8),
    /// The hold was lost while CMD ran (`what` names it, with its lost part);
    /// CMD was stopped as `how` says (empty: CMD had exited, and the
    /// release found the loss).
    Lost {
        reason: Option<LostReason>,
        what: String,
        how: String,
    },
    /// The hold ran out before CMD could start: CMD never ran.
    TooLate,
}

/// One hold of CMD: starts it under the guardian, supervises it and
/// releases `guard`.
///
/// # Cancel safety
/// Dropped while CMD runs, the guardian kills CMD's group, and the guard
/// is released in the background.
pub(crate) async fn run_once<T: Holdable>(
    take: &T,
    guard: Box<dyn Guard>,
    env: &[(&str, String)],
    how: &Supervision<'_>,
    signals: &mut Signals,
) -> Result<Ran, Failure> {
    test_start_delay().await;
    let ended = match supervise::start(&*guard, how.margin, how.command, env).await {
        Ok(Started::Running(guardian)) => {
            supervise::supervise(guardian, &*guard, signals, how.grace).await
        }
        Ok(Started::TooLate) => {
            let _ = release(take, guard).await;
            return Ok(Ran::TooLate);
        }
        Err(failure) => Err(failure),
    };
    let lost_what = match &ended {
        Ok(Ended::Lost { .. }) => Some(take.lost_what(&*guard).await),
        _ => None,
    };
    let found = release(take, guard).await;
    match ended {
        Ok(Ended::Exited(code) | Ended::Requested(code))
            if found.is_some_and(taken_while_running) =>
        {
            // CMD ended before the hold's next renewal could see that the
            // key was deleted or taken over (a foreign SET publishes
            // nothing): CMD ran unprotected for a while, which its exit
            // code cannot say.
            let reason = match found {
                Some(Ownership::HeldByOther) => LostReason::TakenOver,
                _ => LostReason::Gone,
            };
            tracing::debug!(code, "the command exited before the loss was seen");
            Ok(Ran::Lost {
                reason: Some(reason),
                what: take.what(),
                how: String::new(),
            })
        }
        Ok(Ended::Exited(code)) => Ok(Ran::Exited(code)),
        Ok(Ended::Requested(code)) => Ok(Ran::Requested(code)),
        Ok(Ended::Lost {
            reason,
            how: stopped,
        }) => Ok(Ran::Lost {
            reason,
            what: lost_what.unwrap_or_else(|| take.what()),
            how: stopped,
        }),
        Err(failure) => Err(failure),
    }
}

/// What a release after CMD ended found that says the hold was lost while
/// CMD ran: the key gone or someone else's.
fn taken_while_running(found: Ownership) -> bool {
    matches!(found, Ownership::Expired | Ownership::HeldByOther)
}

/// `run`: waits for `take` within `--wait`'s budget, runs CMD under it
/// (with `LATCHKEY_NAME`, `LATCHKEY_TOKEN`, `LATCHKEY_FENCING_TOKEN` and
/// what `more_env` adds), and exits as CMD did (or why it could not).
pub(crate) async fn hold_and_run<T: Holdable>(
    take: &T,
    args: &RunArgs,
    how: &Supervision<'_>,
    signals: &mut Signals,
    more_env: impl Fn(&dyn Guard) -> Vec<(String, String)>,
) -> Outcome {
    let (wait, conflict) = (&args.wait, args.conflict_exit_code);
    let what = take.what();
    let until = wait.deadline();
    let mut backoff = TooLateBackoff::default();
    loop {
        let acquired = tokio::select! {
            acquired = acquire(take, wait, until) => acquired,
            signo = signals.recv() => return Err(interrupted(signo, &format!("waiting for {what}"))),
        };
        let guard = acquired.map_err(|e| wait.failed(&what, e, conflict))?;
        let Some(guard) = guard else {
            return Err(busy(take, how.target, wait, conflict).await);
        };
        let mut vars = command_env(args, guard.token(), guard.issued_fencing_token());
        vars.extend(more_env(&*guard));
        let vars: Vec<(&str, String)> = vars.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        match run_once(take, guard, &vars, how, signals).await? {
            Ran::Exited(code) => return Ok(code),
            Ran::Requested(code) => {
                eprintln!(
                    "latchkey: released {what} on request (latchkey request-release or a waiter's --ask); the command exited {code}"
                );
                return Ok(code);
            }
            Ran::Lost { reason, what, how } => return Err(lost(reason, &what, &how)),
            Ran::TooLate => {
                let delay = backoff.next();
                let spent = wait.no_wait || until.is_some_and(|u| Instant::now() + delay >= u);
                if spent {
                    return Err(too_late(&what, how.margin));
                }
                tracing::warn!(%what, ?delay, "the hold ran out before the command could start; taking it again");
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    signo = signals.recv() => return Err(interrupted(signo, &format!("waiting for {what}"))),
                }
            }
        }
    }
}

/// One acquisition: a first try with `--no-wait`, and when the wait's
/// budget is already spent (`--wait 0s`, or connecting took it all: a
/// spent budget still makes its one attempt); otherwise a wait until
/// `until` (or as long as it takes), riding out an outage within the
/// budget (`patience.rs`). `None` when it stayed busy.
///
/// # Cancel safety
/// As the library's acquisitions: dropped, nothing stays held.
pub(crate) async fn acquire<T: Holdable>(
    take: &T,
    wait: &HoldArgs,
    until: Option<Instant>,
) -> latchkey::Result<Option<Box<dyn Guard>>> {
    if wait.no_wait || until.is_some_and(|until| until <= Instant::now()) {
        return take.acquirer().try_take().await;
    }
    wait.patiently("waiting", || take.acquirer().take_until(until.into()))
        .await
}

/// A hold that stayed busy: a conflict (or `-E`), naming its holders.
pub(crate) async fn busy<T: Holdable>(
    take: &T,
    target: &Target,
    wait: &HoldArgs,
    code: u8,
) -> Failure {
    let busy = take.busy(target).await;
    let waited = match (wait.no_wait, wait.wait) {
        (false, Some(d)) if !d.is_zero() => format!(" after waiting {}", duration::human(d)),
        _ => String::new(),
    };
    // "lock "x" is busy (held by …)": the wait goes before the holder.
    let message = match busy.find(" (") {
        Some(at) if !waited.is_empty() => format!("{}{waited}{}", &busy[..at], &busy[at..]),
        _ => format!("{busy}{waited}"),
    };
    if code == exit::OK {
        // `-E 0` says a busy hold is fine (cron: "skip quietly"); any
        // output would only make cron send mail.
        tracing::info!("{message}");
        return Failure::new(exit::OK, "");
    }
    Failure::new(code, message)
}

/// The failure of a hold lost while CMD ran: 77 when revoked, else 75.
pub(crate) fn lost(reason: Option<LostReason>, what: &str, how: &str) -> Failure {
    let why = reason.map_or("it could no longer be proven ours", LostReason::describe);
    let code = match reason {
        Some(LostReason::Revoked) => exit::REVOKED,
        _ => exit::LOCK_LOST,
    };
    Failure::new(
        code,
        format!("lost {what} while the command ran: {why}{}", told(how)),
    )
}

/// What the command was told of a loss, after the reason.
pub(crate) fn told(how: &str) -> String {
    match how {
        "" => " (found at the release, after the command had exited)".to_owned(),
        how => format!("; {how} to the command"),
    }
}

/// The failure of a hold that ran out before CMD could start, with no time
/// left to take it again: 76.
fn too_late(what: &str, margin: Duration) -> Failure {
    Failure::new(
        exit::TOO_LATE,
        format!(
            "the hold of {what} ran out before the command could start (less than its stop margin of {} was left); the command did not run",
            duration::human(margin)
        ),
    )
}

/// Releases after CMD ended: what the release found, `None` when it
/// failed. A failure is not CMD's failure: warn, since the hold then frees
/// itself at its TTL.
async fn release<T: Holdable>(take: &T, guard: Box<dyn Guard>) -> Option<Ownership> {
    let ttl = guard.ttl();
    match guard.release().await {
        Ok(found) => {
            if found != Ownership::Owned {
                tracing::debug!(?found, "the hold was no longer ours at release");
            }
            Some(found)
        }
        Err(e) => {
            eprintln!(
                "latchkey: warning: could not release {} ({e}); it frees itself within {}",
                take.what(),
                duration::human(ttl)
            );
            None
        }
    }
}

/// Test builds only: a delay between taking the hold and starting CMD
/// (`LATCHKEY_TEST_START_DELAY_MS`), the one way a test can make a hold run
/// out before CMD starts at will (a paused or starved process does it by
/// chance). Release builds have no such variable.
async fn test_start_delay() {
    #[cfg(debug_assertions)]
    if let Some(ms) = std::env::var("LATCHKEY_TEST_START_DELAY_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

/// Delays between attempts after holds that ran out before CMD could
/// start: 10 ms doubling to 1 s, so such a loop sends a few commands a
/// second at most, whatever the cause.
#[derive(Debug)]
pub(crate) struct TooLateBackoff {
    next: Duration,
}

impl Default for TooLateBackoff {
    fn default() -> Self {
        TooLateBackoff {
            next: Duration::from_millis(10),
        }
    }
}

impl TooLateBackoff {
    pub(crate) fn next(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(Duration::from_secs(1));
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_margin_is_the_grace_within_the_librarys_bounds() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        assert_eq!(stop_margin(s(5), s(30), None), s(5));
        assert_eq!(stop_margin(s(5), s(1), None), ms(500));
        assert_eq!(stop_margin(s(5), s(1), Some(ms(300))), ms(150));
        assert_eq!(stop_margin(Duration::ZERO, s(30), None), Duration::ZERO);
    }

    #[test]
    fn holds_that_run_out_are_retried_at_most_once_a_second() {
        let mut backoff = TooLateBackoff::default();
        let delays: Vec<Duration> = (0..12).map(|_| backoff.next()).collect();
        assert_eq!(delays[0], Duration::from_millis(10));
        assert!(delays.windows(2).all(|w| w[1] >= w[0]));
        assert_eq!(delays[11], Duration::from_secs(1));
        // A minute of retries sends at most about 70 attempts.
        let mut backoff = TooLateBackoff::default();
        let (mut t, mut n) = (Duration::ZERO, 0);
        while t < Duration::from_secs(60) {
            t += backoff.next();
            n += 1;
        }
        assert!(n <= 70, "{n} attempts in a minute");
    }
}
