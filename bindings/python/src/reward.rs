//! `sdr_rewards._sdr.RewardScorer`: the Rust half of `sdr_rewards.SDRReward`.
//!
//! The Python class handles trainer conventions (keyword columns, chat
//! messages, logging callbacks, pickling, forks); this one scores a batch of
//! strings with the GIL released.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use numpy::PyReadonlyArray2;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sdr_embed::{EmbedError, SentenceEncoder};
use sdr_reward::{
    BatchStats, LoadOutcome, MissingSection, OwnedReference, Reference, RewardOptions, Scorer,
};

use crate::encoder::load_encoder;
use crate::error::ToPy;

/// Check reward options without loading anything; returns the canonical
/// metric spec. Raises ValueError for an unknown metric or a negative,
/// NaN or infinite weight.
#[pyfunction]
#[pyo3(signature = (metric = "chamfer", format_weight = 1.0, semantic_weight = 1.0, clinical_weight = 0.0))]
pub fn check_reward_options(
    metric: &str,
    format_weight: f64,
    semantic_weight: f64,
    clinical_weight: f64,
) -> PyResult<String> {
    let o = RewardOptions::new(metric, format_weight, semantic_weight, false)
        .and_then(|o| o.with_clinical_weight(clinical_weight))
        .py()?;
    Ok(o.config.metric.to_string())
}

/// The reward's options (``sdr_reward::config``): one dict per option with its
/// ``name``, ``env`` (the OpenRLHF file's variable), ``kind`` (text, number,
/// flag, path), ``default`` (text or None) and ``flag`` (``sdr serve``'s, or None).
pub fn reward_options(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    sdr_reward::REWARD_OPTIONS
        .iter()
        .map(|o| {
            let d = PyDict::new(py);
            d.set_item("name", o.name)?;
            d.set_item("env", o.env)?;
            d.set_item("kind", o.kind.name())?;
            d.set_item("default", o.default)?;
            d.set_item("flag", o.flag)?;
            Ok(d)
        })
        .collect()
}

/// Check a sentence-cost spec (``"cosine"``, ``"clinical"``,
/// ``"clinical:lambda=1"``) without loading anything; returns its canonical
/// form (``"clinical:lambda=1.5"``). Raises ValueError naming what is wrong.
#[pyfunction]
pub fn check_cost(cost: &str) -> PyResult<String> {
    let c = sdr_clinical::parse_cost(cost).map_err(|e| {
        let mut message = e.to_string();
        if message.contains("unknown cost") {
            // A pickled reward reaches a worker with its spec, not its cost's code.
            message.push_str(
                "; a cost written in Python must be registered (sdr_rewards.register_cost) \
                 in the process that uses it",
            );
        }
        PyValueError::new_err(message)
    })?;
    Ok(c.to_string())
}

/// The completion inside an OpenRLHF query (prompt + completion, decoded
/// with its special tokens): what follows ``prompt`` when the query starts
/// with it (a beginning-of-sequence token only the query has set aside), else
/// what follows the last occurrence of the longest end of ``prompt`` (16
/// bytes at least) found in the query (a prompt cut from the left), else the
/// whole query; without the special tokens at its end (``<|im_end|>``,
/// ``</s>``, ...). The same rule as ``sdr serve``'s ``/v1/openrlhf``.
#[pyfunction]
#[pyo3(signature = (query, prompt = None))]
pub fn openrlhf_completion(query: &str, prompt: Option<&str>) -> String {
    sdr_reward::completion_of(query, prompt).to_string()
}

/// A Python callable ``list[str] -> (n, d)`` array (numpy, torch, or
/// anything ``numpy.asarray`` takes) used as the sentence encoder: parsing,
/// deduplication, the sentence cache and the distances stay in Rust; only
/// the distinct sentences not cached reach the callable, in one call per batch.
pub(crate) struct CallableEmbedder {
    func: Py<PyAny>,
    dim: usize,
    name: String,
    /// What the user says the callable is (`encoder_id=`); keys the sentence cache.
    id: Option<String>,
    /// How the last failing call failed, for the exception `score` raises.
    failure: Mutex<Option<CallError>>,
}

/// How a call of the encoder failed.
enum CallError {
    /// It raised this exception.
    Raised(PyErr),
    /// It returned something unusable (the message says what).
    Bad(String),
}

impl CallError {
    fn message(&self) -> String {
        match self {
            CallError::Raised(e) => format!("raised {e}"),
            CallError::Bad(m) => m.clone(),
        }
    }

    /// The exception for the caller: what the encoder raised when it is not
    /// an `Exception` (KeyboardInterrupt, SystemExit pass through unchanged),
    /// else `RuntimeError` chained to it; `ValueError` for an unusable result.
    fn into_py(self, py: Python<'_>, message: String) -> PyErr {
        match self {
            CallError::Raised(e) if !e.is_instance_of::<pyo3::exceptions::PyException>(py) => e,
            CallError::Raised(e) => {
                let err = PyRuntimeError::new_err(message);
                err.set_cause(py, Some(e));
                err
            }
            CallError::Bad(_) => PyValueError::new_err(message),
        }
    }
}

impl CallableEmbedder {
    /// Wraps `func`, calling it once on a probe sentence to learn the dimension.
    pub(crate) fn new(py: Python<'_>, func: Py<PyAny>, id: Option<String>) -> PyResult<Self> {
        let name = callable_name(func.bind(py));
        let probe = embed_checked(py, &func, &name, &["No acute cardiopulmonary abnormality."])?;
        Ok(CallableEmbedder {
            func,
            dim: probe.1,
            name,
            id,
            failure: Mutex::new(None),
        })
    }
}

impl CallableEmbedder {
    /// The exception for `err`, an error of a call through this encoder: what
    /// the callable raised (or why its result was unusable) when that is the
    /// cause, else `fallback(err)`.
    pub(crate) fn exception<E: std::fmt::Display>(
        &self,
        py: Python<'_>,
        err: E,
        external: bool,
        fallback: impl FnOnce(E) -> PyErr,
    ) -> PyErr {
        let failure = self
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        match failure {
            Some(f) if external => {
                let message = err.to_string();
                f.into_py(py, message)
            }
            _ => fallback(err),
        }
    }
}

/// How errors name an encoder callable: its `__name__`, else its type's.
pub(crate) fn callable_name(func: &Bound<'_, PyAny>) -> String {
    func.getattr("__name__")
        .or_else(|_| func.get_type().getattr("__name__"))
        .and_then(|n| n.extract::<String>())
        .unwrap_or_else(|_| "callable".to_string())
}

/// [`call_matrix`] with its failure as the exception for the caller, naming
/// the encoder (`SDRReward`'s probe call and `sdr_rewards.explain`'s one call).
pub(crate) fn embed_checked(
    py: Python<'_>,
    func: &Py<PyAny>,
    name: &str,
    texts: &[&str],
) -> PyResult<(Vec<f32>, usize)> {
    call_matrix(py, func, texts).map_err(|e| {
        let message = format!("encoder {name}: {}", e.message());
        e.into_py(py, message)
    })
}

/// Calls `func(texts)` and returns its rows as one row-major f32 vector with
/// the column count, checking the row count and finiteness.
fn call_matrix(
    py: Python<'_>,
    func: &Py<PyAny>,
    texts: &[&str],
) -> Result<(Vec<f32>, usize), CallError> {
    let out = func
        .call1(py, (texts.to_vec(),))
        .map_err(CallError::Raised)?;
    check_matrix(py, out, texts).map_err(CallError::Bad)
}

/// The rows of what an encoder returned for `texts`, checked (the callable
/// of `SDRReward(encoder=...)` and of `sdr_rewards.explain`).
fn check_matrix(
    py: Python<'_>,
    out: Py<PyAny>,
    texts: &[&str],
) -> Result<(Vec<f32>, usize), String> {
    let mut value = out.into_bound(py);
    if value.is_none() {
        return Err("returned None; expected a (n, d) float array".to_string());
    }
    // torch tensors: detach, move to the CPU. A complex tensor is refused
    // below, not cast (`.float()` would drop its imaginary part).
    if value.hasattr("detach").unwrap_or(false) && value.hasattr("cpu").unwrap_or(false) {
        value = value
            .call_method0("detach")
            .and_then(|v| v.call_method0("cpu"))
            .map_err(|e| format!("returned a tensor that cannot be moved to the CPU: {e}"))?;
        if !value
            .getattr("is_complex")
            .and_then(|f| f.call0())
            .and_then(|b| b.extract::<bool>())
            .unwrap_or(false)
        {
            value = value
                .call_method0("float")
                .map_err(|e| format!("returned a tensor that cannot be made float32: {e}"))?;
        }
    }
    // Complex and boolean arrays cast to float32 without an error (numpy
    // drops the imaginary part with a warning, reads True as 1): vectors
    // that are not the encoder's, and rewards computed from them.
    let (flat, shape) = real_rows::<f32>(&value, "returned", |shape| {
        if shape.len() != 2 || shape[0] != texts.len() || shape[1] == 0 {
            return Err(format!(
                "returned shape {shape:?} for {} texts; expected ({}, d) with d > 0",
                texts.len(),
                texts.len()
            ));
        }
        Ok(())
    })?;
    if let Some(k) = flat.iter().position(|v| !v.is_finite()) {
        return Err(format!(
            "returned a non-finite value (NaN, infinite, or beyond float32) for text {} ({:?})",
            k / shape[1],
            texts[k / shape[1]]
        ));
    }
    Ok((flat, shape[1]))
}

/// `value` (anything `numpy.asarray` takes) as a 2-D array of real numbers of
/// type `T`, row-major, with its shape once `check_shape` accepts it; errors
/// begin with `what` (`"returned"`, `"apply returned"`). The encoder callable's
/// rows and a Python cost's matrix are read by this one rule.
pub(crate) fn real_rows<T: numpy::Element + Copy>(
    value: &Bound<'_, PyAny>,
    what: &str,
    check_shape: impl FnOnce(&[usize]) -> Result<(), String>,
) -> Result<(Vec<T>, Vec<usize>), String> {
    let value = value
        .py()
        .import("numpy")
        .and_then(|np| np.getattr("asarray")?.call1((value,)))
        .map_err(|e| format!("{what} something that is not a float array: {e}"))?;
    let dtype = value
        .getattr("dtype")
        .map_err(|e| format!("{what} an array without a dtype: {e}"))?;
    let kind: String = dtype
        .getattr("kind")
        .and_then(|k| k.extract())
        .unwrap_or_default();
    if matches!(kind.as_str(), "b" | "c" | "U" | "S" | "M" | "m") {
        return Err(format!(
            "{what} an array of dtype {}, not a float array of real numbers",
            dtype.str().map(|s| s.to_string()).unwrap_or(kind)
        ));
    }
    // "float32" / "float64": the type numpy converts to, as the errors name it.
    let target = T::get_dtype(value.py())
        .str()
        .map(|s| s.to_string())
        .map_err(|e| e.to_string())?;
    let arr = crate::distance::aligned_copy(&value, Some(target.as_str()))
        .map_err(|e| format!("{what} something that is not a float array: {e}"))?;
    let shape: Vec<usize> = arr
        .getattr("shape")
        .and_then(|s| s.extract())
        .map_err(|e| format!("{what} an array without a shape: {e}"))?;
    check_shape(&shape)?;
    // One copy of the contiguous buffer (a list of Python floats cost
    // ~50 ns a value: 0.2 s for 4,096 sentences of 768 dimensions).
    let flat: Vec<T> = arr
        .extract::<PyReadonlyArray2<'_, T>>()
        .map_err(|e| format!("{what} an array numpy cannot read as {target}: {e}"))?
        .as_slice()
        .map_err(|e| format!("{what} an array numpy cannot lay out in rows: {e}"))?
        .to_vec();
    Ok((flat, shape))
}

impl SentenceEncoder for CallableEmbedder {
    fn dim(&self) -> usize {
        self.dim
    }
    fn name(&self) -> String {
        self.name.clone()
    }
    fn weights_sha256(&self) -> sdr_embed::Result<String> {
        Ok("callable".to_string())
    }
    fn identity(&self) -> sdr_embed::Result<String> {
        Ok(match &self.id {
            Some(id) => format!("callable:{id}"),
            None => format!("callable:{}", self.name),
        })
    }
    fn embed(&self, texts: &[&str]) -> sdr_embed::Result<Vec<f32>> {
        let external = |message: String| EmbedError::External {
            encoder: self.name.clone(),
            message,
        };
        let (flat, dim) = Python::attach(|py| call_matrix(py, &self.func, texts)).map_err(|e| {
            let message = e.message();
            *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            external(message)
        })?;
        if dim != self.dim {
            let message = format!(
                "returned dimension {dim}, but {} on its first call",
                self.dim
            );
            *self.failure.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(CallError::Bad(message.clone()));
            return Err(external(message));
        }
        Ok(flat)
    }
}

/// A reference as ``score`` takes it: a whole report (a string), or its two
/// sections (a mapping with ``"findings"`` and ``"impression"`` strings), so
/// that one call scores a batch that mixes both, as verl's can.
pub(crate) fn reference_arg(i: usize, value: &Bound<'_, PyAny>) -> PyResult<OwnedReference> {
    if let Ok(text) = value.extract::<String>() {
        return Ok(OwnedReference::Report(text));
    }
    let section = |key: &str| -> PyResult<String> {
        value
            .get_item(key)
            .and_then(|v| v.extract::<String>())
            .map_err(|_| {
                pyo3::exceptions::PyTypeError::new_err(format!(
                    "references[{i}] must be a report string or a mapping with \"findings\" \
                     and \"impression\" strings (its \"{key}\" is missing or not a string)"
                ))
            })
    };
    Ok(OwnedReference::Sections {
        findings: section("findings")?,
        impression: section("impression")?,
    })
}

/// Scores completions against references (see ``sdr_rewards.SDRReward``).
#[pyclass(name = "RewardScorer", module = "sdr_rewards._sdr", frozen, weakref)]
pub struct PyRewardScorer {
    scorer: Scorer,
    /// The Python callable behind the scorer, when one was given.
    callable: Option<Arc<CallableEmbedder>>,
    last: Mutex<BatchStats>,
    /// What was found at ``cache_path`` (one line), when one was given.
    cache_load: Option<String>,
    cache_refused: bool,
}

#[pymethods]
impl PyRewardScorer {
    #[new]
    #[pyo3(signature = (metric = "chamfer", format_weight = 1.0, semantic_weight = 1.0, exact = false, model_dir = None, encoder = None, distinct_sentences = false, clinical_weight = 0.0, cache_mib = sdr_reward::DEFAULT_CACHE_MIB, cache_path = None, cache_save_interval = 300.0, encoder_id = None, device = "cpu", precision = "f32", cost = "cosine"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        metric: &str,
        format_weight: f64,
        semantic_weight: f64,
        exact: bool,
        model_dir: Option<PathBuf>,
        encoder: Option<Py<PyAny>>,
        distinct_sentences: bool,
        clinical_weight: f64,
        cache_mib: f64,
        cache_path: Option<PathBuf>,
        cache_save_interval: f64,
        encoder_id: Option<String>,
        device: &str,
        precision: &str,
        cost: &str,
    ) -> PyResult<Self> {
        if !(cache_save_interval.is_finite() && cache_save_interval >= 0.0) {
            return Err(PyValueError::new_err(format!(
                "cache_save_interval must be a finite number of seconds >= 0, got {cache_save_interval}"
            )));
        }
        if encoder.is_some() && cache_path.is_some() && encoder_id.is_none() {
            return Err(PyValueError::new_err(
                "cache_path with a callable encoder needs encoder_id= (a name that changes \
                 whenever the callable's vectors would, e.g. 'st:all-mpnet-base-v2/bf16'): \
                 a saved cache must never be read by another encoder",
            ));
        }
        let cost =
            sdr_clinical::parse_cost(cost).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let options = RewardOptions::new(metric, format_weight, semantic_weight, exact)
            .and_then(|o| o.with_clinical_weight(clinical_weight))
            .py()?
            .with_distinct_sentences(distinct_sentences)
            .with_cost(cost);
        let mut callable = None;
        let embedder: Option<Arc<dyn SentenceEncoder>> = if exact {
            None
        } else if let Some(func) = encoder {
            if !func.bind(py).is_callable() {
                return Err(pyo3::exceptions::PyTypeError::new_err(
                    "encoder must be a callable list[str] -> (n, d) array",
                ));
            }
            let c = Arc::new(CallableEmbedder::new(py, func, encoder_id)?);
            callable = Some(c.clone());
            Some(c)
        } else {
            // The scorer's bounded cache holds every sentence; the encoder keeps none.
            Some(load_encoder(py, model_dir, false, device, precision)?)
        };
        // Another kind of file at `cache_path` (a corpus, a typo) is refused by
        // `open_cache`, before anything could be saved over it.
        let interval = Duration::from_secs_f64(cache_save_interval);
        let (cache, persist) = match &embedder {
            Some(e) => {
                let file = cache_path.as_deref().map(|p| (p, interval));
                let (cache, persist) = py
                    .detach(|| sdr_reward::open_cache(e.as_ref(), cache_mib, file))
                    .py()?;
                (Some(cache), persist)
            }
            None => (None, None),
        };
        let mut scorer = Scorer::with_cache(options, embedder, cache).py()?;
        let (mut cache_load, mut cache_refused) = (None, false);
        if let (Some(path), Some((persist, outcome))) = (&cache_path, persist) {
            cache_refused = matches!(outcome, LoadOutcome::Refused(_));
            cache_load = Some(outcome.message(path));
            scorer = scorer.with_persistence(persist);
        }
        Ok(PyRewardScorer {
            scorer,
            callable,
            last: Mutex::new(BatchStats::default()),
            cache_load,
            cache_refused,
        })
    }

    /// Score ``completions[i]`` against either ``references[i]`` (a whole
    /// report, or a ``{"findings", "impression"}`` dict) or ``findings[i]`` +
    /// ``impression[i]``. Returns
    /// ``{"reward", "format", "findings", "impression"}``, lists of floats,
    /// ``"unconverged"``, ``"failed"`` (per sample, sections whose solver did not
    /// converge, last iterate used, or gave no finite distance, term 0), and
    /// ``"clinical"`` when ``clinical_weight`` > 0. ``missing_section`` is the
    /// policy for a reference with an empty section (``sdr_reward::missing``):
    /// under ``"score"`` the result adds ``"missing_sections"`` per sample.
    #[pyo3(signature = (completions, references = None, findings = None, impression = None, missing_section = "error"))]
    fn score<'py>(
        &self,
        py: Python<'py>,
        completions: Vec<String>,
        references: Option<Vec<Bound<'py, PyAny>>>,
        findings: Option<Vec<String>>,
        impression: Option<Vec<String>>,
        missing_section: &str,
    ) -> PyResult<Bound<'py, PyDict>> {
        let policy = MissingSection::from_name(missing_section).ok_or_else(|| {
            PyValueError::new_err(format!(
                "missing_section {missing_section:?}: expected 'error' or 'score'"
            ))
        })?;
        let references = references
            .map(|r| {
                r.iter()
                    .enumerate()
                    .map(|(i, v)| reference_arg(i, v))
                    .collect::<PyResult<Vec<_>>>()
            })
            .transpose()?;
        let (reports, sections) = match (references, findings, impression) {
            (Some(r), None, None) => (Some(r), None),
            (None, Some(f), Some(i)) => {
                if f.len() != i.len() {
                    return Err(PyValueError::new_err(format!(
                        "findings has {} items but impression has {}",
                        f.len(),
                        i.len()
                    )));
                }
                (None, Some((f, i)))
            }
            _ => {
                return Err(PyValueError::new_err(
                    "give either references, or both findings and impression",
                ))
            }
        };
        let (reports, sections, gaps) = match policy {
            MissingSection::Error => (reports, sections, None),
            MissingSection::Score => {
                let owned = match (reports, sections) {
                    (Some(r), _) => r,
                    (_, Some((f, i))) => f
                        .into_iter()
                        .zip(i)
                        .map(|(findings, impression)| OwnedReference::Sections {
                            findings,
                            impression,
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                let (filled, gaps) = policy.fill(owned);
                (Some(filled), None, Some(gaps))
            }
        };
        let run = |chunk: usize, stop: &AtomicBool| {
            sdr_reward::install(|| {
                let comps: Vec<&str> = completions.iter().map(String::as_str).collect();
                let refs: Vec<Reference<'_>> = match (&reports, &sections) {
                    (Some(r), _) => r.iter().map(OwnedReference::as_reference).collect(),
                    (_, Some((f, i))) => f
                        .iter()
                        .zip(i)
                        .map(|(f, i)| Reference::Sections {
                            findings: f,
                            impression: i,
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                self.scorer
                    .score_until(&comps, &refs, chunk, &|| stop.load(Ordering::Relaxed))
            })
        };
        let result = if self.callable.is_none() && !self.scorer.options().exact {
            // The built-in encoder can hold the call for minutes on a CPU:
            // Ctrl-C stops it between chunks (what they embedded stays cached).
            crate::interrupt::interruptible(py, |stop| run(sdr_reward::DEFAULT_ENCODE_CHUNK, stop))?
        } else {
            // A Python encoder runs on this thread, where a Ctrl-C reaches its
            // own code, and gets all of a batch's new sentences in one call.
            py.detach(|| run(usize::MAX, &AtomicBool::new(false)))
        };
        let (mut scores, stats) = match result {
            Ok(r) => r,
            Err(e) => {
                let external = matches!(
                    e,
                    sdr_reward::RewardError::Embed(EmbedError::External { .. })
                );
                let err = match &self.callable {
                    Some(c) => c.exception(py, e, external, crate::error::reward_err),
                    None => crate::error::reward_err(e),
                };
                return Err(crate::cost::chain(py, err));
            }
        };
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = stats;
        let missing = gaps.and_then(|g| g.apply(&mut scores, self.scorer.options()));
        let out = PyDict::new(py);
        out.set_item(
            "reward",
            scores.iter().map(|s| s.reward).collect::<Vec<_>>(),
        )?;
        out.set_item(
            "format",
            scores.iter().map(|s| s.format).collect::<Vec<_>>(),
        )?;
        out.set_item(
            "findings",
            scores.iter().map(|s| s.findings).collect::<Vec<_>>(),
        )?;
        out.set_item(
            "impression",
            scores.iter().map(|s| s.impression).collect::<Vec<_>>(),
        )?;
        if self.scorer.options().clinical_weight > 0.0 {
            out.set_item(
                "clinical",
                scores.iter().map(|s| s.clinical).collect::<Vec<_>>(),
            )?;
        }
        // Per sample, sections whose solver did not converge (last iterate
        // used) and sections whose distance was not finite (term 0); SPEC §4.
        out.set_item(
            "unconverged",
            scores
                .iter()
                .map(|s| u32::from(s.unconverged))
                .collect::<Vec<_>>(),
        )?;
        out.set_item(
            "failed",
            scores
                .iter()
                .map(|s| u32::from(s.failed))
                .collect::<Vec<_>>(),
        )?;
        if let Some(missing) = missing {
            out.set_item(
                "missing_sections",
                missing.into_iter().map(u32::from).collect::<Vec<_>>(),
            )?;
        }
        Ok(out)
    }

    /// Counters of the last ``score`` call: samples, sentences, distinct,
    /// embedded (in one encoder call), cache_hits (distinct sentences found in
    /// the sentence cache), hit_rate, encode_seconds, unconverged and failed
    /// (sections, SPEC §4).
    fn last_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = *self.last.lock().unwrap_or_else(|e| e.into_inner());
        let out = PyDict::new(py);
        out.set_item("samples", s.samples)?;
        out.set_item("sentences", s.sentences)?;
        out.set_item("distinct", s.distinct)?;
        out.set_item("embedded", s.embedded)?;
        out.set_item("cache_hits", s.cache_hits)?;
        out.set_item("hit_rate", s.hit_rate())?;
        out.set_item("encode_seconds", s.encode_seconds)?;
        out.set_item("unconverged", s.unconverged)?;
        out.set_item("failed", s.failed)?;
        out.set_item("conflicts", s.conflicts)?;
        Ok(out)
    }

    /// Sentences in the cache.
    #[getter]
    fn cached_sentences(&self) -> usize {
        self.scorer.cached_sentences()
    }

    /// The sentence cache: ``{"entries", "bytes", "max_bytes", "hits", "misses",
    /// "evictions", "identity"}``, plus ``"path"``, ``"writable"`` and ``"load"``
    /// (what was found at start) when it is persisted.
    fn cache_info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.scorer.cache_stats();
        let out = PyDict::new(py);
        out.set_item("entries", s.entries)?;
        out.set_item("bytes", s.bytes)?;
        out.set_item("max_bytes", s.max_bytes)?;
        out.set_item("hits", s.hits)?;
        out.set_item("misses", s.misses)?;
        out.set_item("evictions", s.evictions)?;
        if let Some(c) = self.scorer.cache() {
            out.set_item("identity", c.identity())?;
        }
        if let Some(p) = self.scorer.persistence() {
            out.set_item("path", p.path().to_path_buf())?;
            out.set_item("writable", p.is_writable())?;
        }
        if let Some(msg) = &self.cache_load {
            out.set_item("load", msg)?;
            out.set_item("refused", self.cache_refused)?;
        }
        Ok(out)
    }

    /// Write the cache to ``cache_path`` now (atomically) when it changed;
    /// returns the sentences written (0 without a path or without changes).
    fn save_cache(&self, py: Python<'_>) -> PyResult<usize> {
        match self.scorer.persistence() {
            Some(p) => py.detach(|| p.save()).py(),
            None => Ok(0),
        }
    }

    /// Canonical metric spec.
    #[getter]
    fn metric(&self) -> String {
        self.scorer.options().config.metric.to_string()
    }
}
