//! The watch of every lease that has a watchdog or whose `lost` signal
//! someone holds: one task that renews the hold (with a watchdog), fires
//! `lost` the stop margin before the deadline when nothing moved it, and
//! checks the hold at once (one round trip) when it hears that the hold
//! may have changed hands (a revocation or a foreign release on its
//! channel) or that the subscriber's connection came back after a drop
//! (Redis may have restarted without the hold).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::backend::Wakeups;
use crate::primitives::lease::state::State;
use crate::primitives::lease::LeaseSpec;
use crate::transport::subscriber::Event;
use crate::vocab::outcome::{LostReason, Ownership};
use crate::vocab::token::short;

/// The span of a renewal (watchdog or extend), with the primitive's kind.
pub(crate) fn renew_span(kind: &'static str, name: &[u8], token: &str) -> tracing::Span {
    tracing::debug_span!("renew", kind, lock = %String::from_utf8_lossy(name), token = short(token))
}

/// How long into a hold its watch subscribes to the hold's channel: holds
/// released sooner (most uncontended ones) cost no subscription; one that
/// lasts checks itself once subscribed, so a revocation in between is
/// caught too.
const SUBSCRIBE_AFTER: Duration = Duration::from_millis(50);

/// The most a watchdog's renewal joins its server's renewal batch before
/// it is due (see [`batch_slack`]).
const MAX_BATCH_SLACK: Duration = Duration::from_secs(2);

/// How long before it is due a watchdog's renewal may join its server's
/// renewal batch (`crate::transport::batch`), to share a round trip with
/// the renewals due within that window, and the step of the grid its next
/// renewal is put on ([`on_grid`]): a quarter of the interval. So a hold
/// renews at worst every half interval (a step early on the grid, sent
/// with a batch due a step sooner), never later; once its batch has
/// formed, every interval exactly (four steps); and its server gets at
/// most a few batches an interval. At most [`MAX_BATCH_SLACK`], so that a
/// long interval does not renew early by much (a batch every 2 s is
/// already few round trips).
pub(crate) fn batch_slack(every: Duration) -> Duration {
    (every / 4).min(MAX_BATCH_SLACK)
}

/// `at` moved back onto a process-wide grid of `step`s: the holds of one
/// batch learn of their renewal one after the other (a task each, a
/// thousand of them can take longer than the slack on a busy machine), so
/// "now plus the interval" would spread their next renewals over more
/// batches each time; on the grid they fall due at the same instant and
/// stay in one batch. Never later than `at`, at most a step earlier.
fn on_grid(at: Instant, step: Duration) -> Instant {
    static EPOCH: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);
    let (since, step_ns) = (at.saturating_duration_since(*EPOCH), step.as_nanos());
    if step_ns == 0 || at < *EPOCH {
        return at;
    }
    let on = since.as_nanos() / step_ns * step_ns;
    *EPOCH + Duration::from_nanos(u64::try_from(on).unwrap_or(u64::MAX))
}

/// What a message on a hold's channel means to its holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Heard {
    /// Nothing to do (a request for the holder, a waiter's mark, another
    /// holder's release of a shared primitive).
    Nothing,
    /// Check the hold now; `revoked`: a revocation was announced.
    Check { revoked: bool },
}

/// How an exclusive hold (a lock, a writer, a leadership, several locks)
/// reads a message on its channel: anything but a request or a waiter's
/// mark may mean it changed hands.
pub(crate) fn heard_exclusive(payload: &[u8]) -> Heard {
    use crate::vocab::protocol::{RELEASE_REQUESTED, REVOKED, WANTED};
    if payload == REVOKED {
        Heard::Check { revoked: true }
    } else if payload == RELEASE_REQUESTED || payload == WANTED {
        Heard::Nothing
    } else {
        Heard::Check { revoked: false }
    }
}

/// How a shared hold (a permit, a reader) reads a message on its channel:
/// other holders' releases are normal traffic; only a revocation matters.
pub(crate) fn heard_shared(payload: &[u8]) -> Heard {
    match payload == crate::vocab::protocol::REVOKED {
        true => Heard::Check { revoked: true },
        false => Heard::Nothing,
    }
}

/// The watch of a lease: see the module docs. `every`: the watchdog's
/// interval (`None`: no watchdog; then a check keeps the hold's expiry
/// where it is). `cap`: no renewal takes the hold past it.
pub(crate) async fn watch<H: LeaseSpec>(
    hold: H,
    token: String,
    state: Arc<State>,
    every: Option<Duration>,
    cap: Option<Instant>,
) {
    let name = String::from_utf8_lossy(hold.name()).into_owned();
    let done = state.done_token();
    let began = Instant::now();
    let mut listening: Option<Wakeups> = None;
    // Subscribed SUBSCRIBE_AFTER into the hold; a failure is tried again
    // (renewals still find a loss meanwhile), a refusal (ACL) is not.
    let mut subscribe_at = Some(began + SUBSCRIBE_AFTER);
    let mut subscribe_backoff = crate::vocab::retry::Backoff::default();
    // Failed renewals and checks are tried again soon after a failure (a
    // restart, a failover: the first command on a new connection may
    // fail), backing off, never less often than a quarter interval.
    let mut retry_backoff = crate::vocab::retry::Backoff::default();
    // How long before `next` the renewal joins its server's batch: the
    // slack after a renewal, none after a failure (a retry keeps its
    // backoff).
    let slack = every.map_or(Duration::ZERO, batch_slack);
    let mut early = slack;
    let mut next = every.map(|every| on_grid(began + every, slack));
    // How long a check may wait in the batch: a slack when nothing says
    // the hold changed hands (just subscribed, or the subscriber
    // reconnected: every hold of the process checks at once), none when
    // something does.
    let mut check_wait = Duration::ZERO;
    let mut check_now = false;
    let mut revoked = false;
    loop {
        let stop_at = state.stop_at();
        let renew_from = next.map(|at| at.checked_sub(early).unwrap_or(at));
        let wake_at = [renew_from, subscribe_at, Some(stop_at)]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(stop_at);
        if !check_now {
            tokio::select! {
                biased;
                _ = done.cancelled() => return,
                event = next_event(&mut listening) => match event {
                    Event::Message(m) => match hold.heard(&m.payload) {
                        Heard::Nothing => continue,
                        Heard::Check { revoked: r } => {
                            tracing::debug!(lock = %name, token = short(&token), revoked = r, "heard the hold may have changed hands; checking it");
                            revoked |= r;
                            check_now = true;
                            check_wait = Duration::ZERO;
                        }
                    },
                    Event::Resubscribed => {
                        tracing::debug!(lock = %name, token = short(&token), "the subscriber reconnected; checking the hold");
                        check_wait = if check_now { check_wait } else { slack };
                        check_now = true;
                    }
                },
                _ = state.check_now.notified() => {
                    check_now = true;
                    check_wait = Duration::ZERO;
                }
                _ = tokio::time::sleep_until(wake_at.into()) => {}
            }
        }
        let now = Instant::now();
        if now >= state.stop_at() {
            let reason = state.deadline_reason();
            tracing::warn!(lock = %name, token = short(&token), %reason, "the stop margin came before a renewal succeeded; hold lost");
            state.mark_lost(reason);
            return;
        }
        if subscribe_at.is_some_and(|at| now >= at) {
            subscribe_at = None;
            let subscribed = tokio::select! {
                _ = done.cancelled() => return,
                s = tokio::time::timeout_at(state.stop_at().into(), hold.listen()) => s,
            };
            match subscribed {
                Ok(Ok(wakeups)) => {
                    listening = Some(wakeups);
                    // Whatever was published before we listened: ask.
                    check_wait = if check_now { check_wait } else { slack };
                    check_now = true;
                }
                Ok(Err(e)) if e.is_transient() => {
                    tracing::debug!(lock = %name, error = %e, "cannot listen on the hold's channel yet; trying again");
                    subscribe_at = Some(Instant::now() + subscribe_backoff.next_delay());
                    // The connection may have dropped under a subscription
                    // Redis confirmed: the hold may be gone, ask.
                    check_wait = if check_now { check_wait } else { slack };
                    check_now = true;
                }
                Ok(Err(e)) => {
                    tracing::warn!(lock = %name, error = %e, "cannot listen on the hold's channel; only renewals will find it lost");
                }
                Err(_) => continue,
            }
        }
        let due = renew_from.is_some_and(|at| now >= at);
        if !due && !check_now {
            continue;
        }
        // The renewal (or check) to send: `None` once the cap leaves none.
        let ttl = match every {
            Some(_) => {
                let ttl = capped(state.renewal_ttl(hold.options().ttl), cap);
                if ttl.is_some_and(|ttl| ttl < hold.options().ttl) {
                    state
                        .capped
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                }
                ttl
            }
            // No watchdog: renew to the expiry the hold already has.
            None => state.ttl_to_expiry(hold.options().ttl),
        };
        let Some(ttl) = ttl else {
            // Nothing can be renewed: the hold ends at its stop margin.
            if every.is_some() && cap.is_some() {
                state
                    .capped
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                tracing::info!(lock = %name, token = short(&token), "max hold reached: no more renewals; the hold ends at its stop margin");
            }
            next = None;
            check_now = false;
            continue;
        };
        // Due by schedule, it may wait in its server's batch until `next`;
        // a check as long as `check_wait`; a hold with a cap (its TTL cut
        // to end by the cap when sent now) goes with the next batch, at once.
        let batch_by = match (due, cap, next) {
            (_, Some(_), _) => now,
            (true, None, Some(next)) => next.max(now),
            _ => now + check_wait,
        };
        let span = renew_span(hold.label().kind(), hold.name(), &token);
        state
            .renewal_unanswered
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let result = tokio::select! {
            _ = done.cancelled() => return,
            r = tokio::time::timeout_at(state.stop_at().into(), hold.renew(&token, ttl, Some(batch_by)).instrument(span)) => r,
        };
        let renewed = matches!(result, Ok(Ok((Ownership::Owned, _))));
        if matches!(result, Ok(Ok(_))) {
            state
                .renewal_unanswered
                .store(false, std::sync::atomic::Ordering::Relaxed);
        }
        if every.is_some() {
            crate::vocab::metrics::renewal(hold.label(), renewed);
        }
        check_now = false;
        match result {
            Ok(Ok((Ownership::Owned, valid_until))) => {
                retry_backoff.reset();
                early = slack;
                // A check without a watchdog proves the hold; its expiry stays.
                next = every.map(|every| {
                    state.set_deadline(valid_until);
                    tracing::trace!(lock = %name, token = short(&token), "renewed");
                    on_grid(Instant::now() + every, slack)
                });
                revoked = false;
            }
            Ok(Ok((outcome, _))) => {
                // A revocation's message and the script's effect leave Redis
                // together, on two connections: one may be read first.
                let revoked = revoked
                    || state
                        .revoked_heard
                        .load(std::sync::atomic::Ordering::Relaxed)
                    || revocation_pending(&hold, &mut listening).await
                    || state
                        .revoked_heard
                        .load(std::sync::atomic::Ordering::Relaxed);
                let reason = LostReason::from_check(outcome, revoked);
                tracing::warn!(lock = %name, token = short(&token), ?outcome, %reason, "the hold is no longer ours; lost");
                state.mark_lost(reason);
                return;
            }
            Ok(Err(e)) => {
                // Try again soon, but not in a tight loop: a quarter of the
                // interval leaves several tries before the stop margin.
                tracing::warn!(lock = %name, token = short(&token), error = %e, "renewal failed; retrying until the stop margin");
                let most = every.unwrap_or(hold.options().ttl / 3) / 4;
                let again = retry_backoff.next_delay().min(most);
                next = Some(Instant::now() + again.max(crate::vocab::names::MIN_TTL));
                early = Duration::ZERO;
            }
            Err(_) => {
                let reason = state.deadline_reason();
                tracing::warn!(lock = %name, token = short(&token), %reason, "no answer before the stop margin; hold lost");
                state.mark_lost(reason);
                return;
            }
        }
    }
}

/// How long a hold found gone waits for a revocation's message that may
/// be on its way (published by the script that ended the hold).
const REVOCATION_GRACE: Duration = Duration::from_millis(20);

/// Whether a revocation arrives on the hold's channel within
/// [`REVOCATION_GRACE`] (messages already received included).
async fn revocation_pending<H: LeaseSpec>(hold: &H, listening: &mut Option<Wakeups>) -> bool {
    if listening.is_none() {
        return false;
    }
    let until = Instant::now() + REVOCATION_GRACE;
    while let Ok(event) = tokio::time::timeout_at(until.into(), next_event(listening)).await {
        if let Event::Message(m) = event {
            if hold.heard(&m.payload) == (Heard::Check { revoked: true }) {
                return true;
            }
        }
    }
    false
}

/// The next event on the hold's channel, or never while not listening.
async fn next_event(listening: &mut Option<Wakeups>) -> Event {
    match listening {
        Some(wakeups) => wakeups.next().await,
        None => std::future::pending().await,
    }
}

/// `ttl`, shortened so that a renewal sent now ends the hold by `cap`;
/// `None` when less than [`MIN_TTL`](crate::limits::MIN_TTL) is left: no renewal.
pub(crate) fn capped(ttl: Duration, cap: Option<Instant>) -> Option<Duration> {
    let Some(cap) = cap else {
        return Some(ttl);
    };
    let left = cap.saturating_duration_since(Instant::now());
    (left >= crate::vocab::names::MIN_TTL).then(|| ttl.min(left))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_is_never_later_at_most_a_step_earlier_and_shared() {
        let step = Duration::from_millis(50);
        let at = Instant::now() + Duration::from_secs(1);
        let on = on_grid(at, step);
        assert!(on <= at && at - on < step, "{on:?} for {at:?}");
        // Every time within the step lands on the same instant: one batch.
        for later in [0, 10, 1_000, 49_999] {
            assert_eq!(on_grid(on + Duration::from_micros(later), step), on);
        }
        assert_eq!(on_grid(on + step, step), on + step);
        assert_eq!(on_grid(at, Duration::ZERO), at);
    }
}
