//! Layer 2, transport: one server's connections (standalone, cluster,
//! Sentinel, TLS), the session every primitive sends through, the shared
//! pub/sub subscriber and this process's waiter queues. See `ARCHITECTURE.md`.

pub(crate) mod batch;
pub(crate) mod builder;
pub(crate) mod connection;
pub(crate) mod current;
pub(crate) mod deferred;
pub(crate) mod kept;
pub(crate) mod live;
pub(crate) mod local_queues;
pub(crate) mod pinned;
pub(crate) mod sentinel;
pub(crate) mod server_version;
pub(crate) mod session;
pub(crate) mod subscriber;
pub(crate) mod tls;
pub(crate) mod waiter_groups;
