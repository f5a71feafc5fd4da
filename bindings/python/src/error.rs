//! The one place where Rust errors become Python exceptions.
//!
//! Bad values raise `ValueError`, bad types `TypeError` (raised where the
//! arguments are read); a missing model folder raises `FileNotFoundError`,
//! other I/O `OSError`, and failures inside the network `RuntimeError`.

use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyRuntimeError, PyValueError};
use pyo3::PyErr;
use sdr_core::SdrError;
use sdr_corpus::CorpusError;
use sdr_embed::EmbedError;
use sdr_reward::RewardError;

/// `Result<T, E>` -> `PyResult<T>` with the mapping above.
pub(crate) trait ToPy<T> {
    fn py(self) -> pyo3::PyResult<T>;
}

pub(crate) fn embed_err(e: EmbedError) -> PyErr {
    let msg = e.to_string();
    match e {
        EmbedError::ModelDirMissing { .. } | EmbedError::MissingFile { .. } => {
            PyFileNotFoundError::new_err(msg)
        }
        EmbedError::Io { .. } => PyOSError::new_err(msg),
        EmbedError::InvalidOption { .. }
        | EmbedError::UnknownEncoder { .. }
        | EmbedError::NotACache { .. } => PyValueError::new_err(msg),
        _ => PyRuntimeError::new_err(msg),
    }
}

/// A corpus error: a missing file raises FileNotFoundError, other I/O OSError, the
/// encoder's failure as [`embed_err`], anything else (a bad corpus, source or option)
/// ValueError.
pub(crate) fn corpus_err(e: CorpusError) -> PyErr {
    let msg = e.to_string();
    match e {
        CorpusError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            PyFileNotFoundError::new_err(msg)
        }
        CorpusError::Io { .. } => PyOSError::new_err(msg),
        CorpusError::Encoder(e) => embed_err(*e),
        _ => PyValueError::new_err(msg),
    }
}

pub(crate) fn reward_err(e: RewardError) -> PyErr {
    match e {
        RewardError::Embed(inner) => embed_err(inner),
        // The encoder's result, not its failure: a value error, as for a
        // callable's wrong shape.
        e @ RewardError::EncoderRow { .. } => PyValueError::new_err(e.to_string()),
        other if other.is_input_error() => PyValueError::new_err(other.to_string()),
        other => PyRuntimeError::new_err(other.to_string()),
    }
}

impl<T> ToPy<T> for Result<T, SdrError> {
    fn py(self) -> pyo3::PyResult<T> {
        self.map_err(|e| PyValueError::new_err(e.to_string()))
    }
}

impl<T> ToPy<T> for Result<T, EmbedError> {
    fn py(self) -> pyo3::PyResult<T> {
        self.map_err(embed_err)
    }
}

impl<T> ToPy<T> for Result<T, RewardError> {
    fn py(self) -> pyo3::PyResult<T> {
        self.map_err(reward_err)
    }
}
