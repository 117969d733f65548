//! The end of a long-running view (`exporter`, `top`): a stop signal.

/// Completes on SIGINT, SIGTERM or SIGHUP (never, if they cannot be caught).
///
/// # Cancel safety
///
/// Cancel-safe: nothing is consumed. Tokio keeps its handlers for the
/// process's life, though: after a drop these signals no longer end the
/// process by their default action.
pub async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let kinds = [
        SignalKind::interrupt(),
        SignalKind::terminate(),
        SignalKind::hangup(),
    ];
    let mut streams: Vec<_> = kinds
        .into_iter()
        .filter_map(|kind| signal(kind).ok())
        .collect();
    if streams.is_empty() {
        return std::future::pending().await;
    }
    let any = streams.iter_mut().map(|s| Box::pin(s.recv()));
    futures_util::future::select_all(any).await;
}
