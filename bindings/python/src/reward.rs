//! `sdr._sdr.RewardScorer`: the Rust half of `sdr.SDRReward`.
//!
//! The Python class handles trainer conventions (keyword columns, chat
//! messages, logging callbacks, pickling, forks); this one scores a batch of
//! strings with the GIL released.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sdr_reward::{BatchStats, Embedder, Reference, RewardOptions, Scorer};

use crate::encoder::load_encoder;
use crate::error::ToPy;

/// Check reward options without loading anything; returns the canonical
/// metric spec. Raises ValueError for an unknown metric or a negative,
/// NaN or infinite weight.
#[pyfunction]
#[pyo3(signature = (metric = "chamfer", format_weight = 1.0, semantic_weight = 1.0))]
pub fn check_reward_options(
    metric: &str,
    format_weight: f64,
    semantic_weight: f64,
) -> PyResult<String> {
    let o = RewardOptions::new(metric, format_weight, semantic_weight, false).py()?;
    Ok(o.config.metric.to_string())
}

/// Scores completions against references (see ``sdr.SDRReward``).
#[pyclass(name = "RewardScorer", module = "sdr._sdr", frozen)]
pub struct PyRewardScorer {
    scorer: Scorer,
    last: Mutex<BatchStats>,
}

#[pymethods]
impl PyRewardScorer {
    #[new]
    #[pyo3(signature = (metric = "chamfer", format_weight = 1.0, semantic_weight = 1.0, exact = false, model_dir = None))]
    fn new(
        py: Python<'_>,
        metric: &str,
        format_weight: f64,
        semantic_weight: f64,
        exact: bool,
        model_dir: Option<PathBuf>,
    ) -> PyResult<Self> {
        let options = RewardOptions::new(metric, format_weight, semantic_weight, exact).py()?;
        let embedder: Option<Arc<dyn Embedder>> = if exact {
            None
        } else {
            // The scorer caches reference sentences itself; completions are
            // not cached (they rarely recur and would grow without bound).
            Some(load_encoder(py, model_dir, false)?)
        };
        Ok(PyRewardScorer {
            scorer: Scorer::new(options, embedder).py()?,
            last: Mutex::new(BatchStats::default()),
        })
    }

    /// Score ``completions[i]`` against either ``references[i]`` (a whole
    /// report) or ``findings[i]`` + ``impression[i]``. Returns
    /// ``{"reward", "format", "findings", "impression"}``, lists of floats.
    #[pyo3(signature = (completions, references = None, findings = None, impression = None))]
    fn score<'py>(
        &self,
        py: Python<'py>,
        completions: Vec<String>,
        references: Option<Vec<String>>,
        findings: Option<Vec<String>>,
        impression: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyDict>> {
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
        let result = py.detach(|| {
            sdr_reward::install(|| {
                let comps: Vec<&str> = completions.iter().map(String::as_str).collect();
                let refs: Vec<Reference<'_>> = match (&reports, &sections) {
                    (Some(r), _) => r.iter().map(|t| Reference::Report(t)).collect(),
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
                self.scorer.score(&comps, &refs)
            })
        });
        let (scores, stats) = result.py()?;
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = stats;
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
        Ok(out)
    }

    /// Counters of the last ``score`` call: samples, sentences, distinct,
    /// embedded (in one encoder call), cache_hits (reference cache).
    fn last_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = *self.last.lock().unwrap_or_else(|e| e.into_inner());
        let out = PyDict::new(py);
        out.set_item("samples", s.samples)?;
        out.set_item("sentences", s.sentences)?;
        out.set_item("distinct", s.distinct)?;
        out.set_item("embedded", s.embedded)?;
        out.set_item("cache_hits", s.cache_hits)?;
        Ok(out)
    }

    /// Reference sentences in the cache.
    #[getter]
    fn cached_sentences(&self) -> usize {
        self.scorer.cached_sentences()
    }

    /// Canonical metric spec.
    #[getter]
    fn metric(&self) -> String {
        self.scorer.options().config.metric.to_string()
    }
}
