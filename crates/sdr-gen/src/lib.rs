//! Candidate generation and distance-guided pruning (paper §4.2, Alg. 1;
//! SPEC §1 and §6).
//!
//! Data flow: a [`Backend`] starts K streaming candidates for one prompt
//! ([`Candidates`]); [`LockStep`] turns their token pieces into sentences as
//! they complete (plain-header rules of SPEC §1, robust to a preamble); and
//! [`prune()`] drives the lock-step decoding, asks a [`PartialScorer`] (the
//! corpus distance, wired in by the CLI) for the score of every partial
//! output, and cancels the worst candidates until one is left.
//!
//! Back-ends: [`openai`] (an OpenAI-compatible chat-completions server over
//! SSE), `local` (a GGUF llama-family model decoded in-process with candle,
//! K candidates as one batch) and [`replay`] (already generated candidates,
//! streamed back token by token, as the paper did for API models).
//!
//! A run that writes one record per study (`sdr generate`, live `sdr prune`)
//! can be resumed: [`RunSettings`] is what a record says about how it was
//! made, and [`RunSettings::diff`] names the first setting a resumed run
//! changed.

mod backend;
mod error;
mod lenient;
#[cfg(feature = "local")]
pub mod local;
mod lockstep;
#[cfg(feature = "openai")]
pub mod openai;
mod prompt;
mod prune;
pub mod replay;
mod settings;

pub use backend::{Backend, Candidates, End, Piece, Request, REPEAT_WINDOW};
pub use error::GenError;
pub use lockstep::{CandidateState, LockStep, Partial};
pub use prompt::{Image, Prompt, PromptTemplate};
pub use prune::{
    prune, Distances, Generation, KeptCounts, LiveStudy, PartialScorer, PruneConfig, PruneOutcome,
    PruneRecord, Pruner, ReplayStudy, Round, Sampling, StudyScorer, Totals,
};
pub use settings::{
    study_seed, KeptError, Resume, RunSettings, SamplingSettings, Setting, SettingsDiff,
};
