//! `sdr.distance`, `sdr.distances`, `sdr.METRICS`: set distances on numpy arrays.

use numpy::{PyArray2, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyRuntimeWarning;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sdr_core::distance::{evaluate_all, Evaluation};
use sdr_core::{EmbeddingSet, Metric, Side};

use crate::error::ToPy;

/// Copy a 2-D float32/float64 array into an owned, validated set.
fn read_set(obj: &Bound<'_, PyAny>, side: Side) -> PyResult<EmbeddingSet> {
    let (data, dim) = if let Ok(a) = obj.cast::<PyArray2<f64>>() {
        let ro = a.readonly();
        let v = ro.as_array();
        (v.iter().copied().collect::<Vec<f64>>(), v.ncols())
    } else if let Ok(a) = obj.cast::<PyArray2<f32>>() {
        let ro = a.readonly();
        let v = ro.as_array();
        (v.iter().map(|&x| f64::from(x)).collect(), v.ncols())
    } else if let Ok(a) = obj.cast::<PyUntypedArray>() {
        let dtype = a.dtype().to_string();
        if a.ndim() != 2 {
            return Err(PyValueError::new_err(format!(
                "{side} must be a 2-D array (sentences x dimension), got a {}-D array",
                a.ndim()
            )));
        }
        return Err(PyTypeError::new_err(format!(
            "{side} must have dtype float32 or float64, got {dtype}"
        )));
    } else {
        return Err(PyTypeError::new_err(format!(
            "{side} must be a numpy.ndarray of float32 or float64, got {}",
            obj.get_type().name()?
        )));
    };
    if data.is_empty() {
        return Err(PyValueError::new_err(format!(
            "{side} is empty: a set needs at least one vector of dimension >= 1"
        )));
    }
    EmbeddingSet::from_flat(data, dim, side).py()
}

fn parse_metric(spec: &str) -> PyResult<Metric> {
    spec.parse::<Metric>().py()
}

fn check_dims(a: &EmbeddingSet, b: &EmbeddingSet) -> PyResult<()> {
    if a.dim() != b.dim() {
        return Err(PyValueError::new_err(format!(
            "sets have different dimensions: a is {}-d, b is {}-d",
            a.dim(),
            b.dim()
        )));
    }
    Ok(())
}

/// Evaluate `metrics` on one pair off the GIL; a `RuntimeWarning` names the
/// metrics whose solver stopped before converging (their last iterate is
/// returned, SPEC §3).
fn evaluate(
    py: Python<'_>,
    a: &EmbeddingSet,
    b: &EmbeddingSet,
    metrics: &[Metric],
) -> PyResult<Vec<Evaluation>> {
    let out = py
        .detach(|| sdr_reward::install(|| evaluate_all(metrics, &a.view(), &b.view())))
        .py()?;
    let late: Vec<String> = metrics
        .iter()
        .zip(&out)
        .filter(|(_, e)| !e.converged)
        .map(|(m, _)| m.to_string())
        .collect();
    if !late.is_empty() {
        let msg = format!(
            "{} of {} distances did not converge (last iterate returned): {}",
            late.len(),
            out.len(),
            late.join(", ")
        );
        PyErr::warn(
            py,
            &py.get_type::<PyRuntimeWarning>(),
            &std::ffi::CString::new(msg)?,
            1,
        )?;
    }
    Ok(out)
}

/// Set-to-set distance between the rows of `a` (n x d) and `b` (m x d).
///
/// Arrays are float32 or float64; rows need not be unit-norm but must be
/// finite and non-zero. `metric` is a spec such as ``"chamfer"``,
/// ``"sinkhorn:eps=0.1"`` or ``"pot:rho=adaptive"`` (see ``sdr.METRICS``).
/// Raises TypeError for non-arrays or other dtypes, ValueError for bad
/// shapes, values or metric specs.
#[pyfunction]
#[pyo3(signature = (a, b, metric = "chamfer"))]
pub fn distance(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    metric: &str,
) -> PyResult<f64> {
    let metric = parse_metric(metric)?;
    let a = read_set(a, Side::A)?;
    let b = read_set(b, Side::B)?;
    check_dims(&a, &b)?;
    Ok(evaluate(py, &a, &b, &[metric])?[0].value)
}

/// Several metrics between the same two sets, sharing one cost matrix.
/// Returns ``{canonical spec: value}``; `metrics=None` means all fifteen
/// configurations of ``sdr.METRICS``.
#[pyfunction]
#[pyo3(signature = (a, b, metrics = None))]
pub fn distances<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    metrics: Option<Vec<String>>,
) -> PyResult<Bound<'py, PyDict>> {
    let metrics: Vec<Metric> = match metrics {
        None => Metric::all(),
        Some(specs) => specs
            .iter()
            .map(|s| parse_metric(s))
            .collect::<PyResult<_>>()?,
    };
    let a = read_set(a, Side::A)?;
    let b = read_set(b, Side::B)?;
    check_dims(&a, &b)?;
    let values = evaluate(py, &a, &b, &metrics)?;
    let out = PyDict::new(py);
    for (m, v) in metrics.iter().zip(values) {
        out.set_item(m.to_string(), v.value)?;
    }
    Ok(out)
}

/// The canonical specs of the fifteen metric configurations (SPEC §3).
pub fn metric_names() -> Vec<String> {
    Metric::all().iter().map(|m| m.to_string()).collect()
}
