//! `sdr_rewards.explain` (Rust side): parse a candidate and its reference, embed their
//! distinct sentences with the caller's embedding function, and explain the
//! reward with `sdr_reward::Explainer`, as `sdr explain` does (no maths here). The result is the JSON of
//! `sdr explain`'s output line, which `py_src/sdr_rewards/explain.py` decodes.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use sdr_core::explain::ExplainOptions;
use sdr_core::{parse_report, Metric, SdrError};
use sdr_reward::{parse_reference, Explainer, RewardError};

use sdr_embed::{EmbedControl, EmbedError, SectionEmbedder};

use crate::error::ToPy;
use crate::reward::CallableEmbedder;

/// ``_explain_json(candidate, reference, embed, metric, threshold)``: the
/// explanation as JSON. ``reference`` is a report string or a mapping with
/// ``"findings"`` and ``"impression"`` strings (read as ``score`` reads it,
/// not rebuilt as text). ``embed(texts: list[str])`` must return an array
/// (numpy, torch, or anything ``numpy.asarray`` takes) of shape ``(len(texts), d)``.
#[pyfunction]
#[pyo3(name = "_explain_json", signature = (candidate, reference, embed, metric = "chamfer", threshold = None, cost = "cosine"))]
pub fn explain_json(
    py: Python<'_>,
    candidate: String,
    reference: Bound<'_, PyAny>,
    embed: Bound<'_, PyAny>,
    metric: &str,
    threshold: Option<f64>,
    cost: &str,
) -> PyResult<String> {
    let metric: Metric = metric.parse::<Metric>().py()?;
    let options = ExplainOptions::new(metric, threshold).py()?;
    let cost = sdr_clinical::parse_cost(cost).py()?;
    let explainer = Explainer::new(options, &cost).py()?;
    // One reference: its errors name no index (parse_reference's say "reference N: ").
    let reference = crate::reward::reference_arg(0, &reference)?;
    let reference = match parse_reference(&reference.as_reference(), 0) {
        Ok(r) => r,
        Err(RewardError::Core(SdrError::EmptySection { section, .. })) => {
            return Err(PyValueError::new_err(format!(
                "reference: section `{section}` is empty"
            )))
        }
        Err(RewardError::BadReference { reason, .. }) => {
            return Err(PyValueError::new_err(format!(
                "reference: not a valid report: {reason}"
            )))
        }
        Err(e) => return Err(e).py(),
    };
    let candidate = parse_report(&candidate);

    // The reference is report 0, the candidate report 1; their new sentences
    // go to `embed` in one call (after the probe that learns its dimension),
    // checked as `SDRReward(encoder=...)` checks them, with the same exceptions.
    let encoder = CallableEmbedder::new(py, embed.unbind(), None)?;
    let embedder = SectionEmbedder::transient(&encoder);
    let explained = py
        .detach(|| {
            explainer.explain(
                &[(&candidate, &reference)],
                &embedder,
                &EmbedControl::default(),
            )
        })
        .map_err(|e| {
            let external = matches!(e, EmbedError::External { .. });
            encoder.exception(py, e, external, crate::error::embed_err)
        })?;
    let explanation = explained
        .into_iter()
        .next()
        .expect("one study, one explanation")
        .py()
        .map_err(|e| crate::cost::chain(py, e))?;
    Ok(serde_json::to_string(&explanation).expect("an explanation serialises"))
}
