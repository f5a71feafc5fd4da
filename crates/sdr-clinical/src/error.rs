//! The one error type of `sdr-clinical`. Every variant names the offending input.

use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum ClinicalError {
    /// A rules or map file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The rules JSON does not parse or does not have the documented shape.
    #[error("rules: {0}")]
    RulesJson(String),
    /// The rules name an observation that CheXpert does not have.
    #[error(
        "rules: unknown observation `{0}` (use CheXpert's spelling, e.g. \"Pleural Effusion\")"
    )]
    UnknownObservation(String),
    /// A phrase that cannot be matched (empty, or `*` anywhere but at the end).
    #[error("rules: {list}: bad phrase `{phrase}`: {reason}")]
    BadPhrase {
        list: String,
        phrase: String,
        reason: &'static str,
    },
    /// The phrase automaton could not be built.
    #[error("rules: cannot build the phrase automaton: {0}")]
    Automaton(String),
    /// The IU X-ray MeSH map does not parse or names an unknown observation.
    #[error("MeSH map: {0}")]
    MeshMap(String),
    /// Candidate and reference lists of different lengths.
    #[error("{hyps} candidate label sets but {refs} reference label sets")]
    LengthMismatch { hyps: usize, refs: usize },
}

pub type Result<T> = std::result::Result<T, ClinicalError>;
