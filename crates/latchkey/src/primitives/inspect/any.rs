//! [`Client::describe`](crate::Client::describe): every primitive under one
//! name, read by one script (`inspect_any.lua`) in one round trip. All of a
//! name's keys share its hash tag, so on a cluster they are in one slot.

use std::collections::HashMap;
use std::time::Duration;

use super::kinds::{
    BarrierInfo, ElectionInfo, FairLockInfo, Holding, LatchInfo, PrimitiveInfo, RwLockInfo,
    SemaphoreInfo,
};
use super::lock_info;
use crate::vocab::error::Result;
use crate::vocab::names::LockKeys;
use crate::vocab::protocol::scripts;
use crate::vocab::protocol::{
    primitive_key, ACQUIRED_SUFFIX, ALIVE_SUFFIX, BARRIER_SUFFIX, ELECTION_LEASE_SUFFIX,
    ELECTION_STATE_SUFFIX, LATCH_SUFFIX, LEASES_SUFFIX, PERMITS_FENCE_SUFFIX, PERMITS_SUFFIX,
    QUEUE_SUFFIX, RWLOCK_SUFFIXES, RWLOCK_WRITER_ACQUIRED_SUFFIX,
};
use crate::vocab::token::Holder;

/// The most members of one sorted set or list an inspection reads: a
/// snapshot for people; a queue of thousands is cut (and says nothing new).
const MEMBERS_READ: &[u8] = b"1000";

type Bytes = Option<Vec<u8>>;
type LockPart = (Bytes, i64, Bytes, Option<u64>);
type FairPart = (Vec<Vec<u8>>, Vec<Vec<u8>>);
type PermitsPart = (Vec<Vec<u8>>, Bytes);
type RwPart = (
    Bytes,
    i64,
    Vec<Vec<u8>>,
    Vec<Vec<u8>>,
    Vec<Vec<u8>>,
    i64,
    Bytes,
    Option<u64>,
);
type LatchPart = (Bytes, i64);
type BarrierPart = (i64, Bytes, Bytes, Bytes, i64);
type ElectionPart = (Bytes, i64, i64, Bytes, Bytes, Bytes, Bytes, Bytes, Bytes);
type Reply = (
    String,
    LockPart,
    FairPart,
    PermitsPart,
    RwPart,
    LatchPart,
    BarrierPart,
    ElectionPart,
);

impl super::Inspector<'_> {
    /// See [`Client::describe`](crate::Client::describe).
    pub(crate) async fn describe(&self, name: &[u8]) -> Result<Vec<PrimitiveInfo>> {
        crate::vocab::names::check_name(name)?;
        crate::vocab::names::check_cluster_name(self.prefix(), name, self.is_cluster())?;
        self.describe_key(name).await
    }

    /// [`Session::describe`] without the name check (`list_all` reports
    /// whatever it finds under the prefix).
    pub(super) async fn describe_key(&self, name: &[u8]) -> Result<Vec<PrimitiveInfo>> {
        let lock_keys = LockKeys::new(self.prefix(), name);
        let p = self.prefix();
        let at = |suffix: &[u8]| primitive_key(p, name, suffix);
        let mut keys: Vec<Vec<u8>> = vec![
            lock_keys.key.clone(),
            lock_keys.fence_key.clone(),
            at(QUEUE_SUFFIX),
            at(LEASES_SUFFIX),
            at(PERMITS_SUFFIX),
            at(PERMITS_FENCE_SUFFIX),
        ];
        // Writer, readers, writers waiting, readers waiting, readers next, fence.
        keys.extend(RWLOCK_SUFFIXES[..6].iter().map(|s| at(s)));
        keys.extend([
            at(LATCH_SUFFIX),
            at(BARRIER_SUFFIX),
            at(ELECTION_LEASE_SUFFIX),
            at(ELECTION_STATE_SUFFIX),
            at(ACQUIRED_SUFFIX),
            at(RWLOCK_WRITER_ACQUIRED_SUFFIX),
            at(ALIVE_SUFFIX),
        ]);
        let key_refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let reply: Reply = self
            .eval("inspect", &scripts::INSPECT_ANY, &key_refs, &[MEMBERS_READ])
            .await?;
        Ok(parse(name, &lock_keys, reply))
    }
}

/// Every kind found in the script's reply, in [`Kind`](super::Kind) order.
fn parse(name: &[u8], lock_keys: &LockKeys, reply: Reply) -> Vec<PrimitiveInfo> {
    let (now, lock, fair, permits, rw, latch, barrier, election) = reply;
    let now: u64 = now.parse().unwrap_or(0);
    let mut found = Vec::new();

    let (value, pttl, fence, held) = lock;
    let lock_found = value.is_some() || fence.is_some();
    let lock = lock_info(name, lock_keys, value, pttl, fence, held);
    let queue = fair_queue(now, fair);
    if !queue.is_empty() {
        found.push(PrimitiveInfo::FairLock(FairLockInfo { lock, queue }));
    } else if lock_found {
        found.push(PrimitiveInfo::Lock(lock));
    }

    let (members, fence) = permits;
    if !members.is_empty() || fence.is_some() {
        found.push(PrimitiveInfo::Semaphore(SemaphoreInfo {
            name: name.to_vec(),
            permits: holdings(now, &members),
            fencing_token: number(&fence),
        }));
    }

    let (writer, writer_pttl, readers, writers_waiting, readers_waiting, next, fence, held) = rw;
    if writer.is_some()
        || !readers.is_empty()
        || !writers_waiting.is_empty()
        || !readers_waiting.is_empty()
        || next > 0
        || fence.is_some()
    {
        found.push(PrimitiveInfo::RwLock(RwLockInfo {
            name: name.to_vec(),
            writer: writer.map(|token| Holding {
                holder: Holder::from_token(&token).map(|h| held_for(h, held)),
                token: String::from_utf8_lossy(&token).into_owned(),
                ttl: ttl(writer_pttl),
            }),
            readers: holdings(now, &readers),
            writers_waiting: holdings(now, &writers_waiting),
            readers_waiting: holdings(now, &readers_waiting),
            readers_next: u64::try_from(next).unwrap_or(0),
            fencing_token: number(&fence),
        }));
    }

    let (count, latch_pttl) = latch;
    if count.is_some() {
        found.push(PrimitiveInfo::Latch(LatchInfo {
            name: name.to_vec(),
            count: number(&count),
            ttl: ttl(latch_pttl),
        }));
    }

    let (exists, parties, generation, arrived, barrier_pttl) = barrier;
    if exists == 1 {
        found.push(PrimitiveInfo::Barrier(BarrierInfo {
            name: name.to_vec(),
            parties: number(&parties),
            generation: number(&generation).unwrap_or(0),
            arrived: number(&arrived).unwrap_or(0),
            ttl: ttl(barrier_pttl),
        }));
    }

    let (lease, lease_pttl, exists, token, value, term, since, _change, last_term) = election;
    if lease.is_some() || exists == 1 {
        let leads = lease.is_some() && lease == token;
        // A leader's token is made when it starts campaigning: its term
        // began at `since` (server ms), which the state records.
        let led = number(&since).map(|since| now.saturating_sub(since));
        found.push(PrimitiveInfo::Election(ElectionInfo {
            name: name.to_vec(),
            leader: leads.then(|| Holding {
                token: String::from_utf8_lossy(lease.as_deref().unwrap_or_default()).into_owned(),
                holder: lease
                    .as_deref()
                    .and_then(Holder::from_token)
                    .map(|h| held_for(h, led)),
                ttl: ttl(lease_pttl),
            }),
            term: if leads { number(&term) } else { None },
            value: if leads { value } else { None },
            last_term: number(&last_term),
            lease_unrecorded: lease.is_some() && !leads,
        }));
    }
    found
}

/// `holder` as acquired `held` ms ago (by the server's clock), when the
/// layout says when its hold began: a waiter's token tells when it started
/// waiting, not when it got the hold.
pub(super) fn held_for(mut holder: Holder, held: Option<u64>) -> Holder {
    if let Some(ms) = held {
        let ago = Duration::from_millis(ms);
        holder.acquired_at = std::time::SystemTime::now()
            .checked_sub(ago)
            .unwrap_or(holder.acquired_at);
    }
    holder
}

/// A decimal count or token; `None` when absent or not a number.
fn number(raw: &Option<Vec<u8>>) -> Option<u64> {
    std::str::from_utf8(raw.as_deref()?).ok()?.parse().ok()
}

/// A `PTTL` reply as a TTL: `None` for -1 (no TTL) and -2 (no key).
fn ttl(pttl: i64) -> Option<Duration> {
    u64::try_from(pttl).ok().map(Duration::from_millis)
}

/// A flat `{token, expiry_ms, …}` of unexpired members, as holdings.
fn holdings(now: u64, flat: &[Vec<u8>]) -> Vec<Holding> {
    flat.chunks_exact(2)
        .map(|pair| Holding {
            token: String::from_utf8_lossy(&pair[0]).into_owned(),
            holder: Holder::from_token(&pair[0]),
            ttl: expiry_left(now, &pair[1]),
        })
        .collect()
}

/// What is left until `expiry` (server ms, as a zset score may print it).
fn expiry_left(now: u64, expiry: &[u8]) -> Option<Duration> {
    let expiry: f64 = std::str::from_utf8(expiry).ok()?.parse().ok()?;
    Some(Duration::from_millis((expiry as u64).saturating_sub(now)))
}

/// The fair queue's live waiters in order: an entry is
/// `<id>:<hand-off ttl>:<0|1>:<owner token>`, live while its lease and its
/// process's record are (the script sends only those, each with the sooner
/// deadline).
fn fair_queue(now: u64, (entries, leases): FairPart) -> Vec<Holding> {
    let live: HashMap<&[u8], &[u8]> = leases
        .chunks_exact(2)
        .map(|pair| (&pair[0][..], &pair[1][..]))
        .collect();
    entries
        .iter()
        .filter_map(|entry| {
            let deadline = live.get(&entry[..])?;
            let token = entry.splitn(4, |&b| b == b':').nth(3).unwrap_or_default();
            Some(Holding {
                token: String::from_utf8_lossy(token).into_owned(),
                holder: Holder::from_token(token),
                ttl: expiry_left(now, deadline),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fair_queue_keeps_arrival_order_and_only_live_entries() {
        let entry =
            |n: u8| format!("{:032x}:1000:0:lk2:{:032x}:1000:{n}:web-{n}", n, n).into_bytes();
        let entries = vec![entry(1), entry(2), entry(3)];
        let leases = vec![entry(3), b"5000".to_vec(), entry(1), b"4000".to_vec()];
        let queue = fair_queue(3000, (entries, leases));
        let hosts: Vec<_> = queue
            .iter()
            .map(|h| h.holder.as_ref().map(|h| h.host.clone()))
            .collect();
        assert_eq!(hosts, [Some("web-1".to_owned()), Some("web-3".to_owned())]);
        assert_eq!(queue[0].ttl, Some(Duration::from_millis(1000)));
    }
}
