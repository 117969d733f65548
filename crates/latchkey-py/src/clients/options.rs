//! The one construction every client class shares (`Client`,
//! `AsyncClient`, `Redlock`, `AsyncRedlock`): their keyword arguments,
//! read once into the `Options` a `Core` connects with.

use std::path::PathBuf;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

pub(crate) use super::core::Options;
use crate::args;
use crate::errors::{invalid, to_py};
use crate::runtime::Mode;

/// The keywords every client takes.
const COMMON_KEYWORDS: &[&str] = &[
    "prefix",
    "command_timeout",
    "tls_ca",
    "tls_cert",
    "tls_key",
    "tls_server_name",
];

/// Whether `key` is a keyword of a client of this deployment and mode: a
/// client of one Redis also takes `sentinels` and `master`, a Redlock
/// `instance_timeout`, a blocking one `connect` (an asyncio client always
/// connects on first use).
fn accepted(key: &str, redlock: bool, mode: Mode) -> bool {
    COMMON_KEYWORDS.contains(&key)
        || match key {
            "sentinels" | "master" => !redlock,
            "instance_timeout" => redlock,
            "connect" => mode == Mode::Blocking,
            _ => false,
        }
}

fn take<'py, T: for<'a> FromPyObject<'a, 'py>>(
    kwargs: &Bound<'py, PyDict>,
    key: &str,
) -> PyResult<Option<T>> {
    match kwargs.get_item(key)? {
        Some(value) if !value.is_none() => value.extract().map(Some).map_err(|_| {
            PyTypeError::new_err(format!(
                "{key}: {} is not accepted",
                value
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        }),
        _ => Ok(None),
    }
}

/// `url` (one URL, or a list: a cluster's nodes, a Redlock's instances)
/// and the keywords, checked: an unknown keyword is a `TypeError`, as
/// Python's own signatures make it.
pub(crate) fn options(
    py: Python<'_>,
    url: &Bound<'_, PyAny>,
    kwargs: Option<&Bound<'_, PyDict>>,
    redlock: bool,
    mode: Mode,
) -> PyResult<Options> {
    let empty = PyDict::new(py);
    let kwargs = kwargs.unwrap_or(&empty);
    for key in kwargs.keys() {
        let key: String = key.extract()?;
        if !accepted(&key, redlock, mode) {
            return Err(PyTypeError::new_err(format!(
                "unexpected keyword argument {key:?}"
            )));
        }
    }
    let fail = |m: &str| to_py(py, invalid(m));
    let mut urls: Vec<String> = match url.extract::<String>() {
        Ok(_) if redlock => {
            return Err(fail(
                "urls: a list of the URLs of the independent instances, not one URL",
            ))
        }
        Ok(one) => vec![one],
        Err(_) => url.extract::<Vec<String>>().map_err(|_| {
            fail(match redlock {
                true => "urls: a list of the URLs of the Redlock's independent instances",
                false => "url: a URL, or a list of the URLs of one Redis Cluster's nodes",
            })
        })?,
    };
    if urls.is_empty() {
        return Err(fail("url: an empty list"));
    }
    let first = urls.remove(0);
    let sentinel = match (
        take::<Vec<String>>(kwargs, "sentinels")?,
        take::<String>(kwargs, "master")?,
    ) {
        (Some(sentinels), Some(master)) => Some((sentinels, master)),
        (None, None) => None,
        _ => return Err(fail("sentinels and master go together")),
    };
    let tls_client = match (
        take::<PathBuf>(kwargs, "tls_cert")?,
        take::<PathBuf>(kwargs, "tls_key")?,
    ) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        _ => return Err(fail("tls_cert and tls_key go together")),
    };
    let seconds = |key: &str| -> PyResult<_> {
        take::<f64>(kwargs, key)?
            .map(|t| args::bound(py, key, t))
            .transpose()
    };
    let prefix = match kwargs.get_item("prefix")? {
        Some(p) if !p.is_none() => Some(args::name(py, &p)?),
        _ => None,
    };
    Ok(Options {
        url: first,
        seeds: urls,
        sentinel,
        prefix,
        command_timeout: seconds("command_timeout")?,
        tls_ca: take(kwargs, "tls_ca")?,
        tls_client,
        tls_server_name: take(kwargs, "tls_server_name")?,
        redlock: redlock.then(|| seconds("instance_timeout")).transpose()?,
        connect_now: mode == Mode::Blocking && take::<bool>(kwargs, "connect")?.unwrap_or(true),
    })
}
