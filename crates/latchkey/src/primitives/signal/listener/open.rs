//! Opening a listener: checking the names, choosing its channels (a
//! broadcast channel and a waiter channel per name, or one pattern each),
//! and subscribing to them on every server.
//!
//! Apart from the API because it is the one place that knows the channel
//! layout and how replicas join in; after it returns, the listener only
//! merges events (see `merge.rs`).

use tokio::sync::oneshot;

use super::merge::{Got, Joining, Slot, Watch};
use super::recent::Recent;
use super::Listener;
use crate::primitives::signal::wire;
use crate::transport::session::Session;
use crate::transport::subscriber::{Subscriber, Topic, EVENT_BUFFER};
use crate::vocab::error::{Error, Result};

/// Event buffer of a waiter channel: only its own listener reads it, and a
/// waiter usually wants one message. Two, so that a reconnect notice right
/// behind a message does not push the message out.
const WAITER_BUFFER: usize = 2;

impl Listener {
    /// Subscribes to `items` (names, or patterns when `patterns`) on every
    /// server of `client`; returns once at least one server confirmed.
    pub(crate) async fn open(
        client: &Session,
        items: Vec<Vec<u8>>,
        patterns: bool,
    ) -> Result<Listener> {
        if items.is_empty() {
            return Err(Error::InvalidInput(
                "nothing to wait for: no names given".into(),
            ));
        }
        for (i, item) in items.iter().enumerate() {
            if patterns {
                wire::check_pattern(item)?;
            } else {
                wire::check_name(item)?;
            }
            if items[..i].contains(item) {
                return Err(Error::InvalidInput(format!(
                    "{:?} is given twice",
                    String::from_utf8_lossy(item)
                )));
            }
        }
        let prefix = client.prefix();
        let primary = client.subscriber();
        let waiter_id = primary.new_waiter_id();
        let mut topics = Vec::new();
        let mut slots = Vec::new();
        for (watch, item) in items.iter().enumerate() {
            if patterns {
                topics.push((
                    Topic::Pattern(wire::broadcast_pattern(prefix, item)),
                    EVENT_BUFFER,
                ));
                slots.push(Slot {
                    watch,
                    unicast: false,
                });
            } else {
                topics.push((
                    Topic::Channel(wire::broadcast_channel(prefix, item)),
                    EVENT_BUFFER,
                ));
                slots.push(Slot {
                    watch,
                    unicast: false,
                });
                let own = wire::waiter_channel(prefix, item, &waiter_id);
                topics.push((Topic::Channel(own), WAITER_BUFFER));
                slots.push(Slot {
                    watch,
                    unicast: true,
                });
            }
        }
        let mut listener = Listener {
            prefix: patterns.then(|| prefix.into()),
            watches: items
                .into_iter()
                .map(|what| Watch {
                    what: what.into_boxed_slice(),
                    pattern: patterns,
                    got: None,
                })
                .collect(),
            subs: Vec::with_capacity(slots.len()),
            joining: Vec::new(),
            recent: None,
            subscribers: std::iter::once(primary)
                .chain(client.replica_subscribers())
                .cloned()
                .collect(),
        };
        let replicas = client.replica_subscribers();
        if !replicas.is_empty() || (patterns && listener.watches.len() > 1) {
            listener.recent = Some(Recent::default());
        }
        if replicas.is_empty() {
            let subscriptions = primary.subscribe_many(topics).await?;
            listener.add(0, &slots, subscriptions);
            return Ok(listener);
        }
        // Each server on its own task: one that is down (its subscribe
        // fails only after the command timeout) must not hold up the others.
        // A task whose listener is gone drops its subscriptions.
        let servers = std::iter::once(primary).chain(replicas.iter());
        for (server, subscriber) in servers.enumerate() {
            let (tx, rx) = oneshot::channel();
            let subscriber: Subscriber = subscriber.clone();
            let topics = topics.clone();
            tokio::spawn(async move {
                let _ = tx.send(subscriber.subscribe_many(topics).await);
            });
            listener.joining.push(Joining { server, rx });
        }
        let mut first_error = None;
        while listener.subs.is_empty() {
            if listener.joining.is_empty() {
                return Err(
                    first_error.unwrap_or_else(|| Error::Protocol("no server to listen on".into()))
                );
            }
            if let Got::Joined(server, Err(e)) = listener.next_event().await {
                tracing::debug!(server, error = %e, "cannot listen for signals on one server");
                first_error.get_or_insert(e);
            }
        }
        Ok(listener)
    }
}
