//! What the primitives share besides the wait core (layer 4): their keys,
//! the publish command their scripts are given, script replies, and work
//! left to the background when a call is cancelled (the wait core,
//! `wait/`, is how they wait).

use std::future::Future;

use crate::transport::session::Session;

/// The command a script publishes wake-ups with, given to it as an ARGV:
/// `SPUBLISH` on a cluster (sharded pub/sub, where waiters `SSUBSCRIBE`),
/// `PUBLISH` elsewhere.
pub(crate) fn publish_command(session: &Session) -> &'static [u8] {
    session.publish_command()
}

/// Publishes [`RELEASE_REQUESTED`](crate::vocab::protocol::RELEASE_REQUESTED)
/// on `channel`: the holders listening there are asked to let go
/// ([`Client::request_release`](crate::Client::request_release), and an
/// asking waiter). The connections that received it.
pub(crate) async fn publish_request(session: &Session, channel: &[u8]) -> crate::Result<u64> {
    session
        .publish(channel, crate::vocab::protocol::RELEASE_REQUESTED)
        .await
}

/// A primitive's key or channel: see [`crate::vocab::protocol::primitive_key`].
pub(crate) fn key(session: &Session, name: &[u8], suffix: &[u8]) -> Vec<u8> {
    crate::vocab::protocol::primitive_key(session.prefix(), name, suffix)
}

/// Runs `work` in the background, tracked by the session so that
/// [`Client::flush`](crate::Client::flush) waits for it; without a tokio
/// runtime it is dropped (what it would undo then ends at its TTL).
pub(crate) fn in_background(
    session: &Session,
    why: &'static str,
    work: impl Future<Output = crate::Result<()>> + Send + 'static,
) {
    if tokio::runtime::Handle::try_current().is_err() {
        tracing::warn!(
            why,
            "no tokio runtime to clean up on; it ends by itself at its TTL"
        );
        return;
    }
    session.inner.background.spawn(async move {
        match work.await {
            Ok(()) => tracing::debug!(why, "background clean-up done"),
            Err(e) => {
                tracing::warn!(why, error = %e, "background clean-up failed; it ends at its TTL")
            }
        }
    });
}

/// A count from a script reply, or a protocol error naming the script.
pub(crate) fn reply_int<T: TryFrom<i64>>(script: &str, value: i64) -> crate::Result<T> {
    T::try_from(value)
        .map_err(|_| crate::Error::Protocol(format!("{script} script returned {value}")))
}

/// A fencing script's reply (`{issued, fence}`): the token when `issued`
/// is 1, otherwise `found` (what the script found in place of our hold).
pub(crate) fn fence_reply(
    script: &str,
    (issued, fence): (i64, i64),
    found: crate::vocab::outcome::Ownership,
) -> crate::vocab::outcome::Issued {
    match issued {
        1 => Ok(Ok(reply_int(script, fence)?)),
        _ => Ok(Err(found)),
    }
}
