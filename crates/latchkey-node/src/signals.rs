//! The iterators' native halves: a signal listener and an election
//! observer, each a `next` that waits (cancellable) and a `close`.

use std::sync::Arc;

use napi::Env;
use napi_derive::napi;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::runtime::Promise;
use crate::runtime::{cancellable, promise, token, Cancel};
use napi::bindgen_prelude::{BigInt, Buffer};

/// A signal as JavaScript sees it.
#[napi(object)]
pub struct SignalMessage {
    pub name: String,
    pub payload: Buffer,
    pub unicast: bool,
}

impl From<latchkey::Signal> for SignalMessage {
    fn from(s: latchkey::Signal) -> Self {
        SignalMessage {
            name: String::from_utf8_lossy(&s.name).into_owned(),
            payload: s.payload.into(),
            unicast: s.unicast,
        }
    }
}

/// A leader as observers see it.
#[napi(object)]
pub struct LeaderInfo {
    pub value: Buffer,
    pub term: BigInt,
    /// Milliseconds since the epoch (the server's clock).
    pub since: f64,
}

impl From<latchkey::Leader> for LeaderInfo {
    fn from(l: latchkey::Leader) -> Self {
        LeaderInfo {
            value: l.value.into(),
            term: BigInt::from(l.term),
            since: l
                .since
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64()
                * 1000.0,
        }
    }
}

fn closed_listener() -> latchkey::Error {
    latchkey::Error::Unsupported("the listener is closed")
}

#[napi]
pub struct Listener {
    inner: Arc<Mutex<Option<latchkey::Listener>>>,
    /// The client's close, which ends a `recv` in flight.
    closing: CancellationToken,
}

impl Listener {
    pub(crate) fn new(listener: latchkey::Listener, closing: CancellationToken) -> Listener {
        Listener {
            inner: Arc::new(Mutex::new(Some(listener))),
            closing,
        }
    }
}

#[napi]
impl Listener {
    /// The next signal (waits at most `timeout_ms`: WAIT_TIMED_OUT), or
    /// null once closed.
    #[napi(ts_return_type = "Promise<SignalMessage | null>")]
    pub fn recv(
        &self,
        env: Env,
        timeout_ms: Option<f64>,
        cancel: Option<&Cancel>,
    ) -> napi::Result<Promise<Option<SignalMessage>>> {
        let wait = crate::args::opt_ms("timeout", timeout_ms).map_err(crate::errors::to_js)?;
        let inner = self.inner.clone();
        cancellable(&env, token(cancel), self.closing.clone(), async move {
            let mut held = inner.lock().await;
            let Some(listener) = held.as_mut() else {
                return Ok(None);
            };
            let signal = match wait {
                Some(wait) => listener.recv_timeout(wait).await?,
                None => listener.recv().await,
            };
            Ok(Some(signal.into()))
        })
    }

    /// A signal that already arrived and was not received yet, without
    /// waiting (pub/sub keeps nothing: only a listener can tell); null if
    /// there is none, or while a `recv` is in flight.
    #[napi]
    pub fn try_recv(&self) -> Option<SignalMessage> {
        let mut held = self.inner.try_lock().ok()?;
        held.as_mut()?.try_recv().map(Into::into)
    }

    /// Whether a server confirmed the subscriptions on its current
    /// connection (false while every connection is down or reconnecting,
    /// and once closed; during a `recv`, the last answer is not known:
    /// true).
    #[napi(getter)]
    pub fn subscribed(&self) -> bool {
        match self.inner.try_lock() {
            Ok(held) => held.as_ref().is_some_and(|l| l.is_subscribed()),
            Err(_) => true,
        }
    }

    /// Unsubscribes; a `recv` in flight is cancelled by the facade first.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close(&self, env: Env) -> napi::Result<Promise<()>> {
        let inner = self.inner.clone();
        promise(&env, async move {
            let taken = inner.lock().await.take();
            if let Some(listener) = taken {
                listener.close().await;
            }
            Ok(())
        })
    }
}

#[napi]
pub struct Observer {
    inner: Arc<Mutex<Option<latchkey::Observer>>>,
    /// The client's close, which ends a `next` in flight.
    closing: CancellationToken,
}

impl Observer {
    pub(crate) fn new(observer: latchkey::Observer, closing: CancellationToken) -> Observer {
        Observer {
            inner: Arc::new(Mutex::new(Some(observer))),
            closing,
        }
    }
}

/// One state of an election: its leader, or null when nobody leads.
#[napi(object)]
pub struct Observed {
    pub leader: Option<LeaderInfo>,
}

#[napi]
impl Observer {
    /// The next state (the first call: the state now).
    #[napi(ts_return_type = "Promise<Observed>")]
    pub fn next(&self, env: Env, cancel: Option<&Cancel>) -> napi::Result<Promise<Observed>> {
        let inner = self.inner.clone();
        cancellable(&env, token(cancel), self.closing.clone(), async move {
            let mut held = inner.lock().await;
            let Some(observer) = held.as_mut() else {
                return Err(closed_listener());
            };
            Ok(Observed {
                leader: observer.next().await?.map(LeaderInfo::from),
            })
        })
    }

    /// How many changes this observer could not report one by one (it
    /// re-read the state instead); null while a `next()` is in flight.
    #[napi]
    pub fn missed(&self) -> Option<f64> {
        let held = self.inner.try_lock().ok()?;
        held.as_ref().map(|o| o.missed() as f64)
    }

    #[napi]
    pub fn close(&self) {
        if let Ok(mut held) = self.inner.try_lock() {
            held.take();
        }
    }
}
