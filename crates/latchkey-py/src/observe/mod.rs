//! What the library tells about itself, where Python looks for it: its
//! tracing events as records of the standard `logging` module (log.rs)
//! and its metrics as a snapshot Python reads (metrics.rs). Both are
//! installed once, when the extension module is imported.
//!
//! Both take a lock of their own from the runtime's threads (an event
//! queued, a counter looked up). A fork while one of those threads held
//! it would leave the lock taken for good in the child, whose first event
//! or counter would then hang: the forking thread takes both locks just
//! before the fork (`pthread_atfork`) and gives them back on both sides.

pub(crate) mod log;
pub(crate) mod metrics;

use std::sync::Once;

/// Installs the forwarding of events and the recorder of metrics, and the
/// fork handlers that keep their locks usable in a child.
pub(crate) fn install() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        log::install();
        metrics::install();
        // SAFETY: the handlers are functions without arguments that take
        // and drop two of this module's locks and never unwind.
        unsafe {
            libc::pthread_atfork(Some(before_fork), Some(after_fork), Some(after_fork));
        }
    });
}

extern "C" fn before_fork() {
    metrics::hold_for_fork();
    log::hold_for_fork();
}

extern "C" fn after_fork() {
    log::release_after_fork();
    metrics::release_after_fork();
}
