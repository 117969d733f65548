//! Release requests: another process asks the holders of a name to let go
//! (cooperative revocation). See
//! [`Client::request_release`](crate::Client::request_release).
//!
//! The request is a message, [`RELEASE_REQUESTED`], on the channel the
//! primitive already has: a lock's (or fair lock's) release channel, a
//! semaphore's or read-write lock's released channel, an election's changes
//! channel. Holders listen only while someone awaits their guard's
//! `release_requested()`, so a hold nobody asks about costs nothing. A
//! waiter made `with_asking` sends the same message itself
//! (`primitives/wait/ask.rs`).

use crate::primitives::inspect::PrimitiveInfo;
use crate::transport::session::Session;
use crate::vocab::error::Result;
use crate::vocab::names::LockKeys;
#[cfg(doc)]
use crate::vocab::protocol::RELEASE_REQUESTED;
use crate::vocab::protocol::{
    primitive_key, ELECTION_CHANGES_SUFFIX, PERMITS_RELEASED_SUFFIX, RWLOCK_SUFFIXES,
};

/// See [`Client::request_release`](crate::Client::request_release): the
/// connections that received the request, over every held kind's channel.
pub(crate) async fn request_release(session: &Session, name: &[u8]) -> Result<u64> {
    let found = crate::primitives::inspect::Inspector(session)
        .describe(name)
        .await?;
    let mut heard = 0;
    for info in found.iter().filter(|i| i.holders() > 0) {
        let at = |suffix: &[u8]| primitive_key(session.prefix(), name, suffix);
        let channel = match info {
            PrimitiveInfo::Lock(_) | PrimitiveInfo::FairLock(_) => {
                LockKeys::new(session.prefix(), name).channel
            }
            PrimitiveInfo::Semaphore(_) => at(PERMITS_RELEASED_SUFFIX),
            PrimitiveInfo::RwLock(_) => at(RWLOCK_SUFFIXES[6]),
            PrimitiveInfo::Election(_) => at(ELECTION_CHANGES_SUFFIX),
            _ => continue,
        };
        heard += crate::primitives::shared::publish_request(session, &channel).await?;
    }
    tracing::info!(name = %String::from_utf8_lossy(name), heard, "release requested");
    Ok(heard)
}
