//! `sdr.Encoder`: all-mpnet-base-v2 sentence embeddings as numpy arrays.

use std::path::PathBuf;
use std::sync::Arc;

use numpy::{PyArray1, PyArray2, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use sdr_embed::{resolve_model_dir, Encoder, EncoderDevice, EncoderOptions};

use crate::error::ToPy;

/// ``device=``: ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` (ValueError otherwise, and for
/// ``cuda`` in a build without the CUDA back-end).
pub(crate) fn parse_device(device: &str) -> PyResult<EncoderDevice> {
    device.parse::<EncoderDevice>().py()
}

/// Load the encoder from `model_dir`, else ``$SDR_MODEL``, else
/// ``~/.cache/sdr/models/all-mpnet-base-v2`` (``bash scripts/fetch-model.sh``), onto
/// `device`.
pub(crate) fn load_encoder(
    py: Python<'_>,
    model_dir: Option<PathBuf>,
    cache: bool,
    device: &str,
) -> PyResult<Arc<Encoder>> {
    let device = parse_device(device)?;
    py.detach(|| {
        sdr_reward::install(|| {
            let dir = resolve_model_dir(model_dir.as_deref())?;
            let opts = EncoderOptions {
                cache,
                device,
                batch_size: device.default_batch_size(),
                ..EncoderOptions::default()
            };
            Encoder::load(&dir, opts).map(Arc::new)
        })
    })
    .py()
}

/// A frozen sentence encoder (all-mpnet-base-v2 on candle: mean pooling, L2
/// normalisation, 384-token truncation) with an in-memory sentence cache.
///
/// ``Encoder(model_dir=None, device="cpu")`` reads the model folder from
/// `model_dir`, else ``$SDR_MODEL``, else ``~/.cache/sdr/models/all-mpnet-base-v2``;
/// a missing folder raises FileNotFoundError. ``device="cuda"`` / ``"cuda:N"`` runs
/// it on a GPU (a build with the ``cuda`` feature). Picklable: the model folder
/// and device are stored and the model reloaded on unpickling.
#[pyclass(name = "Encoder", module = "sdr", frozen)]
pub struct PyEncoder {
    inner: Arc<Encoder>,
}

#[pymethods]
impl PyEncoder {
    #[new]
    #[pyo3(signature = (model_dir = None, device = "cpu"))]
    fn new(py: Python<'_>, model_dir: Option<PathBuf>, device: &str) -> PyResult<Self> {
        Ok(PyEncoder {
            inner: load_encoder(py, model_dir, true, device)?,
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
        let args = PyTuple::new(py, [dir, device])?;
        Ok((cls, args))
    }

    fn __repr__(&self) -> String {
        format!(
            "Encoder(model_dir={:?}, device={:?}, dim={})",
            self.inner.dir().display().to_string(),
            self.inner.options().device.to_string(),
            self.inner.dim()
        )
    }
}
