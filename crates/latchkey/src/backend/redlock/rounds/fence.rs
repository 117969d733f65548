//! Fencing tokens on Redlock: the token of a hold is the maximum the
//! instances of its majority issued, and with [`Fencing::Strict`] the
//! counters of a majority are raised to it before it is handed out.
//!
//! Apart because both the acquire round (a `with_fencing` lock) and the
//! issue round (the first `fencing_token()` of a guard) end here, and the
//! raise is the one per-instance command that is Redlock's own.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::redlock::gather::{finish, Gathered};
use crate::backend::redlock::tally::{reach_decided, Verdict};
use crate::backend::redlock::{Fencing, Group};
use crate::backend::single::Single;
use crate::vocab::error::{Error, Result};
use crate::vocab::names::LockKeys;
use crate::vocab::outcome::{Issued, Ownership};
use crate::vocab::protocol::scripts;

use super::owner::found_issue;

impl Single<'_> {
    /// Raises the lock's fencing counter to at least `fence`; returns the
    /// counter after the call.
    async fn raise_fence_once(self, keys: &LockKeys, fence: &str) -> Result<u64> {
        let value: i64 = self
            .eval(
                "raise fence",
                &scripts::RAISE_FENCE,
                &[&keys.fence_key],
                &[fence.as_bytes()],
            )
            .await?;
        u64::try_from(value)
            .map_err(|_| Error::Protocol(format!("negative fencing counter {value}")))
    }
}

impl Group {
    /// The one token of a hold from the tokens the instances of its majority
    /// issued: their maximum, made to stick as [`Fencing`] says.
    pub(super) async fn fence_of(
        &self,
        keys: &LockKeys,
        issued: &[(usize, u64)],
        errored: &[usize],
        timeout: Duration,
    ) -> Result<u64> {
        let fence = issued.iter().map(|&(_, t)| t).max().unwrap_or_default();
        if self.options.fencing == Fencing::Strict {
            self.raise_fences(keys, issued, errored, fence, timeout)
                .await?;
        }
        Ok(fence)
    }

    /// Issues the fencing token of a hold on every instance where we still
    /// hold the key; `Ok(Ok(token))` when a majority did, within the hold's
    /// validity (`valid_until`), else what was found instead.
    pub(crate) async fn issue_fence(
        &self,
        keys: &LockKeys,
        token: &str,
        valid_until: Instant,
    ) -> Issued {
        let timeout = self.timeout_without_ttl();
        let quorum = self.inner.quorum;
        let (Gathered { answers, .. }, tally) = self
            .owner_round(
                timeout,
                "issue fencing token",
                |c| Single(c).issue_fence_once(keys, token),
                found_issue,
                false,
            )
            .await;
        match tally.verdict(quorum) {
            Verdict::Confirmed => {}
            Verdict::Expired => return Ok(Err(Ownership::Expired)),
            Verdict::HeldByOther => return Ok(Err(Ownership::HeldByOther)),
            Verdict::Undecided => {
                let errors = answers.into_iter().filter_map(|(_, a)| a.err());
                return Err(self.undecided("issue fencing token", &tally, errors));
            }
        }
        let mut issued = Vec::new();
        let mut errored = Vec::new();
        for (i, answer) in answers {
            match answer {
                Ok(Ok(t)) => issued.push((i, t)),
                Ok(Err(_)) => {}
                Err(_) => errored.push(i),
            }
        }
        let fence = self.fence_of(keys, &issued, &errored, timeout).await?;
        // Issued, but so late that the hold may be over: a token now could
        // outrank the next holder's.
        if Instant::now() >= valid_until {
            return Ok(Err(Ownership::Expired));
        }
        Ok(Ok(fence))
    }

    /// Strict fencing: raise the fencing counters to `fence` on every
    /// instance but those already there and those whose acquire (or issue)
    /// failed; return once a majority holds at least `fence`. The raises to
    /// the other instances run on to the end in their own tasks.
    ///
    /// The more instances hold `fence`, the more may lose their counters
    /// (restart without persistence) before the next token is issued
    /// without breaking monotonicity: with all N raised, any minority.
    /// Instances that did not answer the acquire in time, or answered
    /// "busy" (or, in an issue round, no longer held our key), are raised
    /// too: raising only ever moves a counter up.
    async fn raise_fences(
        &self,
        keys: &LockKeys,
        acquired: &[(usize, u64)],
        errored: &[usize],
        fence: u64,
        timeout: Duration,
    ) -> Result<()> {
        let quorum = self.inner.quorum;
        let at_fence: Vec<usize> = acquired
            .iter()
            .filter(|&&(_, t)| t >= fence)
            .map(|&(i, _)| i)
            .collect();
        let targets = self
            .all()
            .filter(|i| !at_fence.contains(i) && !errored.contains(i));
        let shared = Arc::new((keys.clone(), fence.to_string()));
        let mut tasks = self.spawn_each(targets, timeout, "raise fence", |client| {
            let shared = shared.clone();
            async move { Single(&client).raise_fence_once(&shared.0, &shared.1).await }
        });
        let mut requests = Vec::with_capacity(tasks.len());
        for (i, task) in tasks.iter_mut() {
            requests.push((*i, task.as_mut().map(finish)));
        }
        let raised = |answers: &[(usize, Result<u64>)]| {
            at_fence.len()
                + answers
                    .iter()
                    .filter(|(_, a)| matches!(a, Ok(c) if *c >= fence))
                    .count()
        };
        let Gathered { answers, .. } = self
            .gather_requests(
                requests,
                // The tasks are bounded by `timeout` already.
                None,
                "raise fence",
                |answers, pending| reach_decided(raised(answers), pending, quorum),
                false,
            )
            .await;
        let count = raised(&answers);
        for (_, answer) in answers {
            match answer {
                Ok(counter) if counter < fence => {
                    return Err(Error::Protocol(format!(
                        "fencing counter {counter} below {fence} after raising it"
                    )))
                }
                Err(e) if !e.is_transient() => return Err(e),
                _ => {}
            }
        }
        if count >= quorum {
            Ok(())
        } else {
            Err(self.no_quorum("raise fence", count))
        }
    }
}
