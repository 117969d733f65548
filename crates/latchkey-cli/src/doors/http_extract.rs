//! What `serve`'s endpoints take from a request (the body, the name in the
//! path, the query), refused as every other error is: a JSON body with a
//! stable code (`INVALID_INPUT`), under the status axum chose (400 for a bad
//! path or query, 413 for a body over the limit), where axum's own
//! extractors would answer plain text.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::verbs::VerbError;

/// The request's body, whole.
pub struct Body(pub Bytes);

/// The `{name}` of the path, percent-decoded.
pub struct Name(pub String);

/// The query string's parameters.
pub struct Params(pub HashMap<String, String>);

impl<S: Send + Sync> FromRequest<S> for Body {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Body, Response> {
        Bytes::from_request(request, state)
            .await
            .map(Body)
            .map_err(|r| refused(r.status(), r.body_text()))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Name {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Name, Response> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(name)| Name(name))
            .map_err(|r| refused(r.status(), r.body_text()))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Params, Response> {
        Query::<HashMap<String, String>>::from_request_parts(parts, state)
            .await
            .map(|Query(params)| Params(params))
            .map_err(|r| refused(r.status(), r.body_text()))
    }
}

/// A refused request: `status` with `{"code": "INVALID_INPUT", "message"}`.
fn refused(status: StatusCode, why: String) -> Response {
    (status, Json(VerbError::invalid(why))).into_response()
}
