//! The owner-only rounds: extend and release, which only the holder of the
//! lock may run (a compare on the owner token on each instance), and the
//! round they share with issuing a fencing token.
//!
//! Apart from the acquire because these rounds never undo anything: their
//! answers are counted into an [`OwnerTally`], whose verdict decides.

use std::time::{Duration, Instant};

use crate::backend::redlock::gather::Gathered;
use crate::backend::redlock::tally::{Found, OwnerTally, Verdict};
use crate::backend::redlock::Group;
use crate::backend::single::Single;
use crate::transport::session::Session;
use crate::vocab::error::{Error, Result};
use crate::vocab::names::LockKeys;
use crate::vocab::outcome::{Ownership, Renewal};

impl Group {
    /// Owner-only extend on all instances; `Extended` only with a majority
    /// that answered within the validity of the new lease. `batch_by`: a
    /// watchdog's renewal waits in each instance's renewal batch until
    /// then at most, a wait added to the instances' timeout.
    pub(crate) async fn extend_all(
        &self,
        keys: &LockKeys,
        token: &str,
        ttl: Duration,
        batch_by: Option<Instant>,
    ) -> Renewal {
        let waits = batch_by.map(|by| by.saturating_duration_since(Instant::now()));
        let timeout = self.timeout_for(ttl) + waits.unwrap_or_default();
        let quorum = self.inner.quorum;
        let start = Instant::now();
        let valid_until = crate::vocab::names::valid_until(start, ttl);
        let (Gathered { answers, .. }, tally) = self
            .owner_round(
                timeout,
                "extend",
                |c| Single(c).extend_once(keys, token, ttl, batch_by),
                found_extend,
                false,
            )
            .await;
        let outcome = match tally.verdict(quorum) {
            // A majority extended, but so late that the new lease is already
            // used up: nothing is proven any more.
            Verdict::Confirmed if Instant::now() >= valid_until => Ownership::Expired,
            Verdict::Confirmed => Ownership::Owned,
            Verdict::Expired => Ownership::Expired,
            Verdict::HeldByOther => Ownership::HeldByOther,
            Verdict::Undecided => {
                let errors = answers.into_iter().filter_map(|(_, a)| a.err());
                return Err(self.undecided("extend", &tally, errors));
            }
        };
        Ok((outcome, valid_until))
    }

    /// Owner-only release on all instances. Stops waiting once the outcome
    /// is decided and the rest had their grace; those are released again in
    /// the background, so the count says what was confirmed by then.
    pub(crate) async fn release_all(
        &self,
        keys: &LockKeys,
        token: &str,
        cleanup: bool,
    ) -> Result<Ownership> {
        let timeout = self.timeout_without_ttl();
        let quorum = self.inner.quorum;
        // An acquire of this hold still on its way to an instance may land
        // after this release there: each is followed by a release of its
        // own once it ends (late.rs), spawned before anything is awaited,
        // so that a dropped release still leaves it followed.
        let late = self.inner.late.take(&keys.key, token);
        self.release_after(late, keys, token, timeout);
        let (
            Gathered {
                answers,
                unanswered,
            },
            tally,
        ) = self
            .owner_round(
                timeout,
                "release",
                |c| async move {
                    match cleanup {
                        true => Single(c).release_whole(keys, token).await,
                        false => Single(c).release_once(keys, token).await,
                    }
                },
                |released| found(*released),
                true,
            )
            .await;
        self.release_detached(&unanswered, keys.clone(), token, timeout);
        // Not worth retrying, unlike an extend: see `release_verdict`.
        let outcome = match tally.release_verdict(quorum) {
            Verdict::Confirmed => Ownership::Owned,
            Verdict::HeldByOther => Ownership::HeldByOther,
            Verdict::Expired => Ownership::Expired,
            Verdict::Undecided => {
                let errors = answers.into_iter().filter_map(|(_, a)| a.err());
                return Err(self.undecided("release", &tally, errors));
            }
        };
        tracing::debug!(
            ?outcome,
            confirmed = tally.ok,
            instances = self.inner.instances.len(),
            "Redlock release"
        );
        Ok(outcome)
    }

    /// One round of an owner-only command (extend, release, issuing a
    /// token) on every instance, stopping once the answers decide the
    /// verdict (see [`Group::gather`] for `grace`); returns what was
    /// gathered and its tally, the unanswered instances counted as failed.
    pub(super) async fn owner_round<'a, T, Fut>(
        &'a self,
        timeout: Duration,
        op: &'static str,
        call: impl Fn(&'a Session) -> Fut,
        found: impl Fn(&T) -> Found + Copy,
        grace: bool,
    ) -> (Gathered<T>, OwnerTally)
    where
        Fut: std::future::Future<Output = Result<T>> + 'a,
    {
        let quorum = self.inner.quorum;
        let tally = |answers: &[(usize, Result<T>)], unknown: usize| {
            OwnerTally::of(answers.iter().map(|(_, a)| a), unknown, found)
        };
        let gathered = self
            .gather(
                self.all(),
                timeout,
                op,
                call,
                |answers, pending| tally(answers, pending).verdict(quorum) != Verdict::Undecided,
                grace,
            )
            .await;
        let tally = tally(&gathered.answers, gathered.unanswered.len());
        (gathered, tally)
    }

    /// The error for a round whose failures leave the outcome open: the
    /// first non-transient one if any (a broken setup), else `NoQuorum`.
    pub(super) fn undecided(
        &self,
        op: &'static str,
        tally: &OwnerTally,
        errors: impl Iterator<Item = Error>,
    ) -> Error {
        let mut errors = errors;
        match errors.find(|e| !e.is_transient()) {
            Some(e) => e,
            None => self.no_quorum(op, tally.answered()),
        }
    }
}

/// What an extend found.
fn found_extend((extend, _): &(Ownership, Instant)) -> Found {
    match extend {
        Ownership::Owned => Found::Ours,
        Ownership::Expired => Found::Gone,
        Ownership::HeldByOther => Found::Other,
    }
}

/// What a compare-and-delete (or a refused token) found.
fn found(outcome: Ownership) -> Found {
    match outcome {
        Ownership::Owned => Found::Ours,
        Ownership::Expired => Found::Gone,
        Ownership::HeldByOther => Found::Other,
    }
}

/// What a request for the fencing token found.
pub(super) fn found_issue(issued: &std::result::Result<u64, Ownership>) -> Found {
    match issued {
        Ok(_) => Found::Ours,
        Err(outcome) => found(*outcome),
    }
}
