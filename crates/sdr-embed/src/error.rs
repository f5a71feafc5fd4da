//! The one error type of `sdr-embed`; every variant names the input it is about.

use std::path::{Path, PathBuf};

use sdr_core::cost::RowFault;

/// Errors of model discovery, loading and embedding.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// No model folder where one was looked for.
    #[error(
        "model folder {dir} not found ({origin}); fetch it with `bash scripts/fetch-model.sh` \
         or give a sentence-transformers folder (--model, or model_dir= in Python) or SDR_MODEL"
    )]
    ModelDirMissing { dir: PathBuf, origin: &'static str },

    /// A file the model folder must hold is absent.
    #[error(
        "model folder {dir} has no {file} (a sentence-transformers folder holds config.json, \
         model.safetensors and tokenizer.json); re-run `bash scripts/fetch-model.sh`"
    )]
    MissingFile { dir: PathBuf, file: &'static str },

    /// The model folder asks for something this encoder does not do (a pooling
    /// other than mean pooling, a dimension unlike the weights'), which would
    /// otherwise give silently different vectors.
    #[error("{path}: {message}")]
    UnsupportedConfig { path: PathBuf, message: String },

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
    /// Built by [`EmbedError::model`]: candle's error as one line, without the
    /// backtrace candle attaches when `RUST_BACKTRACE` is set.
    #[error("model {dir}: {message}")]
    Model { dir: PathBuf, message: String },

    /// A sentence-cache file that cannot be read: not a cache, truncated, damaged.
    #[error("{path}: unusable sentence cache: {fault}")]
    CacheFile { path: PathBuf, fault: String },

    /// A file at a sentence-cache path that is no sentence cache at all (a corpus,
    /// a folder, ...): neither read nor ever overwritten.
    #[error("{path}: {what}, not an SDR sentence-cache file; it is left untouched (give the cache another path)")]
    NotACache { path: PathBuf, what: &'static str },

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

    /// An encoder returned a matrix of the wrong shape (`texts x dim` values expected).
    #[error("encoder {encoder} returned {got} values for {texts} sentences of dimension {dim}")]
    EncoderShape {
        encoder: String,
        texts: usize,
        dim: usize,
        got: usize,
    },

    /// An encoder gave a sentence a vector no cosine can use (the zero vector, or
    /// a non-finite value); nothing of that encoder call was cached.
    #[error(
        "encoder {encoder} gave sentence {text:?} {}; nothing of this batch was cached",
        fault_text(*fault)
    )]
    EncoderRow {
        encoder: String,
        text: String,
        fault: RowFault,
    },

    /// A sentence cache given to an embedder holds vectors of another encoder.
    #[error("sentence cache of {cache} cannot serve encoder {encoder}")]
    CacheMismatch { cache: String, encoder: String },

    /// The caller's stop flag gave an embedding call up; the sentences embedded
    /// until then are in the sentence cache.
    #[error("embedding stopped at the caller's request, after {embedded} new sentences")]
    Stopped {
        /// New sentences embedded (and cached) before the stop.
        embedded: usize,
        /// Encoder seconds they took.
        encode_seconds: f64,
    },

    /// An encoder name the loader ([`crate::open_encoder`]) does not know: not
    /// `mpnet`, nor `hash-DIM` with DIM in range.
    #[error("invalid option `encoder` = `{value}`: {reason}")]
    UnknownEncoder { value: String, reason: &'static str },

    /// An option value that cannot be used.
    #[error("invalid option {name} = {value}: {reason}")]
    InvalidOption {
        name: &'static str,
        value: String,
        reason: &'static str,
    },
}

impl EmbedError {
    /// [`EmbedError::Model`] for the model folder `dir`.
    pub fn model(dir: &Path, err: &candle_core::Error) -> Self {
        EmbedError::Model {
            dir: dir.to_path_buf(),
            message: candle_message(err),
        }
    }
}

/// candle's error as one line: its `Display` appends a backtrace
/// (`WithBacktrace`) and puts context on lines of its own.
pub fn candle_message(err: &candle_core::Error) -> String {
    use candle_core::Error as E;
    match err {
        E::WithBacktrace { inner, .. } => candle_message(inner),
        E::Context { inner, context } => format!("{context}: {}", candle_message(inner)),
        E::WithPath { inner, path } => format!("{}: {}", path.display(), candle_message(inner)),
        E::WrappedContext { wrapped, context } => {
            format!("{context}: {}", one_line(&wrapped.to_string()))
        }
        other => one_line(&other.to_string()),
    }
}

/// The lines of `text` joined with "; " (wrapped errors of other crates may span lines).
fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// What [`EmbedError::EncoderRow`] says of a vector's fault.
pub fn fault_text(fault: RowFault) -> &'static str {
    match fault {
        RowFault::NotFinite => "a non-finite value",
        RowFault::Zero => "the zero vector (cosine undefined)",
    }
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, EmbedError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candle_errors_are_one_line_without_backtrace_or_repetition() {
        let inner =
            candle_core::Error::Msg("q.weight: shape [768, 768], expected [384, 384]".into());
        let traced = candle_core::Error::WithBacktrace {
            inner: Box::new(inner),
            backtrace: Box::new(std::backtrace::Backtrace::force_capture()),
        };
        assert!(
            traced.to_string().contains('\n'),
            "candle's own text spans lines"
        );
        let e = EmbedError::model(Path::new("m"), &traced.context("layer 0"));
        let msg = e.to_string();
        assert_eq!(
            msg,
            "model m: layer 0: q.weight: shape [768, 768], expected [384, 384]"
        );
        // No source: a chain printer would otherwise print the message twice.
        assert!(std::error::Error::source(&e).is_none());
    }
}
