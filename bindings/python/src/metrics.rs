//! `sdr_rewards._sdr.score_reports`: the Rust half of `sdr_rewards.metrics` — the same code
//! as `sdr score` (`sdr_eval::report`), so both give the same numbers.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyFileNotFoundError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use sdr_clinical::UncertainPolicy;
use sdr_eval::bertscore::{Baseline, BertScorer, TokenEncoder};
use sdr_eval::report::{score_pairs, Scope};
use sdr_eval::scores::TextScorer;
use sdr_eval::wordnet::WordNet;
use sdr_eval::EvalError;

use crate::error::ToPy;

/// The last BERTScore encoder loaded, by model folder: loading takes seconds.
static ENCODER: Mutex<Option<(PathBuf, Arc<sdr_embed::Encoder>)>> = Mutex::new(None);

/// The last RoBERTa / BERT judge loaded, by folder and layer asked for.
#[allow(clippy::type_complexity)]
static LAYER_ENCODER: Mutex<Option<((PathBuf, Option<usize>), Arc<sdr_embed::RobertaEncoder>)>> =
    Mutex::new(None);

fn layer_encoder(dir: PathBuf, layer: Option<usize>) -> PyResult<Arc<sdr_embed::RobertaEncoder>> {
    let mut slot = LAYER_ENCODER.lock().unwrap_or_else(|e| e.into_inner());
    let key = (dir, layer);
    if let Some((k, enc)) = slot.as_ref() {
        if *k == key {
            return Ok(enc.clone());
        }
    }
    let enc = Arc::new(sdr_embed::RobertaEncoder::load(&key.0, layer).map_err(|e| {
        let msg = format!("bertscore_model {}: {e}", key.0.display());
        match e {
            sdr_embed::EmbedError::Io { .. } => PyFileNotFoundError::new_err(msg),
            _ => PyValueError::new_err(msg),
        }
    })?);
    *slot = Some((key, enc.clone()));
    Ok(enc)
}

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
    // The same options as `sdr score`, through the one loader; token vectors only, so
    // no sentence cache.
    let options = sdr_embed::EncoderOptions {
        cache: false,
        ..Default::default()
    };
    let loaded = sdr_embed::open_encoder("mpnet", Some(&dir), options).py()?;
    let enc = loaded
        .model
        .ok_or_else(|| PyRuntimeError::new_err("the mpnet encoder loaded without its model"))?;
    *slot = Some((dir, enc.clone()));
    Ok(enc)
}

fn eval_err(e: EvalError) -> PyErr {
    match e {
        EvalError::Io { .. } => PyFileNotFoundError::new_err(e.to_string()),
        EvalError::Encoder { .. } | EvalError::WordNet { .. } => {
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

/// ``section_texts(texts) -> (findings, impression)``: per report, its Findings
/// and its Impression as ``score_reports`` compares them (the sentences joined
/// by one space, ``""`` when missing).
#[pyfunction]
pub fn section_texts(texts: Vec<String>) -> (Vec<String>, Vec<String>) {
    texts
        .iter()
        .map(|t| {
            let [f, i] = sdr_eval::evaluation::section_texts(&sdr_core::report::parse_report(t));
            (f, i)
        })
        .unzip()
}

/// Scores ``hyps[i]`` against ``refs[i]`` exactly as ``sdr score`` does;
/// returns ``(lines, summary)`` as JSON text: one ``sdr score`` output line
/// per pair (no ``id``) and the ``--summary`` object. ``bertscore_model``,
/// ``bertscore_layer``, ``rescale_baseline`` and ``idf`` are ``sdr score``'s
/// options of the same names.
#[pyfunction]
#[pyo3(signature = (hyps, refs, whole = false, bertscore = true, model_dir = None, wordnet_dir = None, uncertain_negative = false, bertscore_model = None, bertscore_layer = None, rescale_baseline = None, idf = false))]
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
    bertscore_model: Option<PathBuf>,
    bertscore_layer: Option<usize>,
    rescale_baseline: Option<PathBuf>,
    idf: bool,
) -> PyResult<(Vec<String>, String)> {
    if bertscore_model.is_none() && (bertscore_layer.is_some() || rescale_baseline.is_some()) {
        return Err(PyValueError::new_err(
            "bertscore_layer and rescale_baseline need bertscore_model (a RoBERTa or BERT folder)",
        ));
    }
    if hyps.len() != refs.len() {
        return Err(PyValueError::new_err(format!(
            "{} hyps but {} refs: they are paired by position",
            hyps.len(),
            refs.len()
        )));
    }
    let wn = py.detach(|| wordnet(wordnet_dir.as_deref()))?;
    enum Judge {
        Reward(Arc<sdr_embed::Encoder>),
        Layer(Arc<sdr_embed::RobertaEncoder>),
    }
    let judge = match (bertscore, bertscore_model) {
        (false, _) => None,
        (true, None) => {
            Some(Judge::Reward(py.detach(|| {
                sdr_reward::install(|| bertscore_encoder(model_dir))
            })?))
        }
        (true, Some(dir)) => {
            Some(Judge::Layer(py.detach(|| {
                sdr_reward::install(|| layer_encoder(dir, bertscore_layer))
            })?))
        }
    };
    let baseline = match (&judge, &rescale_baseline) {
        (Some(Judge::Layer(e)), Some(path)) => {
            Some(Baseline::from_file(path, e.layer()).map_err(|e| match e {
                EvalError::Io { .. } => {
                    PyFileNotFoundError::new_err(format!("rescale_baseline: {e}"))
                }
                other => PyValueError::new_err(format!("rescale_baseline: {other}")),
            })?)
        }
        _ => None,
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
            let bert = judge.as_ref().map(|j| BertScorer {
                encoder: match j {
                    Judge::Reward(e) => &**e as &dyn TokenEncoder,
                    Judge::Layer(e) => &**e as &dyn TokenEncoder,
                },
                idf,
                baseline,
            });
            let mut scores = score_pairs(&pairs, scope, &scorer, bert.as_ref(), policy)?;
            // Named as `sdr score` names it.
            scores.encoder = bert
                .as_ref()
                .map(|b| b.describe(matches!(judge, Some(Judge::Reward(_)))));
            let lines = (0..scores.len())
                .map(|n| serde_json::Value::Object(scores.pair_json(n)).to_string())
                .collect();
            let summary = serde_json::Value::Object(scores.summary_json()?).to_string();
            Ok::<_, EvalError>((lines, summary))
        })
    })
    .map_err(eval_err)
}

/// The 95 % paired-bootstrap interval (`sdr_eval::bootstrap`: 1,000
/// resamples of the studies, fixed seed) of the relative change in % of the
/// mean of ``policy`` against the mean of ``baseline`` (one value per study,
/// paired by position); ``None`` when a resample's baseline mean is 0.
#[pyfunction]
pub fn paired_bootstrap(policy: Vec<f64>, baseline: Vec<f64>) -> PyResult<Option<(f64, f64)>> {
    sdr_eval::bootstrap::paired_mean_change(&policy, &baseline)
        .map(|ci| ci.map(|c| (c.low, c.high)))
        .map_err(eval_err)
}

/// Paired-bootstrap intervals of the relative change in % of corpus-level
/// CheXpert-rule F1 (macro-14, micro-14, macro-5, micro-5, in that order) of
/// ``hyps`` against ``base_hyps``, both against ``refs`` (paired by
/// position): each text is labelled once, and each resample recomputes both
/// F1s on the same studies.
#[pyfunction]
#[pyo3(signature = (hyps, base_hyps, refs, uncertain_negative = false, labeler = "rules", judge_base = None))]
pub fn chexpert_f1_bootstrap(
    py: Python<'_>,
    hyps: Vec<String>,
    base_hyps: Vec<String>,
    refs: Vec<String>,
    uncertain_negative: bool,
    labeler: &str,
    judge_base: Option<std::path::PathBuf>,
) -> PyResult<Vec<Option<(f64, f64)>>> {
    if hyps.len() != refs.len() || base_hyps.len() != refs.len() {
        return Err(PyValueError::new_err(format!(
            "{} hyps, {} base_hyps and {} refs: they are paired by position",
            hyps.len(),
            base_hyps.len(),
            refs.len()
        )));
    }
    if refs.is_empty() {
        return Err(PyValueError::new_err("no studies (refs is empty)"));
    }
    let policy = if uncertain_negative {
        UncertainPolicy::Negative
    } else {
        UncertainPolicy::Positive
    };
    let lab = |v: &[String]| -> PyResult<Vec<sdr_clinical::Labels>> {
        let t: Vec<&str> = v.iter().map(String::as_str).collect();
        crate::clinical::label_all(py, labeler, judge_base.clone(), &t)
    };
    let (a, b, r) = (lab(&hyps)?, lab(&base_hyps)?, lab(&refs)?);
    py.detach(|| {
        let draws = sdr_eval::bootstrap::resample_indices(
            refs.len(),
            sdr_eval::bootstrap::RESAMPLES,
            sdr_eval::bootstrap::SEED,
        );
        let f1 = |h: &[sdr_clinical::Labels], idx: &[usize]| -> Result<[f64; 4], EvalError> {
            let hh: Vec<_> = idx.iter().map(|&i| h[i]).collect();
            let rr: Vec<_> = idx.iter().map(|&i| r[i]).collect();
            Ok(sdr_eval::chexpert::f1_columns(&sdr_clinical::chexpert_f1(
                &hh, &rr, policy,
            )?))
        };
        let stats: Vec<([f64; 4], [f64; 4])> = draws
            .iter()
            .map(|d| Ok((f1(&a, d)?, f1(&b, d)?)))
            .collect::<Result<_, EvalError>>()?;
        (0..4)
            .map(|k| {
                let s: Vec<(f64, f64)> = stats.iter().map(|(x, y)| (x[k], y[k])).collect();
                sdr_eval::bootstrap::interval_of(&s).map(|ci| ci.map(|c| (c.low, c.high)))
            })
            .collect::<Result<Vec<_>, EvalError>>()
    })
    .map_err(eval_err)
}
