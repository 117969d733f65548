//! Fenced writes: a resource in Redis that rejects writes from stale holders.
//!
//! User docs (why, example) are on [`FencedResource`].

use crate::transport::session::Session;
use crate::vocab::error::{Error, Result};
use crate::vocab::names::check_name;
use crate::vocab::protocol::scripts;

/// The outcome of a [`FencedResource::write`].
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FencedWrite {
    /// The write was stored.
    Accepted,
    /// The write was refused: a write with the higher token `seen` was
    /// accepted before. The writer no longer holds the lock it thinks it holds.
    Rejected {
        /// The highest token the resource has seen.
        seen: u64,
    },
}

/// A value in Redis guarded by fencing tokens (a hash at `prefix + name`
/// with fields `value` and `fence`). Made by [`Client::fenced`](crate::Client::fenced).
///
/// A lock with a TTL cannot by itself stop a holder that was paused (GC,
/// swap, `SIGSTOP`) or cut off past its TTL from writing after someone else
/// took over. The resource can: every write carries the writer's
/// [fencing token](crate::LockGuard::fencing_token), and the resource refuses
/// a token lower than the highest it has seen.
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// use latchkey::FencedWrite;
///
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// let lock = client.lock("report", Duration::from_secs(10))?;
/// let report = client.fenced("report-output")?;
///
/// let guard = lock.acquire().await?;
/// match report.write(guard.fencing_token().await?, b"rows: 42").await? {
///     FencedWrite::Accepted => {}
///     FencedWrite::Rejected { seen } => eprintln!("a newer holder ({seen}) wrote first; we are stale"),
/// }
/// guard.release().await?;
/// # Ok(()) }
/// ```
///
/// For a resource outside Redis, do the same check where the data lives; for
/// SQL see `docs/fencing.md`.
#[derive(Clone, Debug)]
pub struct FencedResource {
    client: Session,
    key: Vec<u8>,
}

impl FencedResource {
    /// See [`Client::fenced`](crate::Client::fenced).
    pub(crate) fn on_session(session: &Session, name: &[u8]) -> Result<FencedResource> {
        check_name(name)?;
        Ok(FencedResource {
            client: session.clone(),
            key: [session.prefix(), name].concat(),
        })
    }

    /// The Redis key of the resource.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// Stores `value` if `token` is at least the highest token seen so far
    /// (equal tokens are accepted: one holder may write several times).
    /// Atomic, one round trip.
    ///
    /// # Cancel safety
    /// Dropped after the request was sent, the write may or may not have
    /// been stored (atomically: all or nothing). Writing the same value with
    /// the same token again is harmless.
    pub async fn write(&self, token: u64, value: impl AsRef<[u8]>) -> Result<FencedWrite> {
        let token_arg = token.to_string();
        let (accepted, seen): (i64, String) = self
            .client
            .eval(
                "fenced write",
                &scripts::FENCED_WRITE,
                &[&self.key],
                &[token_arg.as_bytes(), value.as_ref()],
            )
            .await?;
        if accepted == 1 {
            return Ok(FencedWrite::Accepted);
        }
        let seen = seen
            .parse()
            .map_err(|_| Error::Protocol(format!("fenced resource holds a bad token {seen:?}")))?;
        Ok(FencedWrite::Rejected { seen })
    }

    /// Raises the fence to `token` without writing a value, so that every
    /// later write with a lower token is refused; returns the fence after
    /// the call (it never goes down). Use it after
    /// [`Client::revoke`](crate::Client::revoke), with the fencing token the
    /// revocation returned: the revoked holder's next write is refused at
    /// once, before the next holder wrote anything. One round trip.
    ///
    /// # Cancel safety
    /// Dropped after the request was sent, the fence may or may not have
    /// been raised; raising it again is harmless.
    pub async fn raise(&self, token: u64) -> Result<u64> {
        let token_arg = token.to_string();
        let fence: String = self
            .client
            .eval(
                "fenced raise",
                &scripts::FENCED_RAISE,
                &[&self.key],
                &[token_arg.as_bytes()],
            )
            .await?;
        fence
            .parse()
            .map_err(|_| Error::Protocol(format!("fenced resource holds a bad token {fence:?}")))
    }

    /// The current value and the token of the write that stored it.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn read(&self) -> Result<Option<(Vec<u8>, u64)>> {
        let (value, fence): (Option<Vec<u8>>, Option<String>) = self
            .client
            .query(
                "fenced read",
                redis::cmd("HMGET")
                    .arg(&self.key)
                    .arg("value")
                    .arg("fence")
                    .clone(),
                &self.key,
            )
            .await?;
        match (value, fence) {
            (Some(value), Some(fence)) => {
                let fence = fence.parse().map_err(|_| {
                    Error::Protocol(format!("fenced resource holds a bad token {fence:?}"))
                })?;
                Ok(Some((value, fence)))
            }
            _ => Ok(None),
        }
    }
}
