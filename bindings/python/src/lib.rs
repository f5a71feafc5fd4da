//! Python bindings of SDR (module `sdr_rewards._sdr`; the package is `py_src/sdr_rewards`).
//!
//! Thin by design, like huggingface/tokenizers' bindings: every function
//! copies its arguments into owned Rust values, releases the GIL, and calls
//! `sdr-core` / `sdr-embed` / `sdr-reward` / `sdr-clinical` / `sdr-corpus` / `sdr-eval`. Errors are mapped in `error.rs`.

use pyo3::prelude::*;

mod clinical;
mod completion;
mod corpus;
mod cost;
mod distance;
mod encoder;
mod error;
mod explain;
mod interrupt;
mod metrics;
mod prune;
mod report;
mod reward;

/// Called by the package's ``os.register_at_fork(after_in_child=...)`` hook.
///
/// A forked child has none of the parent's pool threads. All Rust work runs
/// in a per-process pool (`sdr_reward::install`), which the child creates
/// afresh; with parallelism off it has one thread, as tokenizers does.
#[pyfunction]
fn _after_fork_child() {
    sdr_reward::set_parallelism(false);
}

/// Turn Rayon parallelism of reward scoring on or off (off after a fork).
#[pyfunction]
fn set_parallelism(on: bool) {
    sdr_reward::set_parallelism(on);
}

/// Whether reward scoring may use the Rayon pool.
#[pyfunction]
fn get_parallelism() -> bool {
    sdr_reward::parallelism()
}

#[pymodule]
fn _sdr(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(distance::distance, m)?)?;
    m.add_function(wrap_pyfunction!(distance::distances, m)?)?;
    m.add_function(wrap_pyfunction!(distance::distance_batch, m)?)?;
    m.add_function(wrap_pyfunction!(distance::distances_batch, m)?)?;
    m.add("METRICS", distance::metric_names())?;
    m.add_function(wrap_pyfunction!(report::parse_report, m)?)?;
    m.add_function(wrap_pyfunction!(report::split_sentences, m)?)?;
    m.add_function(wrap_pyfunction!(clinical::label, m)?)?;
    m.add_function(wrap_pyfunction!(clinical::chexpert_f1, m)?)?;
    m.add_function(wrap_pyfunction!(clinical::clinical_conflicts, m)?)?;
    m.add_function(wrap_pyfunction!(clinical::findings_consistency, m)?)?;
    m.add_function(wrap_pyfunction!(clinical::select_by_findings, m)?)?;
    m.add_function(wrap_pyfunction!(corpus::build_corpus, m)?)?;
    m.add_function(wrap_pyfunction!(corpus::merge_corpus, m)?)?;
    m.add_function(wrap_pyfunction!(metrics::score_reports, m)?)?;
    m.add_function(wrap_pyfunction!(metrics::section_texts, m)?)?;
    m.add_function(wrap_pyfunction!(metrics::paired_bootstrap, m)?)?;
    m.add_function(wrap_pyfunction!(metrics::chexpert_f1_bootstrap, m)?)?;
    m.add_function(wrap_pyfunction!(explain::explain_json, m)?)?;
    m.add_class::<encoder::PyEncoder>()?;
    m.add_function(wrap_pyfunction!(encoder::check_device, m)?)?;
    m.add_class::<prune::PyPruneScorer>()?;
    m.add_class::<reward::PyRewardScorer>()?;
    m.add_function(wrap_pyfunction!(reward::check_reward_options, m)?)?;
    m.add_function(wrap_pyfunction!(reward::check_cost, m)?)?;
    m.add_function(wrap_pyfunction!(cost::register_cost, m)?)?;
    m.add_function(wrap_pyfunction!(reward::openrlhf_completion, m)?)?;
    m.add_function(wrap_pyfunction!(completion::completion_text, m)?)?;
    m.add("REWARD_OPTIONS", reward::reward_options(m.py())?)?;
    m.add("REASONING_KEYS", sdr_reward::REASONING_KEYS.to_vec())?;
    m.add(
        "MISSING_SECTION_POLICIES",
        sdr_reward::MissingSection::NAMES.to_vec(),
    )?;
    m.add_function(wrap_pyfunction!(_after_fork_child, m)?)?;
    m.add_function(wrap_pyfunction!(set_parallelism, m)?)?;
    m.add_function(wrap_pyfunction!(get_parallelism, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
