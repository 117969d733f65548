//! Promises settled through one long-lived completion queue per JavaScript
//! thread, instead of napi-rs's `AsyncBlock` (which makes and tears down a
//! thread-safe function, an env cleanup hook and a stack-trace Error for
//! every call: the larger part of what a call costs beside its I/O and its
//! two thread hops; bench/RESULTS.md, "The Node package").
//!
//! A call makes a plain Promise (`napi_create_promise`) and spawns its
//! future on the runtime; the future's answer is pushed onto the queue, and
//! the first answer of a batch wakes the thread's one thread-safe function,
//! whose callback settles every queued Promise on the JavaScript thread.
//! The thread-safe function is referenced only while calls are in flight:
//! an idle client never keeps the event loop alive, a pending call does
//! (as any Promise-returning I/O in Node does).
//!
//! The feature `per-call-promises` builds napi-rs's own way instead (module
//! `per_call`), only so that both can be measured from one tree.

// Under `per-call-promises` the queue is built but unused.
#![cfg_attr(feature = "per-call-promises", allow(dead_code, unused_imports))]

use std::cell::RefCell;
use std::ffi::c_void;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use napi::bindgen_prelude::{PromiseRaw, ToNapiValue};
use napi::{sys, Env, JsError};
use tokio_util::sync::CancellationToken;

/// What a native call returns: the Promise `promise` made (its lifetime is
/// the call's; the method's return converts it at once).
pub(crate) type Promise<T> = PromiseRaw<'static, T>;

/// An answer, made into its JavaScript value on the JavaScript thread.
type Settle = Box<dyn FnOnce(sys::napi_env) -> napi::Result<sys::napi_value> + Send>;

/// A Promise's resolver. Used (and freed) only on its JavaScript thread.
struct Deferred(sys::napi_deferred);

// SAFETY: the handle is only carried by the runtime's threads, never used
// there: it is settled by `drain`, on the thread that made it.
unsafe impl Send for Deferred {}

struct Done {
    deferred: Deferred,
    settle: Settle,
}

struct State {
    done: Vec<Done>,
    /// Null once the environment is torn down (then answers are dropped:
    /// a guard among them is released in the background, as any dropped
    /// guard is).
    tsfn: sys::napi_threadsafe_function,
    /// A drain is scheduled and has not taken the batch yet.
    woken: bool,
}

// SAFETY: `tsfn` may be called from any thread (N-API's thread-safe
// functions); it is referenced, unreferenced and nulled on the JavaScript
// thread only, always under the mutex.
unsafe impl Send for State {}

/// One JavaScript thread's queue.
pub(crate) struct Queue {
    state: Mutex<State>,
    /// Calls started and not settled yet; touched on the JavaScript thread
    /// only (an atomic only because the queue is shared with the runtime).
    in_flight: AtomicUsize,
    env: sys::napi_env,
    /// Fired when the environment is torn down (a worker terminated): the
    /// calls still in flight are dropped then, not left running on the
    /// process's runtime (a wait would otherwise take its lock later, for
    /// nobody). Dropping them is what the library makes safe.
    torn_down: CancellationToken,
}

// SAFETY: `env` is compared and passed to N-API on its own thread only.
unsafe impl Send for Queue {}
unsafe impl Sync for Queue {}

thread_local! {
    static QUEUE: RefCell<Option<Arc<Queue>>> = const { RefCell::new(None) };
}

fn check(status: sys::napi_status, what: &str) -> napi::Result<()> {
    match status {
        sys::Status::napi_ok => Ok(()),
        _ => Err(napi::Error::from_reason(format!(
            "[INTERNAL] {what} failed (N-API status {status})"
        ))),
    }
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// This thread's queue, made on first use.
    fn of(env: sys::napi_env) -> napi::Result<Arc<Queue>> {
        let known = QUEUE.with(|q| q.borrow().as_ref().filter(|q| q.env == env).cloned());
        if let Some(queue) = known {
            return Ok(queue);
        }
        let queue = Arc::new(Queue {
            state: Mutex::new(State {
                done: Vec::new(),
                tsfn: ptr::null_mut(),
                woken: false,
            }),
            in_flight: AtomicUsize::new(0),
            env,
            torn_down: CancellationToken::new(),
        });
        let mut name = ptr::null_mut();
        const NAME: &str = "latchkey completions";
        // SAFETY: N-API calls on the JavaScript thread with its env; the
        // context is one strong count of the queue, given back by `finalize`.
        unsafe {
            check(
                sys::napi_create_string_utf8(
                    env,
                    NAME.as_ptr().cast(),
                    NAME.len() as isize,
                    &mut name,
                ),
                "naming the completion queue",
            )?;
            let context = Arc::into_raw(queue.clone()).cast_mut().cast::<c_void>();
            let mut tsfn = ptr::null_mut();
            let made = sys::napi_create_threadsafe_function(
                env,
                ptr::null_mut(),
                ptr::null_mut(),
                name,
                0,
                1,
                ptr::null_mut(),
                Some(finalize),
                context,
                Some(drain),
                &mut tsfn,
            );
            if let Err(e) = check(made, "making the completion queue") {
                drop(Arc::from_raw(context.cast::<Queue>()));
                return Err(e);
            }
            check(
                sys::napi_unref_threadsafe_function(env, tsfn),
                "unreferencing the completion queue",
            )?;
            queue.lock().tsfn = tsfn;
        }
        QUEUE.with(|q| *q.borrow_mut() = Some(queue.clone()));
        Ok(queue)
    }

    /// A call starts: the first in flight keeps the event loop alive.
    fn started(&self) {
        if self.in_flight.fetch_add(1, Ordering::Relaxed) == 0 {
            let state = self.lock();
            if !state.tsfn.is_null() {
                // SAFETY: on the JavaScript thread, the queue not torn down.
                unsafe { sys::napi_ref_threadsafe_function(self.env, state.tsfn) };
            }
        }
    }

    /// `n` calls settled: with none left in flight, the loop may end.
    fn settled(&self, n: usize) {
        if n > 0 && self.in_flight.fetch_sub(n, Ordering::Relaxed) == n {
            let state = self.lock();
            if !state.tsfn.is_null() {
                // SAFETY: as in `started`.
                unsafe { sys::napi_unref_threadsafe_function(self.env, state.tsfn) };
            }
        }
    }

    /// An answer (on the runtime's thread): queued, and a drain scheduled
    /// unless one is already.
    fn finish(&self, done: Done) {
        let mut state = self.lock();
        if state.tsfn.is_null() {
            drop(state);
            drop(done);
            return;
        }
        state.done.push(done);
        if !state.woken {
            state.woken = true;
            // SAFETY: the thread-safe function lives until `finalize` nulls
            // it under this mutex. Unbounded (queue size 0): never blocks.
            unsafe {
                sys::napi_call_threadsafe_function(
                    state.tsfn,
                    ptr::null_mut(),
                    sys::ThreadsafeFunctionCallMode::nonblocking,
                )
            };
        }
    }
}

/// Settles every queued answer (N-API calls it on the JavaScript thread).
unsafe extern "C" fn drain(
    env: sys::napi_env,
    _: sys::napi_value,
    context: *mut c_void,
    _: *mut c_void,
) {
    if env.is_null() || context.is_null() {
        return;
    }
    // SAFETY: the context is the queue's strong count, alive until `finalize`.
    let queue = unsafe { &*context.cast::<Queue>() };
    let batch = {
        let mut state = queue.lock();
        state.woken = false;
        std::mem::take(&mut state.done)
    };
    let n = batch.len();
    for Done { deferred, settle } in batch {
        // SAFETY: on the JavaScript thread that made the deferred; each is
        // settled exactly once, here.
        // A panic must not cross N-API: it rejects the one Promise.
        let settled = catch_unwind(AssertUnwindSafe(|| settle(env))).unwrap_or_else(|_| {
            Err(napi::Error::from_reason(
                "[INTERNAL] making the answer's JavaScript value panicked",
            ))
        });
        unsafe {
            match settled {
                Ok(value) => sys::napi_resolve_deferred(env, deferred.0, value),
                Err(e) => {
                    sys::napi_reject_deferred(env, deferred.0, JsError::from(e).into_value(env))
                }
            };
        }
    }
    queue.settled(n);
}

/// The environment is torn down: answers still to come are dropped.
unsafe extern "C" fn finalize(_: sys::napi_env, _: *mut c_void, context: *mut c_void) {
    if context.is_null() {
        return;
    }
    // SAFETY: the strong count given to the thread-safe function by `of`.
    let queue = unsafe { Arc::from_raw(context.cast::<Queue>()) };
    let left = {
        let mut state = queue.lock();
        state.tsfn = ptr::null_mut();
        std::mem::take(&mut state.done)
    };
    // Answers may hold guards and clients: dropped where their drops may
    // spawn, never panicking into N-API.
    crate::executor::drop_in_runtime(left);
    queue.torn_down.cancel();
    let _ = QUEUE.try_with(|q| {
        if let Ok(mut q) = q.try_borrow_mut() {
            if q.as_ref().is_some_and(|q| Arc::ptr_eq(q, &queue)) {
                *q = None;
            }
        }
    });
}

/// A call in flight: settles its Promise once, with the answer, or (if its
/// task is dropped unanswered: a panic, the runtime shut down) with an error.
struct Pending {
    queue: Arc<Queue>,
    deferred: Option<Deferred>,
}

impl Pending {
    fn answer(mut self, settle: Settle) {
        if let Some(deferred) = self.deferred.take() {
            self.queue.finish(Done { deferred, settle });
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(deferred) = self.deferred.take() {
            let settle: Settle = Box::new(|_| {
                Err(napi::Error::from_reason(
                    "[INTERNAL] the call ended unanswered",
                ))
            });
            self.queue.finish(Done { deferred, settle });
        }
    }
}

/// A Promise of `fut`'s answer, settled through this thread's queue.
#[cfg(not(feature = "per-call-promises"))]
pub(crate) fn promise<T, F>(env: &Env, fut: F) -> napi::Result<Promise<T>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = napi::Result<T>> + Send + 'static,
{
    let raw = env.raw();
    let queue = Queue::of(raw)?;
    let (mut deferred, mut promise) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: on the JavaScript thread, with its env.
    check(
        unsafe { sys::napi_create_promise(raw, &mut deferred, &mut promise) },
        "making a Promise",
    )?;
    queue.started();
    let torn_down = queue.torn_down.clone();
    let pending = Pending {
        queue,
        deferred: Some(Deferred(deferred)),
    };
    // Without a runtime (it could not start) the future is dropped
    // unrun: `Pending` then rejects the Promise.
    let _ = crate::executor::spawn(async move {
        let pending = pending;
        let answer = tokio::select! {
            biased;
            _ = torn_down.cancelled() => return,
            answer = fut => answer,
        };
        let settle: Settle = Box::new(move |env| match answer {
            // SAFETY: `drain` calls it on the JavaScript thread.
            Ok(value) => unsafe { T::to_napi_value(env, value) },
            Err(e) => Err(e),
        });
        pending.answer(settle);
    });
    Ok(PromiseRaw::new(raw, promise))
}

#[cfg(feature = "per-call-promises")]
pub(crate) use per_call::promise;

/// napi-rs's own per-call Promise, the one its `AsyncBlock` and
/// `Env::spawn_future` settle through: a `JsDeferred` (a Promise, a
/// thread-safe function and an env cleanup hook made for each call, torn
/// down when it settles), its future on the package's runtime. Built only
/// with the feature `per-call-promises`, to measure the queue against it
/// (bench/node_queue.sh). Unlike the queue, a terminated worker's calls run
/// on to their end.
#[cfg(feature = "per-call-promises")]
mod per_call {
    use std::future::Future;

    use napi::bindgen_prelude::{PromiseRaw, ToNapiValue};
    use napi::{Env, JsDeferred, JsValue};

    use super::Promise;

    type Resolve<T> = Box<dyn FnOnce(Env) -> napi::Result<T> + Send>;

    /// Settles its Promise once: with the answer, or (if the task is
    /// dropped unanswered) with an error, as the queue's `Pending` does.
    struct Pending<T: ToNapiValue + 'static>(Option<JsDeferred<T, Resolve<T>>>);

    impl<T: ToNapiValue + 'static> Drop for Pending<T> {
        fn drop(&mut self) {
            if let Some(deferred) = self.0.take() {
                deferred.reject(napi::Error::from_reason(
                    "[INTERNAL] the call ended unanswered",
                ));
            }
        }
    }

    pub(crate) fn promise<T, F>(env: &Env, fut: F) -> napi::Result<Promise<T>>
    where
        T: ToNapiValue + Send + 'static,
        F: Future<Output = napi::Result<T>> + Send + 'static,
    {
        let (deferred, promise) = env.create_deferred::<T, Resolve<T>>()?;
        let raw = promise.raw();
        let mut pending = Pending(Some(deferred));
        let _ = crate::executor::spawn(async move {
            let answer = fut.await;
            if let Some(deferred) = pending.0.take() {
                match answer {
                    Ok(value) => deferred.resolve(Box::new(move |_| Ok(value))),
                    Err(e) => deferred.reject(e),
                }
            }
        });
        Ok(PromiseRaw::new(env.raw(), raw))
    }
}
