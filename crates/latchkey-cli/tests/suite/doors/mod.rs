//! The doors: `latchkey mcp` driven by a real MCP session (a scripted
//! JSON-RPC exchange over the binary's stdin and stdout) against a private
//! redis-server.

mod mcp_input;
mod mcp_locks;
mod mcp_signals;
mod session;
