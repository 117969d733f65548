//! `with_hold_at_least(d)`: a hold released (or dropped) before `d` from
//! its acquisition is kept until then, so that work done quickly on one
//! machine is not done again on another whose turn came a moment later (a
//! cron job fired on several machines). The release becomes a renewal to
//! the time left, then the hold is given up as `forget` does: the watchdog
//! stops and the key ends by itself when that time is up.

use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::backend::release_span;
use crate::primitives::lease::{Lease, LeaseSpec, ReleaseState};
use crate::vocab::error::Result;
use crate::vocab::outcome::Ownership;
use crate::vocab::token::short;

impl<H: LeaseSpec> Lease<H> {
    /// The release of a hold with `left` to keep: what the renewal found
    /// (`Owned`: it stays ours until then, and nobody else can take it).
    /// Transient errors are retried while the deadline has not passed;
    /// nothing is left to `Drop` either way (a hold not renewed ends at
    /// its TTL, which is no sooner than it would have).
    pub(super) async fn keep_for(&mut self, left: Duration) -> Result<Ownership> {
        self.release = ReleaseState::Done;
        self.state.finish();
        let label = self.hold.label();
        crate::vocab::metrics::hold_time(label, self.acquired_at.elapsed());
        let span = release_span(label.kind(), self.name(), &self.token);
        let (hold, token) = (&self.hold, &self.token);
        let what = "keeping a released hold for its least time";
        let renewed = crate::vocab::retry::until_deadline(self.state.deadline(), &what, || {
            hold.renew(token, left, None)
        })
        .instrument(span)
        .await;
        let result = renewed.map(|(outcome, _)| outcome);
        crate::vocab::metrics::release_outcome(label, result.as_ref().ok().copied());
        match &result {
            Ok(Ownership::Owned) => {
                tracing::debug!(name = %String::from_utf8_lossy(self.name()), token = short(token), ?left, "released before its least time: kept until then")
            }
            Ok(outcome) => {
                tracing::warn!(name = %String::from_utf8_lossy(self.name()), token = short(token), ?outcome, "release found the hold no longer ours")
            }
            Err(_) => {}
        }
        result
    }
}

/// [`Lease::keep_for`] of a hold dropped without a release, on the tokio
/// runtime if there is one (tracked, as background releases are).
pub(super) fn keep_in_background<H: LeaseSpec>(hold: H, token: String, left: Duration) {
    if tokio::runtime::Handle::try_current().is_err() {
        return;
    }
    let until = Instant::now() + left;
    let tracker = hold.tracker().clone();
    tracker.spawn(async move {
        let what = "keeping a dropped hold for its least time";
        let _ =
            crate::vocab::retry::until_deadline(until, &what, || hold.renew(&token, left, None))
                .await;
    });
}
