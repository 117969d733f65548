//! The rounds of the Redlock algorithm: each sends one command to every
//! instance at once (each bounded by the per-instance timeout; see
//! `gather.rs` for when a round stops waiting) and counts the answers. The per-instance commands are the single-instance ones of
//! `single.rs`; only the fence raise is Redlock's own.
//!
//! ```text
//! acquire:  start ─► SET NX on all ─► majority? ─► raise fences (with_fencing, Strict) ─► now < start + ttl − drift?
//!                                     │ no                                                │ no
//!                                     └──────── retract on all ◄──────────────────────────┘  → Busy / NoQuorum
//!
//! issue:    issue_fence.lua on all ─► majority holds our key? ─► raise fences (Strict) ─► now < deadline?
//!                                     │ no → NotHeld / NoQuorum                           │ no → NotHeld
//! (issue: the first `fencing_token()` of a guard whose lock is not `with_fencing`)
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use super::gather::{finish, Gathered};
use super::tally::{contention, Contention, Found, OwnerTally, Seen, Verdict};
use super::{Fencing, Redlock};
use crate::error::{Error, Result};
use crate::names::{drift, LockKeys};
use crate::outcome::{Attempt, AttemptMode, Ownership};
use crate::scripts;
use crate::session::Session;
use crate::subscriber::{jitter, Event, Subscription, Topic};

/// Suffix of the channel a retraction (the release that undoes a failed
/// attempt) publishes on: nobody listens there, so contenders are not
/// woken in lockstep by each other's failures and keep their random delays.
use crate::protocol::RETRACTED_SUFFIX;

impl Session {
    /// Raises the lock's fencing counter to at least `fence`; returns the
    /// counter after the call.
    async fn raise_fence_once(&self, keys: &LockKeys, fence: &str) -> Result<u64> {
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
    pub(crate) async fn try_once(
        &self,
        keys: &LockKeys,
        token: &str,
        ttl: Duration,
        mode: AttemptMode,
    ) -> Result<Attempt> {
        let timeout = self.timeout_for(ttl);
        let quorum = self.inner.quorum;
        // Before the first send: every key we get expires no earlier than
        // `start + ttl` (less the drift allowance for clock rates).
        let start = Instant::now();
        let valid_until = start + ttl - drift(ttl);
        // Each instance's acquire runs in a task of its own, to the end, even
        // when the round stops at the decision: a slower instance still gets
        // our key (so the lock lives on more than a bare majority and
        // survives more instance failures), and a retraction can wait for
        // it before undoing it.
        let shared = Arc::new((keys.clone(), token.to_owned()));
        let mut tasks = self.spawn_each(self.all(), timeout, "acquire", |client| {
            let shared = shared.clone();
            async move { client.try_once(&shared.0, &shared.1, ttl, mode).await }
        });
        let mut requests = Vec::with_capacity(tasks.len());
        for (i, task) in tasks.iter_mut() {
            requests.push((*i, task.as_mut().map(finish)));
        }
        let Gathered {
            answers,
            unanswered,
        } = self
            .gather_requests(
                requests,
                timeout,
                "acquire",
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

        let mut acquired: Vec<(usize, Option<u64>)> = Vec::new();
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
        // The acquires still running: a retraction waits for each to finish.
        let late: Vec<(usize, JoinHandle<Result<Attempt>>)> = unanswered
            .iter()
            .filter_map(|&i| Some((i, tasks[i].1.take()?)))
            .collect();
        let errored = &errored;
        let retract = |acquired: Vec<(usize, Option<u64>)>| async move {
            let ours: Vec<usize> = acquired.iter().map(|&(i, _)| i).collect();
            let targets = Targets {
                ours: &ours,
                late,
                errored,
            };
            self.retract(keys, token, targets, timeout, round).await;
        };

        if acquired.len() >= quorum {
            let fenced = if mode.fenced {
                let issued: Vec<(usize, u64)> = acquired
                    .iter()
                    .filter_map(|&(i, t)| Some((i, t?)))
                    .collect();
                self.fence_of(keys, &issued, errored, timeout)
                    .await
                    .map(Some)
            } else {
                Ok(None)
            };
            let outcome = match fenced {
                Ok(fencing_token) if Instant::now() < valid_until => {
                    return Ok(Attempt::Acquired {
                        fencing_token,
                        valid_until,
                    })
                }
                // Everything was free; only slowness failed us. Retry soon.
                Ok(_) => {
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

    /// The one token of a hold from the tokens the instances of its majority
    /// issued: their maximum, made to stick as [`Fencing`] says.
    async fn fence_of(
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
    ) -> Result<std::result::Result<u64, Ownership>> {
        let timeout = self.timeout_without_ttl();
        let quorum = self.inner.quorum;
        let (Gathered { answers, .. }, tally) = self
            .owner_round(
                timeout,
                "issue fencing token",
                |c| c.issue_fence_once(keys, token),
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

    /// What the busy instances hold now: the owner token (one `GET` each,
    /// at once) with the TTL left that the attempt saw.
    async fn holders(
        &self,
        keys: &LockKeys,
        busy: &[(usize, Option<Duration>)],
        timeout: Duration,
    ) -> Vec<Seen> {
        let Gathered {
            answers,
            unanswered,
        } = self
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
                // Compared across instances: without the waiting mark, which
                // waiters set on some instances and not on others.
                Ok(Some(value)) => Seen::Held(crate::token::unmarked(&value).to_vec(), ttl_left(i)),
                Ok(None) => Seen::Free,
                Err(_) => Seen::Unknown,
            })
            .chain(unanswered.iter().map(|_| Seen::Unknown))
            .collect()
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
            async move { client.raise_fence_once(&shared.0, &shared.1).await }
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
                timeout,
                "raise fence",
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
    /// Waits for the instances that gave us the key, and for those whose
    /// acquire was still running when the round was decided (each is undone
    /// after its acquire finishes) as long again as the round took, at
    /// least 2 ms: long enough for an instance that was merely slower, not
    /// for a dead one. Does not wait where the request failed (usually a
    /// down instance).
    async fn retract(
        &self,
        keys: &LockKeys,
        token: &str,
        targets: Targets<'_>,
        timeout: Duration,
        round: Duration,
    ) {
        let quiet = LockKeys {
            key: keys.key.clone(),
            fence_key: keys.fence_key.clone(),
            channel: [&keys.key[..], RETRACTED_SUFFIX].concat(),
        };
        self.release_detached(targets.errored, quiet.clone(), token, timeout);
        let ours = self.release_detached(targets.ours, quiet.clone(), token, timeout);
        let quiet = Arc::new(quiet);
        let token: Arc<str> = Arc::from(token);
        let late: Vec<JoinHandle<()>> = targets
            .late
            .into_iter()
            .filter_map(|(i, acquire)| {
                let client = self.inner.instances[i].client.get()?.clone();
                let (quiet, token) = (quiet.clone(), token.clone());
                Some(tokio::spawn(async move {
                    // Undo what our acquire did, after it did it. "Busy"
                    // left nothing of ours; anything else might have.
                    if !matches!(acquire.await, Ok(Ok(Attempt::Busy { .. }))) {
                        let release = client.release_whole(&quiet, &token);
                        let _ = tokio::time::timeout(timeout, release).await;
                    }
                }))
            })
            .collect();
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
    ) -> Result<(Ownership, Instant)> {
        let timeout = self.timeout_for(ttl);
        let quorum = self.inner.quorum;
        let start = Instant::now();
        let valid_until = start + ttl - drift(ttl);
        let (Gathered { answers, .. }, tally) = self
            .owner_round(
                timeout,
                "extend",
                |c| c.extend_once(keys, token, ttl),
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
                        true => c.release_whole(keys, token).await,
                        false => c.release_once(keys, token).await,
                    }
                },
                |released| found(*released),
                true,
            )
            .await;
        self.release_detached(&unanswered, keys.clone(), token, timeout);
        let outcome = match tally.verdict(quorum) {
            Verdict::Confirmed => Ownership::Owned,
            Verdict::HeldByOther => Ownership::HeldByOther,
            Verdict::Expired => Ownership::Expired,
            // Unlike an extend, a release is not worth retrying: our keys
            // are gone wherever we were answered. With a majority answering
            // but too few confirming, we cannot prove we held the lock to
            // the end: say so (Expired; someone else cannot hold a majority
            // here, ours and the silent ones make up one). With fewer than a
            // majority answering, our keys may live on until the TTL: an error.
            Verdict::Undecided if tally.answered() >= quorum => Ownership::Expired,
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
    /// verdict (see [`Redlock::gather`] for `grace`); returns what was
    /// gathered and its tally, the unanswered instances counted as failed.
    async fn owner_round<'a, T, Fut>(
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
    fn undecided(
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
            if let Some(subscriber) = instance
                .client
                .get()
                .and_then(Session::subscriber_if_started)
            {
                subscriber.notify_local(&topic, Event::LocalRelease);
            }
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
fn found_issue(issued: &std::result::Result<u64, Ownership>) -> Found {
    match issued {
        Ok(_) => Found::Ours,
        Err(outcome) => found(*outcome),
    }
}

/// Where a retraction goes; see [`Redlock::retract`].
struct Targets<'a> {
    /// Instances that gave us the key.
    ours: &'a [usize],
    /// Instances whose acquire was still running when the round was
    /// decided, with its task.
    late: Vec<(usize, JoinHandle<Result<Attempt>>)>,
    /// Instances whose request failed.
    errored: &'a [usize],
}
