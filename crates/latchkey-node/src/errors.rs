//! latchkey's errors as JavaScript errors: the native layer throws a plain
//! `Error` whose message starts with the stable code in brackets
//! (`[WAIT_TIMED_OUT] lock "x" still busy after …`); lib/errors.js turns it
//! into the class of that code (`WaitTimedOut`, a `LatchkeyError`).

use latchkey::Error;

/// The stable code of each kind (lib/errors.js has a class per code).
pub(crate) fn code(e: &Error) -> &'static str {
    match e {
        Error::InvalidName { .. }
        | Error::InvalidTtl { .. }
        | Error::InvalidInput(_)
        | Error::InvalidCount { .. } => "INVALID_ARGUMENT",
        Error::Unsupported(said) if *said == CLOSED => "CLIENT_CLOSED",
        Error::Unsupported(_) => "UNSUPPORTED",
        Error::Unreachable(_) => "UNREACHABLE",
        Error::Timeout { .. } => "TIMEOUT",
        Error::Unavailable(_) => "UNAVAILABLE",
        Error::NoQuorum { .. } => "NO_QUORUM",
        Error::OutOfMemory(_) => "OUT_OF_MEMORY",
        Error::ReadOnlyReplica(_) => "READ_ONLY_REPLICA",
        Error::TooFewReplicas { .. } => "TOO_FEW_REPLICAS",
        Error::Tls { .. } => "TLS",
        Error::Auth(_) => "AUTH",
        Error::NoPermission(_) => "NO_PERMISSION",
        Error::WrongType { .. } => "WRONG_TYPE",
        Error::BadFencingCounter { .. } => "BAD_FENCING_COUNTER",
        Error::NotACluster { .. } => "NOT_A_CLUSTER",
        Error::WaitTimedOut { .. } => "WAIT_TIMED_OUT",
        Error::NotHeld { .. } => "NOT_HELD",
        Error::MaxHoldReached { .. } => "MAX_HOLD_REACHED",
        Error::ForeignValue { .. } => "FOREIGN_VALUE",
        Error::LatchOpen { .. } => "LATCH_OPEN",
        Error::CountedBelowZero { .. } => "COUNTED_BELOW_ZERO",
        Error::NotFound { .. } => "NOT_FOUND",
        Error::PartiesMismatch { .. } => "PARTIES_MISMATCH",
        Error::Redis(_) => "REDIS_ERROR",
        Error::Protocol(_) => "PROTOCOL_ERROR",
        Error::Random(_) | Error::Internal(_) => "INTERNAL",
        // A kind added to the Rust library later: the base class.
        _ => "LATCHKEY_ERROR",
    }
}

/// The names redis-rs appends to its messages (` - InvalidClientConfig`):
/// a Node user reads what went wrong, not the Redis client's types.
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

fn scrub(message: &str) -> String {
    let mut out = message.to_owned();
    for kind in REDIS_KINDS {
        let tag = format!(" - {kind}");
        while let Some(at) = out.find(&tag) {
            let end = at + tag.len();
            if out[end..].is_empty() || out[end..].starts_with(':') {
                out.replace_range(at..end, "");
            } else {
                break;
            }
        }
    }
    out
}

/// The library's TLS hints name its builder's methods and the CLI's flags;
/// a Node user is told the package's options instead.
const TLS_HINTS: &[(&str, &str)] = &[
    ("(tls_ca_file, --tls-ca)", "(the tlsCa option)"),
    (
        "(tls_server_name, --tls-server-name)",
        "(the tlsServerName option)",
    ),
    (
        "(tls_client_cert, --tls-cert and --tls-key)",
        "(the tlsCert and tlsKey options)",
    ),
];

/// `e` as the error the facade maps to its class.
pub(crate) fn to_js(e: Error) -> napi::Error {
    let mut message = e.to_string();
    if matches!(e, Error::Tls { .. }) {
        for (said, ours) in TLS_HINTS {
            message = message.replace(said, ours);
        }
    }
    coded(code(&e), &message)
}

/// An error of `code` with `message`.
pub(crate) fn coded(code: &str, message: &str) -> napi::Error {
    napi::Error::from_reason(format!("[{code}] {}", scrub(message)))
}

/// A bad argument from JavaScript (the facade checks first; this is the
/// native layer's own guard).
pub(crate) fn invalid(message: impl Into<String>) -> Error {
    Error::InvalidInput(message.into())
}

/// A wait given up because its AbortSignal fired: the facade rejects with
/// the signal's reason instead.
pub(crate) fn aborted() -> napi::Error {
    coded("ABORTED", "the wait was aborted")
}

/// A call on a client after `close()`.
pub(crate) fn closed() -> Error {
    Error::Unsupported(CLOSED)
}

/// What `closed()` says (and how `code` tells it from other refusals).
const CLOSED: &str = "the client is closed";
