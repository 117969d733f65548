//! Releases left to the background: a guard dropped without a release (or
//! whose release was cancelled or failed), and an attempt that may have
//! taken a hold whose reply was never read ([`pending`], an [`Armed`] guard
//! of the wait core).

use std::time::Instant;

use tracing::Instrument;

use crate::backend::release_span;
use crate::primitives::lease::LeaseSpec;
use crate::primitives::wait::armed::Armed;
use crate::vocab::token::short;

/// Owner-only release of `token` on the tokio runtime, if there is one,
/// tracked by the hold's client (see [`Client::flush`](crate::Client::flush)).
/// Transient errors (an outage, a failover) are retried by the one failure
/// policy until `until` (the hold's deadline: after it the hold ends by
/// itself), so a drop during a Redis restart still frees it when Redis is
/// back; at least one try is made. `counted`: a hold we knew we had (its
/// release is counted in the metrics), not an attempt's.
pub(crate) fn release_in_background<H: LeaseSpec>(
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

/// The [`Armed`] guard of an attempt whose request may take a hold of
/// `token` of `hold`: dropped armed (the attempt was cancelled, or failed
/// after sending), it releases that hold in the background. Built from
/// borrows: the clones happen only then.
pub(crate) fn pending<'a, H: LeaseSpec>(hold: &'a H, token: &'a str) -> Armed<impl FnOnce() + 'a> {
    Armed::new(move || {
        release_in_background(
            hold.clone(),
            token.to_owned(),
            "an attempt was cancelled or failed after its request was sent",
            false,
            // A hold it may have taken ends by itself within one TTL.
            Instant::now() + hold.options().ttl,
        )
    })
}
