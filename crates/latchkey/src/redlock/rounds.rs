//! The rounds of the Redlock algorithm: each sends one command to every
//! instance at once (each bounded by the per-instance timeout; see
//! `gather.rs` for when a round stops waiting) and counts the answers. The per-instance commands are the single-instance ones of
//! `single.rs`; only the fence raise is Redlock's own.
//!
//! ```text
//! acquire:  start ─► SET NX on all ─► majority? ─► raise fences (Strict) ─► now < start + ttl − drift?
//!                                       │ no                                  │ no
//!                                       └──────── retract on all ◄────────────┘  → Busy / NoQuorum
//! ```

use std::time::{Duration, Instant};

use super::gather::Gathered;
use super::tally::{contention, Contention, OwnerTally, Seen, Verdict};
use super::{Fencing, Redlock};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::lock::{Attempt, Extend, Release, ReleaseReport};
use crate::names::{drift, LockKeys};
use crate::scripts;
use crate::subscriber::{jitter, Event, Subscription, Topic};

/// Suffix of the channel a retraction (the release that undoes a failed
/// attempt) publishes on: nobody listens there, so contenders are not
/// woken in lockstep by each other's failures and keep their random delays.
pub(crate) const RETRACTED_SUFFIX: &[u8] = b":retracted";

impl Client {
    /// Raises the lock's fencing counter to at least `fence`; returns the
    /// counter after the call.
    async fn raise_fence_once(&self, keys: &LockKeys, fence: &str) -> Result<u64> {
        let value: i64 = self
            .eval("raise fence", &scripts::RAISE_FENCE, &[&keys.fence_key], &[fence.as_bytes()])
            .await?;
        u64::try_from(value).map_err(|_| Error::Protocol(format!("negative fencing counter {value}")))
    }
}

impl Redlock {
    fn all(&self) -> std::ops::Range<usize> {
        0..self.inner.instances.len()
    }

    fn no_quorum(&self, op: &'static str, answered: usize) -> Error {
        Error::NoQuorum {
            op,
            answered,
            needed: self.inner.quorum,
            instances: self.inner.instances.len(),
        }
    }

    /// One acquire attempt over all instances.
    pub(crate) async fn try_once(&self, keys: &LockKeys, token: &str, ttl: Duration) -> Result<Attempt> {
        let timeout = self.timeout_for(ttl);
        let quorum = self.inner.quorum;
        // Before the first send: every key we get expires no earlier than
        // `start + ttl` (less the drift allowance for clock rates).
        let start = Instant::now();
        let valid_until = start + ttl - drift(ttl);
        let Gathered { answers, unanswered } = self
            .gather(
                self.all(),
                timeout,
                "acquire",
                |c| c.try_once(keys, token, ttl),
                |answers, pending| {
                    let acquired = answers
                        .iter()
                        .filter(|(_, a)| matches!(a, Ok(Attempt::Acquired { .. })))
                        .count();
                    let answered = answers.iter().filter(|(_, a)| a.is_ok()).count();
                    // Won; or lost, and also known whether for want of answers.
                    acquired >= quorum
                        || (acquired + pending < quorum
                            && (answered >= quorum || answered + pending < quorum))
                },
                false,
            )
            .await;

        let mut acquired: Vec<(usize, u64)> = Vec::new();
        let mut busy: Vec<(usize, Option<Duration>)> = Vec::new();
        let mut errored = Vec::new();
        let mut errors = Vec::new();
        for (i, answer) in answers {
            match answer {
                Ok(Attempt::Acquired { fencing_token, .. }) => acquired.push((i, fencing_token)),
                Ok(Attempt::Busy { retry_in }) => busy.push((i, retry_in)),
                Err(e) => {
                    errored.push(i);
                    errors.push(e);
                }
            }
        }
        let round = start.elapsed();
        let retract = |acquired: Vec<(usize, u64)>| async move {
            let ours: Vec<usize> = acquired.iter().map(|&(i, _)| i).collect();
            let targets = Targets {
                ours: &ours,
                unanswered: &unanswered,
                errored: &errored,
            };
            self.retract(keys, token, targets, timeout, round).await;
        };

        if acquired.len() >= quorum {
            let fence = acquired.iter().map(|&(_, t)| t).max().unwrap_or_default();
            let fenced = match self.options.fencing {
                Fencing::Strict => self.raise_fences(keys, &acquired, fence, timeout).await,
                Fencing::TimeFloor => Ok(()),
            };
            let outcome = match fenced {
                Ok(()) if Instant::now() < valid_until => {
                    return Ok(Attempt::Acquired {
                        fencing_token: fence,
                        valid_until,
                    })
                }
                // Everything was free; only slowness failed us. Retry soon.
                Ok(()) => {
                    tracing::debug!(elapsed = ?start.elapsed(), ?ttl, "Redlock majority answered too late: no validity left");
                    Ok(Attempt::Busy { retry_in: None })
                }
                Err(e) => Err(e),
            };
            retract(acquired).await;
            return outcome;
        }

        let answered = acquired.len() + busy.len();
        if answered < quorum {
            retract(acquired).await;
            // A broken setup (WRONGTYPE, NOPERM, auth) says more than "no quorum".
            if let Some(e) = errors.into_iter().find(|e| !e.is_transient()) {
                return Err(e);
            }
            return Err(self.no_quorum("acquire", answered));
        }
        // While undoing our part, look at who holds the rest: one owner that
        // may have a majority is worth waiting for (its release wakes us; its
        // keys expire at the latest); a split vote is not, since every
        // contender undoes its part: retry after a short random delay, a few
        // rounds long, so the contenders fall out of step.
        let (_, seen) =
            futures_util::future::join(retract(acquired), self.holders(keys, &busy, timeout)).await;
        let unanswered_count = self.inner.instances.len() - answered;
        let retry_in = match contention(&seen, unanswered_count, quorum) {
            Contention::Holder(ttl_left) => ttl_left,
            Contention::Split => Some(jitter((round * 2).max(Duration::from_millis(2)))),
        };
        Ok(Attempt::Busy { retry_in })
    }

    /// What the busy instances hold now: the owner token (one `GET` each,
    /// at once) with the TTL left that the attempt saw.
    async fn holders(&self, keys: &LockKeys, busy: &[(usize, Option<Duration>)], timeout: Duration) -> Vec<Seen> {
        let Gathered { answers, unanswered } = self
            .gather(
                busy.iter().map(|&(i, _)| i),
                timeout,
                "GET",
                |c| c.query::<Option<Vec<u8>>>("GET", redis::Cmd::get(&keys.key), &keys.key),
                |_, _| false,
                false,
            )
            .await;
        let ttl_left = |i: usize| busy.iter().find(|(j, _)| *j == i).and_then(|(_, t)| *t);
        answers
            .into_iter()
            .map(|(i, answer)| match answer {
                Ok(Some(token)) => Seen::Held(token, ttl_left(i)),
                Ok(None) => Seen::Free,
                Err(_) => Seen::Unknown,
            })
            .chain(unanswered.iter().map(|_| Seen::Unknown))
            .collect()
    }

    /// Strict fencing: raise the acquiring instances' counters to `fence`
    /// until a majority of instances holds at least `fence`.
    async fn raise_fences(
        &self,
        keys: &LockKeys,
        acquired: &[(usize, u64)],
        fence: u64,
        timeout: Duration,
    ) -> Result<()> {
        let quorum = self.inner.quorum;
        let at_fence = acquired.iter().filter(|&&(_, t)| t >= fence).count();
        if at_fence >= quorum {
            return Ok(());
        }
        let behind = acquired.iter().filter(|&&(_, t)| t < fence).map(|&(i, _)| i);
        let arg = fence.to_string();
        let raised = |answers: &[(usize, Result<u64>)]| {
            at_fence
                + answers
                    .iter()
                    .filter(|(_, a)| matches!(a, Ok(c) if *c >= fence))
                    .count()
        };
        let Gathered { answers, .. } = self
            .gather(
                behind,
                timeout,
                "raise fence",
                |c| c.raise_fence_once(keys, &arg),
                |answers, pending| {
                    let raised = raised(answers);
                    raised >= quorum || raised + pending < quorum
                },
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

    /// Undoes a failed attempt on every instance where our key may be, each
    /// in a task of its own that runs to the end (bounded by `timeout`):
    /// compare-and-delete, so only our own keys go, publishing on the
    /// `:retracted` channel, not the release channel. Not where the answer
    /// was "busy": no key of ours is there.
    ///
    /// Waits for the instances that gave us the key, and for those that had
    /// not answered when the round was decided (our SET may still land
    /// there; the release follows it on the same connection) as long again
    /// as the round took, at least 2 ms: long enough for an instance that
    /// was merely slower, not for a dead one. Does not wait where the
    /// request failed (usually a down instance).
    async fn retract(&self, keys: &LockKeys, token: &str, targets: Targets<'_>, timeout: Duration, round: Duration) {
        let quiet = LockKeys {
            key: keys.key.clone(),
            fence_key: keys.fence_key.clone(),
            channel: [&keys.key[..], RETRACTED_SUFFIX].concat(),
        };
        self.release_detached(targets.errored, quiet.clone(), token, timeout);
        let late = self.release_detached(targets.unanswered, quiet.clone(), token, timeout);
        let ours = self.release_detached(targets.ours, quiet, token, timeout);
        let grace = round.max(Duration::from_millis(2));
        // Past the grace, the late ones finish on their own.
        let _ = futures_util::future::join(
            futures_util::future::join_all(ours),
            tokio::time::timeout(grace, futures_util::future::join_all(late)),
        )
        .await;
    }

    /// Owner-only extend on all instances; `Extended` only with a majority
    /// that answered within the validity of the new lease.
    pub(crate) async fn extend_all(
        &self,
        keys: &LockKeys,
        token: &str,
        ttl: Duration,
    ) -> Result<(Extend, Instant)> {
        let timeout = self.timeout_for(ttl);
        let quorum = self.inner.quorum;
        let start = Instant::now();
        let valid_until = start + ttl - drift(ttl);
        let Gathered { answers, unanswered } = self
            .gather(
                self.all(),
                timeout,
                "extend",
                |c| c.extend_once(keys, token, ttl),
                |answers, pending| {
                    let tally = tally_extends(answers.iter().map(|(_, a)| a), pending);
                    tally.verdict(quorum) != Verdict::Undecided
                },
                false,
            )
            .await;
        let tally = tally_extends(answers.iter().map(|(_, a)| a), unanswered.len());
        let outcome = match tally.verdict(quorum) {
            // A majority extended, but so late that the new lease is already
            // used up: nothing is proven any more.
            Verdict::Confirmed if Instant::now() >= valid_until => Extend::Expired,
            Verdict::Confirmed => Extend::Extended,
            Verdict::Expired => Extend::Expired,
            Verdict::HeldByOther => Extend::HeldByOther,
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
    pub(crate) async fn release_all(&self, keys: &LockKeys, token: &str) -> Result<ReleaseReport> {
        let timeout = self.timeout_without_ttl();
        let quorum = self.inner.quorum;
        let Gathered { answers, unanswered } = self
            .gather(
                self.all(),
                timeout,
                "release",
                |c| c.release_once(keys, token),
                |answers, pending| {
                    let tally = tally_releases(answers.iter().map(|(_, a)| a), pending);
                    tally.verdict(quorum) != Verdict::Undecided
                },
                true,
            )
            .await;
        self.release_detached(&unanswered, keys.clone(), token, timeout);
        let tally = tally_releases(answers.iter().map(|(_, a)| a), unanswered.len());
        let outcome = match tally.verdict(quorum) {
            Verdict::Confirmed => Release::Released,
            Verdict::HeldByOther => Release::HeldByOther,
            Verdict::Expired => Release::Expired,
            // Unlike an extend, a release is not worth retrying: our keys
            // are gone wherever we were answered. With a majority answering
            // but too few confirming, we cannot prove we held the lock to
            // the end: say so (Expired; someone else cannot hold a majority
            // here, ours and the silent ones make up one). With fewer than a
            // majority answering, our keys may live on until the TTL: an error.
            Verdict::Undecided if tally.answered() >= quorum => Release::Expired,
            Verdict::Undecided => {
                let errors = answers.into_iter().filter_map(|(_, a)| a.err());
                return Err(self.undecided("release", &tally, errors));
            }
        };
        Ok(ReleaseReport {
            outcome,
            confirmed: tally.ok,
            instances: self.inner.instances.len(),
        })
    }

    /// The error for a round whose failures leave the outcome open: the
    /// first non-transient one if any (a broken setup), else `NoQuorum`.
    fn undecided(&self, op: &'static str, tally: &OwnerTally, errors: impl Iterator<Item = Error>) -> Error {
        let mut errors = errors;
        match errors.find(|e| !e.is_transient()) {
            Some(e) => e,
            None => self.no_quorum(op, tally.answered()),
        }
    }

    /// Subscribes to the lock's release channel on the instances, all at
    /// once; a release on any of them wakes the waiter.
    ///
    /// Returns once every instance answered, or once a majority confirmed
    /// and the rest had their grace: a holder's release publishes on each
    /// instance of its majority, and any two majorities meet, so a majority
    /// of subscriptions hears it; a down instance (whose subscriber may take
    /// its full timeout to say so) does not hold up every waiter. A missing
    /// subscription only costs time when some of a holder's keys are gone:
    /// the waiter still wakes at the holder's TTL. Fails only when none
    /// can subscribe.
    pub(crate) async fn subscriptions(&self, keys: &LockKeys) -> Result<Vec<Subscription>> {
        let topic = Topic::Channel(keys.channel.clone());
        let topic = &topic;
        let quorum = self.inner.quorum;
        // Subscribing may include connecting the subscriber: allow the
        // longer timeout, not the TTL-derived one.
        let timeout = self.timeout_without_ttl().max(super::MAX_INSTANCE_TIMEOUT);
        let Gathered { answers, .. } = self
            .gather(
                self.all(),
                timeout,
                "subscribe",
                |c| c.subscriber().subscribe(topic.clone()),
                |answers, _| answers.iter().filter(|(_, a)| a.is_ok()).count() >= quorum,
                true,
            )
            .await;
        let mut subscriptions = Vec::new();
        let mut first_error = None;
        for (_, answer) in answers {
            match answer {
                Ok(s) => subscriptions.push(s),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match (subscriptions.is_empty(), first_error) {
            (true, Some(e)) => Err(e),
            (true, None) => Err(self.no_quorum("subscribe", 0)),
            (false, _) => Ok(subscriptions),
        }
    }

    /// Wakes this process's waiters at once after a local release.
    pub(crate) fn wake_local(&self, keys: &LockKeys) {
        let topic = Topic::Channel(keys.channel.clone());
        for instance in &self.inner.instances {
            if let Some(subscriber) = instance.client.get().and_then(Client::subscriber_if_started) {
                subscriber.notify_local(&topic, Event::LocalRelease);
            }
        }
    }
}

/// Counts extend answers; `unknown` instances count as failed.
fn tally_extends<'a>(answers: impl Iterator<Item = &'a Result<(Extend, Instant)>>, unknown: usize) -> OwnerTally {
    let mut tally = OwnerTally {
        failed: unknown,
        ..OwnerTally::default()
    };
    for answer in answers {
        match answer {
            Ok((Extend::Extended, _)) => tally.ok += 1,
            Ok((Extend::Expired, _)) => tally.expired += 1,
            Ok((Extend::HeldByOther, _)) => tally.held_by_other += 1,
            Err(_) => tally.failed += 1,
        }
    }
    tally
}

/// Counts release answers; `unknown` instances count as failed.
fn tally_releases<'a>(answers: impl Iterator<Item = &'a Result<Release>>, unknown: usize) -> OwnerTally {
    let mut tally = OwnerTally {
        failed: unknown,
        ..OwnerTally::default()
    };
    for answer in answers {
        match answer {
            Ok(Release::Released) => tally.ok += 1,
            Ok(Release::Expired) => tally.expired += 1,
            Ok(Release::HeldByOther) => tally.held_by_other += 1,
            Err(_) => tally.failed += 1,
        }
    }
    tally
}

/// Where a retraction goes; see [`Redlock::retract`].
#[derive(Clone, Copy)]
struct Targets<'a> {
    /// Instances that gave us the key.
    ours: &'a [usize],
    /// Instances that had not answered when the round was decided.
    unanswered: &'a [usize],
    /// Instances whose request failed.
    errored: &'a [usize],
}
