//! One renewal task per fair lock per process (layer 4): every third of
//! the waiter lease it renews this process's record on that lock, which
//! keeps every one of its queued entries live, with one `fair_renew.lua`,
//! so that waiting costs Redis one short script per process per lock,
//! whatever the number of waiters. Each entry's own lease is long
//! (`backend::fair::ENTRY_LEASES` waiter leases): the same script renews it
//! only when it is due, and at every renewal for the first few members,
//! which the next hand-offs go to. The membership is the session's
//! (`transport/waiter_groups.rs`).
//!
//! The task also looks at the lock for its waiters, which then sleep until
//! it, a message or their deadline wakes them:
//! * an entry no longer queued (a hand-off whose message was missed, or
//!   an entry dropped as dead): its waiter looks for itself (mode `renew`);
//! * the lock held by one of ours (a hand-off whose message was missed,
//!   to a member this renewal did not send): that waiter looks;
//! * the lock free with one of ours at the head (its holder died without
//!   releasing, or a hand-off's key expired): that waiter takes it;
//! * the holder's TTL: the task looks again then (a millisecond after), as
//!   each waiter used to;
//! * the record had run out (this process was held up past a waiter
//!   lease: the script says so, or the task's own clock does): other
//!   scripts may have dropped any of its entries, so the next renewal
//!   sends them all.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::fair::{entry_lease, Renewed};
use crate::backend::single::Single;
use crate::transport::session::Session;
use crate::transport::waiter_groups::{Group, Member, Membership};
use crate::vocab::names::LockKeys;

/// The most entries one script renews: a bigger group is renewed by
/// several scripts in a row, so that none holds Redis for long (about a
/// microsecond per entry).
const BATCH: usize = 1_000;

/// How many of a group's first members (in the order they joined, mostly
/// the queue's) every renewal sends: the next hand-offs go to them, and a
/// renewal that finds an entry still queued proves that the lock was not
/// handed to it before (a hand-off message heard later counts its hold
/// from then; one heard with an older proof costs the waiter a round trip).
const FRONT: usize = 8;

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
    let entry_every = entry_lease(lease) / 3;
    // When each member's own lease was last renewed (by member key).
    let mut renewed_at: HashMap<u64, Instant> = HashMap::new();
    // Send every entry: the record had run out.
    let mut all = false;
    // When the last renewal that reached Redis was sent: a renewal due
    // that long after (this process was held up) may find the record run
    // out, though a waiter's own attempt raised it first and the script
    // cannot tell.
    let mut last_renewed: Option<Instant> = None;
    // When every member was last sent (proved still queued).
    let mut last_all: Option<Instant> = None;
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
            // Hand-offs to this process's waiters began: prove the others
            // still queued now, not at the next renewal.
            if group.has_departed() && last_all.is_none_or(|at| at.elapsed() >= every) {
                break;
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
        renewed_at.retain(|key, _| members.iter().any(|m| m.key == *key));
        let now = Instant::now();
        next = now + every;
        if last_renewed.is_some_and(|at| now >= at + (lease - lease / 10)) {
            all = true;
        }
        // Members left (the lock is being handed to this process's
        // waiters): send every entry, at most once a renewal interval, so
        // that each hears its hand-off with a proof younger than the
        // hand-off TTL, not one from when it queued (which, after a long
        // wait, costs it a round trip to ask). Waiting alone sends only
        // the first few and the ones due.
        if group.take_departed() > 0 && last_all.is_none_or(|at| now >= at + every) {
            all = true;
        }
        if all {
            last_all = Some(now);
        }
        // An own lease is sent when it would be due before the next
        // renewal; the front members and, after a lapse, all of them, always.
        let due = |i: usize, m: &Member| {
            all || i < FRONT
                || renewed_at.get(&m.key).copied().unwrap_or(m.joined) + entry_every <= now + every
        };
        let mut sends: BTreeMap<&str, Vec<&Member>> = BTreeMap::new();
        for (i, member) in members.iter().enumerate() {
            let sent = sends.entry(process_of(&member.entry)).or_default();
            if due(i, member) {
                sent.push(member);
            }
        }
        // Whether this renewal sends every member: a lapse it finds then
        // needs no second pass (each entry gone is named already).
        let sent_all = sends.values().map(Vec::len).sum::<usize>() == members.len();
        all = false;
        for (process, chosen) in &sends {
            // At least one script per process: its record.
            let chunks: Vec<&[&Member]> = match chosen.is_empty() {
                true => vec![&[]],
                false => chosen.chunks(BATCH).collect(),
            };
            for chunk in chunks {
                let sent = Instant::now();
                let entries: Vec<&str> = chunk.iter().map(|m| &*m.entry).collect();
                match Single(&session)
                    .fair_renew(&keys, lease, process, &entries)
                    .await
                {
                    Ok(renewed) => {
                        all |= renewed.lapsed && !sent_all;
                        last_renewed = Some(sent);
                        for member in chunk {
                            renewed_at.insert(member.key, sent);
                        }
                        if let Some(at) = wake(&members, chunk, &renewed, sent) {
                            next = next.min(at);
                        }
                    }
                    Err(e) => {
                        // The record left has two thirds of a lease to run;
                        // a retry soon keeps it.
                        tracing::warn!(error = %e, "renewing fair waiters' queue leases failed; retrying");
                        next = next.min(Instant::now() + RETRY.min(every));
                    }
                }
            }
        }
        if all {
            // The record had run out: any entry not sent may have been
            // dropped; send them all now.
            next = Instant::now();
        }
    }
}

/// The process an entry belongs to: its first 16 hex digits (its
/// subscriber's id), which its record is kept under.
fn process_of(entry: &str) -> &str {
    entry.get(..16).unwrap_or(entry)
}

/// The owner token an entry carries: its fourth field.
fn token_of(entry: &str) -> &str {
    entry.splitn(4, ':').nth(3).unwrap_or_default()
}

/// Wakes the members that must look for themselves: those of `chunk` (the
/// entries sent) no longer queued, the holder's and the head's among
/// `members`; returns when the task should look again at the latest (the
/// holder's TTL).
fn wake(
    members: &[Member],
    chunk: &[&Member],
    renewed: &Renewed,
    sent: Instant,
) -> Option<Instant> {
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
    if let Some(holder) = &renewed.holder {
        if let Some(member) = members.iter().find(|m| token_of(&m.entry) == holder) {
            member.wake.notify_one();
        }
    }
    if let Some(head) = &renewed.head {
        if let Some(member) = members.iter().find(|m| *m.entry == **head) {
            member.wake.notify_one();
        }
    }
    renewed
        .wait
        .map(|left| sent + left + Duration::from_millis(1))
}
