//! The one error type of `sdr-clinical`. Every variant names the offending input.

use std::path::PathBuf;

use thiserror::Error;

/// Errors of rules and map loading and of F1 inputs.
#[derive(Debug, Error)]
pub enum ClinicalError {
    /// A rules or map file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
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
        /// Where the phrase stands, e.g. `Cardiomegaly.mentions` or `cues.negation_before`.
        list: String,
        /// The phrase as written.
        phrase: String,
        /// What is wrong with it.
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
    LengthMismatch {
        /// Number of candidate label sets.
        hyps: usize,
        /// Number of reference label sets.
        refs: usize,
    },
}

/// `Result` with [`ClinicalError`].
pub type Result<T> = std::result::Result<T, ClinicalError>;
