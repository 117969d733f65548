//! Quorum arithmetic: what one round of per-instance answers means.
//!
//! ```text
//! 5 instances, quorum 3. An extend round answers: 2 extended, 2 expired, 1 unreachable.
//!   2 extended < 3                        → not confirmed;
//!   2 extended + 1 unreachable = 3 ≥ 3    → the unreachable one may still be ours:
//!                                           undecided (an error; the watchdog retries);
//! had it answered "expired": 2 + 0 < 3    → lost for sure (Expired).
//! ```
//!
//! Pure functions, no I/O, so the rules can be tested exhaustively here.
//! Every rule that counts answers against the quorum lives here; the rounds
//! (`rounds/`) only gather the answers and act on what these say.

use std::time::Duration;

/// The number of instances that must agree: a strict majority of `n`.
pub(crate) fn quorum(n: usize) -> usize {
    n / 2 + 1
}

/// Answers to one round of an owner-only operation (extend, release, issuing a token).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OwnerTally {
    /// The operation succeeded: our key was there and was extended / deleted.
    pub(crate) ok: usize,
    /// Our key was gone.
    pub(crate) expired: usize,
    /// Someone else's key was there.
    pub(crate) held_by_other: usize,
    /// No answer: unreachable, timed out, or an error reply.
    pub(crate) failed: usize,
}

/// What an [`OwnerTally`] proves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A majority confirmed.
    Confirmed,
    /// A majority can no longer be ours, even counting every instance that
    /// did not answer as ours; nobody else is known to hold a majority.
    Expired,
    /// As `Expired`, and someone else's key is on a majority: someone else
    /// holds the lock. (Others' keys on a minority are contenders' attempts
    /// in flight, or leftovers: that is not "held".)
    HeldByOther,
    /// Not enough answers to tell: the instances that failed decide.
    Undecided,
}

/// What one instance's answer to an owner-only command found there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// Our key: the command did its work.
    Ours,
    /// No key: ours expired.
    Gone,
    /// Someone else's key.
    Other,
}

impl OwnerTally {
    /// Counts the answers of one round; `unknown` instances (not answered)
    /// count as failed, like the answers that are errors.
    pub(crate) fn of<'a, T: 'a>(
        answers: impl Iterator<Item = &'a crate::vocab::error::Result<T>>,
        unknown: usize,
        found: impl Fn(&T) -> Found,
    ) -> OwnerTally {
        let mut tally = OwnerTally {
            failed: unknown,
            ..OwnerTally::default()
        };
        for answer in answers {
            match answer.as_ref().map(&found) {
                Ok(Found::Ours) => tally.ok += 1,
                Ok(Found::Gone) => tally.expired += 1,
                Ok(Found::Other) => tally.held_by_other += 1,
                Err(_) => tally.failed += 1,
            }
        }
        tally
    }

    /// Instances that gave an answer.
    pub(crate) fn answered(&self) -> usize {
        self.ok + self.expired + self.held_by_other
    }

    pub(crate) fn verdict(&self, quorum: usize) -> Verdict {
        if self.ok >= quorum {
            Verdict::Confirmed
        } else if self.ok + self.failed >= quorum {
            Verdict::Undecided
        } else if self.held_by_other >= quorum {
            Verdict::HeldByOther
        } else {
            Verdict::Expired
        }
    }
}

impl OwnerTally {
    /// The verdict on a release: as [`OwnerTally::verdict`], except that an
    /// undecided round in which a majority answered is `Expired`.
    ///
    /// Unlike an extend, a release is not worth retrying: our keys are gone
    /// wherever we were answered. With a majority answering but too few
    /// confirming, we cannot prove we held the lock to the end (someone else
    /// cannot hold a majority either: ours and the silent ones make up one).
    /// With fewer than a majority answering, our keys may live on until the
    /// TTL: still undecided, which the caller reports as an error.
    pub(crate) fn release_verdict(&self, quorum: usize) -> Verdict {
        match self.verdict(quorum) {
            Verdict::Undecided if self.answered() >= quorum => Verdict::Expired,
            verdict => verdict,
        }
    }
}

/// What an acquire round's answers prove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcquireVerdict {
    /// A majority gave us the key.
    Won,
    /// Fewer than a majority answered at all: nothing is known (an error,
    /// not "busy").
    Unanswered,
    /// A majority answered, and too few of them gave us the key: lost to
    /// other holders or contenders.
    Lost,
}

/// The verdict on an acquire round in which `acquired` instances gave us
/// the key and `answered` (those included) answered at all.
pub(crate) fn acquire_verdict(acquired: usize, answered: usize, quorum: usize) -> AcquireVerdict {
    if acquired >= quorum {
        AcquireVerdict::Won
    } else if answered < quorum {
        AcquireVerdict::Unanswered
    } else {
        AcquireVerdict::Lost
    }
}

/// Whether an acquire round can stop waiting with `pending` requests still
/// out: won; or lost, and also known whether for want of answers. That is,
/// no answer still to come can change [`acquire_verdict`].
pub(crate) fn acquire_decided(
    acquired: usize,
    answered: usize,
    pending: usize,
    quorum: usize,
) -> bool {
    acquired >= quorum
        || (acquired + pending < quorum && (answered >= quorum || answered + pending < quorum))
}

/// Whether a count that must reach the quorum (instances whose fencing
/// counter is raised) is settled with `pending` answers still to come: it
/// reached the quorum, or can no longer reach it.
pub(crate) fn reach_decided(count: usize, pending: usize, quorum: usize) -> bool {
    count >= quorum || count + pending < quorum
}

/// What a busy instance had, as far as a failed attempt could tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seen {
    /// Held by this owner token, with this much TTL left (if known).
    Held(Vec<u8>, Option<Duration>),
    /// Free by the time we looked (the key went away).
    Free,
    /// Could not tell (no answer).
    Unknown,
}

/// Why an attempt failed, for choosing when to try again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Contention {
    /// One owner may hold a majority (its keys, plus the instances that
    /// did not answer, reach a quorum): wait for its release or for its
    /// keys to expire, after this long (the least TTL left of its keys;
    /// `None` when none is known).
    Holder(Option<Duration>),
    /// Nobody can hold a majority: contenders split the vote (and have
    /// undone their attempts by now). Try again after a short random delay.
    Split,
}

/// Classifies a failed attempt from what the busy instances held (`seen`)
/// and how many instances gave no answer at all (`unanswered`).
pub(crate) fn contention(seen: &[Seen], unanswered: usize, quorum: usize) -> Contention {
    let unknown = unanswered + seen.iter().filter(|s| **s == Seen::Unknown).count();
    let mut owners: Vec<(&[u8], Vec<Duration>, usize)> = Vec::new();
    for s in seen {
        if let Seen::Held(token, pttl) = s {
            match owners.iter_mut().find(|(t, _, _)| *t == token.as_slice()) {
                Some((_, pttls, count)) => {
                    *count += 1;
                    pttls.extend(*pttl);
                }
                None => owners.push((token, pttl.iter().copied().collect(), 1)),
            }
        }
    }
    let holder = owners
        .into_iter()
        .filter(|(_, _, count)| count + unknown >= quorum)
        .max_by_key(|(_, _, count)| *count);
    match holder {
        Some((_, pttls, _)) => Contention::Holder(pttls.into_iter().min()),
        None if unknown >= quorum => Contention::Holder(None),
        None => Contention::Split,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorum_is_a_strict_majority() {
        assert_eq!(
            [1, 2, 3, 4, 5, 6, 7].map(quorum),
            [1, 2, 2, 3, 3, 4, 4],
            "two disjoint sets can never both reach it"
        );
        for n in 1..20 {
            assert!(2 * quorum(n) > n);
        }
    }

    fn tally(ok: usize, expired: usize, held_by_other: usize, failed: usize) -> OwnerTally {
        OwnerTally {
            ok,
            expired,
            held_by_other,
            failed,
        }
    }

    #[test]
    fn verdicts() {
        let q = quorum(5);
        assert_eq!(tally(3, 2, 0, 0).verdict(q), Verdict::Confirmed);
        assert_eq!(tally(3, 0, 0, 2).verdict(q), Verdict::Confirmed);
        assert_eq!(tally(2, 2, 0, 1).verdict(q), Verdict::Undecided);
        assert_eq!(tally(0, 2, 0, 3).verdict(q), Verdict::Undecided);
        assert_eq!(tally(2, 3, 0, 0).verdict(q), Verdict::Expired);
        assert_eq!(tally(1, 0, 3, 1).verdict(q), Verdict::HeldByOther);
        assert_eq!(
            tally(1, 1, 2, 1).verdict(q),
            Verdict::Expired,
            "2 others are a minority"
        );
        assert_eq!(tally(0, 5, 0, 0).verdict(q), Verdict::Expired);
        // Every combination of 5 answers: Confirmed exactly at a majority of
        // ok, and never a definite loss while the failures could make one.
        for ok in 0..=5 {
            for failed in 0..=5 - ok {
                for other in 0..=5 - ok - failed {
                    let t = tally(ok, 5 - ok - failed - other, other, failed);
                    let v = t.verdict(q);
                    assert_eq!(v == Verdict::Confirmed, ok >= q, "{t:?}");
                    if matches!(v, Verdict::Expired | Verdict::HeldByOther) {
                        assert!(ok + failed < q, "{t:?} declared lost while undecidable");
                    }
                    assert_eq!(
                        v == Verdict::HeldByOther,
                        ok + failed < q && other >= q,
                        "{t:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_release_is_expired_once_a_majority_answered() {
        let q = quorum(5);
        // 2 released, 2 gone, 1 silent: the silent one could be ours, but a
        // majority answered, so the release is over (not provably held).
        assert_eq!(tally(2, 2, 0, 1).verdict(q), Verdict::Undecided);
        assert_eq!(tally(2, 2, 0, 1).release_verdict(q), Verdict::Expired);
        // Only 2 answered: our keys may live on elsewhere.
        assert_eq!(tally(2, 0, 0, 3).release_verdict(q), Verdict::Undecided);
        for ok in 0..=5 {
            for failed in 0..=5 - ok {
                for other in 0..=5 - ok - failed {
                    let t = tally(ok, 5 - ok - failed - other, other, failed);
                    let (v, r) = (t.verdict(q), t.release_verdict(q));
                    if v == Verdict::Undecided && t.answered() >= q {
                        assert_eq!(r, Verdict::Expired, "{t:?}");
                    } else {
                        assert_eq!(r, v, "{t:?}");
                    }
                    assert_eq!(
                        r == Verdict::Undecided,
                        v == Verdict::Undecided && t.answered() < q
                    );
                }
            }
        }
    }

    #[test]
    fn acquire_verdicts() {
        let q = quorum(5);
        assert_eq!(acquire_verdict(3, 3, q), AcquireVerdict::Won);
        assert_eq!(acquire_verdict(2, 5, q), AcquireVerdict::Lost);
        assert_eq!(acquire_verdict(2, 2, q), AcquireVerdict::Unanswered);
        assert_eq!(acquire_verdict(0, 3, q), AcquireVerdict::Lost);
    }

    /// The round stops exactly when no way the pending requests can answer
    /// (the key, busy, or an error) changes the verdict.
    #[test]
    fn an_acquire_round_stops_exactly_when_the_verdict_is_settled() {
        for n in 1..=7 {
            let q = quorum(n);
            for acquired in 0..=n {
                for busy in 0..=n - acquired {
                    for failed in 0..=n - acquired - busy {
                        let answered = acquired + busy;
                        let pending = n - answered - failed;
                        let now = acquire_verdict(acquired, answered, q);
                        let mut settled = true;
                        for more_acquired in 0..=pending {
                            for more_busy in 0..=pending - more_acquired {
                                let later = acquire_verdict(
                                    acquired + more_acquired,
                                    answered + more_acquired + more_busy,
                                    q,
                                );
                                settled &= later == now;
                            }
                        }
                        assert_eq!(
                            acquire_decided(acquired, answered, pending, q),
                            settled,
                            "n {n}: {acquired} acquired, {busy} busy, {failed} failed, {pending} pending"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_count_is_settled_once_it_reached_the_quorum_or_cannot() {
        let q = quorum(5);
        assert!(reach_decided(3, 2, q), "reached");
        assert!(!reach_decided(2, 1, q), "one more may reach it");
        assert!(reach_decided(1, 1, q), "out of reach");
        for count in 0..=5 {
            for pending in 0..=5 - count {
                let outcomes: Vec<bool> = (0..=pending).map(|more| count + more >= q).collect();
                let settled = outcomes.iter().all(|&o| o == outcomes[0]);
                assert_eq!(
                    reach_decided(count, pending, q),
                    settled,
                    "{count} + {pending}"
                );
            }
        }
    }

    #[test]
    fn contention_tells_a_holder_from_a_split_vote() {
        let ms = Duration::from_millis;
        let held = |t: &str, pttl: u64| Seen::Held(t.as_bytes().to_vec(), Some(ms(pttl)));
        let q = quorum(5);
        // A holds 3 of 5: wait for its keys (the earliest to expire).
        let seen = [held("A", 30), held("A", 20), held("A", 25)];
        assert_eq!(contention(&seen, 0, q), Contention::Holder(Some(ms(20))));
        // A on 2, B on 2, we had 1 (now retracted): nobody has a majority.
        let seen = [held("A", 30), held("A", 30), held("B", 30), held("B", 30)];
        assert_eq!(contention(&seen, 0, q), Contention::Split);
        // ...unless an instance that did not answer may be A's third.
        assert_eq!(contention(&seen, 1, q), Contention::Holder(Some(ms(30))));
        // Keys gone by the time we looked count as free.
        let seen = [held("A", 30), Seen::Free, Seen::Free];
        assert_eq!(contention(&seen, 0, q), Contention::Split);
        // Too little known: assume a holder, with no deadline.
        let seen = [Seen::Unknown, Seen::Unknown, held("A", 5)];
        assert_eq!(contention(&seen, 0, q), Contention::Holder(Some(ms(5))));
        assert_eq!(contention(&[], 3, q), Contention::Holder(None));
        // A key without a TTL (a foreign client's): no deadline known.
        let seen = vec![Seen::Held(b"x".to_vec(), None); 3];
        assert_eq!(contention(&seen, 0, q), Contention::Holder(None));
    }
}
