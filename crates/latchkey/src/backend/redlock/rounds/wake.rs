//! Waking Redlock waiters: the subscriptions to a lock's release channel
//! on the instances, and the local wake-up after a release by this process;
//! and a message to a lock's holders (a release request) on every instance.
//!
//! Apart from the rounds that change keys: these only listen, and need a
//! majority of subscriptions, not of keys.

use crate::backend::redlock::gather::Gathered;
use crate::backend::redlock::Group;
use crate::transport::subscriber::{Subscription, Topic};
use crate::vocab::error::Result;
use crate::vocab::names::LockKeys;

impl Group {
    /// Subscribes to the lock's release channel on the instances, all at
    /// once; a release on any of them wakes the waiter.
    ///
    /// Returns once every instance answered, or once a majority confirmed
    /// and the rest had their grace: a holder's release publishes on each
    /// instance of its majority, and any two majorities meet, so a majority
    /// of subscriptions hears it; a down instance (whose subscriber may take
    /// its full timeout to say so) does not hold up every waiter. A missing
    /// subscription only costs time when some of a holder's keys are gone:
    /// the waiter still wakes at the holder's TTL. Fails only when none
    /// can subscribe.
    pub(crate) async fn subscriptions(&self, keys: &LockKeys) -> Result<Vec<Subscription>> {
        let topic = Topic::Channel(keys.channel.clone());
        let topic = &topic;
        let quorum = self.inner.quorum;
        // Subscribing may include connecting the subscriber: allow the
        // longer timeout, not the TTL-derived one.
        let timeout = self
            .timeout_without_ttl()
            .max(crate::backend::redlock::MAX_INSTANCE_TIMEOUT);
        let Gathered { answers, .. } = self
            .gather(
                self.all(),
                timeout,
                "subscribe",
                |c| c.subscriber().subscribe(topic.clone()),
                |answers, _| answers.iter().filter(|(_, a)| a.is_ok()).count() >= quorum,
                true,
            )
            .await;
        let mut subscriptions = Vec::new();
        let mut first_error = None;
        for (_, answer) in answers {
            match answer {
                Ok(s) => subscriptions.push(s),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match (subscriptions.is_empty(), first_error) {
            (true, Some(e)) => Err(e),
            (true, None) => Err(self.no_quorum("subscribe", 0)),
            (false, _) => Ok(subscriptions),
        }
    }
}

impl Group {
    /// Publishes `message` on `channel` of every instance at once (a holder
    /// listens on each instance it reached): the connections that received
    /// it, summed. Fails only when no instance took it.
    pub(crate) async fn publish(&self, channel: &[u8], message: &[u8]) -> Result<u64> {
        let Gathered { answers, .. } = self
            .gather(
                self.all(),
                self.timeout_without_ttl(),
                "publish",
                |c| c.publish(channel, message),
                |_, pending| pending == 0,
                false,
            )
            .await;
        let mut heard = 0;
        let mut first_error = None;
        let mut published = false;
        for (_, answer) in answers {
            match answer {
                Ok(n) => {
                    heard += n;
                    published = true;
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match (published, first_error) {
            (false, Some(e)) => Err(e),
            (false, None) => Err(self.no_quorum("publish", 0)),
            (true, _) => Ok(heard),
        }
    }
}
