//! The recipes (what a client makes: a lock, a semaphore, …), one file
//! each, and what they share: the Rust object made once per process
//! (`Made`), the lease options every lease recipe takes, and the twin
//! classes (blocking, asyncio) every Python class has.

pub(crate) mod barrier;
pub(crate) mod election;
pub(crate) mod fence;
pub(crate) mod latch;
pub(crate) mod lock;
pub(crate) mod options;
pub(crate) mod rwlock;
pub(crate) mod semaphore;

use std::future::Future;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;

use crate::clients::core::Core;
use crate::errors::to_py;
use crate::runtime::{drop_in_runtime, pid, run, Mode};

type Build<T> = Box<dyn Fn(&latchkey::Client) -> latchkey::Result<T> + Send + Sync>;

/// A recipe's Rust object, made once per process from the client of that
/// process: at once when the client is connected (so a bad name, TTL or
/// count is refused where the recipe is made), else on first use; again in
/// a forked child, whose client is its own.
pub(crate) struct Made<T: Clone + Send + 'static> {
    pub(crate) core: Arc<Core>,
    build: Build<T>,
    made: Mutex<Option<(u32, T)>>,
}

impl<T: Clone + Send + 'static> Made<T> {
    pub(crate) fn new(
        py: Python<'_>,
        core: &Arc<Core>,
        build: impl Fn(&latchkey::Client) -> latchkey::Result<T> + Send + Sync + 'static,
    ) -> PyResult<Arc<Made<T>>> {
        core.check_open().map_err(|e| to_py(py, e))?;
        let made = Made {
            core: core.clone(),
            build: Box::new(build),
            made: Mutex::new(None),
        };
        if let Some(connected) = core.connected() {
            let built = (made.build)(&connected).map_err(|e| to_py(py, e))?;
            made.keep(built);
        }
        Ok(Arc::new(made))
    }

    fn mine(&self) -> Option<T> {
        let made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        made.as_ref()
            .filter(|(by, _)| *by == pid())
            .map(|(_, t)| t.clone())
    }

    fn keep(&self, built: T) -> T {
        let inherited = self
            .made
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace((pid(), built.clone()));
        if let Some((by, old)) = inherited {
            drop_in_runtime(old, by); // a parent's, in a forked child: forgotten
        }
        built
    }

    /// `call` on the object of this process, run the way `mode` runs
    /// things (see `runtime::run`).
    pub(crate) fn run<F, R>(
        self: &Arc<Self>,
        py: Python<'_>,
        mode: Mode,
        qualname: &str,
        call: impl FnOnce(T) -> F + Send + 'static,
    ) -> PyResult<Py<PyAny>>
    where
        F: Future<Output = latchkey::Result<R>> + Send + 'static,
        R: for<'py> IntoPyObject<'py> + Send + 'static,
    {
        let made = self.clone();
        run(
            py,
            mode,
            qualname,
            async move { call(made.get().await?).await },
        )
    }

    /// The object of this process, connecting and making it first if needed.
    pub(crate) async fn get(self: Arc<Self>) -> latchkey::Result<T> {
        if let Some(made) = self.mine() {
            return Ok(made);
        }
        // Boxed: the connection's future is large, and kept inline it would
        // be moved with every call's future (a few kB copied twice a call)
        // though it runs only once per process.
        let connected = Box::pin(self.core.clone().connect()).await?;
        let built = (self.build)(&connected)?;
        Ok(self.keep(built))
    }
}

impl<T: Clone + Send + 'static> Drop for Made<T> {
    fn drop(&mut self) {
        // Python drops a recipe outside the runtime: a cached lock's idle
        // hold is given back there (or forgotten, in a forked child).
        let made = self
            .made
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some((by, made)) = made {
            drop_in_runtime(made, by);
        }
    }
}

/// A blocking and an asyncio class over one base class (which has every
/// method, and its `Mode`), and the function that makes the one of a
/// mode: `isinstance(x, AsyncSemaphore)` holds at run time, as the stubs
/// say.
macro_rules! twins {
    ($base:ty => $sync:ident, $async:ident; $maker:ident) => {
        #[pyo3::pyclass(module = "latchkey._native", extends = $base, frozen)]
        pub(crate) struct $sync {}

        #[pyo3::pyclass(module = "latchkey._native", extends = $base, frozen)]
        pub(crate) struct $async {}

        /// The class of `mode` over `init`.
        pub(crate) fn $maker(
            py: pyo3::Python<'_>,
            init: pyo3::PyClassInitializer<$base>,
            mode: $crate::runtime::Mode,
        ) -> pyo3::PyResult<pyo3::Py<pyo3::PyAny>> {
            Ok(match mode {
                $crate::runtime::Mode::Blocking => {
                    pyo3::Py::new(py, init.add_subclass($sync {}))?.into_any()
                }
                $crate::runtime::Mode::Asyncio => {
                    pyo3::Py::new(py, init.add_subclass($async {}))?.into_any()
                }
            })
        }
    };
}
pub(crate) use twins;

/// What a recipe's class shows of a field: its value for Python and in
/// `repr()`.
pub(crate) trait Shown {
    type Out;
    fn out(&self) -> Self::Out;
}

impl Shown for u64 {
    type Out = u64;
    fn out(&self) -> u64 {
        *self
    }
}

impl Shown for std::time::Duration {
    type Out = f64;
    fn out(&self) -> f64 {
        self.as_secs_f64()
    }
}

/// A recipe's base class and all that every recipe has alike: the struct
/// (its Rust object made once per process, its name as given, the fields
/// it `shows`, those it only `keeps`, its mode), its blocking and asyncio
/// twins, `make` (the class of a mode over a recipe built by `build` from
/// a process's connection and the name's bytes), the `name` getter, a
/// getter for each field shown, and `__repr__`.
macro_rules! recipe_class {
    (
        $(#[$doc:meta])*
        $base:ident($pyname:literal) of $recipe:ty => $sync:ident, $async:ident;
        shows { $($(#[$fdoc:meta])* $field:ident: $fty:ty),* $(,)? }
        keeps { $($kept:ident: $kty:ty),* $(,)? }
    ) => {
        $(#[$doc])*
        #[pyo3::pyclass(module = "latchkey._native", name = $pyname, subclass, frozen)]
        pub(crate) struct $base {
            recipe: std::sync::Arc<$crate::recipes::Made<$recipe>>,
            name: $crate::args::Name,
            $($field: $fty,)*
            $($kept: $kty,)*
            mode: $crate::runtime::Mode,
        }

        $crate::recipes::twins!($base => $sync, $async; class_of);

        impl $base {
            /// The class of `mode` over the recipe `build` makes.
            #[allow(clippy::too_many_arguments)]
            pub(crate) fn make(
                py: pyo3::Python<'_>,
                core: &std::sync::Arc<$crate::clients::core::Core>,
                name: $crate::args::Name,
                $($field: $fty,)*
                $($kept: $kty,)*
                mode: $crate::runtime::Mode,
                build: impl Fn(&latchkey::Client, &[u8]) -> latchkey::Result<$recipe>
                    + Send
                    + Sync
                    + 'static,
            ) -> pyo3::PyResult<pyo3::Py<pyo3::PyAny>> {
                let bytes = name.bytes.clone();
                let recipe = $crate::recipes::Made::new(py, core, move |c| build(c, &bytes))?;
                let base = $base { recipe, name, $($field,)* $($kept,)* mode };
                class_of(py, base.into(), mode)
            }
        }

        #[pyo3::pymethods]
        impl $base {
            /// The name as given.
            #[getter]
            fn name(&self, py: pyo3::Python<'_>) -> pyo3::Py<pyo3::PyAny> {
                self.name.to_py(py)
            }

            $(
                $(#[$fdoc])*
                #[getter]
                fn $field(&self) -> <$fty as $crate::recipes::Shown>::Out {
                    $crate::recipes::Shown::out(&self.$field)
                }
            )*

            fn __repr__(slf: &pyo3::Bound<'_, Self>) -> pyo3::PyResult<String> {
                let me = slf.get();
                let mut shown = format!(
                    "<latchkey.{} name={}",
                    pyo3::types::PyTypeMethods::name(&slf.get_type())?,
                    me.name.shown()
                );
                $(shown.push_str(&format!(
                    concat!(" ", stringify!($field), "={}"),
                    $crate::recipes::Shown::out(&me.$field)
                ));)*
                shown.push('>');
                Ok(shown)
            }
        }
    };
}
pub(crate) use recipe_class;
