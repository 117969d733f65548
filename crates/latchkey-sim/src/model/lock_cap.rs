//! The max-hold cap of the plain lock model: a hold made `with_max_hold(d)`
//! (`primitives/lease/`): its cap is `d` after the acquire's reply came;
//! the watchdog shortens each renewal to end by the cap and sends none
//! once less than the library's minimum TTL (10 ms) is left
//! (`renew::capped`), and the holder counts the hold as lost the stop
//! margin before the cap, whatever its deadline (`State::held`, in
//! [`LockModel::believes`]).
//!
//! Invariants: no client believes it holds at or past its cap minus the
//! margin (where `lost` fires); and the lock key of a capped hold never
//! expires after `max(acquired + ttl, cap)`: the acquire's own TTL may
//! outlast a cap shorter than it, but no renewal may take the key past
//! the cap (tighter than `acquired + cap + ttl`, as every renewal is
//! shortened to end by the cap).

use crate::model::common::{margin, token, Stored};
use crate::model::lock::{Hold, LockModel, Mutant, Phase, State, START_MICROS};

/// The library's minimum TTL, in ms: a capped renewal shorter than this
/// is not sent (`vocab::names::MIN_TTL`).
const MIN_TTL: i64 = 10;

impl LockModel {
    /// Every hold made `with_max_hold` of `ms` milliseconds (at least the
    /// library's minimum, 10 ms).
    pub fn with_max_hold(mut self, ms: i64) -> LockModel {
        self.max_hold = Some(ms);
        self
    }

    /// The cap on holds, in ms, if any.
    pub fn max_hold(&self) -> Option<i64> {
        self.max_hold
    }

    /// The TTL the watchdog's renewal of `hold` sends at `now`: the lock's,
    /// shortened to end by the cap; `None` once the cap leaves less than
    /// the minimum TTL (no more renewals).
    pub(crate) fn renewal_ttl(&self, hold: &Hold, now: i64) -> Option<i64> {
        let ttl = self.config.ttl;
        match hold.cap {
            None => Some(ttl),
            Some(_) if self.config.mutant == Some(Mutant::RenewPastCap) => Some(ttl),
            Some(cap) => (cap - now >= MIN_TTL).then(|| ttl.min(cap - now)),
        }
    }

    /// The cap's invariants (see the module's docs).
    pub(crate) fn check_cap(&self, s: &State) -> Result<(), String> {
        let Some(max_hold) = self.max_hold else {
            return Ok(());
        };
        for (c, client) in s.clients.iter().enumerate() {
            let Phase::Held(h) = &client.phase else {
                continue;
            };
            let Some(cap) = h.cap else { continue };
            if self.believes(h, s.now) && s.now >= cap - margin(self.config.ttl) {
                return Err(format!(
                    "max hold: c{c} believes it holds at {} ms, past its cap {cap} ms minus the margin",
                    s.now
                ));
            }
            let acquired = cap - max_hold;
            let bound = (acquired + self.config.ttl).max(cap);
            let mine = token(c, h.attempt).into_bytes();
            let expiry = match s.keys.get(self.key()) {
                Some((Stored::Str(v), at)) if *v == mine => *at,
                _ => None,
            };
            if let Some(at) = expiry {
                let at = at - START_MICROS / 1000;
                if at > bound {
                    return Err(format!(
                        "max hold: c{c}'s key (acquired at {acquired} ms, capped at {cap} ms) \
                         was renewed to expire at {at} ms, past the cap"
                    ));
                }
            }
        }
        Ok(())
    }
}
