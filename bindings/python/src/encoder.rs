//! `sdr_rewards.Encoder`: all-mpnet-base-v2 sentence embeddings as numpy arrays.

use std::path::PathBuf;
use std::sync::Arc;

use numpy::{PyArray1, PyArray2, PyArrayMethods};
use pyo3::exceptions::{PyRuntimeWarning, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use sdr_embed::{Encoder, EncoderDevice, EncoderOptions, LoadedEncoder, Precision};

use crate::error::ToPy;

/// ``device=``: ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` (ValueError otherwise, and for
/// ``cuda`` in a build without the CUDA back-end, whose message names the wheel's build
/// rather than the command line's).
pub(crate) fn parse_device(device: &str) -> PyResult<EncoderDevice> {
    let parsed = device.parse::<EncoderDevice>().py()?;
    if !parsed.compiled_in() {
        return Err(PyValueError::new_err(format!(
            "device '{parsed}': this build of the sdr_rewards package has no CUDA back-end; install \
             the CUDA wheel, sdr-rewards-cu13 (bash scripts/build-wheels.sh cuda), or build one \
             with `maturin build --release --features cuda -m bindings/python/Cargo.toml` \
             (toolkit from scripts/install-cuda.sh)"
        )));
    }
    Ok(parsed)
}

/// Check a ``device=`` value without loading anything: the canonical name
/// (``"cpu"``, ``"cuda:0"``, ...), ValueError otherwise (a misspelt device, or
/// ``cuda`` in a build without the CUDA back-end). ``SDRReward`` checks
/// its device when it is made, not at its first batch.
#[pyfunction]
pub fn check_device(device: &str) -> PyResult<String> {
    Ok(parse_device(device)?.to_string())
}

/// ``precision=``: ``"f32"`` or ``"bf16"`` (ValueError otherwise; the message is the
/// one ``SDRReward`` raises in Python).
pub(crate) fn parse_precision(precision: &str) -> PyResult<Precision> {
    match precision {
        "f32" => Ok(Precision::F32),
        "bf16" => Ok(Precision::Bf16),
        other => Err(PyValueError::new_err(format!(
            "precision '{other}': expected 'f32' or 'bf16'"
        ))),
    }
}

/// The spelling `parse_precision` takes (the requested precision, not the one in
/// force: a pickled encoder asks again on the machine that loads it).
fn precision_name(precision: Precision) -> &'static str {
    match precision {
        Precision::F32 => "f32",
        _ => "bf16",
    }
}

/// The one encoder loader of the bindings: `name` (``"mpnet"``: the model folder
/// `model_dir`, else ``$SDR_MODEL``, else ``~/.cache/sdr/models/all-mpnet-base-v2``,
/// as ``bash scripts/fetch-model.sh`` puts it; ``"hash-DIM"``: the stand-in, which has
/// no precision) on `device` at `precision`, through `sdr_embed::open_encoder`; the
/// notice (``bf16`` replaced by f32 on this CPU) becomes a RuntimeWarning. `cache`:
/// whether the model keeps a sentence cache of its own (``sdr_rewards.Encoder``);
/// callers that embed through a `SectionEmbedder` keep theirs there.
pub(crate) fn open_encoder(
    py: Python<'_>,
    name: &str,
    model_dir: Option<PathBuf>,
    device: &str,
    precision: &str,
    cache: bool,
) -> PyResult<LoadedEncoder> {
    let device = parse_device(device)?;
    let opts = EncoderOptions {
        cache,
        device,
        precision: parse_precision(precision)?,
        batch_size: device.default_batch_size(),
        ..EncoderOptions::default()
    };
    let loaded = py
        .detach(|| {
            sdr_reward::install(|| sdr_embed::open_encoder(name, model_dir.as_deref(), opts))
        })
        .py()?;
    if let Some(notice) = &loaded.notice {
        let message = std::ffi::CString::new(notice.as_str()).unwrap_or_default();
        PyErr::warn(py, &py.get_type::<PyRuntimeWarning>(), &message, 1)?;
    }
    Ok(loaded)
}

/// The model of ``sdr_rewards.Encoder`` and ``SDRReward`` ([`open_encoder`]'s ``"mpnet"``).
pub(crate) fn load_encoder(
    py: Python<'_>,
    model_dir: Option<PathBuf>,
    cache: bool,
    device: &str,
    precision: &str,
) -> PyResult<Arc<Encoder>> {
    open_encoder(py, "mpnet", model_dir, device, precision, cache)?
        .model
        .ok_or_else(|| PyValueError::new_err("the mpnet encoder loaded without its model"))
}

/// A frozen sentence encoder (all-mpnet-base-v2 on candle: mean pooling, L2
/// normalisation, 384-token truncation) with an in-memory sentence cache.
///
/// ``Encoder(model_dir=None, device="cpu", precision="f32")`` reads the model folder
/// from `model_dir`, else ``$SDR_MODEL``, else
/// ``~/.cache/sdr/models/all-mpnet-base-v2``; a missing folder raises
/// FileNotFoundError. ``device="cuda"`` / ``"cuda:N"`` runs it on a GPU (a build with
/// the ``cuda`` feature). ``precision="bf16"``: bfloat16 GEMMs with f32 activations on
/// CPUs with AVX-512 BF16 or AMX-BF16 (about 2x faster there, cosine >= 0.999 to
/// f32), f32 with a RuntimeWarning on other CPUs, bf16 weights and activations on a
/// GPU. Picklable: the model folder, device and precision are stored and the model
/// reloaded on unpickling.
#[pyclass(name = "Encoder", module = "sdr_rewards", frozen)]
pub struct PyEncoder {
    inner: Arc<Encoder>,
    /// As asked (``bf16`` may run as f32 on this CPU).
    precision: Precision,
}

#[pymethods]
impl PyEncoder {
    #[new]
    #[pyo3(signature = (model_dir = None, device = "cpu", precision = "f32"))]
    fn new(
        py: Python<'_>,
        model_dir: Option<PathBuf>,
        device: &str,
        precision: &str,
    ) -> PyResult<Self> {
        Ok(PyEncoder {
            inner: load_encoder(py, model_dir, true, device, precision)?,
            precision: parse_precision(precision)?,
        })
    }

    /// Unit-norm embeddings of `texts` as a float32 array of shape (len(texts), dim).
    /// Each distinct text is embedded once; repeats come from the cache.
    fn embed<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<String>,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let dim = self.inner.dim();
        let n = texts.len();
        let enc = self.inner.clone();
        let data = py
            .detach(move || {
                sdr_reward::install(move || {
                    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                    enc.embed_matrix(&refs).map(|m| m.data)
                })
            })
            .py()?;
        PyArray1::from_vec(py, data).reshape([n, dim])
    }

    /// Embedding dimension (768 for all-mpnet-base-v2).
    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }

    /// Model name (its folder name).
    #[getter]
    fn name(&self) -> String {
        self.inner.name().to_string()
    }

    /// The model folder.
    #[getter]
    fn model_dir(&self) -> PathBuf {
        self.inner.dir().to_path_buf()
    }

    /// Where the encoder runs (``"cpu"`` or ``"cuda:N"``).
    #[getter]
    fn device(&self) -> String {
        self.inner.options().device.to_string()
    }

    /// The precision asked for (``"f32"`` or ``"bf16"``).
    #[getter]
    fn precision(&self) -> &'static str {
        precision_name(self.precision)
    }

    /// Truncation length in tokens.
    #[getter]
    fn max_seq_length(&self) -> usize {
        self.inner.max_seq_length()
    }

    /// Sentence-cache counters: ``{"entries", "hits", "misses"}``.
    fn cache_info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        if let Some(c) = self.inner.cache() {
            let s = c.stats();
            out.set_item("entries", s.entries)?;
            out.set_item("hits", s.hits)?;
            out.set_item("misses", s.misses)?;
        }
        Ok(out)
    }

    /// Empty the sentence cache.
    fn clear_cache(&self) {
        if let Some(c) = self.inner.cache() {
            c.clear();
        }
    }

    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let cls = slf.get_type().into_any();
        let inner = &slf.get().inner;
        let dir = inner.dir().to_path_buf().into_pyobject(py)?.into_any();
        let device = inner
            .options()
            .device
            .to_string()
            .into_pyobject(py)?
            .into_any();
        let precision = precision_name(slf.get().precision)
            .into_pyobject(py)?
            .into_any();
        let args = PyTuple::new(py, [dir, device, precision])?;
        Ok((cls, args))
    }

    fn __repr__(&self) -> String {
        format!(
            "Encoder(model_dir={:?}, device={:?}, precision={:?}, dim={})",
            self.inner.dir().display().to_string(),
            self.inner.options().device.to_string(),
            precision_name(self.precision),
            self.inner.dim()
        )
    }
}
