//! latchkey's errors as JavaScript errors: the native layer throws a plain
//! `Error` whose message starts with the stable code in brackets
//! (`[WAIT_TIMED_OUT] lock "x" still busy after …`); lib/errors.js turns it
//! into the class of that code (`WaitTimedOut`, a `LatchkeyError`).

use std::time::Duration;

use latchkey::Error;

/// The package's code of `e`: the library's [`Error::code`], but one
/// `INVALID_ARGUMENT` for the four bad-input kinds (the facade's own checks
/// throw it too), and one `INTERNAL` for the two kinds that are bugs to
/// report.
pub(crate) fn code(e: &Error) -> &'static str {
    package_code(e.code())
}

/// The package's code for a library code.
fn package_code(code: &'static str) -> &'static str {
    match code {
        "INVALID_NAME" | "INVALID_TTL" | "INVALID_INPUT" | "INVALID_COUNT" => "INVALID_ARGUMENT",
        "RANDOM_ERROR" | "INTERNAL_ERROR" => "INTERNAL",
        code => code,
    }
}

/// Every code a native error can carry but `ABORTED` (which the facade
/// turns into the signal's reason): lib/errors.js has a class for each, as
/// the package's tests check.
#[napi_derive::napi]
pub fn error_codes() -> Vec<&'static str> {
    let mut codes: Vec<&'static str> = Error::CODES.iter().map(|c| package_code(c)).collect();
    codes.sort_unstable();
    codes.dedup();
    codes
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
    to_js_after(e, None)
}

/// `e` as the error the facade maps to its class, for a call that took
/// `took` (said where it differs from the limit a message names).
pub(crate) fn to_js_after(e: Error, took: Option<Duration>) -> napi::Error {
    let code = code(&e);
    let message = match &e {
        Error::Tls { .. } => {
            let mut message = e.to_string();
            for (said, ours) in TLS_HINTS {
                message = message.replace(said, ours);
            }
            message
        }
        // Durations as people write them ("101ms", not "101.046147ms").
        Error::WaitTimedOut { name, waited } => {
            format!("{name:?} still busy after waiting {}", duration(*waited))
        }
        Error::Timeout { op, after } => {
            let mut said = format!("Redis did not answer `{op}` within {}", duration(*after));
            // A wait retries through a stall: the limit was one command's.
            if let Some(took) = took.filter(|t| *t > *after + Duration::from_millis(100)) {
                said.push_str(&format!(" (gave up after {})", duration(took)));
            }
            said
        }
        _ => e.to_string(),
    };
    coded(code, &message)
}

/// `d` rounded as a person writes it: "101ms", "2.6s", "42s".
pub(crate) fn duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 1000.0 {
        format!("{}ms", ms.round() as u64)
    } else if ms < 10_000.0 {
        format!("{:.1}s", ms / 1000.0)
    } else {
        format!("{}s", (ms / 1000.0).round() as u64)
    }
}

/// An error of `code` with `message`.
pub(crate) fn coded(code: &str, message: &str) -> napi::Error {
    napi::Error::from_reason(format!("[{code}] {message}"))
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
    Error::ClientClosed
}
