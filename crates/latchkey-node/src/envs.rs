//! The clients of each JavaScript environment (the main thread's, each
//! worker thread's), so that the environment's end closes them, which
//! gives their holds back: an env cleanup hook when a worker is terminated
//! (no JavaScript runs then, and the guards' finalizers must not be what
//! releases), and the facade's `exit` listener on the main thread. Clients
//! JavaScript no longer references are reached too: the holds their
//! library client keeps keep it alive (`latchkey::WeakClient`).

use std::cell::RefCell;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use napi::{sys, Env};
use napi_derive::napi;

use crate::core::Core;

/// How long an environment's end waits for its holds' releases.
const AT_END: Duration = Duration::from_secs(1);

/// One client of an environment, kept weakly: one nothing uses any more
/// (no JavaScript object, no kept hold) has nothing to give back.
struct Known {
    /// While JavaScript (a client, a primitive, a guard) or a wait uses it.
    core: Weak<Core>,
    /// While its kept holds live, after JavaScript let go of it.
    client: latchkey::WeakClient,
}

/// A client to close at the environment's end.
enum Open {
    /// Its close also ends its pending waits.
    Core(Arc<Core>),
    /// Only its kept holds left: nothing waits on it.
    Client(latchkey::Client),
}

/// One environment's clients.
#[derive(Default)]
pub(crate) struct EnvCores {
    cores: Mutex<Vec<Known>>,
}

impl Known {
    /// Whether anything still uses the client (the one handle upgraded
    /// here may be its last: dropped on the runtime).
    fn used(&self) -> bool {
        self.core.strong_count() > 0
            || crate::executor::within(|| self.client.upgrade().is_some()).unwrap_or(false)
    }

    /// The client if anything still uses it, and it is not closed (one
    /// closed already waited for its releases: an exit does not wait for
    /// them twice).
    fn open(&self) -> Option<Open> {
        if let Some(core) = self.core.upgrade() {
            return (!core.is_closed()).then_some(Open::Core(core));
        }
        self.client.upgrade().map(Open::Client)
    }
}

impl EnvCores {
    pub(crate) fn add(&self, core: &Arc<Core>) {
        let mut cores = self.cores.lock().unwrap_or_else(|p| p.into_inner());
        cores.retain(Known::used);
        cores.push(Known {
            core: Arc::downgrade(core),
            client: core.client.downgrade(),
        });
    }

    /// The clients not closed yet.
    fn live(&self) -> Vec<Open> {
        let cores = self.cores.lock().unwrap_or_else(|p| p.into_inner());
        cores.iter().filter_map(Known::open).collect()
    }

    /// Closes every client, blocking at most `within`: whether all
    /// releases finished in time.
    fn close_all(&self, within: Duration) -> bool {
        let open = self.live();
        if open.is_empty() {
            return true;
        }
        let closing = async move {
            let mut all = true;
            for client in open {
                all &= match client {
                    Open::Core(core) => core.close(within).await,
                    Open::Client(client) => client.close(within).await,
                };
            }
            all
        };
        // Bounded as a whole, whatever the number of clients.
        let bounded = async move { tokio::time::timeout(within, closing).await };
        matches!(crate::executor::block_on(bounded), Some(Ok(true)))
    }
}

thread_local! {
    static ENV: RefCell<Option<(usize, Arc<EnvCores>)>> = const { RefCell::new(None) };
}

/// This environment's clients, with its cleanup hook added on first use.
pub(crate) fn of(env: &Env) -> napi::Result<Arc<EnvCores>> {
    let raw = env.raw();
    let known = ENV.with(|e| {
        e.borrow()
            .as_ref()
            .filter(|(at, _)| *at == raw as usize)
            .map(|(_, cores)| cores.clone())
    });
    if let Some(cores) = known {
        return Ok(cores);
    }
    let cores = Arc::new(EnvCores::default());
    let arg = Arc::into_raw(cores.clone()).cast_mut().cast::<c_void>();
    // SAFETY: on the JavaScript thread with its env; the hook's argument is
    // one strong count, given back by `cleanup`.
    let status = unsafe { sys::napi_add_env_cleanup_hook(raw, Some(cleanup), arg) };
    if status != sys::Status::napi_ok {
        // SAFETY: the count given above, not handed to N-API.
        drop(unsafe { Arc::from_raw(arg.cast::<EnvCores>()) });
        return Err(crate::errors::coded(
            "INTERNAL",
            &format!("adding the environment's cleanup hook failed (N-API status {status})"),
        ));
    }
    ENV.with(|e| *e.borrow_mut() = Some((raw as usize, cores.clone())));
    Ok(cores)
}

/// The environment ends (a worker terminated, or the process's last
/// teardown): every client of it gives its holds back. Nothing may panic
/// across this boundary.
unsafe extern "C" fn cleanup(arg: *mut c_void) {
    if arg.is_null() {
        return;
    }
    // SAFETY: the strong count `of` gave the hook.
    let cores = unsafe { Arc::from_raw(arg.cast::<EnvCores>()) };
    let _ = catch_unwind(AssertUnwindSafe(|| {
        cores.close_all(AT_END);
        let _ = ENV.try_with(|e| {
            if let Ok(mut e) = e.try_borrow_mut() {
                if e.as_ref().is_some_and(|(_, c)| Arc::ptr_eq(c, &cores)) {
                    *e = None;
                }
            }
        });
    }));
}

/// Closes every client of this thread's environment, blocking at most
/// `within_ms` (the facade's `exit` listener: an exit cannot wait for a
/// Promise). Whether every release finished in time.
#[napi]
pub fn close_all_blocking(env: Env, within_ms: f64) -> bool {
    let Ok(within) = crate::args::ms("within", within_ms) else {
        return false;
    };
    match of(&env) {
        Ok(cores) => cores.close_all(within),
        Err(_) => false,
    }
}
