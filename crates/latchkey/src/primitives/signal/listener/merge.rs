//! The event-merging machinery behind [`Listener`]: one listener holds many
//! subscriptions (a name's broadcast and waiter channels, on every server),
//! and servers that are still joining; this file waits on all of them at
//! once and turns each event into at most one [`Signal`].
//!
//! Apart from the API because the waiting (`select!` and `select_all` over
//! borrowed subscriptions) and the bookkeeping of watches and sources is
//! what a reader of the public methods does not need; it is also where the
//! cancel safety of `recv` comes from: every await here is on a receiver
//! that keeps its message when the future is dropped, and everything done
//! with a message happens without an await in between.

use std::future::Future;
use std::pin::Pin;

use futures_util::FutureExt;
use tokio::sync::oneshot;

use super::{Listener, Signal};
use crate::primitives::signal::wire;
use crate::transport::subscriber::{Event, Subscription};
use crate::vocab::error::{Error, Result};

/// One name or pattern the listener was asked to watch.
pub(super) struct Watch {
    pub(super) what: Box<[u8]>,
    pub(super) pattern: bool,
    /// For [`Listener::recv_all`]: the first signal this watch got.
    pub(super) got: Option<Signal>,
}

/// One subscription on one server.
pub(super) struct Sub {
    pub(super) subscription: Subscription,
    pub(super) watch: usize,
    pub(super) unicast: bool,
    /// Stable number of (server, subscription kind) for de-duplication.
    pub(super) source: u32,
}

pub(super) struct Joining {
    pub(super) server: usize,
    pub(super) rx: oneshot::Receiver<Result<Vec<Subscription>>>,
}

/// Which subscription of a server serves which watch.
#[derive(Clone, Copy)]
pub(super) struct Slot {
    pub(super) watch: usize,
    pub(super) unicast: bool,
}

pub(super) enum Got {
    Event(usize, Event),
    Joined(usize, Result<Vec<Subscription>>),
}

impl Listener {
    /// Waits for one event and handles it; a signal if it was one.
    pub(super) async fn next_signal(&mut self, all: bool) -> Option<Signal> {
        let got = self.next_event().await;
        self.handle(got, all)
    }

    pub(super) fn add(&mut self, server: usize, slots: &[Slot], subscriptions: Vec<Subscription>) {
        for (i, (slot, subscription)) in slots.iter().zip(subscriptions).enumerate() {
            // With `recv_all` a watch may be done before this server joined.
            if self.watches[slot.watch].got.is_some() {
                continue;
            }
            self.subs.push(Sub {
                subscription,
                watch: slot.watch,
                unicast: slot.unicast,
                source: (server * slots.len() + i) as u32,
            });
        }
    }

    /// The slot layout of one server (the same for every server).
    fn slots(&self) -> Vec<Slot> {
        let mut slots = Vec::with_capacity(self.watches.len() * 2);
        for (watch, w) in self.watches.iter().enumerate() {
            slots.push(Slot {
                watch,
                unicast: false,
            });
            if !w.pattern {
                slots.push(Slot {
                    watch,
                    unicast: true,
                });
            }
        }
        slots
    }

    /// The next event of any subscription, or a server that joined (whose
    /// subscriptions are then added; the server's number is returned).
    pub(super) async fn next_event(&mut self) -> Got {
        // The common shapes without boxing: one name on one server (its
        // broadcast and waiter channel), or one pattern.
        if self.joining.is_empty() {
            match self.subs.as_mut_slice() {
                [only] => return Got::Event(0, only.subscription.recv().await),
                [first, second] => {
                    // Biased: a broadcast (first) wakes many waiters at once;
                    // each then need not look at its own channel. A waiter
                    // channel is still read once the broadcasts are.
                    return tokio::select! {
                        biased;
                        event = first.subscription.recv() => Got::Event(0, event),
                        event = second.subscription.recv() => Got::Event(1, event),
                    };
                }
                _ => {}
            }
        }
        let got = {
            let mut waiting: Vec<Pin<Box<dyn Future<Output = Got> + Send + '_>>> =
                Vec::with_capacity(self.subs.len() + self.joining.len());
            for (i, sub) in self.subs.iter_mut().enumerate() {
                waiting.push(Box::pin(async move {
                    Got::Event(i, sub.subscription.recv().await)
                }));
            }
            for (k, joining) in self.joining.iter_mut().enumerate() {
                waiting.push(Box::pin(async move {
                    let result = (&mut joining.rx).await.unwrap_or_else(|_| {
                        Err(Error::Internal(
                            "a subscribing task ended without an answer".into(),
                        ))
                    });
                    Got::Joined(k, result)
                }));
            }
            if waiting.is_empty() {
                // Nothing to listen to (everything of `recv_all` is done).
                return std::future::pending().await;
            }
            futures_util::future::select_all(waiting).await.0
        };
        match got {
            Got::Joined(k, result) => self.joined(k, result),
            event => event,
        }
    }

    fn joined(&mut self, k: usize, result: Result<Vec<Subscription>>) -> Got {
        let server = self.joining.swap_remove(k).server;
        match result {
            Ok(subscriptions) => {
                let slots = self.slots();
                self.add(server, &slots, subscriptions);
                Got::Joined(server, Ok(Vec::new()))
            }
            Err(e) => Got::Joined(server, Err(e)),
        }
    }

    /// Like [`Listener::next_event`], but only what is there already.
    pub(super) fn next_event_now(&mut self) -> Option<Got> {
        for k in 0..self.joining.len() {
            match self.joining[k].rx.try_recv() {
                Ok(result) => return Some(self.joined(k, result)),
                Err(oneshot::error::TryRecvError::Closed) => {
                    let e = Error::Internal("a subscribing task ended without an answer".into());
                    return Some(self.joined(k, Err(e)));
                }
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
        }
        for (i, sub) in self.subs.iter_mut().enumerate() {
            if let Some(event) = sub.subscription.recv().now_or_never() {
                return Some(Got::Event(i, event));
            }
        }
        None
    }

    /// Turns an event into a signal, or `None` (not a signal, or a copy).
    /// With `all` (for `recv_all`), a signal satisfies its watch, whose
    /// subscriptions are then given up.
    pub(super) fn handle(&mut self, got: Got, all: bool) -> Option<Signal> {
        let Got::Event(i, Event::Message(message)) = got else {
            // Reconnects and lock wake-ups mean nothing to a signal waiter:
            // pub/sub keeps nothing, so there is nothing to re-check.
            return None;
        };
        let Sub {
            watch: w,
            unicast,
            source,
            ..
        } = self.subs[i];
        let watch = &self.watches[w];
        let (channel, payload) = (&message.channel, &message.payload);
        let name = if watch.pattern {
            let prefix = self.prefix.as_deref().unwrap_or_default();
            wire::name_of_broadcast_channel(prefix, channel)?.to_vec()
        } else {
            watch.what.to_vec()
        };
        let (id, body) = wire::open(payload);
        let copy = match (&mut self.recent, id) {
            (None, _) => false,
            (Some(recent), Some(id)) => recent.seen_id(id),
            (Some(recent), None) => {
                recent.seen_foreign(wire::fingerprint(channel, payload), source)
            }
        };
        // `recv_all` takes the first signal of every watch: the same signal
        // may satisfy two patterns, and a watch that is done hears nothing.
        if copy && !all {
            return None;
        }
        let signal = Signal {
            name,
            payload: body.to_vec(),
            unicast,
        };
        if !copy {
            crate::vocab::metrics::signal_received(unicast);
        }
        if all {
            if self.watches[w].got.is_none() {
                self.watches[w].got = Some(signal.clone());
            }
            self.subs.retain(|s| s.watch != w);
        }
        Some(signal)
    }
}
