//! The one error type of `sdr-embed`; every variant names the input it is about.

use std::path::PathBuf;

/// Errors of model discovery, loading and embedding.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// No model folder where one was looked for.
    #[error(
        "model folder {dir} not found ({origin}); fetch it with `bash scripts/fetch-model.sh` \
         or point --model / SDR_MODEL at a sentence-transformers folder"
    )]
    ModelDirMissing { dir: PathBuf, origin: &'static str },

    /// A file the model folder must hold is absent.
    #[error("model folder {dir} has no {file}; re-run `bash scripts/fetch-model.sh`")]
    MissingFile { dir: PathBuf, file: &'static str },

    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A JSON file of the model folder does not parse.
    #[error("{path}: invalid JSON: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },

    /// `config.json` names an architecture SDR does not implement.
    #[error("{path}: unsupported model_type `{model_type}` (supported: mpnet, bert)")]
    UnsupportedModel { path: PathBuf, model_type: String },

    /// `tokenizer.json` cannot be loaded or a text cannot be tokenised.
    #[error("tokenizer {what}: {message}")]
    Tokenizer { what: String, message: String },

    /// The network failed (shape or weight mismatch, unsupported dtype, ...).
    #[error("model {dir}: {source}")]
    Model {
        dir: PathBuf,
        #[source]
        source: candle_core::Error,
    },

    /// A sentence-cache file that cannot be read: not a cache, truncated, damaged.
    #[error("{path}: unusable sentence cache: {fault}")]
    CacheFile { path: PathBuf, fault: String },

    /// A well-formed sentence-cache file written by another encoder.
    #[error("{path}: sentence cache of encoder {found}, but {expected} is in use")]
    CacheEncoder {
        path: PathBuf,
        found: String,
        expected: String,
    },

    /// An encoder outside this crate (a Python callable, a remote service) failed
    /// or returned something unusable.
    #[error("encoder {encoder}: {message}")]
    External { encoder: String, message: String },

    /// The device asked for cannot be opened (no GPU, no driver, bad ordinal).
    #[error("device {device}: {message}")]
    Device { device: String, message: String },

    /// An option value that cannot be used.
    #[error("invalid option {name} = {value}: {reason}")]
    InvalidOption {
        name: &'static str,
        value: String,
        reason: &'static str,
    },
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, EmbedError>;
