//! The acquire round: `SET NX` (the single-instance acquire) on every
//! instance at once, the fencing token when the lock is fenced, and, when
//! the attempt fails, its retraction and a look at who holds the lock, to
//! choose when to try again.
//!
//! Apart from the owner rounds because only an acquire must undo itself:
//! its requests run on in tasks of their own, and a lost attempt is
//! retracted everywhere our key may have landed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

/// Suffix of the channel a retraction (the release that undoes a failed
/// attempt) publishes on: nobody listens there, so contenders are not
/// woken in lockstep by each other's failures and keep their random delays.
use crate::backend::single::Single;
use crate::vocab::protocol::RETRACTED_SUFFIX;

use crate::backend::redlock::gather::{finish, Gathered};
use crate::backend::redlock::tally::{
    acquire_decided, acquire_verdict, contention, AcquireVerdict, Contention, Seen,
};
use crate::backend::redlock::Group;
use crate::transport::subscriber::jitter;
use crate::vocab::error::Result;
use crate::vocab::names::LockKeys;
use crate::vocab::outcome::{Attempt, AttemptMode};

impl Group {
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
        let valid_until = crate::vocab::names::valid_until(start, ttl);
        // Each instance's acquire runs in a task of its own, to the end, even
        // when the round stops at the decision: a slower instance still gets
        // our key (so the lock lives on more than a bare majority and
        // survives more instance failures), and a retraction can wait for
        // it before undoing it.
        let shared = Arc::new((keys.clone(), token.to_owned()));
        let mut tasks = self.spawn_each(self.all(), timeout, "acquire", |client| {
            let shared = shared.clone();
            async move {
                Single(&client)
                    .try_once(&shared.0, &shared.1, ttl, mode)
                    .await
            }
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
                // The tasks are bounded by `timeout` already.
                None,
                "acquire",
                |answers, pending| {
                    let acquired = answers
                        .iter()
                        .filter(|(_, a)| matches!(a, Ok(Attempt::Acquired { .. })))
                        .count();
                    let answered = answers.iter().filter(|(_, a)| a.is_ok()).count();
                    acquire_decided(acquired, answered, pending, quorum)
                },
                false,
            )
            .await;

        let mut acquired: Vec<(usize, Option<u64>)> = Vec::new();
        let mut busy: Vec<(usize, Option<Duration>)> = Vec::new();
        let mut errored = Vec::new();
        let mut errors = Vec::new();
        // Whether every busy instance's holder will publish its release.
        let mut announced = true;
        for (i, answer) in answers {
            match answer {
                Ok(Attempt::Acquired { fencing_token, .. }) => acquired.push((i, fencing_token)),
                Ok(Attempt::Busy {
                    retry_in,
                    announced: heard,
                    ..
                }) => {
                    busy.push((i, retry_in));
                    announced &= heard;
                }
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
        let retract = |acquired: Vec<(usize, Option<u64>)>,
                       late: Vec<(usize, JoinHandle<Result<Attempt>>)>| async move {
            let ours: Vec<usize> = acquired.iter().map(|&(i, _)| i).collect();
            let targets = Targets {
                ours: &ours,
                late,
                errored,
            };
            self.retract(keys, token, targets, timeout, round).await;
        };

        let answered = acquired.len() + busy.len();
        let verdict = acquire_verdict(acquired.len(), answered, quorum);
        if verdict == AcquireVerdict::Won {
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
                    // Ours: its release must not overtake them (late.rs).
                    self.inner.late.keep(&keys.key, token, late);
                    return Ok(Attempt::Acquired {
                        fencing_token,
                        valid_until,
                    });
                }
                // Everything was free; only slowness failed us. Retry soon.
                Ok(_) => {
                    tracing::debug!(elapsed = ?start.elapsed(), ?ttl, "Redlock majority answered too late: no validity left");
                    Ok(Attempt::Busy {
                        retry_in: None,
                        announced: true,
                        holder: None,
                        kept_idle: false,
                    })
                }
                Err(e) => Err(e),
            };
            retract(acquired, late).await;
            return outcome;
        }

        if verdict == AcquireVerdict::Unanswered {
            retract(acquired, late).await;
            // A broken setup (WRONGTYPE, NOPERM, auth) says more than "no quorum".
            if let Some(e) = errors.into_iter().find(|e| !e.is_transient()) {
                return Err(e);
            }
            return Err(self.no_quorum("acquire", answered));
        }
        // Lost. While undoing our part, look at who holds the rest: one
        // owner that may have a majority is worth waiting for (its release
        // wakes us; its keys expire at the latest); a split vote is not,
        // since every contender undoes its part: retry after a short random
        // delay, a few rounds long, so the contenders fall out of step.
        let (_, seen) =
            futures_util::future::join(retract(acquired, late), self.holders(keys, &busy, timeout))
                .await;
        let unanswered_count = self.inner.instances.len() - answered;
        let retry_in = match contention(&seen, unanswered_count, quorum) {
            Contention::Holder(ttl_left) => ttl_left,
            Contention::Split => Some(jitter((round * 2).max(Duration::from_millis(2)))),
        };
        // The holder is not named: an asking waiter asks after each
        // release it lost the race for (`primitives/wait/ask.rs`).
        Ok(Attempt::Busy {
            retry_in,
            announced,
            holder: None,
            kept_idle: false,
        })
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
                Ok(Some(value)) => {
                    Seen::Held(crate::vocab::token::unmarked(&value).to_vec(), ttl_left(i))
                }
                Ok(None) => Seen::Free,
                Err(_) => Seen::Unknown,
            })
            .chain(unanswered.iter().map(|_| Seen::Unknown))
            .collect()
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
        // Same keys, but the release publishes on the `:retracted` channels.
        let stem = crate::vocab::protocol::tag_stem(&keys.key);
        let quiet = LockKeys {
            key: keys.key.clone(),
            fence_key: keys.fence_key.clone(),
            channel: [&stem[..], RETRACTED_SUFFIX].concat(),
            // Nobody is woken one by one either.
            wake: Vec::new(),
            wake_len: 0,
            fair: None,
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
                        let release = Single(&client).release_whole(&quiet, &token);
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
}

/// Where a retraction goes; see [`Group::retract`].
struct Targets<'a> {
    /// Instances that gave us the key.
    ours: &'a [usize],
    /// Instances whose acquire was still running when the round was
    /// decided, with its task.
    late: Vec<(usize, JoinHandle<Result<Attempt>>)>,
    /// Instances whose request failed.
    errored: &'a [usize],
}
