//! latchkey's errors as Python exceptions: one class per kind of the Rust
//! `latchkey::Error`, defined in Python (python/latchkey/_errors.py, where
//! they can also derive from the built-in ones: `WaitTimedOut` is a
//! `TimeoutError`, `InvalidInput` a `ValueError`), with the same one-line
//! messages.

use latchkey::Error;
use pyo3::prelude::*;

/// The Python class of each kind of `latchkey::Error` (a name in
/// `latchkey._errors`), and the list of them all, from one table.
macro_rules! error_classes {
    ($($kind:pat => $class:literal,)*) => {
        pub(crate) fn class_name(e: &Error) -> &'static str {
            match e {
                $($kind => $class,)*
                // A kind added to the Rust library later: the base class.
                _ => "LatchkeyError",
            }
        }

        /// Every class `class_name` can name, for the test that each exists.
        pub(crate) const CLASS_NAMES: &[&str] = &[$($class,)* "LatchkeyError", "LockLost"];
    };
}

error_classes! {
    Error::InvalidName { .. } => "InvalidName",
    Error::InvalidTtl { .. } => "InvalidTtl",
    Error::InvalidInput(_) => "InvalidInput",
    Error::InvalidCount { .. } => "InvalidCount",
    Error::Unsupported(_) => "Unsupported",
    Error::Unreachable(_) => "Unreachable",
    Error::Timeout { .. } => "Timeout",
    Error::Unavailable(_) => "Unavailable",
    Error::NoQuorum { .. } => "NoQuorum",
    Error::OutOfMemory(_) => "OutOfMemory",
    Error::ReadOnlyReplica(_) => "ReadOnlyReplica",
    Error::TooFewReplicas { .. } => "TooFewReplicas",
    Error::Tls { .. } => "Tls",
    Error::Auth(_) => "Auth",
    Error::NoPermission(_) => "NoPermission",
    Error::WrongType { .. } => "WrongType",
    Error::BadFencingCounter { .. } => "BadFencingCounter",
    Error::NotACluster { .. } => "NotACluster",
    Error::WaitTimedOut { .. } => "WaitTimedOut",
    Error::NotHeld { .. } => "NotHeld",
    Error::MaxHoldReached { .. } => "MaxHoldReached",
    Error::ForeignValue { .. } => "ForeignValue",
    Error::LatchOpen { .. } => "LatchOpen",
    Error::CountedBelowZero { .. } => "CountedBelowZero",
    Error::NotFound { .. } => "NotFound",
    Error::PartiesMismatch { .. } => "PartiesMismatch",
    Error::Redis(_) => "RedisError",
    Error::Protocol(_) => "ProtocolError",
    Error::Random(_) => "RandomError",
    Error::Internal(_) => "InternalError",
}

/// `e` as an instance of its Python class, with the Rust message.
pub(crate) fn to_py(py: Python<'_>, e: Error) -> PyErr {
    raise(py, class_name(&e), scrub(&e.to_string()))
}

/// The names redis-rs appends to its messages (` - InvalidClientConfig`):
/// a Python user reads what went wrong, not the Redis client's types.
const REDIS_KINDS: &[&str] = &[
    "Parse",
    "AuthenticationFailed",
    "UnexpectedReturnType",
    "InvalidClientConfig",
    "Io",
    "Client",
    "Extension",
    "MasterNameNotFoundBySentinel",
    "NoValidReplicasFoundBySentinel",
    "EmptySentinelList",
    "ClusterConnectionNotFound",
    "Serialize",
    "RESP3NotSupported",
];

/// `message` without redis-rs's kind names, and a URL that did not parse
/// told what a URL looks like.
pub(crate) fn scrub(message: &str) -> String {
    let mut out = message.to_owned();
    for kind in REDIS_KINDS {
        let tag = format!(" - {kind}");
        while let Some(at) = out.find(&tag) {
            let end = at + tag.len();
            // The whole name: followed by the end, or its detail's ": ".
            if out[end..].is_empty() || out[end..].starts_with(':') {
                out.replace_range(at..end, "");
            } else {
                break;
            }
        }
    }
    out.replace(
        "Redis URL did not parse",
        "expected redis://[user[:password]@]host[:port][/db], rediss://… for TLS, or unix:///path/to/socket",
    )
}

/// An exception of the class called `class` in `latchkey._errors`.
pub(crate) fn raise(py: Python<'_>, class: &str, message: String) -> PyErr {
    let made = py
        .import("latchkey._errors")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.call1((message.clone(),)));
    match made {
        Ok(instance) => PyErr::from_value(instance),
        // The Python half is missing (the bare extension imported alone).
        Err(_) => pyo3::exceptions::PyRuntimeError::new_err(message),
    }
}

/// A bad argument from Python (a negative timeout, a name of the wrong type).
pub(crate) fn invalid(message: impl Into<String>) -> Error {
    Error::InvalidInput(message.into())
}

/// The runtime is gone or cannot start: `latchkey.InternalError`.
pub(crate) fn closed(message: &str) -> PyErr {
    Python::attach(|py| raise(py, "InternalError", format!("internal error: {message}")))
}

/// A `DeprecationWarning` pointing at the caller's line.
pub(crate) fn deprecated(py: Python<'_>, message: &str) -> PyResult<()> {
    let category = py.get_type::<pyo3::exceptions::PyDeprecationWarning>();
    PyErr::warn(
        py,
        &category,
        &std::ffi::CString::new(message).unwrap_or_default(),
        1,
    )
}
