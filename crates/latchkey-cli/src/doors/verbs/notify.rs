//! `signal`, `wait`, `request_release` and `revoke`: telling the others,
//! as `latchkey signal`, `wait`, `request-release` and `revoke` do.

use std::time::Duration;

use latchkey::Client;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::VerbError;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignalRequest {
    /// The signal's name.
    pub name: String,
    /// What to send (text; empty when absent).
    #[serde(default)]
    pub payload: Option<String>,
    /// Deliver to exactly one waiter, picked at random, instead of all.
    #[serde(default)]
    pub one: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SignalReply {
    /// How many received it: 0 means nobody waited and the signal is gone
    /// (nothing keeps it).
    pub receivers: u64,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitRequest {
    /// The signal name(s) to wait on; the first signal on any of them ends
    /// the wait. Only signals sent after the wait began are seen.
    pub names: Vec<String>,
    /// How long to wait at most, with a unit ("30s", "5m"). Required: a
    /// wait always ends.
    pub timeout: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct WaitReply {
    /// True when a signal came; false when the timeout passed first.
    pub signalled: bool,
    /// The name it came on.
    pub name: Option<String>,
    /// What it carried (text; bytes that are not UTF-8 are replaced).
    pub payload: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NameRequest {
    /// The name: of a lock, fair lock, semaphore, read-write lock or election.
    pub name: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RequestReleaseReply {
    /// How many connections heard the request (holders that listen, and
    /// waiters); 0 when nobody holds the name or no holder listens.
    pub heard: u64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Revoked {
    /// The kind revoked: lock, fair_lock, semaphore, rwlock, election.
    pub kind: String,
    /// How many holds ended.
    pub ended: u64,
    /// A fencing token above every revoked holder's: raise your stores to it.
    pub fencing_token: Option<u64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RevokeReply {
    /// What was revoked; empty when nothing held the name.
    pub revoked: Vec<Revoked>,
}

/// Wakes the waiters on `name` (all, or one).
///
/// # Cancel safety
///
/// Dropped after the request was written, the waiters may or may not have
/// got the signal.
pub async fn signal(client: &Client, request: SignalRequest) -> Result<SignalReply, VerbError> {
    let payload = request.payload.unwrap_or_default();
    let receivers = if request.one {
        u64::from(client.signal_one(&request.name, &payload).await?)
    } else {
        client.signal(&request.name, &payload).await? as u64
    };
    Ok(SignalReply { receivers })
}

/// Waits for the first signal on any of the names, at most `timeout`
/// (subscribing included), through the client's shared subscriber.
///
/// # Cancel safety
///
/// Cancel-safe: dropped, the subscriptions are given up.
pub async fn wait(client: &Client, request: WaitRequest) -> Result<WaitReply, VerbError> {
    let timeout: Duration = super::wait(&request.timeout)?;
    let deadline = tokio::time::Instant::now() + timeout;
    let subscribed = tokio::time::timeout_at(deadline, client.listen(&request.names)).await;
    let mut listener = match subscribed {
        Ok(listener) => listener?,
        // Never subscribed: nothing could have been heard, so this is Redis
        // not answering, not "nobody signalled" (as `latchkey wait` says).
        Err(_) => {
            return Err(VerbError::new(
                "TIMEOUT",
                "could not subscribe before the timeout: Redis did not answer",
            ))
        }
    };
    let received = tokio::time::timeout_at(deadline, listener.recv()).await;
    let still_subscribed = listener.is_subscribed();
    listener.close().await;
    match received {
        Ok(signal) => Ok(WaitReply {
            signalled: true,
            name: Some(String::from_utf8_lossy(&signal.name).into_owned()),
            payload: Some(String::from_utf8_lossy(&signal.payload).into_owned()),
        }),
        Err(_) if !still_subscribed => Err(VerbError::new(
            "UNAVAILABLE",
            "lost the connection to Redis: not subscribed when the timeout passed \
             (signals sent meanwhile were lost)",
        )),
        Err(_) => Ok(WaitReply {
            signalled: false,
            name: None,
            payload: None,
        }),
    }
}

/// Asks the holders of `name` to let go; nothing is taken away.
///
/// # Cancel safety
///
/// Dropped after the request was written, it may or may not have been heard.
pub async fn request_release(
    client: &Client,
    request: NameRequest,
) -> Result<RequestReleaseReply, VerbError> {
    let heard = client.request_release(&request.name).await?;
    Ok(RequestReleaseReply { heard })
}

/// Ends every hold of `name`, whoever holds it, and raises its fencing
/// counter past the revoked holders' tokens (an operator's action).
///
/// # Cancel safety
///
/// Dropped after the request was written, the holds may or may not have
/// been ended; calling it again is harmless.
pub async fn revoke(client: &Client, request: NameRequest) -> Result<RevokeReply, VerbError> {
    let revoked = client.revoke(&request.name).await?;
    Ok(RevokeReply {
        revoked: revoked
            .into_iter()
            .map(|r| Revoked {
                kind: r.kind.as_str().to_owned(),
                ended: r.ended,
                fencing_token: r.fencing_token,
            })
            .collect(),
    })
}
