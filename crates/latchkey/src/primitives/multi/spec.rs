//! What a multi lock is (the recipe's and every guard's spec) and what it
//! does in Redis (layer 4): one attempt to take every lock, their renewal,
//! their release and their fencing tokens, in one script when they share a
//! server or a cluster slot, one lock after the other in the global order
//! (sorted by key) when they do not.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::single::Single;
use crate::backend::Wakeups;
use crate::primitives::lease::options::LeaseOptions;
use crate::transport::session::Session;
use crate::transport::subscriber::{Topic, EVENT_BUFFER};
use crate::vocab::error::{Error, Result};
use crate::vocab::metrics::LockLabel;
use crate::vocab::names::{ttl_ms, LockKeys};
use crate::vocab::outcome::{Attempt, AttemptMode, Ownership, Renewal};
use crate::vocab::protocol::scripts;

/// One lock of a multi lock: its name and keys (an ordinary lock's).
#[derive(Debug)]
pub(crate) struct Member {
    pub(crate) name: Arc<[u8]>,
    pub(crate) keys: LockKeys,
}

/// What a [`MultiLock`](crate::MultiLock) is.
#[derive(Clone)]
pub struct MultiSpec {
    pub(crate) session: Session,
    /// The names joined by `+`, for log lines, spans and the metrics label.
    pub(crate) name: Arc<[u8]>,
    /// The locks sorted by key: the one global order of every acquisition.
    pub(crate) members: Arc<[Member]>,
    /// For each name in the caller's order, its place in `members`.
    pub(crate) given: Arc<[usize]>,
    /// All in one script: one server, or every key in one cluster slot.
    pub(crate) one_script: bool,
    /// TTL, watchdog, cap, margin, fencing; `asking`: a waiter asks the
    /// holder of the busy lock to let go.
    pub(crate) lease: LeaseOptions,
    pub(crate) metrics_label: LockLabel,
}

/// What one attempt got.
pub(crate) enum Attempted {
    /// Every lock is ours; their fencing tokens (in `members` order) when
    /// they came with the hold.
    Taken {
        fences: Option<Vec<u64>>,
        valid_until: Instant,
    },
    /// None is ours: `members[index]` is held by someone else.
    Busy {
        index: usize,
        /// Its holder's remaining TTL, when known.
        retry_in: Option<Duration>,
        /// Whether its holder's release will publish a wake-up.
        announced: bool,
        /// Locks before it were taken and given back (one lock after the
        /// other, on a cluster): the attempt backs off before the next.
        gave_back: bool,
    },
}

/// What `multi_extend.lua` or `multi_release.lua` (`script`) found: `1`
/// every lock ours, `0` one gone, `-1` one someone else's.
fn ownership(script: &str, outcome: i64) -> Result<Ownership> {
    match outcome {
        1 => Ok(Ownership::Owned),
        0 => Ok(Ownership::Expired),
        -1 => Ok(Ownership::HeldByOther),
        other => Err(Error::Protocol(format!("{script} script returned {other}"))),
    }
}

/// The worse of two outcomes of a hold's locks: someone else's, then gone.
fn worse(a: Ownership, b: Ownership) -> Ownership {
    match (a, b) {
        (Ownership::HeldByOther, _) | (_, Ownership::HeldByOther) => Ownership::HeldByOther,
        (Ownership::Expired, _) | (_, Ownership::Expired) => Ownership::Expired,
        _ => Ownership::Owned,
    }
}

impl MultiSpec {
    /// The names in the caller's order.
    pub(crate) fn names(&self) -> impl ExactSizeIterator<Item = &[u8]> {
        self.given.iter().map(|&i| &self.members[i].name[..])
    }

    /// One attempt to take every lock with `token`: one script, or one
    /// lock after the other in key order (giving back what it took when one
    /// is busy). `mark`: make the busy holder's release publish (a waiter).
    pub(crate) async fn attempt(&self, token: &str, mark: bool) -> Result<Attempted> {
        if self.one_script {
            return self.attempt_in_one(token, mark).await;
        }
        let sent = Instant::now();
        let mode = AttemptMode {
            fenced: self.lease.fenced,
            ask_ttl: true,
            mark,
            // A multi hold's waiter listens on each lock's release channel.
            register: false,
            holder: false,
        };
        let mut fences = Vec::with_capacity(self.members.len());
        for (index, member) in self.members.iter().enumerate() {
            let attempt = Single(&self.session)
                .try_once(&member.keys, token, self.lease.ttl, mode)
                .await?;
            match attempt {
                Attempt::Acquired { fencing_token, .. } => fences.extend(fencing_token),
                Attempt::Busy {
                    retry_in,
                    announced,
                    ..
                } => {
                    // Given back before the next lock is tried: holding some
                    // while waiting for another is how deadlocks start. An
                    // error here leaves the caller's armed guard to do it.
                    let _gave_back = self.release_each(&self.members[..index], token).await?;
                    return Ok(Attempted::Busy {
                        index,
                        retry_in,
                        announced,
                        gave_back: index > 0,
                    });
                }
            }
        }
        Ok(Attempted::Taken {
            fences: self.lease.fenced.then_some(fences),
            valid_until: crate::vocab::names::valid_until(sent, self.lease.ttl),
        })
    }

    /// `multi_acquire.lua`: every lock or none, in one round trip.
    async fn attempt_in_one(&self, token: &str, mark: bool) -> Result<Attempted> {
        let sent = Instant::now();
        let mut keys: Vec<&[u8]> = self
            .members
            .iter()
            .flat_map(|member| member.keys.counted())
            .collect();
        if mark {
            // Each lock's waiting processes, where a marking waiter
            // registers as '*' (it listens on the release channels only).
            keys.extend(self.members.iter().map(|m| m.keys.waiting()));
        }
        let ttl = ttl_ms(self.lease.ttl).to_string();
        let issue: &[u8] = if self.lease.fenced { b"1" } else { b"0" };
        let waiting: &[u8] = if mark { b"1" } else { b"0" };
        // Then the publish command and each lock's channel: where a marking
        // waiter tells a holder kept idle that it is wanted.
        let mut args: Vec<&[u8]> = Vec::with_capacity(5 + self.members.len());
        args.extend([token.as_bytes(), ttl.as_bytes(), issue, waiting]);
        args.push(self.session.publish_command());
        args.extend(self.members.iter().map(|m| &m.keys.channel[..]));
        let reply: Vec<i64> = self
            .session
            .eval("multi acquire", &scripts::MULTI_ACQUIRE, &keys, &args)
            .await?;
        let bad = || Error::Protocol(format!("multi acquire script returned {reply:?}"));
        match reply.split_first() {
            Some((1, fences)) if fences.len() == self.members.len() => Ok(Attempted::Taken {
                fences: match self.lease.fenced {
                    true => Some(
                        fences
                            .iter()
                            .map(|&f| u64::try_from(f).map_err(|_| bad()))
                            .collect::<Result<_>>()?,
                    ),
                    false => None,
                },
                valid_until: crate::vocab::names::valid_until(sent, self.lease.ttl),
            }),
            Some((0, [index, pttl, announced])) => Ok(Attempted::Busy {
                index: usize::try_from(*index - 1)
                    .ok()
                    .filter(|i| *i < self.members.len())
                    .ok_or_else(bad)?,
                retry_in: u64::try_from(*pttl).ok().map(Duration::from_millis),
                announced: *announced == 1,
                gave_back: false,
            }),
            _ => Err(bad()),
        }
    }

    /// Renews every lock for `ttl` from now if all are still ours: what was
    /// found (the worst lock's), and the new deadline. `batch_by`: see
    /// `LeaseSpec::renew`.
    pub(crate) async fn extend(
        &self,
        token: &str,
        ttl: Duration,
        batch_by: Option<Instant>,
    ) -> Renewal {
        let sent = Instant::now();
        let valid_until = crate::vocab::names::valid_until(sent, ttl);
        if !self.one_script {
            // One request per lock, all in flight at once.
            let each = self
                .members
                .iter()
                .map(|m| Single(&self.session).extend_once(&m.keys, token, ttl, batch_by));
            let mut found = Ownership::Owned;
            for (outcome, _) in futures_util::future::try_join_all(each).await? {
                found = worse(found, outcome);
            }
            return Ok((found, valid_until));
        }
        let keys: Vec<&[u8]> = self.members.iter().map(|m| &m.keys.key[..]).collect();
        let ttl_arg = ttl_ms(ttl).to_string();
        let (outcome, _index): (i64, i64) = self
            .session
            .eval_renewal(
                "multi extend",
                &scripts::MULTI_EXTEND,
                &keys,
                &[token.as_bytes(), ttl_arg.as_bytes()],
                batch_by,
            )
            .await?;
        Ok((ownership("multi extend", outcome)?, valid_until))
    }

    /// Owner-only release of every lock still ours, each waking its
    /// waiters as a lock's release does: the worst lock's outcome.
    pub(crate) async fn release(&self, token: &str) -> Result<Ownership> {
        if !self.one_script {
            return self.release_each(&self.members, token).await;
        }
        let keys: Vec<&[u8]> = self.members.iter().map(|m| &m.keys.key[..]).collect();
        let mut args: Vec<&[u8]> = Vec::with_capacity(2 + self.members.len());
        args.extend([token.as_bytes(), self.session.publish_command()]);
        args.extend(self.members.iter().map(|m| &m.keys.channel[..]));
        let outcome: i64 = self
            .session
            .eval("multi release", &scripts::MULTI_RELEASE, &keys, &args)
            .await?;
        ownership("multi release", outcome)
    }

    /// `release.lua` on each of `members`, all in flight at once.
    async fn release_each(&self, members: &[Member], token: &str) -> Result<Ownership> {
        let each = members
            .iter()
            .map(|m| Single(&self.session).release_once(&m.keys, token));
        let outcomes = futures_util::future::try_join_all(each).await?;
        Ok(outcomes.into_iter().fold(Ownership::Owned, worse))
    }

    /// Subscribes to every lock's release channel, in one request.
    pub(crate) async fn subscribe_all(&self) -> Result<Wakeups> {
        let topics = self
            .members
            .iter()
            .map(|m| (Topic::Channel(m.keys.channel.clone()), EVENT_BUFFER))
            .collect();
        let subscriptions = self.session.subscriber().subscribe_many(topics).await?;
        Ok(Wakeups::new(subscriptions))
    }

    /// Issues every lock's fencing token (in `members` order) while all are
    /// held with `token`: `issue_fence.lua` per lock, all in flight at once
    /// (pipelined on the one connection). `Err((index, found))`: that lock
    /// is no longer ours.
    pub(crate) async fn issue_fences(
        &self,
        token: &str,
    ) -> Result<std::result::Result<Vec<u64>, (usize, Ownership)>> {
        let each = self
            .members
            .iter()
            .map(|m| Single(&self.session).issue_fence_once(&m.keys, token));
        let issued = futures_util::future::try_join_all(each).await?;
        let mut fences = Vec::with_capacity(issued.len());
        for (index, one) in issued.into_iter().enumerate() {
            match one {
                Ok(fence) => fences.push(fence),
                Err(found) => return Ok(Err((index, found))),
            }
        }
        Ok(Ok(fences))
    }
}
