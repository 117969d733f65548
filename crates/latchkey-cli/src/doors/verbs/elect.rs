//! `elect`: campaign once in an election, as `latchkey elect` does, and
//! leave the leadership to the caller by its owner token: the caller is
//! the leader, `extend` (kind `leader`) is its heartbeat and `release` its
//! resignation. Nothing renews it here: a leader that stops calling loses
//! the leadership at the TTL, and the next candidate is elected.

use latchkey::Client;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::inspect::{leader, LeaderReply, LeaderRequest};
use super::lease::{hand_back, take, HoldKind};
use super::VerbError;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ElectRequest {
    /// The election's name (the one `latchkey elect NAME` campaigns in).
    pub name: String,
    /// What the others see while you lead (`leader` shows it): an address,
    /// a host, an agent's name. Empty when absent.
    #[serde(default)]
    pub value: Option<String>,
    /// How long the leadership lasts unless extended, with a unit ("2m").
    /// Nothing renews it: `extend` it (kind "leader") before it runs out.
    pub ttl: String,
    /// How long to wait to be elected ("30s"); the leader's resignation or
    /// expiry wakes the wait at once. Absent or "0s": do not wait.
    #[serde(default)]
    pub wait: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ElectReply {
    /// The election's name.
    pub name: String,
    /// Always "leader": pass it to `extend` and `release` with the token.
    pub kind: HoldKind,
    /// True when this call made you the leader; false when someone else
    /// leads (see `leader`).
    pub elected: bool,
    /// The owner token: pass it to `extend` and `release` (which resigns).
    pub token: Option<String>,
    /// Your term: greater than every earlier leader's. It is a fencing
    /// token: pass it to whatever you write as the leader.
    pub term: Option<u64>,
    /// The TTL it was taken with, in milliseconds.
    pub ttl_ms: Option<u64>,
    /// Until when (Unix epoch milliseconds) you certainly lead; `extend`
    /// before then.
    pub deadline_unix_ms: Option<u64>,
    /// Who leads when you were not elected (absent when it cannot be told).
    pub leader: Option<LeaderReply>,
}

/// Campaigns in `name` (waiting up to `wait`) and leaves the leadership to
/// its TTL: the owner token is the handle, nothing renews it.
///
/// # Cancel safety
///
/// Cancel-safe: dropped while campaigning or before the token is handed
/// back, nobody is left leading (the leadership resigns in the background).
pub async fn elect(client: &Client, request: ElectRequest) -> Result<ElectReply, VerbError> {
    let ttl = super::ttl(&request.ttl)?;
    let wait = request.wait.as_deref().map(super::wait).transpose()?;
    let election = client.election(&request.name, ttl)?;
    let candidacy = election.candidacy(request.value.as_deref().unwrap_or_default());
    let Some(guard) = take(&candidacy, wait).await? else {
        // A courtesy: a failure to read the leader leaves it out.
        let now = leader(
            client,
            LeaderRequest {
                name: request.name.clone(),
            },
        )
        .await
        .ok();
        return Ok(ElectReply {
            name: request.name,
            kind: HoldKind::Leader,
            elected: false,
            token: None,
            term: None,
            ttl_ms: None,
            deadline_unix_ms: None,
            leader: now,
        });
    };
    let handed = hand_back(guard, &request.name, ttl, HoldKind::Leader).await?;
    Ok(ElectReply {
        name: request.name,
        kind: HoldKind::Leader,
        elected: true,
        token: Some(handed.token),
        term: handed.fencing_token,
        ttl_ms: Some(ttl.as_millis() as u64),
        deadline_unix_ms: Some(handed.deadline_unix_ms),
        leader: None,
    })
}
