//! Layer 1, vocabulary: what every layer speaks (errors, names, tokens,
//! the Redis layout and its scripts, metric labels). No I/O. See
//! `ARCHITECTURE.md`.

pub mod acl;
pub(crate) mod deadline;
pub(crate) mod error;
pub(crate) mod kind;
pub mod metrics;
pub(crate) mod names;
pub(crate) mod outcome;
pub mod protocol;
pub(crate) mod retry;
pub(crate) mod token;
pub(crate) mod url;
