//! A stable code per kind of [`Error`]: what the bindings name their error
//! classes after and what logs and dashboards can match on, unlike the
//! messages, which may be reworded.

use super::Error;

/// `Error::code` and `Error::CODES` from one table. The match has no
/// wildcard arm: a variant added without a code does not compile.
macro_rules! codes {
    ($($kind:pat => $code:literal,)*) => {
        impl Error {
            /// This error's kind as a stable `SCREAMING_SNAKE_CASE` code
            /// (`"WAIT_TIMED_OUT"`, `"NO_PERMISSION"`, …), one per variant.
            /// A code is never reused or renamed; a new kind gets a new one.
            /// The Python package's exception classes are named after it
            /// (`WAIT_TIMED_OUT` is `WaitTimedOut`), and the Node package's
            /// `.code` is it, but for the four invalid-input kinds, which
            /// Node reports as one `INVALID_ARGUMENT` (docs/node.md).
            ///
            /// ```
            /// let e = latchkey::Error::InvalidInput("no".into());
            /// assert_eq!(e.code(), "INVALID_INPUT");
            /// assert!(latchkey::Error::CODES.contains(&e.code()));
            /// ```
            pub fn code(&self) -> &'static str {
                match self {
                    $($kind => $code,)*
                }
            }

            /// Every code [`code`](Error::code) returns, in declaration
            /// order: for a binding's test that each has its class.
            pub const CODES: &'static [&'static str] = &[$($code,)*];
        }
    };
}

codes! {
    // Bad input: fix the call.
    Error::InvalidName { .. } => "INVALID_NAME",
    Error::InvalidTtl { .. } => "INVALID_TTL",
    Error::InvalidInput(_) => "INVALID_INPUT",
    Error::InvalidCount { .. } => "INVALID_COUNT",
    Error::Unsupported(_) => "UNSUPPORTED",
    // Redis cannot be reached or cannot serve now: transient.
    Error::Unreachable(_) => "UNREACHABLE",
    Error::Timeout { .. } => "TIMEOUT",
    Error::Unavailable(_) => "UNAVAILABLE",
    Error::NoQuorum { .. } => "NO_QUORUM",
    Error::OutOfMemory(_) => "OUT_OF_MEMORY",
    Error::ReadOnlyReplica(_) => "READ_ONLY_REPLICA",
    Error::TooFewReplicas { .. } => "TOO_FEW_REPLICAS",
    // The deployment: fix the server, the user or the key.
    Error::Tls { .. } => "TLS",
    Error::Auth(_) => "AUTH",
    Error::NoPermission(_) => "NO_PERMISSION",
    Error::UnsupportedServer { .. } => "UNSUPPORTED_SERVER",
    Error::WrongType { .. } => "WRONG_TYPE",
    Error::BadFencingCounter { .. } => "BAD_FENCING_COUNTER",
    Error::NotACluster { .. } => "NOT_A_CLUSTER",
    // A bounded wait ran out: the primitive is busy, not broken.
    Error::WaitTimedOut { .. } => "WAIT_TIMED_OUT",
    // The state says no: retrying will not change the answer.
    Error::ClientClosed => "CLIENT_CLOSED",
    Error::NotHeld { .. } => "NOT_HELD",
    Error::MaxHoldReached { .. } => "MAX_HOLD_REACHED",
    Error::ForeignValue { .. } => "FOREIGN_VALUE",
    Error::LatchOpen { .. } => "LATCH_OPEN",
    Error::CountedBelowZero { .. } => "COUNTED_BELOW_ZERO",
    Error::NotFound { .. } => "NOT_FOUND",
    Error::PartiesMismatch { .. } => "PARTIES_MISMATCH",
    // Anything else: report it.
    Error::Redis(_) => "REDIS_ERROR",
    Error::Protocol(_) => "PROTOCOL_ERROR",
    Error::Random(_) => "RANDOM_ERROR",
    Error::Internal(_) => "INTERNAL_ERROR",
}

#[cfg(test)]
mod tests {
    use super::Error;

    #[test]
    fn codes_are_distinct_and_screaming_snake_case() {
        let mut seen = std::collections::HashSet::new();
        for code in Error::CODES {
            assert!(seen.insert(code), "{code} twice");
            assert!(
                code.chars().all(|c| c.is_ascii_uppercase() || c == '_'),
                "{code}"
            );
            assert!(!code.starts_with('_') && !code.ends_with('_'), "{code}");
        }
    }

    #[test]
    fn each_kind_answers_its_own_code() {
        let cases = [
            (Error::InvalidInput("x".into()), "INVALID_INPUT"),
            (Error::Unsupported("x"), "UNSUPPORTED"),
            (
                Error::UnsupportedServer {
                    server: "Redis",
                    version: "6.2.5".into(),
                    address: "127.0.0.1:1".into(),
                },
                "UNSUPPORTED_SERVER",
            ),
            (Error::Protocol("x".into()), "PROTOCOL_ERROR"),
            (Error::Internal("x".into()), "INTERNAL_ERROR"),
        ];
        for (error, code) in cases {
            assert_eq!(error.code(), code, "{error}");
        }
    }
}
