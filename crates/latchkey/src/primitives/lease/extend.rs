//! A program's own renewals of a lease: `extend` (a new TTL from now,
//! which the watchdog then keeps at least) and `confirm` (a proof that
//! leaves the expiry where it is).

use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::primitives::lease::renew::{capped, renew_span};
use crate::primitives::lease::{Lease, LeaseSpec};
use crate::vocab::error::{Error, Result};
use crate::vocab::outcome::{LostReason, Ownership};
use crate::vocab::token::short;

impl<H: LeaseSpec> Lease<H> {
    /// Renews for `ttl` from now if still ours; else marks the hold lost.
    /// A `ttl` that would take the hold past its cap is refused, nothing
    /// changed: the program asked for time it cannot have.
    pub(crate) async fn extend(&self, ttl: Duration) -> Result<Ownership> {
        crate::vocab::names::check_ttl(ttl)?;
        let sent = Instant::now();
        if capped(ttl, self.state.cap) != Some(ttl) {
            return Err(Error::MaxHoldReached {
                name: String::from_utf8_lossy(self.name()).into_owned(),
                max_hold: self.hold.options().max_hold.unwrap_or_default(),
            });
        }
        let label = self.hold.label();
        let span = renew_span(label.kind(), self.name(), &self.token);
        let result = self
            .hold
            .renew(&self.token, ttl, None)
            .instrument(span)
            .await;
        crate::vocab::metrics::renewal(label, matches!(result, Ok((Ownership::Owned, _))));
        let (outcome, valid_until) = result?;
        match outcome {
            Ownership::Owned => {
                // The watchdog (if any) keeps it at least this long now.
                self.state.extend_to(sent + ttl);
                self.state.set_deadline(valid_until);
            }
            Ownership::Expired | Ownership::HeldByOther => {
                tracing::warn!(name = %String::from_utf8_lossy(self.name()), token = short(&self.token), ?outcome, "extend found the hold no longer ours");
                self.state.mark_lost(LostReason::from_check(outcome, false));
            }
        }
        Ok(outcome)
    }

    /// Proves the hold still ours by one round trip that leaves its expiry
    /// where it is (a renewal to the expiry it already has); otherwise
    /// marks it lost. A hold with less than `MIN_TTL` left is as good as
    /// gone: `Expired`, nothing sent.
    pub(crate) async fn confirm(&self) -> Result<Ownership> {
        let Some(left) = self.state.ttl_to_expiry(self.ttl()) else {
            return Ok(Ownership::Expired);
        };
        let label = self.hold.label();
        let span = renew_span(label.kind(), self.name(), &self.token);
        let (outcome, _) = (self.hold.renew(&self.token, left, None))
            .instrument(span)
            .await?;
        if outcome != Ownership::Owned {
            tracing::warn!(name = %String::from_utf8_lossy(self.name()), token = short(&self.token), ?outcome, "a check found the hold no longer ours");
            self.state.mark_lost(LostReason::from_check(outcome, false));
        }
        Ok(outcome)
    }
}
