//! `acquire`, `extend` and `release`: a lock held across calls, identified
//! by its owner token, as `latchkey acquire` / `extend` / `release` do
//! (`commands/acquire.rs`) and with the same keys, so the doors and the CLI
//! exclude one another on a name.

use latchkey::{Client, Ownership};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{unix_ms, VerbError, NOT_HELD};
use crate::support::kind_view;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AcquireRequest {
    /// The lock's name: the file, task, environment or resource it guards.
    pub name: String,
    /// How long the lock stays held unless extended, with a unit: "500ms",
    /// "30s", "10m", "1h" (at most 24h). Nothing renews it: call `extend`
    /// before it runs out, or lose it then.
    pub ttl: String,
    /// How long to wait for a busy lock, with a unit ("30s"); a release
    /// wakes the wait at once. Absent or "0s": do not wait.
    #[serde(default)]
    pub wait: Option<String>,
    /// Wait in line: waiters get the lock in arrival order and a release
    /// hands it to the next one. Release a fair lock with `fair: true`.
    #[serde(default)]
    pub fair: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct AcquireReply {
    /// The lock's name.
    pub name: String,
    /// True when this call took the lock; false when it stayed busy
    /// (see `holder`).
    pub acquired: bool,
    /// The owner token: pass it to `extend` and `release`. Keep it to
    /// yourself: whoever has it can release the lock.
    pub token: Option<String>,
    /// The fencing token: pass it to whatever you write under the lock; it
    /// grows with every holder, so a store can refuse a stale writer's write.
    pub fencing_token: Option<u64>,
    /// The TTL the lock was taken with, in milliseconds.
    pub ttl_ms: Option<u64>,
    /// Until when (Unix epoch milliseconds) the hold is certainly yours;
    /// `extend` before then.
    pub deadline_unix_ms: Option<u64>,
    /// Who holds it, when busy: host, pid, acquired_at_ms, ttl_ms, age_ms,
    /// fencing_token (never their owner token); absent when it cannot be told.
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
    /// The lock was acquired with `fair: true`: hand it to the next waiter.
    #[serde(default)]
    pub fair: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ReleaseReply {
    /// The lock's name.
    pub name: String,
    /// Always true: a token that does not own the lock is an error (NOT_HELD).
    pub released: bool,
}

/// Takes `name` (waiting up to `wait` for it) and leaves it held until its
/// TTL: the owner token is the handle, nothing renews it.
///
/// # Cancel safety
///
/// Cancel-safe: dropped while waiting or before the token is handed back,
/// nothing stays held (the guard releases it in the background).
pub async fn acquire(client: &Client, request: AcquireRequest) -> Result<AcquireReply, VerbError> {
    let ttl = super::ttl(&request.ttl)?;
    let wait = request.wait.as_deref().map(super::wait).transpose()?;
    // Fenced, as the CLI's locks are: every holder gets a fencing token.
    let mut lock = client.lock(&request.name, ttl)?.with_fencing();
    if request.fair {
        lock = lock.fair()?;
    }
    let guard = match wait {
        None => lock.try_acquire().await?,
        Some(wait) if wait.is_zero() => lock.try_acquire().await?,
        // The library's wait: woken by the release through the shared
        // subscriber, not a polling loop.
        Some(wait) => match lock.acquire_until(wait).await {
            Ok(guard) => Some(guard),
            Err(latchkey::Error::WaitTimedOut { .. }) => None,
            Err(e) => return Err(e.into()),
        },
    };
    let Some(guard) = guard else {
        return Ok(busy(client, request.name).await);
    };
    if lock.is_fair() && guard.extend(ttl).await? != Ownership::Owned {
        // A hand-off sets the waiter lease as the TTL, and the guard's
        // background extension would end with the guard: set the TTL now.
        return Err(VerbError::new(
            NOT_HELD,
            format!(
                "lock {:?} was lost as soon as it was handed over",
                request.name
            ),
        ));
    }
    // Failing here drops the guard, which releases the lock: nothing is
    // left held that the caller has no token for.
    let fencing_token = guard.fencing_token().await?;
    let deadline_unix_ms = unix_ms(guard.deadline());
    let token = guard.forget();
    Ok(AcquireReply {
        name: request.name,
        acquired: true,
        token: Some(token),
        fencing_token: Some(fencing_token),
        ttl_ms: Some(ttl.as_millis() as u64),
        deadline_unix_ms: Some(deadline_unix_ms),
        holder: None,
    })
}

/// The reply for a lock that stayed busy, naming its holder when it can be
/// read (a courtesy: a failure to read it leaves `holder` empty).
async fn busy(client: &Client, name: String) -> AcquireReply {
    let holder = match client.inspect(&name).await {
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
    };
    AcquireReply {
        name,
        acquired: false,
        token: None,
        fencing_token: None,
        ttl_ms: None,
        deadline_unix_ms: None,
        holder,
    }
}

/// Resets the TTL if `token` still owns the lock: the caller's heartbeat.
///
/// # Cancel safety
///
/// Dropped after the request was sent, the TTL may or may not have been
/// reset; calling it again is harmless.
pub async fn extend(client: &Client, request: ExtendRequest) -> Result<ExtendReply, VerbError> {
    let ttl = super::ttl(&request.ttl)?;
    let lock = client.lock(&request.name, ttl)?;
    let sent = std::time::Instant::now();
    owned(&request.name, lock.extend_token(&request.token, ttl).await?)?;
    Ok(ExtendReply {
        name: request.name,
        ttl_ms: ttl.as_millis() as u64,
        // As the library's guards count theirs (and `acquire`'s): from when
        // the request was sent, less the clock-drift allowance.
        deadline_unix_ms: unix_ms(sent + ttl - latchkey::protocol::drift(ttl)),
    })
}

/// Releases the lock if `token` still owns it, and wakes its waiters.
///
/// # Cancel safety
///
/// Dropped after the request was sent, the lock may or may not be
/// released; calling it again is harmless (NOT_HELD the second time).
pub async fn release(client: &Client, request: ReleaseRequest) -> Result<ReleaseReply, VerbError> {
    // The TTL of this handle is never used: release takes none.
    let mut lock = client.lock(&request.name, std::time::Duration::from_secs(1))?;
    if request.fair {
        lock = lock.fair()?;
    }
    owned(&request.name, lock.release_token(&request.token).await?)?;
    Ok(ReleaseReply {
        name: request.name,
        released: true,
    })
}

/// NOT_HELD unless `outcome` says the token owned the lock.
fn owned(name: &str, outcome: Ownership) -> Result<(), VerbError> {
    let why = match outcome {
        Ownership::Owned => return Ok(()),
        Ownership::Expired => "it is not held (it expired?)",
        Ownership::HeldByOther => "someone else holds it",
    };
    Err(VerbError::new(
        NOT_HELD,
        format!("lock {name:?}: this token does not own it; {why}"),
    ))
}
