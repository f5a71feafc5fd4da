//! The one streaming interface every back-end implements.

use serde::{Deserialize, Serialize};

use crate::{GenError, Prompt};

/// What to generate: K samples of one prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The prompt (text and, for vision models, images).
    pub prompt: Prompt,
    /// Number of candidates.
    pub k: usize,
    /// Sampling temperature; 0 means greedy.
    pub temperature: f64,
    /// Nucleus sampling mass; 1 turns it off.
    pub top_p: f64,
    /// Tokens per candidate at most.
    pub max_tokens: usize,
    /// Base seed; candidate `i` samples with seed `seed + i`, so a candidate's
    /// text does not depend on K or on which others were pruned.
    pub seed: u64,
    /// Divides the positive logits (multiplies the negative ones) of tokens
    /// the candidate produced among its last [`REPEAT_WINDOW`] tokens; 1 is
    /// off. Servers get it as `repetition_penalty` (vLLM) and `repeat_penalty`
    /// (llama.cpp).
    pub repetition_penalty: f64,
    /// Text the answer starts with (local back-end): appended after the chat
    /// template's assistant turn and kept at the start of every candidate, so
    /// a small model begins with `Findings:` instead of a preamble.
    pub prefill: Option<String>,
}

/// Tokens a candidate looks back over for the repetition penalty.
pub const REPEAT_WINDOW: usize = 64;

impl Request {
    /// Checks the fields a back-end relies on.
    pub fn validate(&self) -> Result<(), GenError> {
        if self.k == 0 {
            return Err(GenError::Request("k must be at least 1".into()));
        }
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(GenError::Request(format!(
                "temperature must be finite and >= 0, got {}",
                self.temperature
            )));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(GenError::Request(format!(
                "top_p must be in (0, 1], got {}",
                self.top_p
            )));
        }
        if !(self.repetition_penalty.is_finite() && self.repetition_penalty > 0.0) {
            return Err(GenError::Request(format!(
                "repetition penalty must be finite and > 0 (1 is off), got {}",
                self.repetition_penalty
            )));
        }
        if self.prefill.as_deref().is_some_and(|p| p.trim().is_empty()) {
            return Err(GenError::Request("the prefill text is empty".into()));
        }
        if self.max_tokens == 0 {
            return Err(GenError::Request("max_tokens must be at least 1".into()));
        }
        if self.prompt.user.trim().is_empty() {
            return Err(GenError::Request("the prompt is empty".into()));
        }
        Ok(())
    }
}

/// Why a candidate stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum End {
    /// End-of-sequence token or a stop string.
    Stop,
    /// `max_tokens` reached.
    Length,
    /// Cancelled by the caller (pruned).
    Cancelled,
    /// The stream failed after retries; the text so far is kept.
    Error(String),
}

/// The next piece of one candidate's output: one token for local decoding,
/// one SSE chunk (usually one token) for a server.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Piece {
    /// Text appended to the candidate (may be empty, e.g. for a split UTF-8 character).
    pub text: String,
    /// Tokens this piece stands for.
    pub tokens: usize,
    /// Set on the candidate's last piece.
    pub end: Option<End>,
}

/// Starts K streaming candidates for a prompt.
pub trait Backend {
    /// A short description for logs and output records (`openai:<model>@<url>`, `local:<file>`).
    fn describe(&self) -> String;
    /// Starts the candidates of `request`; nothing need be decoded yet.
    fn start<'a>(&'a mut self, request: &Request) -> Result<Box<dyn Candidates + 'a>, GenError>;
}

/// K candidates being generated, advanced piece by piece.
///
/// Local back-ends decode the requested candidates as one batch; server
/// back-ends read each candidate's stream, which keeps running in the
/// background until it ends or is cancelled.
pub trait Candidates {
    /// Number of candidates (the request's K).
    fn k(&self) -> usize;
    /// The next piece of every candidate in `ids`, in that order. Each id must
    /// be live: not ended and not cancelled. A candidate whose stream fails
    /// gets a piece with [`End::Error`]; `Err` is for failures of the whole batch.
    fn next(&mut self, ids: &[usize]) -> Result<Vec<Piece>, GenError>;
    /// Stops candidate `id` for good: its stream is closed and no more tokens
    /// are produced for it. Cancelling an ended candidate does nothing.
    fn cancel(&mut self, id: usize);
    /// Tokens the back-end produced for `id` so far. For a server this counts
    /// what was streamed to us, which can run ahead of what `next` handed out.
    fn produced(&self, id: usize) -> usize;
}
