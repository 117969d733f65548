//! A value that refuses stale holders' writes: `FencedResource`/
//! `AsyncFencedResource`.

use std::sync::Arc;

use latchkey::FencedWrite;
use pyo3::prelude::*;

use super::{twins, Made};
use crate::args::Name;
use crate::clients::core::Core;
use crate::runtime::{run, Mode};

/// A value in Redis that refuses the writes of stale holders: a write with
/// a fencing token below the highest seen is rejected.
#[pyclass(
    module = "latchkey._native",
    name = "_FencedResource",
    subclass,
    frozen
)]
pub(crate) struct FencedBase {
    recipe: Arc<Made<latchkey::FencedResource>>,
    name: Name,
    mode: Mode,
}

twins!(FencedBase => FencedResource, AsyncFencedResource; fenced_class);

/// `client.fenced(name)`.
pub(crate) fn fenced(
    py: Python<'_>,
    core: &Arc<Core>,
    name: Name,
    mode: Mode,
) -> PyResult<Py<PyAny>> {
    let bytes = name.bytes.clone();
    let recipe = Made::new(py, core, move |c| c.client()?.fenced(&bytes))?;
    fenced_class(py, FencedBase { recipe, name, mode }.into(), mode)
}

#[pymethods]
impl FencedBase {
    /// Stores `value` if `token` is at least the highest seen: True when
    /// stored, False when refused (a newer holder wrote).
    fn write(
        &self,
        py: Python<'_>,
        token: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        let token = crate::args::token(py, token)?;
        let value = crate::args::name(py, value)?;
        let recipe = self.recipe.clone();
        run(py, self.mode, "FencedResource.write", async move {
            Ok(recipe.get().await?.write(token, value).await? == FencedWrite::Accepted)
        })
    }

    /// Raises the highest token seen to `token` (after a revocation, to
    /// its fencing token): the highest now.
    fn raise_to(&self, py: Python<'_>, token: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let token = crate::args::token(py, token)?;
        let recipe = self.recipe.clone();
        run(py, self.mode, "FencedResource.raise_to", async move {
            recipe.get().await?.raise(token).await
        })
    }

    /// (value, token of the write that stored it), or None.
    fn read(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let recipe = self.recipe.clone();
        run(py, self.mode, "FencedResource.read", async move {
            recipe.get().await?.read().await
        })
    }

    #[getter]
    fn name(&self, py: Python<'_>) -> Py<PyAny> {
        self.name.to_py(py)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        Ok(format!(
            "<latchkey.{} name={}>",
            slf.get_type().name()?,
            slf.get().name.shown()
        ))
    }
}
