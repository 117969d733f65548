//! The queued waiters of one session's fair locks, grouped by lock and
//! lease, so that one task per group renews all their queue leases with one
//! script (`primitives/lock/fair/renewer.rs` runs it; the membership lives
//! here because it belongs to the session, beside its other shared state).
//!
//! A waiter joins once its entry is queued and leaves by dropping its
//! [`Membership`]; the group's task is started by the first member to join
//! and ends when the last has left.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// A group's name: its lock's key and the waiters' lease.
type GroupKey = (Vec<u8>, Duration);

/// Every group of one session.
#[derive(Default)]
pub(crate) struct WaiterGroups {
    groups: Mutex<HashMap<GroupKey, Arc<Group>>>,
}

/// The waiters of one lock (and lease) in this process.
#[derive(Default)]
pub(crate) struct Group {
    members: Mutex<Members>,
    /// Told when a member joins (it may want an earlier look) or leaves.
    pub(crate) changed: Notify,
    /// Its task has ended (the last member left, or the runtime it ran on
    /// shut down): a member still waiting joins a new group.
    ended: std::sync::atomic::AtomicBool,
    /// Members that left since the task last took the count: the lock is
    /// being handed to this process's waiters (or they give up), and the
    /// task then proves the others still queued (see `renewer.rs`).
    departed: std::sync::atomic::AtomicU64,
}

#[derive(Default)]
struct Members {
    next_key: u64,
    /// By key, so in the order they joined: mostly the queue's order.
    list: BTreeMap<u64, Member>,
    /// The earliest look a member asked for since the task last looked.
    look_by: Option<Instant>,
}

/// One queued waiter: its entry, and how to wake it.
#[derive(Clone)]
pub(crate) struct Member {
    pub(crate) key: u64,
    /// When it joined: its entry's own lease was set just before.
    pub(crate) joined: Instant,
    pub(crate) entry: Arc<str>,
    pub(crate) wake: Arc<Notify>,
    /// When a renewal that found the entry still queued was sent: the lock
    /// was not handed to it before then.
    pub(crate) queued_at: Arc<Mutex<Option<Instant>>>,
}

impl Member {
    /// A renewal sent at `sent` found the entry still queued.
    pub(crate) fn still_queued(&self, sent: Instant) {
        let mut at = locked(&self.queued_at);
        *at = Some(at.map_or(sent, |a| a.max(sent)));
    }
}

/// A waiter's place in its group: dropped, it leaves.
pub(crate) struct Membership {
    group: Arc<Group>,
    key: u64,
    entry: Arc<str>,
    /// Told when the waiter must look for itself (its entry is gone, or the
    /// lock is free with it at the head).
    pub(crate) wake: Arc<Notify>,
    queued_at: Arc<Mutex<Option<Instant>>>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl WaiterGroups {
    /// Joins `entry` to the group of `lock` and `lease`, asking for a look
    /// at the lock by `look_by` (the holder's TTL). The group comes back
    /// too when this member started it: the caller starts its task.
    pub(crate) fn join(
        &self,
        lock: &[u8],
        lease: Duration,
        entry: &str,
        look_by: Option<Instant>,
    ) -> (Membership, Option<Arc<Group>>) {
        let mut groups = locked(&self.groups);
        let mut started = None;
        let group = groups
            .entry((lock.to_vec(), lease))
            .or_insert_with(|| {
                let group = Arc::new(Group::default());
                started = Some(group.clone());
                group
            })
            .clone();
        let membership = {
            let mut members = locked(&group.members);
            members.next_key += 1;
            let member = Member {
                key: members.next_key,
                joined: Instant::now(),
                entry: Arc::from(entry),
                wake: Arc::new(Notify::new()),
                queued_at: Arc::new(Mutex::new(None)),
            };
            if let Some(at) = look_by {
                members.look_by = Some(members.look_by.map_or(at, |l| l.min(at)));
            }
            members.list.insert(member.key, member.clone());
            Membership {
                group: group.clone(),
                key: member.key,
                entry: member.entry,
                wake: member.wake,
                queued_at: member.queued_at,
            }
        };
        drop(groups);
        group.changed.notify_one();
        (membership, started)
    }

    /// Removes `group`, whose task ended without its members (its runtime
    /// shut down), and wakes every member: each looks for itself, and
    /// joins a new group with a task of its own.
    pub(crate) fn end(&self, lock: &[u8], lease: Duration, group: &Arc<Group>) {
        let mut groups = locked(&self.groups);
        group
            .ended
            .store(true, std::sync::atomic::Ordering::Release);
        let key = (lock.to_vec(), lease);
        if groups.get(&key).is_some_and(|g| Arc::ptr_eq(g, group)) {
            groups.remove(&key);
        }
        drop(groups);
        for member in locked(&group.members).list.values() {
            member.wake.notify_one();
        }
    }

    /// Removes `group` if it has no member left: its task ends. Under the
    /// map's lock, so that no member joins a group whose task has ended.
    pub(crate) fn end_if_empty(&self, lock: &[u8], lease: Duration, group: &Arc<Group>) -> bool {
        let mut groups = locked(&self.groups);
        if !locked(&group.members).list.is_empty() {
            return false;
        }
        let key = (lock.to_vec(), lease);
        if groups.get(&key).is_some_and(|g| Arc::ptr_eq(g, group)) {
            groups.remove(&key);
        }
        true
    }
}

impl Group {
    /// The members now, in the order they joined, and the earliest look
    /// one asked for since the last call (taken: asked once).
    pub(crate) fn members(&self) -> (Vec<Member>, Option<Instant>) {
        let mut members = locked(&self.members);
        (
            members.list.values().cloned().collect(),
            members.look_by.take(),
        )
    }

    /// The earliest look a member asked for, left in place.
    pub(crate) fn look_by(&self) -> Option<Instant> {
        locked(&self.members).look_by
    }

    /// How many members left since the last call (taken).
    pub(crate) fn take_departed(&self) -> u64 {
        self.departed.swap(0, std::sync::atomic::Ordering::AcqRel)
    }

    /// Whether a member left since the count was last taken.
    pub(crate) fn has_departed(&self) -> bool {
        self.departed.load(std::sync::atomic::Ordering::Acquire) > 0
    }
}

impl Membership {
    /// The entry this membership renews.
    pub(crate) fn entry(&self) -> &str {
        &self.entry
    }

    /// Whether the group's task has ended: this member is renewed no more.
    pub(crate) fn ended(&self) -> bool {
        self.group.ended.load(std::sync::atomic::Ordering::Acquire)
    }

    /// When the last renewal that found the entry still queued was sent.
    pub(crate) fn queued_at(&self) -> Option<Instant> {
        *locked(&self.queued_at)
    }

    /// Asks the group's task for a look at the lock by `at` (a holder's
    /// TTL this member read), if sooner than it would look.
    pub(crate) fn look_by(&self, at: Option<Instant>) {
        let Some(at) = at else { return };
        {
            let mut members = locked(&self.group.members);
            members.look_by = Some(members.look_by.map_or(at, |l| l.min(at)));
        }
        self.group.changed.notify_one();
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        let empty = {
            let mut members = locked(&self.group.members);
            members.list.remove(&self.key);
            members.list.is_empty()
        };
        // The first to leave since the task last looked tells it (a burst
        // of hand-offs may be starting); the others only count.
        let first = self
            .group
            .departed
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel)
            == 0;
        if empty || first {
            self.group.changed.notify_one();
        }
    }
}
