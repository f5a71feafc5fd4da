//! Text-level SDR rewards for GRPO trainers (paper §3.2, SPEC §4).
//!
//! `sdr-core` scores *embedded* sections; this crate is the text pipeline
//! around it that the Python bindings (TRL, verl, OpenRLHF adapters) and the
//! `sdr serve` reward server share:
//!
//! 1. completions are parsed with the template rules (`R_fmt`), references
//!    with either layout ([`parse_reference`]);
//! 2. the batch's distinct sentences are looked up in one bounded sentence
//!    cache (completions and references alike) and the rest are embedded in one
//!    encoder call ([`Scorer`]); the cache can be saved and reloaded
//!    ([`open_cache`]), so a resumed run starts warm;
//! 3. each sample is scored with [`sdr_core::reward::reward`] (or the
//!    exact-match baseline), in parallel unless parallelism was switched off
//!    ([`set_parallelism`], needed in forked children).
//!
//! Paper: *SDR: Set-Distance Rewards for Radiology Report Generation*.

mod completion;
/// The reward's options, declared once ([`REWARD_OPTIONS`]): the one module
/// public as a namespace, for the option kinds ([`config::Kind`]).
pub mod config;
mod error;
mod explain;
mod missing;
mod parallel;
mod persist;
mod query;
mod reference;
mod scorer;

pub use completion::{completion_text, json_completion_text, Dialect, Node, REASONING_KEYS};
pub use config::{OptionSpec, REWARD_OPTIONS};
pub use error::{Result, RewardError};
pub use explain::Explainer;
pub use missing::{Gaps, MissingSection};
pub use parallel::{beside, install, parallelism, set_parallelism};
pub use persist::{open_cache, LoadOutcome, PersistentCache};
pub use query::{completion_match, completion_of, PromptMatch, MIN_PROMPT_END};
pub use reference::{parse_reference, OwnedReference, Reference, ReferenceSections, ReferenceText};
pub use scorer::{
    BatchStats, RewardOptions, Scorer, DEFAULT_CACHE_MIB, DEFAULT_ENCODE_CHUNK, MAX_WEIGHT,
};
/// sdr-embed's types under their 0.1 paths; import them from `sdr_embed`.
/// Off by default (feature `embed-reexports`), removed in 0.3.0.
#[cfg(feature = "embed-reexports")]
#[doc(hidden)]
pub use sdr_embed::{CacheStats, SectionEmbedder, SentenceCache, SentenceEncoder};
