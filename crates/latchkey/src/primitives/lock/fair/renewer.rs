//! One renewal task per fair lock per process (layer 4): it renews the
//! queue leases of every waiter of this process on that lock with one
//! `fair_renew.lua` every third of the lease, so that waiting costs Redis
//! one script per process per lock, not one per waiter. The membership is
//! the session's (`transport/waiter_groups.rs`).
//!
//! The task also looks at the lock for its waiters, which then sleep until
//! it, a message or their deadline wakes them:
//! * an entry no longer queued (a hand-off whose message was missed, or
//!   an entry dropped as dead): its waiter looks for itself (mode `renew`);
//! * the lock free with one of ours at the head (its holder died without
//!   releasing, or a hand-off's key expired): that waiter takes it;
//! * the holder's TTL: the task looks again then (a millisecond after), as
//!   each waiter used to.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::fair::Renewed;
use crate::backend::single::Single;
use crate::transport::session::Session;
use crate::transport::waiter_groups::{Group, Member, Membership};
use crate::vocab::names::LockKeys;

/// The most entries one script renews: a bigger group is renewed by
/// several scripts in a row, so that none holds Redis for long (about a
/// microsecond per entry).
const BATCH: usize = 1_000;

/// How soon a renewal that failed is tried again (at most a third of the
/// lease, the usual interval).
const RETRY: Duration = Duration::from_millis(100);

/// Joins the group of `keys` and `lease` with `entry` (queued), asking for
/// a look by `look_by` (the holder's TTL); starts the group's task if this
/// is its first member. Dropping the membership leaves the group.
pub(crate) fn join(
    session: &Session,
    keys: &Arc<LockKeys>,
    lease: Duration,
    entry: &str,
    look_by: Option<Instant>,
) -> Membership {
    let groups = &session.inner.fair_waiters;
    let (membership, started) = groups.join(&keys.key, lease, entry, look_by);
    if let Some(group) = started {
        if tokio::runtime::Handle::try_current().is_ok() {
            tokio::spawn(renew(session.clone(), keys.clone(), lease, group));
        }
    }
    membership
}

/// Ends the group when its task ends, however it ends: a task dropped
/// with members left (its runtime shut down while other runtimes' waiters
/// wait) must not leave them unrenewed; they look, and join anew.
struct Ending<'a> {
    session: &'a Session,
    keys: &'a LockKeys,
    lease: Duration,
    group: &'a Arc<Group>,
}

impl Drop for Ending<'_> {
    fn drop(&mut self) {
        let groups = &self.session.inner.fair_waiters;
        groups.end(&self.keys.key, self.lease, self.group);
    }
}

/// The group's task: renews until the group is empty.
async fn renew(session: Session, keys: Arc<LockKeys>, lease: Duration, group: Arc<Group>) {
    let _ending = Ending {
        session: &session,
        keys: &keys,
        lease,
        group: &group,
    };
    let every = lease / 3;
    // The members queued themselves just now: their leases are fresh.
    let mut next = Instant::now() + every;
    loop {
        // Sleep until the next renewal, or an earlier look a member asked
        // for; a member leaving may end the group.
        loop {
            let at = group.look_by().map_or(next, |l| l.min(next));
            tokio::select! {
                _ = tokio::time::sleep_until(at.into()) => break,
                _ = group.changed.notified() => {}
            }
            if session
                .inner
                .fair_waiters
                .end_if_empty(&keys.key, lease, &group)
            {
                return;
            }
        }
        let (members, _) = group.members();
        if members.is_empty() {
            if session
                .inner
                .fair_waiters
                .end_if_empty(&keys.key, lease, &group)
            {
                return;
            }
            continue;
        }
        next = Instant::now() + every;
        for chunk in members.chunks(BATCH) {
            let sent = Instant::now();
            let entries: Vec<&str> = chunk.iter().map(|m| &*m.entry).collect();
            match Single(&session).fair_renew(&keys, lease, &entries).await {
                Ok(renewed) => {
                    if let Some(at) = wake(chunk, &renewed, sent) {
                        next = next.min(at);
                    }
                }
                Err(e) => {
                    // The leases left have two thirds of a lease to run;
                    // a retry soon keeps them.
                    tracing::warn!(error = %e, "renewing fair waiters' queue leases failed; retrying");
                    next = next.min(Instant::now() + RETRY.min(every));
                }
            }
        }
    }
}

/// Wakes the members of `chunk` that must look for themselves; returns
/// when the task should look again at the latest (the holder's TTL).
fn wake(chunk: &[Member], renewed: &Renewed, sent: Instant) -> Option<Instant> {
    let mut gone = renewed.gone.iter().peekable();
    for (i, member) in chunk.iter().enumerate() {
        if gone.next_if(|&&g| g == i).is_some() {
            member.wake.notify_one();
        } else {
            // Not handed to it before `sent`: a hand-off message it hears
            // later counts its hold from then (`handed_valid_until`).
            member.still_queued(sent);
        }
    }
    if let Some(head) = &renewed.head {
        if let Some(member) = chunk.iter().find(|m| *m.entry == **head) {
            member.wake.notify_one();
        }
    }
    renewed
        .wait
        .map(|left| sent + left + Duration::from_millis(1))
}
