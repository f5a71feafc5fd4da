use std::path::PathBuf;

use thiserror::Error;

/// Why generation failed. Messages are one line and name the input or peer;
/// errors from a library keep it as their source.
#[derive(Debug, Error)]
pub enum GenError {
    /// A request the back-end cannot serve (bad K, empty prompt, ...).
    #[error("invalid request: {0}")]
    Request(String),
    /// A stored input (candidates file, prompt, image) is malformed.
    #[error("{0}")]
    Input(String),
    /// The caller broke the streaming protocol (asked a finished candidate for more).
    #[error("protocol: {0}")]
    Protocol(String),
    /// A file (prompt, image) could not be read.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The GGUF model file could not be opened.
    #[error("{path}: {source} (for SmolLM2 run `bash scripts/fetch-smollm2.sh`, for Gemma 3 `bash scripts/fetch-gemma3.sh`)")]
    ModelFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A GGUF model whose contents SDR cannot use (metadata, shapes, architecture).
    #[error("{what}: {message}")]
    BadModel { what: String, message: String },
    /// The local model failed to load or run (`what` names the file and step).
    #[cfg(feature = "local")]
    /// candle's messages can carry a backtrace: the message keeps their first line.
    #[error("{what}: {}", first_line(source))]
    Model {
        what: String,
        #[source]
        source: candle_core::Error,
    },
    /// Building or running the GGUF tokenizer failed.
    #[cfg(feature = "local")]
    #[error("{what}: {source}")]
    Tokenizer {
        what: String,
        #[source]
        source: tokenizers::Error,
    },
    /// The GGUF chat template could not be rendered.
    #[cfg(feature = "local")]
    #[error("rendering the GGUF chat template: {source}")]
    Template {
        #[source]
        source: minijinja::Error,
    },
    /// The HTTP client for a server could not be built.
    #[cfg(feature = "openai")]
    #[error("HTTP client for {url}: {source}")]
    Http {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// The async runtime of the OpenAI back-end could not be started.
    #[error("tokio runtime for {url}: {source}")]
    Runtime {
        url: String,
        #[source]
        source: std::io::Error,
    },
    /// The server refused or failed a candidate's request (after retries).
    #[error("POST {url}: candidate {candidate}: {cause}")]
    Server {
        url: String,
        candidate: usize,
        cause: String,
    },
    /// A candidate's stream failed after it began (pruning cannot choose it).
    #[error("candidate {candidate} failed: {cause}")]
    Candidate { candidate: usize, cause: String },
    /// A study of a pruning run failed; `at` names its line or id. The cause
    /// is not a source: the message already holds it.
    #[error("{at}: {error}")]
    Study { at: String, error: Box<GenError> },
    /// The partial-output scorer failed.
    #[error("scoring partial outputs: {0}")]
    Score(#[source] Box<dyn std::error::Error + Send + Sync>),
}

#[cfg(feature = "local")]
fn first_line(e: &impl std::fmt::Display) -> String {
    e.to_string().lines().next().unwrap_or_default().to_string()
}
