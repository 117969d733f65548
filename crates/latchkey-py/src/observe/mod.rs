//! What the library tells about itself, where Python looks for it: its
//! tracing events as records of the standard `logging` module (log.rs)
//! and its metrics as a snapshot Python reads (metrics.rs). Both are
//! installed once, when the extension module is imported.

pub(crate) mod log;
pub(crate) mod metrics;
