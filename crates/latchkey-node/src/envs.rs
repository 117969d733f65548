//! The clients of each JavaScript environment (the main thread's, each
//! worker thread's), so that the environment's end gives their holds back:
//! an env cleanup hook when a worker is terminated (no JavaScript runs
//! then, and the guards' finalizers must not be what releases), and the
//! facade's `exit` listener on the main thread. Clients JavaScript no
//! longer references are reached too: their live holds keep them alive.

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

/// One environment's clients (weakly: a client with live holds is kept
/// alive by them, one without has nothing to give back).
#[derive(Default)]
pub(crate) struct EnvCores {
    cores: Mutex<Vec<Weak<Core>>>,
}

impl EnvCores {
    pub(crate) fn add(&self, core: &Arc<Core>) {
        let mut cores = self.cores.lock().unwrap_or_else(|p| p.into_inner());
        cores.retain(|c| c.strong_count() > 0);
        cores.push(Arc::downgrade(core));
    }

    /// The clients not closed yet (one closed already waited for its
    /// releases: an exit does not wait for them twice).
    fn live(&self) -> Vec<Arc<Core>> {
        let cores = self.cores.lock().unwrap_or_else(|p| p.into_inner());
        cores
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|c| !c.is_closed())
            .collect()
    }

    /// Closes every client, blocking at most `within`: whether all
    /// releases finished in time.
    fn close_all(&self, within: Duration) -> bool {
        let cores = self.live();
        if cores.is_empty() {
            return true;
        }
        let closing = async move {
            let mut all = true;
            for core in cores {
                all &= core.close(within).await;
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
