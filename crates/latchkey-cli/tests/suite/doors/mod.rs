//! The doors: `latchkey mcp` driven by a real MCP session (a scripted
//! JSON-RPC exchange over the binary's stdin and stdout) and `latchkey
//! serve` by an HTTP client, against a private redis-server.

mod http;
mod http_client;
mod http_metrics;
mod http_tls;
mod mcp_input;
mod mcp_kinds;
mod mcp_locks;
mod mcp_session;
mod mcp_signals;
mod session;
