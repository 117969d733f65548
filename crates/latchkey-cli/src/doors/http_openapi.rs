//! `GET /v1/openapi.json`: `serve`'s API as OpenAPI 3.1, made from the same
//! request and reply types the endpoints decode and encode (their JSON
//! Schemas, as `mcp` publishes them), so the description cannot drift from
//! what is served. A client generator reads it; docs/http.md is the prose.

use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde_json::{json, Map, Value};

use super::verbs::{elect, inspect, lease, notify, VerbError};

/// One endpoint: method, path, summary, the body's and reply's schemas.
struct Endpoint {
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    body: Option<Value>,
    reply: Value,
}

/// The schema of `T`, subschemas inlined (OpenAPI resolves `#` against the
/// whole document, not the schema), without its `$schema`.
fn schema<T: JsonSchema>() -> Value {
    let settings = SchemaSettings::draft2020_12().with(|s| s.inline_subschemas = true);
    let mut value = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    if let Some(object) = value.as_object_mut() {
        object.remove("$schema");
    }
    value
}

/// A request's schema without `name`, which the path carries.
fn body<T: JsonSchema>() -> Option<Value> {
    let mut value = schema::<T>();
    if let Some(object) = value.as_object_mut() {
        if let Some(Value::Object(properties)) = object.get_mut("properties") {
            properties.remove("name");
        }
        if let Some(Value::Array(required)) = object.get_mut("required") {
            required.retain(|field| field != "name");
        }
    }
    Some(value)
}

fn endpoints(allow_revoke: bool) -> Vec<Endpoint> {
    let mut all = vec![
        Endpoint {
            method: "post",
            path: "/v1/locks/{name}/acquire",
            summary:
                "Take a lock, a semaphore's permits or a side of a read-write lock until its TTL (nothing renews it); busy: acquired false and the holder",
            body: body::<lease::AcquireRequest>(),
            reply: schema::<lease::AcquireReply>(),
        },
        Endpoint {
            method: "post",
            path: "/v1/locks/{name}/extend",
            summary: "Reset a hold's TTL, given its owner token and kind: the caller's heartbeat",
            body: body::<lease::ExtendRequest>(),
            reply: schema::<lease::ExtendReply>(),
        },
        Endpoint {
            method: "post",
            path: "/v1/locks/{name}/release",
            summary: "Release a hold, given its owner token and kind, and wake its waiters (a leader resigns)",
            body: body::<lease::ReleaseRequest>(),
            reply: schema::<lease::ReleaseReply>(),
        },
        Endpoint {
            method: "get",
            path: "/v1/locks/{name}",
            summary: "Who holds a name: every kind of primitive under it",
            body: None,
            reply: schema::<inspect::StatusReply>(),
        },
        Endpoint {
            method: "get",
            path: "/v1/locks",
            summary:
                "The primitives whose names match ?pattern= (a glob; at most ?limit=, default 100)",
            body: None,
            reply: schema::<inspect::ListReply>(),
        },
        Endpoint {
            method: "post",
            path: "/v1/locks/{name}/request_release",
            summary: "Ask the holders of a name to let go",
            body: None,
            reply: schema::<notify::RequestReleaseReply>(),
        },
        Endpoint {
            method: "get",
            path: "/v1/elections/{name}/leader",
            summary: "Who leads an election: its value, term (a fencing token) and since when",
            body: None,
            reply: schema::<inspect::LeaderReply>(),
        },
        Endpoint {
            method: "post",
            path: "/v1/elections/{name}/elect",
            summary: "Campaign once to lead an election until the TTL (nothing renews it: extend and release with kind leader); not elected: the leader",
            body: body::<elect::ElectRequest>(),
            reply: schema::<elect::ElectReply>(),
        },
        Endpoint {
            method: "post",
            path: "/v1/signals/{name}/signal",
            summary: "Send a signal to the waiters on a name",
            body: body::<notify::SignalRequest>(),
            reply: schema::<notify::SignalReply>(),
        },
        Endpoint {
            method: "post",
            path: "/v1/signals/wait",
            summary: "Wait at most `timeout` for a signal on any of the names",
            body: schema::<notify::WaitRequest>().into(),
            reply: schema::<notify::WaitReply>(),
        },
    ];
    if allow_revoke {
        all.push(Endpoint {
            method: "post",
            path: "/v1/locks/{name}/revoke",
            summary: "End every hold of a name, whoever holds it (an operator's action)",
            body: None,
            reply: schema::<notify::RevokeReply>(),
        });
    }
    all
}

/// The whole description.
pub fn document(allow_revoke: bool) -> Value {
    let error = json!({
        "description": "An error: the stable code (see docs/http.md) and one line",
        "content": {"application/json": {"schema": schema::<VerbError>()}}
    });
    let mut paths = Map::new();
    for endpoint in endpoints(allow_revoke) {
        let mut operation = json!({
            "summary": endpoint.summary,
            "responses": {
                "200": {"description": "Done", "content": {"application/json": {"schema": endpoint.reply}}},
                "4XX": error,
                "5XX": error,
            }
        });
        if endpoint.path.contains("{name}") {
            operation["parameters"] = json!([{
                "name": "name", "in": "path", "required": true,
                "description": "The name, percent-encoded (one path segment)",
                "schema": {"type": "string"}
            }]);
        }
        if let Some(body) = endpoint.body {
            operation["requestBody"] = json!({
                "required": false,
                "content": {"application/json": {"schema": body}}
            });
        }
        let path = paths
            .entry(endpoint.path)
            .or_insert_with(|| Value::Object(Map::new()));
        path[endpoint.method] = operation;
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "latchkey serve",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Distributed locks on Redis over HTTP/JSON. Stateless by the owner token; nothing renews a lock: extend it before its TTL."
        },
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
        "paths": paths,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_description_has_every_endpoint_with_its_schemas() {
        let doc = document(false);
        let acquire = &doc["paths"]["/v1/locks/{name}/acquire"]["post"];
        let body = &acquire["requestBody"]["content"]["application/json"]["schema"];
        assert!(body["properties"]["ttl"].is_object(), "{body}");
        assert!(
            body["properties"].get("name").is_none(),
            "the path has the name"
        );
        assert_eq!(body["required"], json!(["ttl"]));
        let reply = &acquire["responses"]["200"]["content"]["application/json"]["schema"];
        assert!(reply["properties"]["fencing_token"].is_object());
        assert!(doc["paths"].get("/v1/locks/{name}/revoke").is_none());
        assert!(document(true)["paths"]["/v1/locks/{name}/revoke"]["post"].is_object());
        assert!(!doc.to_string().contains("$ref"), "subschemas inlined");
    }
}
