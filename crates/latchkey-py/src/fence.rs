//! Every call into the Rust API of a fenced resource
//! (`latchkey::FencedResource`), and its Python class.

use std::sync::Arc;

use latchkey::FencedWrite;
use pyo3::prelude::*;

use crate::core::Core;
use crate::runtime::run;

pub(crate) struct FencedSpec {
    pub(crate) core: Arc<Core>,
    pub(crate) name: Vec<u8>,
}

impl FencedSpec {
    pub(crate) fn build(
        &self,
        client: &latchkey::Client,
    ) -> latchkey::Result<latchkey::FencedResource> {
        client.fenced(&self.name)
    }

    async fn resource(&self) -> latchkey::Result<latchkey::FencedResource> {
        let client = self.core.clone().client().await?;
        self.build(&client)
    }
}

/// A value in Redis that refuses the writes of stale holders: a write with
/// a fencing token below the highest seen is rejected.
#[pyclass(module = "latchkey._native", frozen)]
pub(crate) struct FencedResource {
    pub(crate) spec: Arc<FencedSpec>,
    pub(crate) asyncio: bool,
}

#[pymethods]
impl FencedResource {
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
        let spec = self.spec.clone();
        run(py, self.asyncio, "FencedResource.write", async move {
            Ok(spec.resource().await?.write(token, value).await? == FencedWrite::Accepted)
        })
    }

    /// (value, token of the write that stored it), or None.
    fn read(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let spec = self.spec.clone();
        run(py, self.asyncio, "FencedResource.read", async move {
            spec.resource().await?.read().await
        })
    }
}
