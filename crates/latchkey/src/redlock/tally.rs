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
        answers: impl Iterator<Item = &'a crate::error::Result<T>>,
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
