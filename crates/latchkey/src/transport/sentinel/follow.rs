//! The task that follows failovers: it asks the Sentinels every `poll`, and
//! at once when one of them announces a switch (`+switch-master`, on a
//! pub/sub connection to the first Sentinel that takes it), and drops the
//! connection in use when they name another primary.

use std::pin::Pin;
use std::sync::Weak;
use std::time::Duration;

use futures_util::{Stream, StreamExt};

use super::Shared;

type Events = Pin<Box<dyn Stream<Item = redis::Msg> + Send>>;

/// Runs while the connection lives (`shared` can be upgraded).
pub(super) async fn follow(shared: Weak<Shared>, poll: Duration) {
    let mut events: Option<Events> = None;
    loop {
        if events.is_none() {
            events = switch_events(&shared).await;
        }
        match &mut events {
            Some(stream) => {
                tokio::select! {
                    event = stream.next() => {
                        // A closed stream: poll, and subscribe again next time.
                        if event.is_none() {
                            events = None;
                        }
                    }
                    _ = tokio::time::sleep(poll) => {}
                }
            }
            None => tokio::time::sleep(poll).await,
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        if let Ok(addr) = shared.ask_sentinels().await {
            let moved = shared.primary.borrow().as_ref() != Some(&addr);
            if moved {
                shared.current.clear();
                shared.named(&addr);
            }
        }
    }
}

/// `+switch-master` announcements from the first Sentinel that takes the
/// subscription; `None` when none does (then the task only polls).
async fn switch_events(shared: &Weak<Shared>) -> Option<Events> {
    let (sentinels, timeout) = {
        let shared = shared.upgrade()?;
        (shared.sentinels.clone(), shared.timeout)
    };
    for client in &sentinels {
        let subscribed = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe("+switch-master").await?;
            Ok::<_, redis::RedisError>(pubsub)
        };
        if let Ok(Ok(pubsub)) = tokio::time::timeout(timeout, subscribed).await {
            return Some(Box::pin(pubsub.into_on_message()));
        }
    }
    None
}
