//! Messages delivered where they are read.
//!
//! Both subscriber connections speak RESP3, where messages arrive as pushes
//! that redis-rs hands to a push sender from the task that reads the socket.
//! [`Dispatcher`] is that sender: it gives each message to the waiters of its
//! topic at once, in that task, instead of queueing it for the actor, which
//! would cost every wake-up one more task switch (the wake-up path is the
//! hand-off gap that issues 17 and 20 measure). Every other push (a
//! subscription confirmation, an unsolicited unsubscribe, a lost connection)
//! goes to the actor, which owns the connection's state.

use std::sync::Weak;

use redis::aio::{AsyncPushSender, SendError};
use redis::{PushInfo, PushKind};
use tokio::sync::mpsc;

use super::actor::dispatch;
use super::registry::Shared;

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
