//! Messages delivered where they are read.
//!
//! Both subscriber connections speak RESP3, where messages arrive as pushes
//! that redis-rs hands to a push sender from the task that reads the socket.
//! [`Dispatcher`] is that sender: it gives each message to the waiters of its
//! topic at once, in that task, instead of queueing it for the actor, which
//! would cost every wake-up one more task switch (the wake-up path is the
//! hand-off gap the bench measures). Every other push (a
//! subscription confirmation, an unsolicited unsubscribe, a lost connection)
//! goes to the actor, which owns the connection's state.

use std::sync::{Arc, Weak};

use redis::aio::{AsyncPushSender, SendError};
use redis::{PushInfo, PushKind};
use tokio::sync::mpsc;

use super::registry::{lock, Published, Shared, Topic};

/// The push sender of a subscriber connection; see the module docs.
pub(super) struct Dispatcher {
    shared: Weak<Shared>,
    to_actor: mpsc::UnboundedSender<PushInfo>,
}

impl Dispatcher {
    /// A dispatcher, and the actor's end for the pushes that are not messages.
    pub(super) fn new(shared: Weak<Shared>) -> (Self, mpsc::UnboundedReceiver<PushInfo>) {
        let (to_actor, pushes) = mpsc::unbounded_channel();
        (Dispatcher { shared, to_actor }, pushes)
    }
}

impl AsyncPushSender for Dispatcher {
    fn send(&self, push: PushInfo) -> Result<(), SendError> {
        match push.kind {
            PushKind::Message | PushKind::PMessage | PushKind::SMessage => {
                // Gone: the subscriber was dropped, and the connection with it.
                let shared = self.shared.upgrade().ok_or(SendError)?;
                if let Some(message) = redis::Msg::from_push_info(push) {
                    dispatch(&shared, &message);
                }
                Ok(())
            }
            // Confirmations of our own (un)subscribes say nothing new.
            PushKind::Subscribe | PushKind::PSubscribe | PushKind::SSubscribe => Ok(()),
            _ => self.to_actor.send(push).map_err(|_| SendError),
        }
    }
}

/// Gives one message to the waiters of its topic (a channel, or the pattern
/// it matched), in the task that read it.
fn dispatch(shared: &Shared, message: &redis::Msg) {
    let Ok(channel) = message.get_channel::<Vec<u8>>() else {
        return;
    };
    let (topic, channel) = if message.from_pattern() {
        match message.get_pattern::<Vec<u8>>() {
            Ok(pattern) => (Topic::Pattern(pattern), channel.into_boxed_slice()),
            Err(_) => return,
        }
    } else {
        (Topic::Channel(channel.clone()), channel.into_boxed_slice())
    };
    let published = Published {
        channel,
        payload: message.get_payload_bytes().into(),
    };
    if let Some(entry) = lock(&shared.registry).get(&topic) {
        entry.deliver(Arc::new(published));
    }
}
