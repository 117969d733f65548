//! `acquire`, `extend` and `release`: a hold kept across calls, identified
//! by its owner token, as `latchkey acquire` / `extend` / `release` do
//! (`commands/acquire.rs`) and with the same keys, so the doors and the CLI
//! exclude one another on a name. Every kind is taken through the library's
//! one [`Acquire`]: a lock (fair or not), permits of a semaphore, a side of
//! a read-write lock, and (`elect.rs`) an election's leadership; the reply
//! says its `kind`, which `extend` and `release` take back.

use std::time::Duration;

use latchkey::{Acquire, Client, Guard, Ownership, RwAccess};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{unix_ms, VerbError, NOT_HELD};
use crate::support::kind_view;

/// What a hold is of: what `acquire` (or `elect`) took, and what `extend`
/// and `release` must be told.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HoldKind {
    /// A lock (the default).
    #[default]
    Lock,
    /// A fair lock: its release hands it to the next in line.
    FairLock,
    /// Permits of a semaphore (`k` of them).
    Semaphore,
    /// The read side of a read-write lock.
    Read,
    /// The write side of a read-write lock.
    Write,
    /// An election's leadership (`elect`).
    Leader,
}

/// A side of a read-write lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Shared with other readers; no fencing token (readers do not write).
    Read,
    /// Alone: no reader and no other writer.
    Write,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AcquireRequest {
    /// The lock's name: the file, task, environment or resource it guards.
    pub name: String,
    /// How long the hold lasts unless extended, with a unit: "500ms",
    /// "30s", "10m", "1h" (at most 24h). Nothing renews it: call `extend`
    /// before it runs out, or lose it then.
    pub ttl: String,
    /// How long to wait for a busy lock, with a unit ("30s"); a release
    /// wakes the wait at once. Absent or "0s": do not wait.
    #[serde(default)]
    pub wait: Option<String>,
    /// Wait in line: waiters get the lock in arrival order and a release
    /// hands it to the next one. The reply's kind is then `fair_lock`.
    #[serde(default)]
    pub fair: bool,
    /// Take permits of a semaphore of this many (N) instead of a lock: up
    /// to N holders at once. Every caller of one name passes the same N.
    #[serde(default)]
    pub permits: Option<u32>,
    /// With `permits`: how many permits to take at once, all or none
    /// (default 1). Pass the same `k` to `extend` and `release`.
    #[serde(default)]
    pub k: Option<u32>,
    /// Take a side of a read-write lock instead of a lock: "read" (shared
    /// with other readers) or "write" (alone).
    #[serde(default)]
    pub access: Option<Access>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct AcquireReply {
    /// The lock's name.
    pub name: String,
    /// What was asked for: pass it to `extend` and `release`.
    pub kind: HoldKind,
    /// True when this call took it; false when it stayed busy (see
    /// `holder`).
    pub acquired: bool,
    /// The owner token: pass it to `extend` and `release`. Keep it to
    /// yourself: whoever has it can release the hold.
    pub token: Option<String>,
    /// The fencing token: pass it to whatever you write under the hold; it
    /// grows with every holder, so a store can refuse a stale writer's
    /// write. Absent for a reader (readers do not write).
    pub fencing_token: Option<u64>,
    /// For a semaphore: how many permits the hold took.
    pub k: Option<u32>,
    /// The TTL it was taken with, in milliseconds.
    pub ttl_ms: Option<u64>,
    /// Until when (Unix epoch milliseconds) the hold is certainly yours;
    /// `extend` before then.
    pub deadline_unix_ms: Option<u64>,
    /// Who holds a busy lock: host, pid, acquired_at_ms, ttl_ms, age_ms,
    /// fencing_token (never their owner token); absent when it cannot be
    /// told (and for the other kinds: ask `status`).
    pub holder: Option<Value>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExtendRequest {
    /// The lock's name.
    pub name: String,
    /// The owner token `acquire` returned.
    pub token: String,
    /// The new TTL, counted from now (replaces what is left): "30s", "10m".
    pub ttl: String,
    /// The `kind` `acquire` returned (default "lock").
    #[serde(default)]
    pub kind: HoldKind,
    /// For a semaphore: the `k` `acquire` returned (default 1).
    #[serde(default)]
    pub k: Option<u32>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ExtendReply {
    /// The lock's name.
    pub name: String,
    /// The TTL now set, in milliseconds.
    pub ttl_ms: u64,
    /// Until when (Unix epoch milliseconds) the hold is certainly yours.
    pub deadline_unix_ms: u64,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseRequest {
    /// The lock's name.
    pub name: String,
    /// The owner token `acquire` returned.
    pub token: String,
    /// The `kind` `acquire` returned (default "lock"): a fair lock is handed
    /// to the next in line, a leader's release is a resignation.
    #[serde(default)]
    pub kind: HoldKind,
    /// For a semaphore: the `k` `acquire` returned (default 1).
    #[serde(default)]
    pub k: Option<u32>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ReleaseReply {
    /// The lock's name.
    pub name: String,
    /// Always true: a token that does not own the hold is an error
    /// (NOT_HELD).
    pub released: bool,
}

/// How long a reader of a write hold's release has to come in, when the
/// release does not know the TTL the hold was taken with.
const READERS_COME_IN: Duration = Duration::from_secs(30);

/// Takes what `request` names (waiting up to `wait` for it) and leaves it
/// held until its TTL: the owner token is the handle, nothing renews it.
///
/// # Cancel safety
///
/// Cancel-safe: dropped while waiting or before the token is handed back,
/// nothing stays held (the guard releases it in the background).
pub async fn acquire(client: &Client, request: AcquireRequest) -> Result<AcquireReply, VerbError> {
    let ttl = super::ttl(&request.ttl)?;
    let wait = request.wait.as_deref().map(super::wait).transpose()?;
    let (kind, what) = recipe(client, &request, ttl)?;
    let k = (kind == HoldKind::Semaphore).then(|| request.k.unwrap_or(1));
    let Some(guard) = take(what.as_ref(), wait).await? else {
        let holder = match kind {
            HoldKind::Lock | HoldKind::FairLock => lock_holder(client, &request.name).await,
            _ => None,
        };
        return Ok(AcquireReply {
            name: request.name,
            kind,
            acquired: false,
            token: None,
            fencing_token: None,
            k: None,
            ttl_ms: None,
            deadline_unix_ms: None,
            holder,
        });
    };
    let handed = hand_back(guard, &request.name, ttl, kind).await?;
    Ok(AcquireReply {
        name: request.name,
        kind,
        acquired: true,
        token: Some(handed.token),
        fencing_token: handed.fencing_token,
        k,
        ttl_ms: Some(ttl.as_millis() as u64),
        deadline_unix_ms: Some(handed.deadline_unix_ms),
        holder: None,
    })
}

/// The kind and the recipe `request` asks for; every recipe fenced, as the
/// CLI's holds are (a reader's side has no fencing token).
fn recipe(
    client: &Client,
    request: &AcquireRequest,
    ttl: Duration,
) -> Result<(HoldKind, Box<dyn Acquire>), VerbError> {
    let name = &request.name;
    let exclusive = |what: &str| VerbError::invalid(format!("{what}: choose one kind per call"));
    match (request.fair, request.permits, request.access) {
        (true, Some(_), _) => Err(exclusive("fair and permits")),
        (true, _, Some(_)) => Err(exclusive("fair and access")),
        (_, Some(_), Some(_)) => Err(exclusive("permits and access")),
        (_, None, _) if request.k.is_some() => Err(VerbError::invalid(
            "k is the number of permits taken at once: it needs permits",
        )),
        (true, None, None) => Ok((
            HoldKind::FairLock,
            Box::new(client.lock(name, ttl)?.with_fencing().fair()?),
        )),
        (false, Some(n), None) => {
            let semaphore = client.semaphore(name, u64::from(n), ttl)?.with_fencing();
            Ok((
                HoldKind::Semaphore,
                Box::new(semaphore.taking(request.k.unwrap_or(1))),
            ))
        }
        (false, None, Some(access)) => {
            let (kind, side) = match access {
                Access::Read => (HoldKind::Read, RwAccess::Read),
                Access::Write => (HoldKind::Write, RwAccess::Write),
            };
            Ok((
                kind,
                Box::new(client.rwlock(name, ttl)?.with_fencing().side(side)),
            ))
        }
        (false, None, None) => Ok((
            HoldKind::Lock,
            Box::new(client.lock(name, ttl)?.with_fencing()),
        )),
    }
}

/// One try (`wait` absent or zero) or a wait: the library's, woken by the
/// release through the shared subscriber, not a polling loop. `None`: busy.
///
/// # Cancel safety
///
/// As the library's `try_acquire` / `acquire_until`: nothing stays held.
pub(super) async fn take(
    what: &dyn Acquire,
    wait: Option<Duration>,
) -> Result<Option<Box<dyn Guard>>, VerbError> {
    match wait {
        None => Ok(what.try_take().await?),
        Some(wait) if wait.is_zero() => Ok(what.try_take().await?),
        Some(wait) => match what.take_until(wait.into()).await {
            Ok(guard) => Ok(Some(guard)),
            Err(latchkey::Error::WaitTimedOut { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        },
    }
}

/// What a caller keeps of a hold the door lets go of.
pub(super) struct Handed {
    pub token: String,
    pub fencing_token: Option<u64>,
    pub deadline_unix_ms: u64,
}

/// Sets the TTL of a fair lock (handed over, it carries the waiter lease),
/// reads the fencing token (a reader has none) and gives up the guard
/// without releasing: the owner token is the caller's handle from now on.
///
/// # Cancel safety
///
/// Cancel-safe: dropped before the token is handed back, the guard is
/// dropped too, and it releases the hold in the background.
pub(super) async fn hand_back(
    guard: Box<dyn Guard>,
    name: &str,
    ttl: Duration,
    kind: HoldKind,
) -> Result<Handed, VerbError> {
    // The guard's background extension would end with the guard: set the
    // TTL now.
    if kind == HoldKind::FairLock && guard.extend(ttl).await? != Ownership::Owned {
        return Err(VerbError::new(
            NOT_HELD,
            format!("{name:?} was lost as soon as it was handed over"),
        ));
    }
    // Failing here drops the guard, which releases the hold: nothing is
    // left held that the caller has no token for.
    let fencing_token = match kind {
        HoldKind::Read => None,
        _ => Some(guard.fencing_token().await?),
    };
    let deadline_unix_ms = unix_ms(guard.deadline());
    Ok(Handed {
        token: guard.forget(),
        fencing_token,
        deadline_unix_ms,
    })
}

/// Who holds a busy lock, when it can be read (a courtesy: a failure to
/// read it leaves it out).
async fn lock_holder(client: &Client, name: &str) -> Option<Value> {
    match client.inspect(name).await {
        Ok(info) if info.held => {
            // One flat object: the holder's host, pid and acquired_at_ms
            // beside the lock's ttl_ms, age_ms and fencing_token.
            let mut fields = kind_view::lock_json(&info);
            fields.remove("name");
            fields.remove("held");
            if let Some(Value::Object(who)) = fields.remove("holder") {
                fields.extend(who);
            }
            Some(Value::Object(fields))
        }
        _ => None,
    }
}

/// Resets the TTL if `token` still owns the hold: the caller's heartbeat.
///
/// # Cancel safety
///
/// Dropped after the request was sent, the TTL may or may not have been
/// reset; calling it again is harmless.
pub async fn extend(client: &Client, request: ExtendRequest) -> Result<ExtendReply, VerbError> {
    let ttl = super::ttl(&request.ttl)?;
    k_only_for_permits(request.kind, request.k)?;
    let (name, token) = (&request.name, &request.token);
    let sent = std::time::Instant::now();
    let outcome = match request.kind {
        HoldKind::Lock | HoldKind::FairLock => {
            client.lock(name, ttl)?.extend_token(token, ttl).await?
        }
        HoldKind::Semaphore => {
            let (semaphore, k) = held_permits(client, name, request.k, ttl)?;
            semaphore.extend_token(token, k, ttl).await?
        }
        HoldKind::Read => {
            client
                .rwlock(name, ttl)?
                .extend_token(token, RwAccess::Read, ttl)
                .await?
        }
        HoldKind::Write => {
            client
                .rwlock(name, ttl)?
                .extend_token(token, RwAccess::Write, ttl)
                .await?
        }
        HoldKind::Leader => client.election(name, ttl)?.extend_token(token, ttl).await?,
    };
    owned(name, outcome)?;
    Ok(ExtendReply {
        name: request.name,
        ttl_ms: ttl.as_millis() as u64,
        // As the library's guards count theirs (and `acquire`'s): from when
        // the request was sent, less the clock-drift allowance.
        deadline_unix_ms: unix_ms(sent + ttl - latchkey::protocol::drift(ttl)),
    })
}

/// Releases the hold if `token` still owns it, and wakes its waiters (a
/// fair lock's next in line gets it; a leader resigns).
///
/// # Cancel safety
///
/// Dropped after the request was sent, the hold may or may not be
/// released; calling it again is harmless (NOT_HELD the second time).
pub async fn release(client: &Client, request: ReleaseRequest) -> Result<ReleaseReply, VerbError> {
    k_only_for_permits(request.kind, request.k)?;
    let (name, token) = (&request.name, &request.token);
    // A handle's TTL is not used by a release, but for a writer's: how
    // long the readers it lets in have to come.
    let ttl = READERS_COME_IN;
    let outcome = match request.kind {
        HoldKind::Lock => client.lock(name, ttl)?.release_token(token).await?,
        HoldKind::FairLock => client.lock(name, ttl)?.fair()?.release_token(token).await?,
        HoldKind::Semaphore => {
            let (semaphore, k) = held_permits(client, name, request.k, ttl)?;
            semaphore.release_token(token, k).await?
        }
        HoldKind::Read => {
            client
                .rwlock(name, ttl)?
                .release_token(token, RwAccess::Read)
                .await?
        }
        HoldKind::Write => {
            client
                .rwlock(name, ttl)?
                .release_token(token, RwAccess::Write)
                .await?
        }
        HoldKind::Leader => client.election(name, ttl)?.resign_token(token).await?,
    };
    owned(name, outcome)?;
    Ok(ReleaseReply {
        name: request.name,
        released: true,
    })
}

/// A handle on the semaphore `name` for a hold of `k` permits (default 1;
/// the library refuses 0), and that `k`. A by-token call does not use the
/// handle's N (only `k` ≤ N is checked).
fn held_permits(
    client: &Client,
    name: &str,
    k: Option<u32>,
    ttl: Duration,
) -> Result<(latchkey::Semaphore, u32), VerbError> {
    let k = k.unwrap_or(1);
    let semaphore = client.semaphore(name, u64::from(k.max(1)), ttl)?;
    Ok((semaphore, k))
}

/// INVALID_INPUT for a `k` given with another kind than a semaphore's.
fn k_only_for_permits(kind: HoldKind, k: Option<u32>) -> Result<(), VerbError> {
    match (kind, k) {
        (HoldKind::Semaphore, _) | (_, None) => Ok(()),
        _ => Err(VerbError::invalid(
            "k is the number of permits a semaphore's hold took: give it with kind \"semaphore\" only",
        )),
    }
}

/// NOT_HELD unless `outcome` says the token owned the hold.
fn owned(name: &str, outcome: Ownership) -> Result<(), VerbError> {
    let why = match outcome {
        Ownership::Owned => return Ok(()),
        Ownership::Expired => "it is not held (it expired?)",
        Ownership::HeldByOther => "someone else holds it",
    };
    Err(VerbError::new(
        NOT_HELD,
        format!("{name:?}: this token does not own it; {why}"),
    ))
}
