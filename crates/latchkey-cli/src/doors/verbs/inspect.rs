//! `status` and `list`: every kind of primitive under a name, read as
//! `latchkey status` and `latchkey list --json` read them, each primitive
//! the object `list --json` prints (`support/kind_view.rs`; never an owner
//! token).

use latchkey::Client;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::VerbError;
use crate::support::kind_view;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusRequest {
    /// The name: of a lock, semaphore, read-write lock, latch, barrier or election.
    pub name: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct StatusReply {
    /// The name asked about.
    pub name: String,
    /// True when anything holds it (the lock, a permit, a reader or
    /// writer, a leader).
    pub held: bool,
    /// Each primitive found under the name: `name`, `kind`, `held` and the
    /// kind's fields (a lock's: `ttl_ms`, `holder` {host, pid,
    /// acquired_at_ms}, `age_ms`, `fencing_token`). Empty: never acquired.
    pub primitives: Vec<Value>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListRequest {
    /// A glob over names (Redis MATCH syntax: * ? [abc] \x); "*" when absent.
    #[serde(default)]
    pub pattern: Option<String>,
    /// At most this many primitives in the reply (default 100).
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ListReply {
    /// The primitives whose names match, sorted by name then kind, each as
    /// in `status`.
    pub primitives: Vec<Value>,
    /// True when more matched than `limit`: narrow the pattern.
    pub truncated: bool,
}

/// How many primitives `list` returns unless asked: a reply an agent reads
/// whole, not a dump of the deployment.
const DEFAULT_LIST_LIMIT: usize = 100;

/// What holds `name`, every kind.
///
/// # Cancel safety
///
/// Cancel-safe: it only reads.
pub async fn status(client: &Client, request: StatusRequest) -> Result<StatusReply, VerbError> {
    let found = client.describe(&request.name).await?;
    Ok(StatusReply {
        held: found.iter().any(kind_view::is_held),
        primitives: found.iter().map(kind_view::to_json).collect(),
        name: request.name,
    })
}

/// The primitives whose names match the pattern (SCAN, never KEYS).
///
/// # Cancel safety
///
/// Cancel-safe: it only reads.
pub async fn list(client: &Client, request: ListRequest) -> Result<ListReply, VerbError> {
    let pattern = request.pattern.as_deref().unwrap_or("*");
    let limit = request.limit.unwrap_or(DEFAULT_LIST_LIMIT);
    let found = client.list_all(pattern).await?;
    Ok(ListReply {
        truncated: found.len() > limit,
        primitives: found.iter().take(limit).map(kind_view::to_json).collect(),
    })
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaderRequest {
    /// The election's name (as `latchkey elect NAME` campaigns in).
    pub name: String,
}

/// Who leads an election: the fields of `latchkey leader --json`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct LeaderReply {
    /// The election's name.
    pub name: String,
    /// True when someone leads it now.
    pub leader: bool,
    /// What the leader announced (its campaign value), as text.
    pub value: Option<String>,
    /// The leader's term: greater than every earlier leader's (a fencing
    /// token for what the leader writes).
    pub term: Option<u64>,
    /// When it was elected, Unix epoch milliseconds (the server's clock).
    pub since_ms: Option<u64>,
}

/// Who leads `name`, read once (`latchkey leader NAME`).
///
/// # Cancel safety
///
/// Cancel-safe: it only reads.
pub async fn leader(client: &Client, request: LeaderRequest) -> Result<LeaderReply, VerbError> {
    // The TTL only matters to candidates; a reader passes any valid one.
    let election = client.election(&request.name, std::time::Duration::from_secs(10))?;
    let found = election.leader().await?;
    Ok(LeaderReply {
        name: request.name,
        leader: found.is_some(),
        value: found.as_ref().map(|l| l.value_lossy().into_owned()),
        term: found.as_ref().map(|l| l.term),
        since_ms: found.as_ref().map(|l| {
            l.since
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64)
        }),
    })
}
