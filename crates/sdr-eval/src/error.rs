//! The one error type of `sdr-eval`. Every variant names the offending input.

use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum EvalError {
    /// Two parallel inputs (hypotheses and references, values and flags, ...)
    /// do not have the same length.
    #[error("`{what}`: expected {expected} items, got {got}")]
    LengthMismatch {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    /// An input that must hold at least one item is empty.
    #[error("`{what}` is empty")]
    Empty { what: &'static str },
    /// A parameter is outside its domain.
    #[error("parameter `{name}` = {value}: {message}")]
    BadParameter {
        name: &'static str,
        value: String,
        message: &'static str,
    },
    /// A metric value or an embedding component is NaN or infinite.
    #[error("`{what}` item {index} is not finite ({value})")]
    NonFinite {
        what: &'static str,
        index: usize,
        value: f64,
    },
    /// A token embedding is the zero vector, so its cosine is undefined.
    #[error("sentence {sentence} token {token} is the zero vector (cosine undefined)")]
    ZeroVector { sentence: usize, token: usize },
    /// Token embeddings of one sentence are inconsistent (shape, flags).
    #[error("sentence {sentence}: {message} (expected {expected}, got {got})")]
    BadEmbeddings {
        sentence: usize,
        message: &'static str,
        expected: usize,
        got: usize,
    },
    /// The caller's token encoder failed.
    #[error("token encoder `{encoder}` failed: {message}")]
    Encoder { encoder: String, message: String },
    /// A dataset label cannot be mapped to a stratum.
    #[error("problems label `{0}` holds no label (expected `normal` or `;`-separated findings)")]
    EmptyProblems(String),
    /// A WordNet database file is missing or malformed.
    #[error("WordNet file {path}: line {line}: {message}")]
    WordNet {
        path: PathBuf,
        line: usize,
        message: String,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A reference without one of its two sections.
    #[error("the reference has no {section} section (template or `{section}:` header)")]
    MissingSection { section: &'static str },
    /// A BERTScore baseline file (bert-score's `rescale_baseline` TSV) that
    /// cannot be used.
    #[error("baseline file {path}: {message}")]
    Baseline { path: PathBuf, message: String },
    /// A bad (hypothesis, reference) pair, by index in the caller's list.
    #[error("pair {index}: {message}")]
    Pair { index: usize, message: String },
    /// CheXpert-rule F1 failed.
    #[error(transparent)]
    Clinical(#[from] sdr_clinical::ClinicalError),
    /// A table could not be written as CSV.
    #[error("table `{what}` as CSV: {source}")]
    Csv {
        what: String,
        #[source]
        source: csv::Error,
    },
    /// Drawing the heatmap failed.
    #[error("heatmap {path}: {message}")]
    Plot { path: PathBuf, message: String },
    /// One study of an evaluation is bad (counts that disagree, a pick out
    /// of range, a text a metric fails on).
    #[error("study {id}: {message}")]
    Study { id: String, message: String },
    /// An error of the input at `at` (a file's line, a section and group).
    #[error("{at}: {source}")]
    At {
        at: String,
        #[source]
        source: Box<EvalError>,
    },
    /// No study has a reference section to score against.
    #[error("no study has a reference {section} section in {references}")]
    NoReferenceSection {
        section: &'static str,
        references: String,
    },
    /// Token counts that cannot be totalled (overflow) or shown exactly.
    #[error("{message}")]
    Tokens { message: String },
    /// An output file's destination is a folder.
    #[error("cannot write {path}: is a folder")]
    IsAFolder { path: PathBuf },
    /// An output folder could not be made.
    #[error("cannot create {path}: {source}")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An output file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T> = std::result::Result<T, EvalError>;
