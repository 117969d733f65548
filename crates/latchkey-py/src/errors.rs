//! latchkey's errors as Python exceptions: one class per kind of the Rust
//! `latchkey::Error`, defined in Python (python/latchkey/_errors.py, where
//! they can also derive from the built-in ones: `WaitTimedOut` is a
//! `TimeoutError`, `InvalidInput` a `ValueError`), with the same one-line
//! messages.

use latchkey::Error;
use pyo3::prelude::*;

/// The Python class of a library error code (a name in `latchkey._errors`):
/// the code in CamelCase, `WAIT_TIMED_OUT` → `WaitTimedOut`. The classes are
/// declared once, in Python; the codes once, in the library.
pub(crate) fn class_name(code: &str) -> String {
    code.split('_')
        .map(|word| {
            let mut letters = word.chars();
            letters.next().map_or_else(String::new, |first| {
                first.to_string() + &letters.as_str().to_ascii_lowercase()
            })
        })
        .collect()
}

/// Every class `to_py` can raise, and the two the Python side raises
/// itself: for the test that each exists.
pub(crate) fn class_names() -> Vec<String> {
    Error::CODES
        .iter()
        .map(|code| class_name(code))
        .chain(["LatchkeyError", "LockLost"].map(str::to_owned))
        .collect()
}

/// `e` as an instance of its Python class, with the Rust message.
pub(crate) fn to_py(py: Python<'_>, e: Error) -> PyErr {
    raise(py, &class_name(e.code()), e.to_string())
}

/// An exception of the class called `class` in `latchkey._errors` (the
/// base class `LatchkeyError` if there is no such class: a kind the Rust
/// library has and this package's Python half does not yet).
pub(crate) fn raise(py: Python<'_>, class: &str, message: String) -> PyErr {
    let made = py.import("latchkey._errors").and_then(|m| {
        m.getattr(class)
            .or_else(|_| m.getattr("LatchkeyError"))
            .and_then(|c| c.call1((message.clone(),)))
    });
    match made {
        Ok(instance) => PyErr::from_value(instance),
        // The Python half is missing (the bare extension imported alone).
        Err(_) => pyo3::exceptions::PyRuntimeError::new_err(message),
    }
}

/// A bad argument from Python (a negative timeout, a name of the wrong type).
pub(crate) fn invalid(message: impl Into<String>) -> Error {
    Error::InvalidInput(message.into())
}

/// The runtime is gone or cannot start: `latchkey.InternalError`.
pub(crate) fn closed(message: &str) -> PyErr {
    Python::attach(|py| raise(py, "InternalError", format!("internal error: {message}")))
}

/// A `DeprecationWarning` pointing at the caller's line.
pub(crate) fn deprecated(py: Python<'_>, message: &str) -> PyResult<()> {
    let category = py.get_type::<pyo3::exceptions::PyDeprecationWarning>();
    PyErr::warn(
        py,
        &category,
        &std::ffi::CString::new(message).unwrap_or_default(),
        1,
    )
}
