//! `sdr_rewards.distance`, `sdr_rewards.distances`, `sdr_rewards.METRICS`: set distances on numpy
//! arrays; `sdr_rewards.distance_batch`, `sdr_rewards.distances_batch`: many pairs in one call.

use std::borrow::Cow;

use numpy::{
    PyArray1, PyArray2, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::PyRuntimeWarning;
use pyo3::exceptions::{PyTypeError, PyValueError};
use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use rustc_hash::FxHashMap;
use sdr_core::distance::{evaluate_all_until, evaluate_pairs_until, Evaluation};
use sdr_core::{EmbeddingSet, Metric, SetView, Side};

use crate::error::ToPy;

/// `obj` itself, or for an array whose elements do not sit on whole,
/// aligned steps (a field of a structured array, a buffer at an odd
/// offset), an aligned C-contiguous copy: such arrays cannot be viewed
/// element by element (`numpy.ascontiguousarray` would return an unaligned
/// contiguous array unchanged).
pub(crate) fn ordinary<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    if let Ok(a) = obj.cast::<PyUntypedArray>() {
        if !well_laid(a, a.dtype().itemsize()) {
            return aligned_copy(obj, None);
        }
    }
    Ok(obj.clone())
}

/// Aligned, with every stride a whole number of `itemsize`-byte elements.
fn well_laid(a: &Bound<'_, PyUntypedArray>, itemsize: usize) -> bool {
    const NPY_ARRAY_ALIGNED: std::ffi::c_int = 0x0100;
    // SAFETY: a live array object; only its flags are read.
    let aligned = unsafe { (*a.as_array_ptr()).flags } & NPY_ARRAY_ALIGNED != 0;
    let size = itemsize as isize;
    aligned && a.strides().iter().all(|&s| size == 0 || s % size == 0)
}

/// `numpy.require(obj, dtype, ["C", "A"])`: `obj` as an aligned C-contiguous
/// array (of `dtype` when given), copied only when it is not one already.
pub(crate) fn aligned_copy<'py>(
    obj: &Bound<'py, PyAny>,
    dtype: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let numpy = obj.py().import("numpy")?;
    numpy
        .getattr("require")?
        .call1((obj, dtype, vec!["C", "A"]))
}

/// Copy a 2-D float32/float64 array into an owned, validated set.
fn read_set(obj: &Bound<'_, PyAny>, side: Side) -> PyResult<EmbeddingSet> {
    let rows = borrow_rows(obj, || side.to_string())?;
    let (n, dim) = rows.shape();
    if n == 0 || dim == 0 {
        return Err(PyValueError::new_err(format!(
            "{side} is empty: a set needs at least one vector of dimension >= 1"
        )));
    }
    EmbeddingSet::from_flat(rows.as_f64().into_owned(), dim, side).py()
}

fn parse_metric(spec: &str) -> PyResult<Metric> {
    spec.parse::<Metric>().py()
}

/// The specs given (a list of them, or one spec as a string), or all
/// fifteen for `None`.
fn parse_metrics(specs: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<Metric>> {
    let Some(specs) = specs else {
        return Ok(Metric::all());
    };
    if let Ok(one) = specs.extract::<String>() {
        return Ok(vec![parse_metric(&one)?]);
    }
    let not_a_list = || {
        PyTypeError::new_err(format!(
            "metrics must be a list of metric specs such as ['chamfer', 'ot'], got {}",
            type_name(specs)
        ))
    };
    let items = specs.try_iter().map_err(|_| not_a_list())?;
    let mut out = Vec::new();
    for (i, item) in items.enumerate() {
        let item = item?;
        // Name the item that is not a spec, not the list that holds it.
        let spec: String = item.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "metrics[{i}] must be a metric spec (a string such as 'chamfer'), got {}",
                type_name(&item)
            ))
        })?;
        out.push(parse_metric(&spec)?);
    }
    Ok(out)
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

/// Evaluate `metrics` on one pair off the GIL, stopped by a Ctrl-C within
/// milliseconds (the solvers read the flag between iterations: GW on
/// thousands of rows runs for tens of seconds); a `RuntimeWarning` names the
/// metrics whose solver stopped before converging (their last iterate is
/// returned, SPEC §3).
fn evaluate(
    py: Python<'_>,
    a: &EmbeddingSet,
    b: &EmbeddingSet,
    metrics: &[Metric],
) -> PyResult<Vec<Evaluation>> {
    let out = crate::interrupt::interruptible(py, |stop| {
        sdr_reward::install(|| evaluate_all_until(metrics, &a.view(), &b.view(), stop))
    })?
    .py()?;
    let late: Vec<String> = metrics
        .iter()
        .zip(&out)
        .filter(|(_, e)| !e.converged)
        .map(|(m, _)| m.to_string())
        .collect();
    if !late.is_empty() {
        warn(
            py,
            format!(
                "{} of {} distances did not converge (last iterate returned): {}",
                late.len(),
                out.len(),
                late.join(", ")
            ),
        )?;
    }
    Ok(out)
}

fn warn(py: Python<'_>, msg: String) -> PyResult<()> {
    PyErr::warn(
        py,
        &py.get_type::<PyRuntimeWarning>(),
        &std::ffi::CString::new(msg)?,
        1,
    )
}

/// Set-to-set distance between the rows of `a` (n x d) and `b` (m x d).
///
/// Arrays are float32 or float64; rows need not be unit-norm but must be
/// finite and non-zero. `metric` is a spec such as ``"chamfer"``,
/// ``"sinkhorn:eps=0.1"`` or ``"pot:rho=adaptive"`` (see ``sdr_rewards.METRICS``).
/// Raises TypeError for non-arrays or other dtypes, ValueError for bad
/// shapes, values or metric specs. Ctrl-C stops the computation within about
/// 0.1 s (GW on thousands of rows takes tens of seconds) and raises
/// KeyboardInterrupt, or whatever exception a signal handler raises.
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
/// configurations of ``sdr_rewards.METRICS``. Errors, and Ctrl-C, as for
/// ``sdr_rewards.distance``.
#[pyfunction]
#[pyo3(signature = (a, b, metrics = None))]
pub fn distances<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    metrics: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let metrics = parse_metrics(metrics)?;
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

/// One array of a batch, read in place where its layout allows.
///
/// Held without numpy's dynamic borrow flags: registering and releasing a
/// borrow per array cost more than the distances of small sets, and those
/// flags only coordinate Rust extensions. The contract is numpy's own for
/// operations that release the GIL: the arrays are not written by another
/// thread during the call (here they are only read, and kept alive by the
/// references held in `Rows`).
enum Rows<'py> {
    F32(Bound<'py, PyArray2<f32>>),
    F64(Bound<'py, PyArray2<f64>>),
}

impl Rows<'_> {
    fn shape(&self) -> (usize, usize) {
        let s = match self {
            Rows::F32(a) => a.shape(),
            Rows::F64(a) => a.shape(),
        };
        (s[0], s[1])
    }

    /// The rows of a float32 array: borrowed when C-contiguous (`as_slice`
    /// also accepts Fortran order, whose rows are not rows), else a copy.
    fn as_f32(&self) -> Option<Cow<'_, [f32]>> {
        match self {
            // SAFETY: see the type's contract.
            Rows::F32(a) => Some(match unsafe { a.as_slice() } {
                Ok(s) if a.is_c_contiguous() => Cow::Borrowed(s),
                _ => Cow::Owned(unsafe { a.as_array() }.iter().copied().collect()),
            }),
            Rows::F64(_) => None,
        }
    }

    /// The rows as f64: borrowed when C-contiguous float64, else a copy
    /// (f32 widens exactly, so either way the distances are the same).
    fn as_f64(&self) -> Cow<'_, [f64]> {
        match self {
            // SAFETY: see the type's contract.
            Rows::F64(a) => match unsafe { a.as_slice() } {
                Ok(s) if a.is_c_contiguous() => Cow::Borrowed(s),
                _ => Cow::Owned(unsafe { a.as_array() }.iter().copied().collect()),
            },
            Rows::F32(a) => Cow::Owned(
                unsafe { a.as_array() }
                    .iter()
                    .map(|&x| f64::from(x))
                    .collect(),
            ),
        }
    }
}

/// A 2-D float32/float64 array; `what` names it in errors (made only then).
fn borrow_rows<'py>(obj: &Bound<'py, PyAny>, what: impl Fn() -> String) -> PyResult<Rows<'py>> {
    // The common case first, with one type check: batches hand over
    // thousands of arrays, and this runs under the GIL before any distance.
    if let Ok(a) = obj.cast::<PyArray2<f32>>() {
        if well_laid(a.as_untyped(), 4) {
            return Ok(Rows::F32(a.clone()));
        }
    } else if let Ok(a) = obj.cast::<PyArray2<f64>>() {
        if well_laid(a.as_untyped(), 8) {
            return Ok(Rows::F64(a.clone()));
        }
    }
    let obj = &ordinary(obj)?;
    if let Ok(a) = obj.cast::<PyArray2<f32>>() {
        return Ok(Rows::F32(a.clone()));
    }
    if let Ok(a) = obj.cast::<PyArray2<f64>>() {
        return Ok(Rows::F64(a.clone()));
    }
    if let Ok(a) = obj.cast::<PyUntypedArray>() {
        if a.ndim() != 2 {
            return Err(PyValueError::new_err(format!(
                "{} must be a 2-D array (sentences x dimension), got a {}-D array",
                what(),
                a.ndim()
            )));
        }
        return Err(PyTypeError::new_err(format!(
            "{} must have dtype float32 or float64, got {}",
            what(),
            a.dtype()
        )));
    }
    Err(PyTypeError::new_err(format!(
        "{} must be a numpy.ndarray of float32 or float64, got {}",
        what(),
        type_name(obj)
    )))
}

/// The name of `obj`'s type, for error messages.
fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default()
}

/// Evaluate `metrics` on every pair of `pairs` (an iterable of `(a, b)`
/// arrays) off the GIL: one vector of values per metric, in pair order.
/// Arrays that appear in several pairs are borrowed once and keep one
/// address, so the batch computes their norms once. The rows are checked
/// by the pass that computes their norms (`PairCost`), not by a pass of
/// their own.
fn evaluate_batch(
    py: Python<'_>,
    pairs: &Bound<'_, PyAny>,
    metrics: &[Metric],
) -> PyResult<Vec<Vec<f64>>> {
    // A capacity hint only: `len()` may be absent or absurd (`range(10**12)`).
    let hint = pairs.len().unwrap_or(0).min(1 << 16);
    let mut slots: Vec<Rows<'_>> = Vec::with_capacity(2 * hint);
    let mut seen: FxHashMap<usize, usize> = FxHashMap::default();
    seen.reserve(2 * hint);
    let mut index: Vec<[usize; 2]> = Vec::with_capacity(hint);
    for (k, item) in pairs.try_iter()?.enumerate() {
        let item = item?;
        let not_a_pair = |items: usize| {
            PyValueError::new_err(format!(
                "pairs[{k}] must be an (a, b) pair of arrays, got {items} items"
            ))
        };
        // Tuples without a Vec per pair; any other iterable of two through one.
        let two: [Bound<'_, PyAny>; 2] = match item.cast::<PyTuple>() {
            Ok(t) if t.len() == 2 => [t.get_item(0)?, t.get_item(1)?],
            Ok(t) => return Err(not_a_pair(t.len())),
            Err(_) => {
                let iter = item.try_iter().map_err(|_| {
                    PyTypeError::new_err(format!(
                        "pairs[{k}] must be an (a, b) pair of arrays, got {}",
                        type_name(&item)
                    ))
                })?;
                let v: Vec<Bound<'_, PyAny>> = iter.collect::<PyResult<_>>()?;
                <[_; 2]>::try_from(v).map_err(|v| not_a_pair(v.len()))?
            }
        };
        let mut ids = [0; 2];
        for (side, (obj, id)) in two.iter().zip(&mut ids).enumerate() {
            let key = obj.as_ptr() as usize;
            *id = match seen.get(&key) {
                Some(&slot) => slot,
                None => {
                    let what = || format!("pairs[{k}][{side}]");
                    let rows = borrow_rows(obj, what)?;
                    let (n, dim) = rows.shape();
                    if n == 0 || dim == 0 {
                        return Err(PyValueError::new_err(format!(
                            "{} is empty: a set needs at least one vector of dimension >= 1",
                            what()
                        )));
                    }
                    slots.push(rows);
                    seen.insert(key, slots.len() - 1);
                    slots.len() - 1
                }
            };
        }
        let (da, db) = (slots[ids[0]].shape().1, slots[ids[1]].shape().1);
        if da != db {
            return Err(PyValueError::new_err(format!(
                "pairs[{k}]: sets have different dimensions: a is {da}-d, b is {db}-d"
            )));
        }
        index.push(ids);
    }
    // f32 when every array is float32 (encoders emit f32), else f64.
    let f32_rows: Option<Vec<Cow<'_, [f32]>>> = slots.iter().map(Rows::as_f32).collect();
    let f64_rows: Vec<Cow<'_, [f64]>> = match f32_rows {
        Some(_) => Vec::new(),
        None => slots.iter().map(Rows::as_f64).collect(),
    };
    let dims: Vec<usize> = slots.iter().map(|s| s.shape().1).collect();
    // The rows as slices once, for every part.
    let rows32: Option<Vec<&[f32]>> = f32_rows
        .as_ref()
        .map(|rows| rows.iter().map(|r| &r[..]).collect());
    let rows64: Vec<&[f64]> = f64_rows.iter().map(|r| &r[..]).collect();
    // In parts (see FIRST_PART); the solvers read `stop` within each pair.
    let run = |stop: &AtomicBool| {
        sdr_reward::install(|| {
            let mut out = Vec::with_capacity(index.len());
            let (mut first, mut size) = (0, FIRST_PART);
            while first < index.len() && !stop.load(Ordering::Relaxed) {
                let part = &index[first..(first + size).min(index.len())];
                let t0 = std::time::Instant::now();
                out.extend(match &rows32 {
                    Some(rows) => run_batch(rows, &dims, part, metrics, first, stop)?,
                    None => run_batch(&rows64, &dims, part, metrics, first, stop)?,
                });
                first += part.len();
                // The next part lasts about PART_SECONDS at this part's rate.
                let rate = part.len() as f64 / t0.elapsed().as_secs_f64().max(1e-6);
                size = ((rate * PART_SECONDS) as usize).clamp(64, 1 << 20);
            }
            Ok::<_, PyErr>(out)
        })
    };
    let results = crate::interrupt::interruptible(py, run)??;
    let mut late = vec![0usize; metrics.len()];
    let mut values = vec![Vec::with_capacity(index.len()); metrics.len()];
    for evals in results {
        for ((e, v), l) in evals.iter().zip(&mut values).zip(&mut late) {
            v.push(e.value);
            *l += usize::from(!e.converged);
        }
    }
    let late: Vec<String> = metrics
        .iter()
        .zip(&late)
        .filter(|(_, &l)| l > 0)
        .map(|(m, l)| format!("{m} on {l} of {} pairs", index.len()))
        .collect();
    if !late.is_empty() {
        warn(
            py,
            format!(
                "distances did not converge (last iterate returned): {}",
                late.join(", ")
            ),
        )?;
    }
    Ok(values)
}

/// A batch runs on the process pool while the calling thread watches for
/// signals (interrupt.rs). After a Ctrl-C the solvers stop within their pair,
/// and the rest of the part skips its solvers but still builds its cost
/// matrices; so the batch goes in parts, the first of `FIRST_PART` pairs,
/// each further one sized to last about `PART_SECONDS` at the rate of the one
/// before (parts share no norms, so they are not made smaller than that).
const FIRST_PART: usize = 1_024;
const PART_SECONDS: f64 = 0.1;

/// Evaluate every pair; an error names the first failing pair in input
/// order (`first` is the index of `index[0]` in the batch).
fn run_batch<T: sdr_core::cost::Element>(
    rows: &[&[T]],
    dims: &[usize],
    index: &[[usize; 2]],
    metrics: &[Metric],
    first: usize,
    stop: &AtomicBool,
) -> PyResult<Vec<Vec<Evaluation>>> {
    let views: Vec<SetView<'_, T>> = rows
        .iter()
        .zip(dims)
        .map(|(r, &d)| SetView::new(r, d))
        .collect();
    let pairs: Vec<_> = index.iter().map(|&[i, j]| (views[i], views[j])).collect();
    evaluate_pairs_until(metrics, &pairs, stop)
        .into_iter()
        .enumerate()
        .map(|(k, r)| r.map_err(|e| PyValueError::new_err(format!("pairs[{}]: {e}", first + k))))
        .collect()
}

/// `metric` for every `(a, b)` pair of `pairs`, in one call: a float64 array
/// of one value per pair, in order.
///
/// Pairs are computed in parallel off the GIL, each fetching the next
/// pair's rows while it runs; an array that appears in several pairs (one
/// reference against K samples) has its norms computed once. C-contiguous
/// arrays are read in place; others are copied (all as float64 when the
/// batch mixes float32 and float64; same values either way). The arrays
/// are read after `pairs` has been consumed, while other threads may run:
/// do not write to them during the call, nor yield one reused buffer.
/// Raises the errors of ``sdr_rewards.distance``, naming the pair (``pairs[3]: set
/// `b` row 2 is not finite``); type, shape and dimension errors are found
/// while collecting, before any row is checked.
#[pyfunction]
#[pyo3(signature = (pairs, metric = "chamfer"))]
pub fn distance_batch<'py>(
    py: Python<'py>,
    pairs: &Bound<'py, PyAny>,
    metric: &str,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let metric = parse_metric(metric)?;
    let mut values = evaluate_batch(py, pairs, &[metric])?;
    Ok(PyArray1::from_vec(py, values.pop().unwrap_or_default()))
}

/// Several metrics for every `(a, b)` pair of `pairs`, sharing each pair's
/// cost matrix: ``{canonical spec: float64 array, one value per pair}``.
/// `metrics=None` means all fifteen configurations of ``sdr_rewards.METRICS``.
#[pyfunction]
#[pyo3(signature = (pairs, metrics = None))]
pub fn distances_batch<'py>(
    py: Python<'py>,
    pairs: &Bound<'py, PyAny>,
    metrics: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let metrics = parse_metrics(metrics)?;
    let values = evaluate_batch(py, pairs, &metrics)?;
    let out = PyDict::new(py);
    for (m, v) in metrics.iter().zip(values) {
        out.set_item(m.to_string(), PyArray1::from_vec(py, v))?;
    }
    Ok(out)
}

/// The canonical specs of the fifteen metric configurations (SPEC §3).
pub fn metric_names() -> Vec<String> {
    Metric::all().iter().map(|m| m.to_string()).collect()
}
