//! `latchkey serve --listen ADDR`: the verbs as HTTP/JSON (docs/http.md),
//! for languages and machines without the CLI. A skin over `verbs`, as
//! `mcp.rs` is: the same requests (the name from the path), the same
//! replies, the same stable codes in `{"code", "message"}` error bodies.
//!
//! ```text
//! POST /v1/locks/{name}/acquire          {"ttl": "5m", "wait": "30s"}
//! POST /v1/locks/{name}/extend           {"token": "…", "ttl": "5m"}
//! POST /v1/locks/{name}/release          {"token": "…"}
//! GET  /v1/locks/{name}                  status
//! GET  /v1/locks?pattern=P&limit=N       list
//! POST /v1/locks/{name}/request_release
//! POST /v1/locks/{name}/revoke           (only with --allow-revoke)
//! GET  /v1/elections/{name}/leader       who leads an election
//! POST /v1/elections/{name}/elect        campaign once; the leader by token
//! POST /v1/signals/{name}/signal         {"payload": "…", "one": false}
//! POST /v1/signals/wait                  {"names": ["…"], "timeout": "30s"}
//! GET  /v1/openapi.json                  this API as OpenAPI 3.1
//! GET  /metrics                          the exporter's Prometheus text
//! ```

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use clap::Args;
use latchkey::Client;
use metrics_exporter_prometheus::PrometheusHandle;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

use super::http_auth::{self, Tokens};
use super::http_extract::{Body, Name, Params};
use super::verbs::{decode, elect, inspect, lease, notify, VerbError};
use super::Redis;
use super::{http_metrics, http_tls};
use crate::commands::exporter::ScanArgs;
use crate::support::exit::{self, Failure, Outcome};
use crate::support::target::Target;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Where to listen, IP:PORT (port 0: a free one; the address is printed).
    /// Without tokens only a loopback address is accepted.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7380")]
    pub listen: String,
    /// Bearer tokens callers must present, one a line (also
    /// LATCHKEY_SERVE_TOKENS, comma-separated).
    #[arg(long, value_name = "FILE")]
    pub tokens_file: Option<PathBuf>,
    /// Serve `revoke` (end anyone's hold of a name): an operator's action.
    #[arg(long)]
    pub allow_revoke: bool,
    /// Serve HTTPS with this certificate chain (PEM); needs --listen-tls-key.
    /// (--tls-cert is the Redis connection's client certificate.)
    #[arg(long, value_name = "FILE", requires = "listen_tls_key")]
    pub listen_tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --listen-tls-cert.
    #[arg(long, value_name = "FILE", requires = "listen_tls_cert")]
    pub listen_tls_key: Option<PathBuf>,
    /// The scan of the server's locks behind GET /metrics, as `latchkey
    /// exporter`'s.
    #[command(flatten)]
    pub scan: ScanArgs,
}

/// The code of an unknown endpoint: latchkey's for a thing that does not exist.
const NOT_FOUND: &str = "NOT_FOUND";

/// The largest request body: the verbs' arguments are a few fields.
const BODY_LIMIT: usize = 64 * 1024;

/// Serves until SIGINT or SIGTERM (after the requests in flight).
///
/// # Cancel safety
///
/// As `Command::run`: run to completion by `main`, never dropped part-way.
pub async fn serve(target: &Target, args: ServeArgs) -> Outcome {
    let addr: SocketAddr = args.listen.parse().map_err(|_| {
        Failure::usage(format!(
            "--listen {:?}: give IP:PORT, e.g. 127.0.0.1:7380",
            args.listen
        ))
    })?;
    let tokens = Tokens::load(args.tokens_file.as_deref())?;
    tokens.check_listener(addr)?;
    args.scan.check()?;
    // Read before listening: a bad file is the operator's to fix, at start.
    let tls = match (&args.listen_tls_cert, &args.listen_tls_key) {
        (Some(cert), Some(key)) => Some(http_tls::acceptor(cert, key)?),
        _ => None,
    };
    let redis = Arc::new(Redis::new(target, "serve")?);
    let metrics = http_metrics::start(Arc::clone(&redis), args.scan)?;
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        Failure::new(
            exit::UNAVAILABLE,
            format!("serve: cannot listen on {addr}: {e}"),
        )
    })?;
    let bound = listener
        .local_addr()
        .map_err(|e| Failure::new(exit::INTERNAL, format!("serve: {e}")))?;
    // The one line on stdout: where it listens (port 0 picks one).
    let scheme = if tls.is_some() { "https" } else { "http" };
    println!("listening on {scheme}://{bound}");
    let app = routes(Arc::clone(&redis), args.allow_revoke, metrics)
        .layer(axum::middleware::from_fn_with_state(
            tokens,
            http_auth::authenticate,
        ))
        .layer(DefaultBodyLimit::max(BODY_LIMIT));
    let served = match tls {
        Some(acceptor) => {
            let listener = http_tls::TlsListener::new(listener, acceptor)
                .map_err(|e| Failure::new(exit::INTERNAL, format!("serve: {e}")))?;
            axum::serve(listener, app)
                .with_graceful_shutdown(stopped())
                .await
        }
        None => {
            axum::serve(listener, app)
                .with_graceful_shutdown(stopped())
                .await
        }
    };
    redis.flush(std::time::Duration::from_secs(3)).await;
    served.map_err(|e| Failure::new(exit::INTERNAL, format!("serve: {e}")))?;
    Ok(exit::OK)
}

/// SIGINT or SIGTERM.
async fn stopped() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate => {}
    }
}

type Door = Arc<Redis>;

fn routes(redis: Door, allow_revoke: bool, metrics: PrometheusHandle) -> Router {
    let mut router = Router::new()
        .route("/v1/locks", get(list))
        .route("/v1/locks/{name}", get(status))
        .route("/v1/locks/{name}/acquire", post(acquire))
        .route("/v1/locks/{name}/extend", post(extend))
        .route("/v1/locks/{name}/release", post(release))
        .route("/v1/locks/{name}/request_release", post(request_release))
        .route("/v1/elections/{name}/leader", get(leader))
        .route("/v1/elections/{name}/elect", post(elect))
        .route("/v1/signals/{name}/signal", post(signal))
        .route("/v1/signals/wait", post(wait))
        .route("/v1/openapi.json", get(move || openapi(allow_revoke)))
        .route(
            "/metrics",
            get(move || async move { http_metrics::render(&metrics) }),
        );
    if allow_revoke {
        router = router.route("/v1/locks/{name}/revoke", post(revoke));
    }
    router.fallback(not_found).with_state(redis)
}

async fn acquire(State(redis): State<Door>, Name(name): Name, Body(body): Body) -> Response {
    call(&redis, Some(name), &body, |c, r| async move {
        lease::acquire(&c, r).await
    })
    .await
}

async fn extend(State(redis): State<Door>, Name(name): Name, Body(body): Body) -> Response {
    call(&redis, Some(name), &body, |c, r| async move {
        lease::extend(&c, r).await
    })
    .await
}

async fn release(State(redis): State<Door>, Name(name): Name, Body(body): Body) -> Response {
    call(&redis, Some(name), &body, |c, r| async move {
        lease::release(&c, r).await
    })
    .await
}

async fn elect(State(redis): State<Door>, Name(name): Name, Body(body): Body) -> Response {
    call(&redis, Some(name), &body, |c, r| async move {
        elect::elect(&c, r).await
    })
    .await
}

async fn status(State(redis): State<Door>, Name(name): Name) -> Response {
    call(&redis, Some(name), b"", |c, r| async move {
        inspect::status(&c, r).await
    })
    .await
}

async fn list(State(redis): State<Door>, Params(query): Params) -> Response {
    // Query values are text: `limit` is the one number.
    let mut arguments = Map::new();
    for (key, value) in query {
        let value = match (key.as_str(), value.parse::<u64>()) {
            ("limit", Ok(limit)) => Value::from(limit),
            _ => Value::String(value),
        };
        arguments.insert(key, value);
    }
    let body = Value::Object(arguments).to_string();
    call(&redis, None, body.as_bytes(), |c, r| async move {
        inspect::list(&c, r).await
    })
    .await
}

async fn leader(State(redis): State<Door>, Name(name): Name) -> Response {
    call(&redis, Some(name), b"", |c, r| async move {
        inspect::leader(&c, r).await
    })
    .await
}

async fn request_release(State(redis): State<Door>, Name(name): Name) -> Response {
    call(&redis, Some(name), b"", |c, r| async move {
        notify::request_release(&c, r).await
    })
    .await
}

async fn revoke(State(redis): State<Door>, Name(name): Name) -> Response {
    call(&redis, Some(name), b"", |c, r| async move {
        notify::revoke(&c, r).await
    })
    .await
}

async fn signal(State(redis): State<Door>, Name(name): Name, Body(body): Body) -> Response {
    call(&redis, Some(name), &body, |c, r| async move {
        notify::signal(&c, r).await
    })
    .await
}

async fn wait(State(redis): State<Door>, Body(body): Body) -> Response {
    call(&redis, None, &body, |c, r| async move {
        notify::wait(&c, r).await
    })
    .await
}

async fn openapi(allow_revoke: bool) -> Response {
    Json(super::http_openapi::document(allow_revoke)).into_response()
}

async fn not_found() -> Response {
    let error = VerbError::new(NOT_FOUND, "no such endpoint (see docs/http.md)");
    (StatusCode::NOT_FOUND, Json(error)).into_response()
}

/// Decodes the body (empty: `{}`) with the path's `name`, connects and runs
/// `verb`: every endpoint's body.
async fn call<Req, Rep, F, Fut>(
    redis: &Redis,
    name: Option<String>,
    body: &[u8],
    verb: F,
) -> Response
where
    Req: DeserializeOwned,
    Rep: Serialize,
    F: FnOnce(Client, Req) -> Fut,
    Fut: Future<Output = Result<Rep, VerbError>>,
{
    let outcome = async {
        let mut arguments = object(body)?;
        if let Some(name) = name {
            if arguments
                .insert("name".into(), Value::String(name))
                .is_some()
            {
                return Err(VerbError::invalid(
                    "the name is the path's; leave \"name\" out of the body",
                ));
            }
        }
        let request: Req = decode(arguments)?;
        let client = redis.client().await?;
        verb(client, request).await
    };
    match outcome.await {
        Ok(reply) => (StatusCode::OK, Json(reply)).into_response(),
        Err(error) => (status_of(&error.code), Json(error)).into_response(),
    }
}

/// A body as a JSON object; an empty body is `{}`.
fn object(body: &[u8]) -> Result<Map<String, Value>, VerbError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(VerbError::invalid("the body must be a JSON object")),
        Err(e) => Err(VerbError::invalid(format!("the body is not JSON: {e}"))),
    }
}

/// The HTTP status of a stable code: the caller's mistake 4xx, Redis's
/// trouble 5xx (503: retry later).
fn status_of(code: &str) -> StatusCode {
    match code {
        "INVALID_NAME" | "INVALID_TTL" | "INVALID_INPUT" | "INVALID_COUNT" | "UNSUPPORTED" => {
            StatusCode::BAD_REQUEST
        }
        "NOT_HELD" | "FOREIGN_VALUE" | "WRONG_TYPE" => StatusCode::CONFLICT,
        "NOT_FOUND" => StatusCode::NOT_FOUND,
        "UNREACHABLE" | "TIMEOUT" | "UNAVAILABLE" | "NO_QUORUM" | "OUT_OF_MEMORY"
        | "READ_ONLY_REPLICA" | "TOO_FEW_REPLICAS" => StatusCode::SERVICE_UNAVAILABLE,
        "AUTH" | "TLS" | "NO_PERMISSION" | "UNSUPPORTED_SERVER" => StatusCode::BAD_GATEWAY,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_status_and_bad_input_is_400() {
        for code in latchkey::Error::CODES {
            let status = status_of(code);
            assert!(
                status.is_client_error() || status.is_server_error(),
                "{code}"
            );
        }
        assert!(latchkey::Error::CODES.contains(&NOT_FOUND));
        assert_eq!(status_of("INVALID_TTL"), StatusCode::BAD_REQUEST);
        assert_eq!(status_of("NOT_HELD"), StatusCode::CONFLICT);
        assert_eq!(status_of("UNREACHABLE"), StatusCode::SERVICE_UNAVAILABLE);
    }

    #[test]
    fn an_empty_body_is_an_empty_object_and_others_must_be_objects() {
        assert!(object(b"").unwrap().is_empty());
        assert!(object(b" \n").unwrap().is_empty());
        assert_eq!(object(b"[1]").unwrap_err().code, "INVALID_INPUT");
        assert_eq!(object(b"{").unwrap_err().code, "INVALID_INPUT");
        assert_eq!(object(br#"{"ttl":"1s"}"#).unwrap().len(), 1);
    }
}
