//! The watchdog of every lease: renews it every `every` until the hold ends,
//! and fires `lost` as soon as ownership cannot be proven.

use std::time::{Duration, Instant};

use crate::primitives::lease::state::State;
use crate::vocab::outcome::Ownership;
use crate::vocab::token::short;

/// The span of a renewal (watchdog or extend), with the primitive's kind.
pub(crate) fn renew_span(kind: &'static str, name: &[u8], token: &str) -> tracing::Span {
    tracing::debug_span!("renew", kind, lock = %String::from_utf8_lossy(name), token = short(token))
}

/// The watchdog of any lease (a lock, a semaphore's permit): calls `renew`
/// every `every` until the guard is done, or until `renew` says there is
/// nothing left to renew (`None`: the hold reached its max hold; then the
/// watchdog only fires `lost` at the deadline) (each renewal bounded by the
/// lease's deadline, which a success moves to the instant it returns);
/// cancels `lost` as soon as ownership cannot be proven (a renewal that
/// finds the lease gone, or the deadline passing first).
pub(crate) async fn renew_until_done<F, Fut>(
    name: &str,
    token: &str,
    every: Duration,
    state: &State,
    mut renew: F,
) where
    F: FnMut() -> Option<Fut>,
    Fut: std::future::Future<Output = crate::Result<(Ownership, Instant)>>,
{
    let done = state.done_token();
    let label = state.metrics_label.clone();
    let mut next = Instant::now() + every;
    loop {
        let deadline = state.deadline();
        tokio::select! {
            _ = done.cancelled() => return,
            _ = tokio::time::sleep_until(next.min(deadline).into()) => {}
        }
        let now = Instant::now();
        if now >= state.deadline() {
            tracing::warn!(lock = %name, token = short(token), "lease ran out before a renewal succeeded; lock lost");
            state.mark_lost();
            return;
        }
        // A renewal that answers after the deadline is worthless: bound it.
        let Some(renewal) = renew() else {
            tracing::info!(lock = %name, token = short(token), "max hold reached: no more renewals; the hold ends at its deadline");
            tokio::select! {
                _ = done.cancelled() => {}
                _ = state.until_lost() => {}
            }
            return;
        };
        let result = tokio::select! {
            _ = done.cancelled() => return,
            r = tokio::time::timeout_at(state.deadline().into(), renewal) => r,
        };
        crate::vocab::metrics::renewal(&label, matches!(result, Ok(Ok((Ownership::Owned, _)))));
        match result {
            Ok(Ok((Ownership::Owned, valid_until))) => {
                state.set_deadline(valid_until);
                next = Instant::now() + every;
                tracing::trace!(lock = %name, token = short(token), "renewed");
            }
            Ok(Ok((outcome, _))) => {
                tracing::warn!(lock = %name, token = short(token), ?outcome, "renewal found the lock no longer ours; lock lost");
                state.mark_lost();
                return;
            }
            Ok(Err(e)) => {
                // Try again soon, but not in a tight loop: a quarter of the
                // interval leaves several tries before the deadline.
                tracing::warn!(lock = %name, token = short(token), error = %e, "renewal failed; retrying until the lease runs out");
                next = Instant::now() + every / 4;
            }
            Err(_) => {
                tracing::warn!(lock = %name, token = short(token), "renewal did not answer before the lease ran out; lock lost");
                state.mark_lost();
                return;
            }
        }
    }
}
