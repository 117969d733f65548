//! [`WeakClient`]: a handle to a client that does not keep it alive.

use std::sync::{Arc, Weak};

use crate::backend::redlock::WeakGroup;
use crate::backend::Backend;
use crate::client::Client;
use crate::transport::session::{Session, SessionInner};

/// A handle to a [`Client`] that does not keep it alive
/// ([`Client::downgrade`]): [`upgrade`](WeakClient::upgrade) gives the
/// client back while anything else keeps it — a clone, a guard, a lock,
/// and a hold it [keeps](Client::keep) (kept holds keep their client alive
/// until they end). What a binding keeps of each client its host made, so
/// that the host's end can [close](Client::close) those whose handles the
/// program dropped while their kept holds live on, without keeping alive
/// the ones nothing uses any more.
#[derive(Clone)]
pub struct WeakClient {
    backend: WeakBackend,
}

#[derive(Clone)]
enum WeakBackend {
    Single(Weak<SessionInner>),
    Redlock(WeakGroup),
}

impl Client {
    /// A handle that does not keep this client alive; see [`WeakClient`].
    pub fn downgrade(&self) -> WeakClient {
        let backend = match &self.backend {
            Backend::Single(session) => WeakBackend::Single(Arc::downgrade(&session.inner)),
            Backend::Redlock(group) => WeakBackend::Redlock(group.downgrade()),
        };
        WeakClient { backend }
    }
}

impl WeakClient {
    /// The client, while anything else keeps it alive; `None` once it was
    /// dropped.
    pub fn upgrade(&self) -> Option<Client> {
        let backend = match &self.backend {
            WeakBackend::Single(inner) => Backend::Single(Session {
                inner: inner.upgrade()?,
            }),
            WeakBackend::Redlock(group) => Backend::Redlock(group.upgrade()?),
        };
        Some(Client { backend })
    }
}

impl std::fmt::Debug for WeakClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeakClient").finish_non_exhaustive()
    }
}
