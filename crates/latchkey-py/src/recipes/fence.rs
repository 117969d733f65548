//! A value that refuses stale holders' writes: `FencedResource`/
//! `AsyncFencedResource`.

use latchkey::FencedWrite;
use pyo3::prelude::*;

use super::recipe_class;

recipe_class! {
    /// A value in Redis that refuses the writes of stale holders: a write
    /// with a fencing token below the highest seen is rejected.
    FencedBase("_FencedResource") of latchkey::FencedResource => FencedResource, AsyncFencedResource;
    shows {}
    keeps {}
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
        self.recipe.run(py, self.mode, "FencedResource.write", move |recipe| async move {
            Ok(recipe.write(token, value).await? == FencedWrite::Accepted)
        })
    }

    /// Raises the highest token seen to `token` (after a revocation, to
    /// its fencing token): the highest now.
    fn raise_to(&self, py: Python<'_>, token: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let token = crate::args::token(py, token)?;
        self.recipe.run(
            py,
            self.mode,
            "FencedResource.raise_to",
            move |recipe| async move { recipe.raise(token).await },
        )
    }

    /// (value, token of the write that stored it), or None.
    fn read(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.recipe.run(
            py,
            self.mode,
            "FencedResource.read",
            move |recipe| async move { recipe.read().await },
        )
    }
}
