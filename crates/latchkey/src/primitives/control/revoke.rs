//! Revocation (layer 4): an operator ends the holds of a name whoever holds
//! them, and makes them harmless. See [`Client::revoke`](crate::Client::revoke).
//!
//! Every kind that can be held is revoked the way it is released, without
//! the owner check, in one script where the kind allows, and the fencing
//! counter is raised in that script *before* anything is handed on, so the
//! next holder's token is above the revocation's: a lock, fair or not, by
//! `fair_revoke.lua` (the counter raised, then the lock
//! handed to the head of its queue or freed); a semaphore's permits, a
//! read-write lock's writer and readers by `revoke.lua` (deleted, the
//! counter raised); an election's leader is resigned with its token
//! (candidates and observers are told), and its term + 1 is the fence. A
//! hold key that holds no latchkey token (another program's data under the
//! prefix) is never deleted: [`Error::ForeignValue`]. Each script
//! publishes `revoked` on the primitive's channel: the holders check their
//! hold when they hear it, else learn at their next renewal.

use std::time::Duration;

use crate::primitives::inspect::{Kind, PrimitiveInfo};
use crate::transport::session::Session;
use crate::vocab::error::{Error, Result};
use crate::vocab::names::LockKeys;
use crate::vocab::outcome::Ownership;
use crate::vocab::protocol::{
    primitive_key, scripts, ELECTION_LEASE_SUFFIX, PERMITS_FENCE_SUFFIX, PERMITS_RELEASED_SUFFIX,
    PERMITS_SUFFIX, RWLOCK_SUFFIXES,
};

/// What [`Client::revoke`](crate::Client::revoke) ended under one name, per kind.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Revocation {
    /// The kind revoked.
    pub kind: Kind,
    /// How many holds ended: 1 for a lock, a writer or a leader, the permits
    /// of a semaphore, the readers of a read-write lock (plus its writer).
    pub ended: u64,
    /// A fencing token above every token the revoked holders could have,
    /// and at or below every later holder's (the raised counter; an
    /// election's term + 1): raise a
    /// [`FencedResource`](crate::FencedResource) to it
    /// ([`raise`](crate::FencedResource::raise)) and the revoked holders'
    /// next writes there are refused at once.
    pub fencing_token: Option<u64>,
}

/// The TTL of the handles made to revoke with (never used to hold).
const HANDLE_TTL: Duration = Duration::from_secs(1);

/// See [`Client::revoke`](crate::Client::revoke).
pub(crate) async fn revoke(session: &Session, name: &[u8]) -> Result<Vec<Revocation>> {
    let found = crate::primitives::inspect::Inspector(session)
        .describe(name)
        .await?;
    let mut revoked = Vec::new();
    for info in found.iter().filter(|i| i.holders() > 0) {
        let revocation = match info {
            PrimitiveInfo::Lock(_) => revoke_lock(session, name, Kind::Lock).await?,
            PrimitiveInfo::FairLock(_) => revoke_lock(session, name, Kind::FairLock).await?,
            PrimitiveInfo::Semaphore(_) => revoke_keys(session, name, Kind::Semaphore).await?,
            PrimitiveInfo::RwLock(_) => revoke_keys(session, name, Kind::RwLock).await?,
            PrimitiveInfo::Election(_) => revoke_leader(session, name).await?,
            // A latch or a barrier is not held: there is nothing to revoke.
            _ => continue,
        };
        let Some(revocation) = revocation else {
            continue;
        };
        let policy = &session.inner.metrics_labels;
        crate::vocab::metrics::revoked(policy, revocation.kind.as_str(), name, revocation.ended);
        tracing::warn!(
            name = %String::from_utf8_lossy(name),
            kind = revocation.kind.as_str(),
            ended = revocation.ended,
            fencing_token = ?revocation.fencing_token,
            "revoked"
        );
        revoked.push(revocation);
    }
    Ok(revoked)
}

/// `revoke.lua` over the hold keys of a semaphore or a read-write lock.
async fn run_revoke(session: &Session, keys: &[&[u8]], channel: &[u8]) -> Result<(u64, u64)> {
    let (ended, fence): (i64, i64) = session
        .eval(
            "revoke",
            &scripts::REVOKE,
            keys,
            &[session.publish_command(), channel],
        )
        .await?;
    let count = |v| crate::primitives::shared::reply_int("revoke", v);
    Ok((count(ended)?, count(fence)?))
}

async fn revoke_keys(session: &Session, name: &[u8], kind: Kind) -> Result<Option<Revocation>> {
    let at = |suffix: &[u8]| primitive_key(session.prefix(), name, suffix);
    let (holds, fence, channel) = match kind {
        Kind::Semaphore => (
            vec![at(PERMITS_SUFFIX)],
            at(PERMITS_FENCE_SUFFIX),
            at(PERMITS_RELEASED_SUFFIX),
        ),
        // Writer, readers; the fencing counter; the released channel.
        _ => (
            vec![at(RWLOCK_SUFFIXES[0]), at(RWLOCK_SUFFIXES[1])],
            at(RWLOCK_SUFFIXES[5]),
            at(RWLOCK_SUFFIXES[6]),
        ),
    };
    let mut keys: Vec<&[u8]> = holds.iter().map(Vec::as_slice).collect();
    keys.push(&fence);
    let (ended, fence) = run_revoke(session, &keys, &channel).await?;
    Ok((ended > 0).then_some(Revocation {
        kind,
        ended,
        fencing_token: Some(fence),
    }))
}

/// A lock, fair or not: one script raises the counter, then hands the lock to the first live waiter of its queue, or frees it.
async fn revoke_lock(session: &Session, name: &[u8], kind: Kind) -> Result<Option<Revocation>> {
    let keys = LockKeys::new(session.prefix(), name).with_fair();
    let revoked = crate::backend::single::Single(session)
        .fair_revoke(&keys)
        .await?;
    Ok(revoked.map(|fence| Revocation {
        kind,
        ended: 1,
        fencing_token: Some(fence),
    }))
}

/// An election: its leader is resigned with its own token (candidates and
/// observers hear it at once); the next leader's term outranks its term.
async fn revoke_leader(session: &Session, name: &[u8]) -> Result<Option<Revocation>> {
    let election = crate::primitives::election::Election::on_session(session, name, HANDLE_TTL)?;
    let lease = primitive_key(session.prefix(), name, ELECTION_LEASE_SUFFIX);
    let Some(token) = holder_token(session, &lease).await? else {
        return Ok(None);
    };
    let term = election.leader().await?.map(|l| l.term);
    match election.revoke_token(&token).await? {
        Ownership::Owned => Ok(Some(Revocation {
            kind: Kind::Election,
            ended: 1,
            fencing_token: term.map(|t| t + 1),
        })),
        _ => Ok(None),
    }
}

/// The owner token a lease key holds (without a waiter's `+w` mark);
/// [`Error::ForeignValue`] for a value no latchkey client wrote.
async fn holder_token(session: &Session, key: &[u8]) -> Result<Option<String>> {
    let value: Option<Vec<u8>> = session
        .query("revoke", redis::cmd("GET").arg(key).clone(), key)
        .await?;
    let Some(value) = value else {
        return Ok(None);
    };
    if !crate::vocab::token::is_token(&value) {
        return Err(Error::ForeignValue {
            key: String::from_utf8_lossy(key).into_owned(),
        });
    }
    let value = value.strip_suffix(b"+w").unwrap_or(&value);
    String::from_utf8(value.to_vec())
        .map(Some)
        .map_err(|_| Error::Protocol("the holder's token is not UTF-8".into()))
}
