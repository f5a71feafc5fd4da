//! The one error type of `sdr-corpus`. Every variant names the offending input
//! (a file, a record, a column, an option) and renders as one line.

use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum CorpusError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A corpus file that cannot be used: truncated, corrupt, inconsistent.
    #[error("{path}: not a usable SDR corpus: {fault}")]
    BadCorpus { path: PathBuf, fault: String },
    /// A well-formed corpus built with something other than what is in use.
    #[error("{path}: corpus was built with {what} `{found}`, but `{expected}` is in use; rebuild it with `sdr corpus build`")]
    Mismatch {
        path: PathBuf,
        what: &'static str,
        found: String,
        expected: String,
    },
    /// A corpus of this model embedded at another precision than the encoder in use.
    #[error("{path}: corpus was embedded at {found} (encoder `{recorded}`), but the encoder in use runs at {expected}; embed at {found} (--precision {found}, precision=\"{found}\" in Python) or rebuild the corpus")]
    PrecisionMismatch {
        path: PathBuf,
        recorded: String,
        found: String,
        expected: String,
    },
    /// A record of the source data that cannot be read; `record` is the
    /// 1-based file line where it starts.
    #[error("{source_name}:{record}: {message}")]
    BadRecord {
        source_name: String,
        record: usize,
        message: String,
    },
    #[error("{source_name}: no column `{column}` (columns: {available})")]
    MissingColumn {
        source_name: String,
        column: String,
        available: String,
    },
    /// Several header cells name the column asked for (exactly, or only
    /// case-insensitively); which one was meant is not known.
    #[error("{source_name}: the header names column `{column}` {count} times (columns {positions}); rename all but one")]
    AmbiguousColumn {
        source_name: String,
        column: String,
        count: usize,
        positions: String,
    },
    /// Two sections asked to be read from one column.
    #[error("{source_name}: findings and impression both read column `{column}`; give each its own column")]
    SameColumn { source_name: String, column: String },
    /// A JSON Lines key (section or id) that no record has.
    #[error("{source_name}: no record has the key `{key}` (exact or case-insensitive; keys seen: {available})")]
    MissingKey {
        source_name: String,
        key: String,
        available: String,
    },
    #[error("invalid option `{name}` = `{value}`: {reason}")]
    InvalidOption {
        name: &'static str,
        value: String,
        reason: String,
    },
    #[error("{source_name}: no reports to build a corpus from ({reason})")]
    EmptyCorpus { source_name: String, reason: String },
    /// A corpus in which no report has one of the two sections, which
    /// scoring aggregates over (e.g. one built from impressions only).
    #[error("{}no report in the corpus has the {section} section, and scoring needs both sections; rebuild it from reports that have both", path.as_ref().map(|p| format!("{}: ", p.display())).unwrap_or_default())]
    MissingSection {
        path: Option<PathBuf>,
        section: &'static str,
    },
    /// A corpus whose vectors have another dimension than the encoder's
    /// (a header edited by hand, say), whose distances would be meaningless.
    #[error("{path}: corpus holds {found}-dimensional embeddings, but encoder `{encoder}` in use makes {expected}-dimensional ones; rebuild it with `sdr corpus build`")]
    DimMismatch {
        path: PathBuf,
        encoder: String,
        found: usize,
        expected: usize,
    },
    /// Embeddings of candidates or corpus that cannot be compared.
    #[error("embedding dimension {got} does not match the corpus's {expected}")]
    Dimension { expected: usize, got: usize },
    #[error("sentence {index} of {what}: embedding is {fault}")]
    BadVector {
        what: String,
        index: usize,
        fault: &'static str,
    },
    /// A shard that does not belong with the others given to merge.
    #[error("{path}: shard {what} is `{found}`, but {other} has `{expected}`; merge takes the shards of one build (same source, encoder, segmenter and settings)")]
    ShardMismatch {
        path: PathBuf,
        what: &'static str,
        found: String,
        expected: String,
        other: PathBuf,
    },
    #[error("shards {missing} missing; given: {given}")]
    MissingShards { missing: String, given: String },
    /// Candidate sentences that do not match the candidate's embedded rows
    /// (the clinical cost reads one text per row).
    #[error("{what}: {sentences} sentences for {rows} embedded rows; give the texts the rows were embedded from")]
    SentenceCount {
        what: String,
        rows: usize,
        sentences: usize,
    },
    /// The encoder failed (boxed: `EmbedError` is large and rare).
    #[error(transparent)]
    Encoder(Box<sdr_embed::EmbedError>),
}

pub type Result<T> = std::result::Result<T, CorpusError>;

impl From<sdr_embed::EmbedError> for CorpusError {
    fn from(e: sdr_embed::EmbedError) -> Self {
        CorpusError::Encoder(Box::new(e))
    }
}

impl CorpusError {
    pub(crate) fn bad(path: &std::path::Path, fault: impl Into<String>) -> Self {
        CorpusError::BadCorpus {
            path: path.to_path_buf(),
            fault: fault.into(),
        }
    }
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        CorpusError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
