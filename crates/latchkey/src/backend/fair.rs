//! A fair lock's scripts on one server (layer 3): the attempt that queues a
//! waiter (`fair_acquire.lua`), the renewal of many waiters' leases at once
//! (`fair_renew.lua`), the release that
//! hands the lock to the first live waiter (`fair_release.lua`), a
//! waiter's leaving (`fair_leave.lua`) and an operator's revocation
//! (`fair_revoke.lua`), the last three over one hand-on
//! (`scripts/shared/hand_on.lua`). The
//! waiting loop above them is `crate::primitives::lock::fair` (layer 4); the layout is in
//! `docs/protocol.md`, "Fair locks".

use std::time::{Duration, Instant};

use crate::backend::single::Single;
use crate::vocab::error::{Error, Result};
use crate::vocab::names::{drift, ttl_ms, FairKeys, LockKeys};
use crate::vocab::outcome::Ownership;
use crate::vocab::protocol::scripts;

/// What one fair attempt found.
#[derive(Debug)]
pub(crate) enum FairAttempt {
    /// Ours: taken now (the lock was free and nobody live was ahead), or
    /// already ours (`handed`: a release handed it to us; its message may
    /// be lost).
    Ours {
        handed: bool,
        fencing_token: Option<u64>,
        valid_until: Instant,
    },
    /// Not ours. `retry_in`: the holder's TTL, or the lease left to the
    /// live head when the lock is free. `queued`: the caller's entry is in
    /// the queue now (a [`FairMode::Renew`] that finds it gone says false).
    Busy {
        retry_in: Option<Duration>,
        queued: bool,
    },
}

/// What a fair attempt does when it cannot take the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FairMode {
    /// Change nothing (`try_acquire`).
    Try,
    /// Queue the entry, or renew its lease if it is queued.
    Queue,
    /// Renew the entry's lease only if it is still queued. An entry that is
    /// gone was handed the lock (or dropped as dead) while this process did
    /// not listen: the waiter queues again under a new entry, so that a late
    /// message for the old one is never taken for a new hand-off.
    Renew,
}

/// What one renewal of a process's waiters (`fair_renew.lua`) found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Renewed {
    /// The holder's TTL; when the lock is free, the time left until the
    /// live head is no longer live; `None`: the holder has no TTL, or the
    /// lock is free and nobody live is queued.
    pub(crate) wait: Option<Duration>,
    /// When the lock is free: the live head's entry (its waiter takes the
    /// lock now).
    pub(crate) head: Option<String>,
    /// The holder's token, without a waiter's mark: a hand-off to one of
    /// this process's waiters whose message was lost shows as its token.
    pub(crate) holder: Option<String>,
    /// The process's record had run out before this renewal: any of its
    /// entries may have been dropped as dead.
    pub(crate) lapsed: bool,
    /// The positions (0-based, among the entries sent) of the entries no
    /// longer queued: handed the lock, or dropped as dead.
    pub(crate) gone: Vec<usize>,
}

/// A waiter's queue entry: `<32 hex id>:<hand-off ttl ms>:<0|1>:<token>`.
pub(crate) fn entry(id: &str, handoff_ttl: Duration, fenced: bool, token: &str) -> String {
    let fenced = if fenced { '1' } else { '0' };
    format!("{id}:{}:{fenced}:{token}", ttl_ms(handoff_ttl))
}

fn fair_keys(keys: &LockKeys) -> Result<&FairKeys> {
    keys.fair.as_ref().ok_or(Error::Internal(
        "a fair script on a lock that is not fair".into(),
    ))
}

/// The script keys: lock, queue, leases, counter, acquired record,
/// process records.
fn script_keys<'a>(keys: &'a LockKeys, fair: &'a FairKeys) -> [&'a [u8]; 6] {
    [
        &keys.key,
        &fair.queue,
        &fair.leases,
        &keys.fence_key,
        &fair.acquired,
        &fair.alive,
    ]
}

/// How many waiter leases an entry's own lease lasts: its process's
/// record, renewed every third of the waiter lease, keeps it live, so the
/// entry itself needs renewing only every third of this many leases. A
/// process that dies still takes its entries with it within one waiter
/// lease (its record runs out); a waiter of a live process that stopped
/// without leaving (its leave failed) keeps its entry live this long, and
/// a hand-off to it expires within the hand-off TTL, as one to a waiter
/// that died does.
pub(crate) const ENTRY_LEASES: u32 = 15;

/// An entry's own lease for a waiter lease of `lease`.
pub(crate) fn entry_lease(lease: Duration) -> Duration {
    lease.saturating_mul(ENTRY_LEASES)
}

/// `fair_renew.lua`'s reply `{wait_ms, head, holder, lapsed, gone...}` for
/// `sent` entries.
fn parse_renewed(reply: &[redis::Value], sent: usize) -> Result<Renewed> {
    let bad = || Error::Protocol(format!("fair renew script returned {reply:?}"));
    let int = |v: &redis::Value| match v {
        redis::Value::Int(n) => Some(*n),
        _ => None,
    };
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) if b.is_empty() => Ok(None),
        redis::Value::BulkString(b) => Ok(Some(String::from_utf8_lossy(b).into_owned())),
        _ => Err(bad()),
    };
    let [wait, head, holder, lapsed, gone @ ..] = reply else {
        return Err(bad());
    };
    let wait = int(wait).ok_or_else(bad)?;
    let head = text(head)?;
    let holder = text(holder)?;
    let lapsed = int(lapsed).ok_or_else(bad)? == 1;
    let gone = gone
        .iter()
        .map(|v| {
            int(v)
                .and_then(|n| usize::try_from(n).ok())
                .filter(|&n| (1..=sent).contains(&n))
                .map(|n| n - 1)
                .ok_or_else(bad)
        })
        .collect::<Result<Vec<usize>>>()?;
    Ok(Renewed {
        wait: u64::try_from(wait).ok().map(Duration::from_millis),
        head,
        holder,
        lapsed,
        gone,
    })
}

fn fence(fenced: bool, value: i64) -> Option<u64> {
    match fenced {
        true => u64::try_from(value).ok().filter(|&v| v > 0),
        false => None,
    }
}

impl Single<'_> {
    /// One run of `fair_acquire.lua`: take the lock if it is free and
    /// nobody live is ahead; else queue or renew `entry` (its own lease
    /// [`entry_lease`], its process's record `lease`), as `mode` says. One
    /// round trip.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn fair_attempt(
        &self,
        keys: &LockKeys,
        entry: &str,
        token: &str,
        ttl: Duration,
        fenced: bool,
        mode: FairMode,
        lease: Duration,
    ) -> Result<FairAttempt> {
        let fair = fair_keys(keys)?;
        let all = script_keys(keys, fair);
        let sent = Instant::now();
        let ttl_arg = ttl_ms(ttl).to_string();
        let lease_arg = ttl_ms(entry_lease(lease)).to_string();
        let process_lease_arg = ttl_ms(lease).to_string();
        let reply: Vec<i64> = self
            .eval(
                "fair acquire",
                &scripts::FAIR_ACQUIRE,
                &all,
                &[
                    entry.as_bytes(),
                    token.as_bytes(),
                    ttl_arg.as_bytes(),
                    if fenced { b"1" } else { b"0" },
                    match mode {
                        FairMode::Try => b"try",
                        FairMode::Queue => b"wait",
                        FairMode::Renew => b"renew",
                    },
                    lease_arg.as_bytes(),
                    process_lease_arg.as_bytes(),
                ],
            )
            .await?;
        match reply[..] {
            [1, value, ..] => Ok(FairAttempt::Ours {
                handed: false,
                fencing_token: fence(fenced, value),
                valid_until: crate::vocab::names::valid_until(sent, ttl),
            }),
            [2, value, pttl, ..] => {
                let left = Duration::from_millis(u64::try_from(pttl).unwrap_or(0));
                Ok(FairAttempt::Ours {
                    handed: true,
                    fencing_token: fence(fenced, value),
                    valid_until: sent + left.saturating_sub(drift(left)),
                })
            }
            [0, wait_ms, queued, ..] => Ok(FairAttempt::Busy {
                retry_in: u64::try_from(wait_ms).ok().map(Duration::from_millis),
                queued: queued == 1,
            }),
            _ => Err(Error::Protocol(format!(
                "fair acquire script returned {reply:?}"
            ))),
        }
    }

    /// One run of `fair_renew.lua`: renew the record of process `process`
    /// (the 16 hex digits its entries start with) for `lease`, and the own
    /// leases of `entries` that are still queued (never queue one again)
    /// for [`entry_lease`]. One round trip.
    pub(crate) async fn fair_renew(
        &self,
        keys: &LockKeys,
        lease: Duration,
        process: &str,
        entries: &[&str],
    ) -> Result<Renewed> {
        let fair = fair_keys(keys)?;
        let lease_arg = ttl_ms(entry_lease(lease)).to_string();
        let process_lease_arg = ttl_ms(lease).to_string();
        let mut args: Vec<&[u8]> = Vec::with_capacity(entries.len() + 3);
        args.push(lease_arg.as_bytes());
        args.push(process_lease_arg.as_bytes());
        args.push(process.as_bytes());
        args.extend(entries.iter().map(|e| e.as_bytes()));
        let reply: Vec<redis::Value> = self
            .eval(
                "fair renew",
                &scripts::FAIR_RENEW,
                &[&keys.key, &fair.queue, &fair.leases, &fair.alive],
                &args,
            )
            .await?;
        parse_renewed(&reply, entries.len())
    }

    /// One run of `fair_release.lua`: hand the lock to the first live
    /// waiter, or free it; with `leaving`, of `fair_leave.lua`: that entry
    /// is taken out of the queue first (a waiter that gives up, releasing
    /// a lock handed to it meanwhile). `Owned` when we held it (handed on
    /// or freed). One round trip.
    pub(crate) async fn fair_release(
        &self,
        keys: &LockKeys,
        token: &str,
        leaving: Option<&str>,
    ) -> Result<Ownership> {
        let fair = fair_keys(keys)?;
        let all = script_keys(keys, fair);
        let args: [&[u8]; 5] = [
            token.as_bytes(),
            // SPUBLISH on a cluster (sharded pub/sub), PUBLISH elsewhere.
            self.publish_command(),
            &fair.handoff_prefix,
            &keys.channel,
            leaving.unwrap_or_default().as_bytes(),
        ];
        let outcome: i64 = match leaving {
            Some(_) => {
                self.eval("fair leave", &scripts::FAIR_LEAVE, &all, &args)
                    .await?
            }
            None => {
                self.eval("fair release", &scripts::FAIR_RELEASE, &all, &args[..4])
                    .await?
            }
        };
        match outcome {
            1 | 2 => Ok(Ownership::Owned),
            0 => Ok(Ownership::Expired),
            -1 => Ok(Ownership::HeldByOther),
            other => Err(Error::Protocol(format!(
                "fair release script returned {other}"
            ))),
        }
    }

    /// An operator's revocation of the lock at `keys` (`fair_revoke.lua`),
    /// whoever holds it: the fencing counter is raised
    /// first, then the lock is handed to the first live waiter (or freed),
    /// and `revoked` is published. `Some(fence)`: revoked, `fence` below
    /// every later holder's token; `None`: nothing held it. A lock without
    /// a queue is freed as `revoke.lua` would. One round trip.
    pub(crate) async fn fair_revoke(&self, keys: &LockKeys) -> Result<Option<u64>> {
        let fair = fair_keys(keys)?;
        let all = script_keys(keys, fair);
        let reply: Vec<i64> = self
            .eval(
                "fair revoke",
                &scripts::FAIR_REVOKE,
                &all,
                &[self.publish_command(), &fair.handoff_prefix, &keys.channel],
            )
            .await?;
        match reply[..] {
            [1, fence, _] if fence > 0 => Ok(u64::try_from(fence).ok()),
            [0, ..] => Ok(None),
            _ => Err(Error::Protocol(format!(
                "fair revoke script returned {reply:?}"
            ))),
        }
    }
}
