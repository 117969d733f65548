//! `latchkey mcp`: the verbs as Model Context Protocol tools over stdio,
//! for AI agents (docs/agents.md). One JSON-RPC message per line on
//! stdin/stdout (rmcp, the official SDK); logs go to stderr only.
//!
//! Arguments are decoded here, not by the SDK, so that bad input (a missing
//! name, an unknown field, a negative TTL) is a tool error carrying
//! latchkey's code (`INVALID_INPUT`, `INVALID_TTL`), which an agent reads
//! and corrects, where the SDK would answer a protocol error the agent's
//! host may not show it. The schemas published are the request types'.
//!
//! A tool error's text is one JSON object, `{"code": …, "message": …}`:
//! the stable code to act on and a line for people.

use std::future::Future;
use std::sync::Arc;

use clap::Args;
use latchkey::Client;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Json;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, JsonObject, ListResourcesResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::mcp_holds::{self, Holds, Took};
use super::verbs::{elect, inspect, lease, notify, VerbError, NOT_HELD};
use super::Redis;
use crate::support::exit::{self, Failure, Outcome};
use crate::support::target::Target;

#[derive(Args, Debug)]
pub struct McpArgs {
    /// Offer the `revoke` tool (end anyone's hold of a name): an operator's
    /// action, off unless asked for.
    #[arg(long)]
    pub allow_revoke: bool,
}

/// The code of a call the host cancelled: the library's for a client
/// closed (the reply is only written for the record).
const CANCELLED: &str = "CLIENT_CLOSED";

/// What the host shows the model about the server as a whole.
const INSTRUCTIONS: &str = "Distributed locks (leases) on Redis, shared with other agents and programs. \
Take a lock with `acquire` before working on a shared thing (a file, a task, an environment) and \
`release` it when done; `acquire` also takes permits of a semaphore or a side of a read-write lock, and \
`elect` makes you the leader of an election. The lock expires at its TTL unless you call `extend`: nothing renews it for you, \
so pick a TTL of a few minutes and call `extend` at each step. Pass the fencing token to whatever you \
write under the lock. A busy lock's reply names its holder; `wait` for a while or work on something else. \
The resource latchkey://session/holds lists the holds you took here and have not released, with their \
tokens and deadlines.";

/// The tools, over one connection to Redis.
#[derive(Clone)]
pub struct Tools {
    redis: Arc<Redis>,
    /// What this session took: the `latchkey://session/holds` resource.
    holds: Holds,
    tool_router: ToolRouter<Tools>,
}

#[tool_router]
impl Tools {
    pub fn new(redis: Arc<Redis>, allow_revoke: bool) -> Tools {
        let mut tool_router = Self::tool_router();
        if !allow_revoke {
            tool_router.remove_route("revoke");
        }
        Tools {
            redis,
            holds: Holds::default(),
            tool_router,
        }
    }

    /// Decodes `arguments`, connects and runs `verb`: every tool's body.
    ///
    /// A call the host cancels (`notifications/cancelled`) is dropped at
    /// once: the SDK only trips `cancelled`, and a wait left running would
    /// take the lock for a caller that has given up on it, which would hold
    /// it to its TTL with no one knowing the token. Every verb is
    /// cancel-safe: dropped, nothing stays held.
    async fn call<Req, Rep, F, Fut>(
        &self,
        arguments: JsonObject,
        cancelled: CancellationToken,
        verb: F,
    ) -> Result<Json<Rep>, CallToolResult>
    where
        Req: DeserializeOwned,
        F: FnOnce(Client, Req) -> Fut,
        Fut: Future<Output = Result<Rep, VerbError>>,
    {
        let request: Req = super::verbs::decode(arguments).map_err(failed)?;
        let served = async {
            let client = self.redis.client().await?;
            verb(client, request).await
        };
        tokio::select! {
            outcome = served => outcome.map(Json).map_err(failed),
            // The SDK sends no reply to a cancelled request; this one is
            // for the record (and a host that cancels by other means).
            () = cancelled.cancelled() => Err(failed(VerbError::new(CANCELLED, "cancelled by the client"))),
        }
    }

    #[tool(
        description = "Take a named lock (a lease) and keep it until its TTL. Returns `acquired`, its `kind`, the owner `token` (pass both to extend/release), the `fencing_token` (pass it to what you write) and `deadline_unix_ms`. When busy: `acquired: false` and the `holder`. `wait` waits that long for a release. `fair: true` waits in line; `permits: N` takes one of N permits of a semaphore (`k` of them at once); `access: \"read\"` or `\"write\"` takes a side of a read-write lock.",
        input_schema = schema::<lease::AcquireRequest>()
    )]
    async fn acquire(
        &self,
        arguments: JsonObject,
        cancelled: CancellationToken,
    ) -> Result<Json<lease::AcquireReply>, CallToolResult> {
        let holds = self.holds.clone();
        self.call(arguments, cancelled, |c, r| async move {
            let reply = lease::acquire(&c, r).await?;
            if let (Some(token), Some(deadline)) = (&reply.token, reply.deadline_unix_ms) {
                holds.took(Took {
                    name: &reply.name,
                    kind: reply.kind,
                    token,
                    fencing_token: reply.fencing_token,
                    k: reply.k,
                    deadline_unix_ms: deadline,
                });
            }
            Ok(reply)
        })
        .await
    }

    #[tool(
        description = "Campaign once to lead an election, with a `value` the others see (`leader` shows it), and keep the leadership until its TTL: you are the leader until then. Returns `elected`, the owner `token`, your `term` (greater than every earlier leader's: a fencing token) and `deadline_unix_ms`; `extend` (kind \"leader\") at each step, `release` (kind \"leader\") to resign. When someone else leads: `elected: false` and the `leader`. `wait` waits that long to be elected.",
        input_schema = schema::<elect::ElectRequest>()
    )]
    async fn elect(
        &self,
        arguments: JsonObject,
        cancelled: CancellationToken,
    ) -> Result<Json<elect::ElectReply>, CallToolResult> {
        let holds = self.holds.clone();
        self.call(arguments, cancelled, |c, r| async move {
            let reply = elect::elect(&c, r).await?;
            if let (Some(token), Some(deadline)) = (&reply.token, reply.deadline_unix_ms) {
                holds.took(Took {
                    name: &reply.name,
                    kind: reply.kind,
                    token,
                    fencing_token: reply.term,
                    k: None,
                    deadline_unix_ms: deadline,
                });
            }
            Ok(reply)
        })
        .await
    }

    #[tool(
        description = "Reset a hold's TTL to `ttl` from now, given the owner token and the `kind` (and `k`) acquire or elect returned: the heartbeat of a long task or of a leader (call it at each step). Fails with NOT_HELD if the token lost the hold (it expired or was revoked): stop writing then.",
        input_schema = schema::<lease::ExtendRequest>()
    )]
    async fn extend(
        &self,
        arguments: JsonObject,
        cancelled: CancellationToken,
    ) -> Result<Json<lease::ExtendReply>, CallToolResult> {
        let holds = self.holds.clone();
        self.call(
            arguments,
            cancelled,
            |c, r: lease::ExtendRequest| async move {
                let (name, token) = (r.name.clone(), r.token.clone());
                match lease::extend(&c, r).await {
                    Ok(reply) => {
                        holds.extended(&name, &token, reply.deadline_unix_ms);
                        Ok(reply)
                    }
                    Err(e) => {
                        if e.code == NOT_HELD {
                            holds.gone(&name, &token);
                        }
                        Err(e)
                    }
                }
            },
        )
        .await
    }

    #[tool(
        description = "Release a hold, given the owner token and the `kind` (and `k`) acquire or elect returned, and wake its waiters (a leader resigns). Fails with NOT_HELD if the token no longer owns it.",
        input_schema = schema::<lease::ReleaseRequest>()
    )]
    async fn release(
        &self,
        arguments: JsonObject,
        cancelled: CancellationToken,
    ) -> Result<Json<lease::ReleaseReply>, CallToolResult> {
        let holds = self.holds.clone();
        self.call(
            arguments,
            cancelled,
            |c, r: lease::ReleaseRequest| async move {
                let (name, token) = (r.name.clone(), r.token.clone());
                let outcome = lease::release(&c, r).await;
                // Released, or not this token's any more: not held either way.
                if outcome
                    .as_ref()
                    .map_or_else(|e| e.code == NOT_HELD, |_| true)
                {
                    holds.gone(&name, &token);
                }
                outcome
            },
        )
        .await
    }

    #[tool(
        description = "Who holds a name and since when: held or not, TTL left, holder (host, pid), age, fencing token; every kind (lock, semaphore, read-write lock, latch, barrier, election). Read-only.",
        input_schema = schema::<inspect::StatusRequest>()
    )]
    async fn status(
        &self,
        arguments: JsonObject,
        cancelled: CancellationToken,
    ) -> Result<Json<inspect::StatusReply>, CallToolResult> {
        self.call(arguments, cancelled, |c, r| async move {
            inspect::status(&c, r).await
        })
        .await
    }

    #[tool(
        description = "List the locks and other primitives whose names match a glob pattern (default \"*\"), with their holders. Read-only.",
        input_schema = schema::<inspect::ListRequest>()
    )]
    async fn list(
        &self,
        arguments: JsonObject,
        cancelled: CancellationToken,
    ) -> Result<Json<inspect::ListReply>, CallToolResult> {
        self.call(arguments, cancelled, |c, r| async move {
            inspect::list(&c, r).await
        })
        .await
    }

    #[tool(
        description = "Who leads an election (`latchkey elect NAME` campaigns in it): `leader` true or false, the leader's announced `value`, its `term` (greater than every earlier leader's: a fencing token) and `since_ms`. Read-only.",
        input_schema = schema::<inspect::LeaderRequest>()
    )]
    async fn leader(
        &self,
        arguments: JsonObject,
        cancelled: CancellationToken,
    ) -> Result<Json<inspect::LeaderReply>, CallToolResult> {
        self.call(arguments, cancelled, |c, r| async move {
            inspect::leader(&c, r).await
        })
        .await
    }

    #[tool(
        description = "Wait (at most `timeout`) for a signal on any of the names; returns its name and payload, or `signalled: false` at the timeout. Only signals sent after the wait began are seen.",
        input_schema = schema::<notify::WaitRequest>()
    )]
    async fn wait(
        &self,
        arguments: JsonObject,
        cancelled: CancellationToken,
    ) -> Result<Json<notify::WaitReply>, CallToolResult> {
        self.call(arguments, cancelled, |c, r| async move {
            notify::wait(&c, r).await
        })
        .await
    }

    #[tool(
        description = "Send a signal (with an optional text payload) to everyone waiting on a name, or to one waiter with `one: true`. Returns how many received it; nothing keeps a signal nobody waited for.",
        input_schema = schema::<notify::SignalRequest>()
    )]
    async fn signal(
        &self,
        arguments: JsonObject,
        cancelled: CancellationToken,
    ) -> Result<Json<notify::SignalReply>, CallToolResult> {
        self.call(arguments, cancelled, |c, r| async move {
            notify::signal(&c, r).await
        })
        .await
    }

    #[tool(
        description = "Ask the holders of a name to let go (a polite request: latchkey run/elect holders stop their command and release). Nothing is taken away. Returns how many connections heard it.",
        input_schema = schema::<notify::NameRequest>()
    )]
    async fn request_release(
        &self,
        arguments: JsonObject,
        cancelled: CancellationToken,
    ) -> Result<Json<notify::RequestReleaseReply>, CallToolResult> {
        self.call(arguments, cancelled, |c, r| async move {
            notify::request_release(&c, r).await
        })
        .await
    }

    #[tool(
        description = "End every hold of a name, whoever holds it (an operator's action), and raise its fencing counter past the revoked holders' tokens. Only offered when the server was started with --allow-revoke.",
        input_schema = schema::<notify::NameRequest>()
    )]
    async fn revoke(
        &self,
        arguments: JsonObject,
        cancelled: CancellationToken,
    ) -> Result<Json<notify::RevokeReply>, CallToolResult> {
        self.call(arguments, cancelled, |c, r| async move {
            notify::revoke(&c, r).await
        })
        .await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .build();
        let mut config = ServerConfig::new(capabilities).with_instructions(INSTRUCTIONS);
        config.server_info = Implementation::new("latchkey", env!("CARGO_PKG_VERSION"));
        config
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(vec![Holds::resource()]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri != mcp_holds::URI {
            return Err(ErrorData::resource_not_found(
                format!(
                    "no resource {:?}; the one resource is {}",
                    request.uri,
                    mcp_holds::URI
                ),
                None,
            ));
        }
        Ok(self.holds.read().into())
    }
}

/// The input schema of a request type.
fn schema<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    rmcp::handler::server::common::schema_for_type::<T>()
}

/// A verb's failure as a tool error: `{"code", "message"}` as its text.
fn failed(error: VerbError) -> CallToolResult {
    let text = serde_json::to_string(&error).unwrap_or_else(|_| error.message.clone());
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// Serves the tools on stdin/stdout until the host closes stdin. The locks
/// callers took stay held to their TTLs: they are the callers', by token.
///
/// # Cancel safety
///
/// As `Command::run`: run to completion by `main`, never dropped part-way.
pub async fn mcp(target: &Target, args: McpArgs) -> Outcome {
    let redis = Arc::new(Redis::new(target, "mcp")?);
    let tools = Tools::new(Arc::clone(&redis), args.allow_revoke);
    let service = tools.serve(rmcp::transport::stdio()).await.map_err(|e| {
        Failure::new(
            exit::UNAVAILABLE,
            format!("mcp: the session did not start: {e}"),
        )
    })?;
    let ended = service.waiting().await;
    // A wait the host cancelled leaves its release running in the background.
    redis.flush(std::time::Duration::from_secs(3)).await;
    match ended {
        Ok(_) => Ok(exit::OK),
        Err(e) => Err(Failure::new(exit::INTERNAL, format!("mcp: {e}"))),
    }
}
