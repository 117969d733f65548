//! Releases left to the background: a guard dropped without a release (or
//! whose release was cancelled or failed), and an attempt that may have
//! taken a hold whose reply was never read ([`Pending`]).

use std::time::Instant;

use tracing::Instrument;

use crate::backend::release_span;
use crate::primitives::lease::Hold;
use crate::vocab::token::short;

/// Owner-only release of `token` on the tokio runtime, if there is one,
/// tracked by the hold's client (see [`Client::flush`](crate::Client::flush)).
/// Transient errors (an outage, a failover) are retried by the one failure
/// policy until `until` (the hold's deadline: after it the hold ends by
/// itself), so a drop during a Redis restart still frees it when Redis is
/// back; at least one try is made. `counted`: a hold we knew we had (its
/// release is counted in the metrics), not an attempt's.
pub(crate) fn release_in_background<H: Hold>(
    hold: H,
    token: String,
    why: &'static str,
    counted: bool,
    until: Instant,
) {
    if tokio::runtime::Handle::try_current().is_err() {
        tracing::warn!(
            why,
            "no tokio runtime to release on; the hold ends by itself at its TTL"
        );
        return;
    }
    let span = release_span(hold.label().kind(), hold.name(), &token);
    let tracker = hold.tracker().clone();
    tracker.spawn(
        async move {
            let result = crate::vocab::retry::until_deadline(until, &why, || {
                hold.release(&token, true)
            })
            .await;
            if counted {
                crate::vocab::metrics::release_outcome(hold.label(), result.as_ref().ok().copied());
            }
            match result {
                Ok(outcome) => tracing::debug!(why, ?outcome, token = short(&token), "background release"),
                Err(e) => tracing::warn!(why, error = %e, "background release failed; the hold ends by itself at its TTL"),
            }
        }
        .instrument(span),
    );
}

/// Armed while an attempt's request may have taken a hold whose reply was
/// not read yet: dropped armed (the attempt was cancelled, or failed after
/// sending), it releases that hold in the background. Disarm it once the
/// reply says what happened.
pub(crate) struct Pending<'a, H: Hold> {
    hold: &'a H,
    token: Option<&'a str>,
}

impl<'a, H: Hold> Pending<'a, H> {
    /// Armed for `token`, which a request about to be sent may take.
    pub(crate) fn arm(hold: &'a H, token: &'a str) -> Self {
        Pending {
            hold,
            token: Some(token),
        }
    }

    /// The reply was read: nothing to undo.
    pub(crate) fn disarm(mut self) {
        self.token = None;
    }
}

impl<H: Hold> Drop for Pending<'_, H> {
    fn drop(&mut self) {
        if let Some(token) = self.token {
            release_in_background(
                self.hold.clone(),
                token.to_owned(),
                "an attempt was cancelled or failed after its request was sent",
                false,
                // A hold it may have taken ends by itself within one TTL.
                Instant::now() + self.hold.ttl(),
            );
        }
    }
}
