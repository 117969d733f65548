//! Who may call `latchkey serve`: bearer tokens from a file or the
//! environment, or, with none, callers on this machine only (the listener
//! must be a loopback address; any other is refused at start).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::verbs::VerbError;
use crate::support::exit::Failure;

/// The code of a refused caller: latchkey's code for an authentication
/// refused (there by Redis, here by the door).
pub const AUTH: &str = "AUTH";

/// The environment variable of the tokens, comma-separated.
pub const TOKENS_ENV: &str = "LATCHKEY_SERVE_TOKENS";

/// The bearer tokens a caller must present one of; empty: none needed
/// (loopback only).
#[derive(Clone, Default)]
pub struct Tokens(Arc<Vec<String>>);

impl Tokens {
    /// From `file` (one token a line; blank lines and `#` comments skipped)
    /// and [`TOKENS_ENV`]. A file that names no token is refused: it would
    /// silently leave the door open.
    pub fn load(file: Option<&Path>) -> Result<Tokens, Failure> {
        let mut tokens = Vec::new();
        if let Some(file) = file {
            let text = std::fs::read_to_string(file)
                .map_err(|e| Failure::usage(format!("--tokens-file {}: {e}", file.display())))?;
            let before = tokens.len();
            tokens.extend(
                text.lines()
                    .map(str::trim)
                    .filter(|line| !line.is_empty() && !line.starts_with('#'))
                    .map(str::to_owned),
            );
            if tokens.len() == before {
                return Err(Failure::usage(format!(
                    "--tokens-file {}: no token in it (one a line)",
                    file.display()
                )));
            }
        }
        if let Ok(listed) = std::env::var(TOKENS_ENV) {
            tokens.extend(
                listed
                    .split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned),
            );
        }
        Ok(Tokens(Arc::new(tokens)))
    }

    /// Refuses to listen on `addr` without tokens unless it is a loopback
    /// address: anyone who can reach the port could release anyone's lock.
    pub fn check_listener(&self, addr: SocketAddr) -> Result<(), Failure> {
        if self.0.is_empty() && !addr.ip().is_loopback() {
            return Err(Failure::usage(format!(
                "serve: {addr} is not a loopback address and no token was given; \
                 give --tokens-file FILE or {TOKENS_ENV}, or listen on 127.0.0.1"
            )));
        }
        Ok(())
    }

    fn admits(&self, given: Option<&str>) -> bool {
        if self.0.is_empty() {
            return true;
        }
        let Some(given) = given else { return false };
        // Every token is compared whole, so the time taken does not tell
        // how much of a guess was right.
        self.0.iter().fold(false, |found, token| {
            found | same(token.as_bytes(), given.as_bytes())
        })
    }
}

/// Equal bytes, in a time that depends on the lengths only.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// The middleware: 401 with `{"code": "AUTH"}` unless the request carries
/// `Authorization: Bearer TOKEN` with a known token.
pub async fn authenticate(State(tokens): State<Tokens>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    if tokens.admits(given) {
        return next.run(request).await;
    }
    let refusal = VerbError::new(
        AUTH,
        "a bearer token is required: Authorization: Bearer TOKEN",
    );
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        Json(refusal),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_code_is_the_librarys() {
        assert!(latchkey::Error::CODES.contains(&AUTH));
    }

    #[test]
    fn tokens_admit_exact_matches_only() {
        let tokens = Tokens(Arc::new(vec!["s3cret".into(), "other".into()]));
        assert!(tokens.admits(Some("s3cret")));
        assert!(tokens.admits(Some("other")));
        assert!(!tokens.admits(Some("s3cre")));
        assert!(!tokens.admits(Some("s3cret ")));
        assert!(!tokens.admits(None));
        assert!(Tokens::default().admits(None));
    }

    #[test]
    fn without_tokens_only_loopback_listeners() {
        let none = Tokens::default();
        assert!(none.check_listener("127.0.0.1:80".parse().unwrap()).is_ok());
        assert!(none.check_listener("[::1]:80".parse().unwrap()).is_ok());
        assert!(none.check_listener("0.0.0.0:80".parse().unwrap()).is_err());
        assert!(none.check_listener("10.0.0.5:80".parse().unwrap()).is_err());
        let some = Tokens(Arc::new(vec!["t".into()]));
        assert!(some.check_listener("0.0.0.0:80".parse().unwrap()).is_ok());
    }
}
