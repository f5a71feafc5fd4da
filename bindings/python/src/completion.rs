//! `completion_text`: a Python completion read by `sdr_reward::completion`'s rules.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use sdr_reward::{Dialect, Node};

/// A Python object as a completion tree (keys as ``str(key)``).
fn node(v: &Bound<'_, PyAny>) -> PyResult<Node> {
    if v.cast::<PyString>().is_ok() {
        return Ok(Node::Text(v.extract()?));
    }
    if v.is_none() {
        return Ok(Node::Null);
    }
    if let Ok(d) = v.cast::<PyDict>() {
        return d
            .iter()
            .map(|(k, v)| Ok((k.str()?.extract()?, node(&v)?)))
            .collect::<PyResult<_>>()
            .map(Node::Map);
    }
    let type_name = || -> PyResult<String> { v.get_type().name()?.extract() };
    if v.cast::<PyList>().is_ok() || v.cast::<PyTuple>().is_ok() {
        return Ok(Node::Seq {
            container: type_name()?,
            items: v.try_iter()?.map(|i| node(&i?)).collect::<PyResult<_>>()?,
        });
    }
    Ok(Node::Other(type_name()?))
}

/// The report a completion holds (``sdr_rewards.completion_text``): a string as
/// is; a chat message dict, or a list of them (the last assistant message),
/// with reasoning fields put back between ``<think>`` tags. ``TypeError`` names
/// a shape it cannot read.
#[pyfunction]
pub fn completion_text<'py>(completion: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    // A string is returned as the same object: no copy, and a lone surrogate
    // reaches the scorer's message that names it.
    if completion.cast::<PyString>().is_ok() {
        return Ok(completion.clone());
    }
    let text = sdr_reward::completion_text(&node(completion)?, Dialect::Python)
        .map_err(PyTypeError::new_err)?;
    Ok(PyString::new(completion.py(), &text).into_any())
}
