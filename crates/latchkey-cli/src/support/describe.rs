//! The holder of a busy lock, told in the errors of `run` and `acquire`
//! (one line, as `status` prints it: `kind_view.rs`).

use crate::support::kind_view::lock_line;
use crate::support::target::Target;

/// ` (held by web-1 pid 4242 for 3.20s, 26.8s left)` for error messages
/// about a busy lock; empty when the holder cannot be told (several servers,
/// or any error: the message is a courtesy).
///
/// # Cancel safety
///
/// Cancel-safe: it only reads.
pub async fn holder_summary(target: &Target, name: &str) -> String {
    let Ok(client) = target.client("inspect").await else {
        return String::new();
    };
    match client.inspect(name).await {
        Ok(info) if info.held => format!(" ({})", lock_line(&info)),
        _ => String::new(),
    }
}
