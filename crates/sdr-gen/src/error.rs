use thiserror::Error;

/// Why generation failed. Messages are one line and name the input or peer.
#[derive(Debug, Error)]
pub enum GenError {
    /// A request the back-end cannot serve (bad K, empty prompt, ...).
    #[error("invalid request: {0}")]
    Request(String),
    /// The server or model could not be reached or loaded.
    #[error("{0}")]
    Backend(String),
    /// A stored input (prompt file, candidates file) is malformed.
    #[error("{0}")]
    Input(String),
    /// The partial-output scorer failed.
    #[error("scoring partial outputs: {0}")]
    Score(String),
    /// The caller broke the streaming protocol (asked a finished candidate for more).
    #[error("protocol: {0}")]
    Protocol(String),
}
