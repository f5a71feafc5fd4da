//! `sdr._sdr.score_reports`: the Rust half of `sdr.metrics` — the same code
//! as `sdr score` (`sdr_eval::report`), so both give the same numbers.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyFileNotFoundError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use sdr_clinical::UncertainPolicy;
use sdr_eval::bertscore::TokenEncoder;
use sdr_eval::report::{score_pairs, Scope};
use sdr_eval::scores::TextScorer;
use sdr_eval::wordnet::WordNet;
use sdr_eval::EvalError;

use crate::error::ToPy;

/// The last BERTScore encoder loaded, by model folder: loading takes seconds.
static ENCODER: Mutex<Option<(PathBuf, Arc<sdr_embed::Encoder>)>> = Mutex::new(None);

fn bertscore_encoder(model_dir: Option<PathBuf>) -> PyResult<Arc<sdr_embed::Encoder>> {
    let dir = sdr_embed::resolve_model_dir(model_dir.as_deref()).map_err(|e| {
        PyFileNotFoundError::new_err(format!(
            "BERTScore needs the sentence-transformers model: {e} (run scripts/fetch-model.sh, \
                 pass model_dir=..., or leave BERTScore out of metrics)"
        ))
    })?;
    let mut slot = ENCODER.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((d, enc)) = slot.as_ref() {
        if *d == dir {
            return Ok(enc.clone());
        }
    }
    // The same options as `sdr score`.
    let enc = Arc::new(sdr_embed::Encoder::load(&dir, sdr_embed::EncoderOptions::default()).py()?);
    *slot = Some((dir, enc.clone()));
    Ok(enc)
}

fn eval_err(e: EvalError) -> PyErr {
    match e {
        EvalError::Encoder { .. } | EvalError::Io { .. } | EvalError::WordNet { .. } => {
            PyRuntimeError::new_err(e.to_string())
        }
        other => PyValueError::new_err(other.to_string()),
    }
}

/// WordNet as `sdr score` finds it: `dir`, else `$SDR_WORDNET_DIR`, else
/// `/usr/share/wordnet`; `None` when there is none.
fn wordnet(dir: Option<&Path>) -> PyResult<Option<WordNet>> {
    match dir.map(Path::to_path_buf).or_else(WordNet::default_dir) {
        // A wrong folder fails on its first file; say that it is WordNet's.
        Some(d) => WordNet::load(&d).map(Some).map_err(|e| {
            pyo3::exceptions::PyRuntimeError::new_err(format!("WordNet at {}: {e}", d.display()))
        }),
        None => Ok(None),
    }
}

/// Scores ``hyps[i]`` against ``refs[i]`` exactly as ``sdr score`` does;
/// returns ``(lines, summary)`` as JSON text: one ``sdr score`` output line
/// per pair (no ``id``) and the ``--summary`` object.
#[pyfunction]
#[pyo3(signature = (hyps, refs, whole = false, bertscore = true, model_dir = None, wordnet_dir = None, uncertain_negative = false))]
#[allow(clippy::too_many_arguments)]
pub fn score_reports(
    py: Python<'_>,
    hyps: Vec<String>,
    refs: Vec<String>,
    whole: bool,
    bertscore: bool,
    model_dir: Option<PathBuf>,
    wordnet_dir: Option<PathBuf>,
    uncertain_negative: bool,
) -> PyResult<(Vec<String>, String)> {
    if hyps.len() != refs.len() {
        return Err(PyValueError::new_err(format!(
            "{} hyps but {} refs: they are paired by position",
            hyps.len(),
            refs.len()
        )));
    }
    let wn = py.detach(|| wordnet(wordnet_dir.as_deref()))?;
    let encoder = if bertscore {
        Some(py.detach(|| sdr_reward::install(|| bertscore_encoder(model_dir)))?)
    } else {
        None
    };
    let policy = if uncertain_negative {
        UncertainPolicy::Negative
    } else {
        UncertainPolicy::Positive
    };
    let scope = if whole { Scope::Whole } else { Scope::Sections };
    py.detach(|| {
        sdr_reward::install(|| {
            let pairs: Vec<(&str, &str)> = hyps
                .iter()
                .zip(&refs)
                .map(|(h, r)| (h.as_str(), r.as_str()))
                .collect();
            let scorer = TextScorer::new(Default::default(), wn.as_ref());
            let scores = score_pairs(
                &pairs,
                scope,
                &scorer,
                encoder.as_deref().map(|e| e as &dyn TokenEncoder),
                policy,
            )?;
            let lines = (0..scores.len())
                .map(|n| serde_json::Value::Object(scores.pair_json(n)).to_string())
                .collect();
            let summary = serde_json::Value::Object(scores.summary_json()?).to_string();
            Ok::<_, EvalError>((lines, summary))
        })
    })
    .map_err(eval_err)
}
