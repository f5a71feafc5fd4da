//! The one error type of `sdr-reward`; every variant names the offending input.

use sdr_core::SdrError;
use sdr_embed::EmbedError;

/// Errors of reward configuration and batch scoring.
#[derive(Debug, thiserror::Error)]
pub enum RewardError {
    /// An input error of the core (empty reference section, bad metric spec, bad vector).
    #[error(transparent)]
    Core(#[from] SdrError),
    /// The encoder failed or could not be loaded.
    #[error(transparent)]
    Embed(#[from] EmbedError),
    /// A reward weight that is negative, NaN, infinite or above
    /// [`crate::scorer::MAX_WEIGHT`].
    #[error("{name} must be a finite number >= 0 and <= 1e6, got {}", sdr_core::error::shown(*value))]
    BadWeight { name: &'static str, value: f64 },
    /// Parallel inputs of different lengths.
    #[error("{what} has {got} items, expected {expected} (one per completion)")]
    LengthMismatch {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    /// A reference whose sections are present but whose layout is invalid
    /// (e.g. text outside the template tags).
    #[error("reference {index}: not a valid report: {reason}")]
    BadReference { index: usize, reason: String },
    /// Semantic rewards were asked of a scorer built without an encoder.
    #[error("this reward needs a sentence encoder (metric {metric}), but none was given")]
    NoEncoder { metric: String },
    /// A caller-supplied encoder (e.g. a Python callable) failed.
    #[error("encoder {name} failed: {message}")]
    External { name: String, message: String },
    /// A sentence cache given to a scorer holds vectors of another encoder.
    #[error("sentence cache of {cache} cannot serve encoder {encoder}")]
    CacheMismatch { cache: String, encoder: String },
    /// [`crate::Scorer::score_until`]'s caller asked it to stop (its client
    /// left, say); the sentences embedded so far are in the sentence cache.
    #[error("scoring stopped at the caller's request, after embedding {embedded} new sentences")]
    Stopped {
        /// New sentences embedded (and cached) before the stop.
        embedded: usize,
        /// Encoder seconds they took.
        encode_seconds: f64,
    },
    /// The encoder gave a sentence a vector no cosine can use (a zero
    /// vector, or a non-finite value); nothing of that encoder call was cached.
    #[error(
        "encoder {encoder} gave sentence {text:?} {problem}; nothing of this batch was cached"
    )]
    EncoderRow {
        encoder: String,
        text: String,
        problem: String,
    },
    /// The encoder returned a matrix of the wrong shape.
    #[error("encoder returned {got} values for {texts} texts of dimension {dim}")]
    EncoderShape {
        texts: usize,
        dim: usize,
        got: usize,
    },
}

impl RewardError {
    /// An error of the embedding stage as the scorer reports it (its own
    /// variants for a stop, a cache of another encoder and unusable vectors).
    pub fn from_stage(e: EmbedError) -> Self {
        match e {
            EmbedError::Stopped {
                embedded,
                encode_seconds,
            } => RewardError::Stopped {
                embedded,
                encode_seconds,
            },
            EmbedError::CacheMismatch { cache, encoder } => {
                RewardError::CacheMismatch { cache, encoder }
            }
            EmbedError::EncoderRow {
                encoder,
                text,
                fault,
            } => RewardError::EncoderRow {
                encoder,
                text,
                problem: sdr_embed::sections::fault_text(fault).to_string(),
            },
            EmbedError::EncoderShape {
                texts, dim, got, ..
            } => RewardError::EncoderShape { texts, dim, got },
            other => RewardError::Embed(other),
        }
    }

    /// Whether the error is the caller's input (as opposed to the environment:
    /// a missing model folder, an unreadable file, a failing network).
    pub fn is_input_error(&self) -> bool {
        !matches!(
            self,
            RewardError::Embed(_)
                | RewardError::NoEncoder { .. }
                | RewardError::EncoderShape { .. }
                | RewardError::EncoderRow { .. }
                | RewardError::External { .. }
                | RewardError::CacheMismatch { .. }
                | RewardError::Stopped { .. }
                | RewardError::Core(sdr_core::SdrError::Stopped)
        )
    }
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, RewardError>;
