//! `sdr.explain` (Rust side): parse a candidate and its reference, embed their
//! distinct sentences with the caller's embedding function, and explain the
//! reward with `sdr_core::explain` (no maths here). The result is the JSON of
//! `sdr explain`'s output line, which `py_src/sdr/explain.py` decodes.

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use sdr_core::explain::{explain_texts, ExplainOptions};
use sdr_core::{parse_report, Metric, SdrError};
use sdr_reward::{parse_reference, Reference, RewardError};

use crate::error::ToPy;
use crate::reward::{callable_name, embed_checked};

/// ``_explain_json(candidate, reference, embed, metric, threshold)``: the
/// explanation as JSON. ``embed(texts: list[str])`` must return an array
/// (numpy, torch, or anything ``numpy.asarray`` takes) of shape ``(len(texts), d)``.
#[pyfunction]
#[pyo3(name = "_explain_json", signature = (candidate, reference, embed, metric = "chamfer", threshold = None))]
pub fn explain_json(
    py: Python<'_>,
    candidate: String,
    reference: String,
    embed: Bound<'_, PyAny>,
    metric: &str,
    threshold: Option<f64>,
) -> PyResult<String> {
    let metric: Metric = metric.parse::<Metric>().py()?;
    let options = ExplainOptions::new(metric, threshold).py()?;
    // One reference: its errors name no index (parse_reference's say "reference N: ").
    let reference = match parse_reference(&Reference::Report(&reference), 0) {
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

    // Distinct sentences, embedded in one call (with the GIL: `embed` is Python).
    let mut row_of: HashMap<&str, usize> = HashMap::new();
    let mut texts: Vec<&str> = Vec::new();
    let sections: Vec<&[String]> = if candidate.format_valid {
        vec![
            &reference.findings,
            &reference.impression,
            &candidate.findings,
            &candidate.impression,
        ]
    } else {
        vec![&reference.findings, &reference.impression]
    };
    for s in sections.iter().flat_map(|s| s.iter()) {
        row_of.entry(s.as_str()).or_insert_with(|| {
            texts.push(s.as_str());
            texts.len() - 1
        });
    }
    // One call; what it returns is checked as `SDRReward(encoder=...)`
    // checks it (shape, dtype, finiteness), with the same exceptions.
    let name = callable_name(&embed);
    let (vectors, dim) = embed_checked(py, &embed.unbind(), &name, &texts)?;

    py.detach(|| {
        let row = |t: &str| {
            let r = row_of[t];
            &vectors[r * dim..(r + 1) * dim]
        };
        let cand = candidate
            .format_valid
            .then_some((&candidate.findings[..], &candidate.impression[..]));
        let explanation = explain_texts(
            &options,
            cand,
            (&reference.findings, &reference.impression),
            dim,
            row,
            0,
        )?;
        Ok::<_, sdr_core::SdrError>(
            serde_json::to_string(&explanation).expect("an explanation serialises"),
        )
    })
    .py()
}
