//! `sdr_rewards.parse_report`, `sdr_rewards.split_sentences`.

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Split a report into Findings and Impression sentences. Template rules
/// apply when `text` holds any of ``<think>``, ``</think>``, ``<answer>``,
/// ``</answer>``; ``Findings:`` / ``Impression:`` header rules otherwise.
/// Returns ``{"format_valid": bool, "findings": [str], "impression": [str]}``.
#[pyfunction]
pub fn parse_report<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyDict>> {
    let r = sdr_core::parse_report(text);
    let out = PyDict::new(py);
    out.set_item("format_valid", r.format_valid)?;
    out.set_item("findings", r.findings)?;
    out.set_item("impression", r.impression)?;
    Ok(out)
}

/// Rule-based sentence segmentation (decimals, abbreviations, vertebral
/// levels and ``XXXX`` kept whole; list enumerators removed).
#[pyfunction]
pub fn split_sentences(text: &str) -> Vec<String> {
    sdr_core::split_sentences(text)
}
