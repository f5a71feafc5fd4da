//! SDR core: reports -> sections -> sentences, and set-to-set distances over
//! already-embedded sentence sets.
//!
//! Paper: *SDR: Set-Distance Rewards for Radiology Report Generation*.
//! This crate has no ML dependencies; embeddings come from `sdr-embed`.

pub mod cost;
pub mod distance;
pub mod error;
pub mod explain;
/// The atomic file writes, moved to the `sdr-io` crate (a maths crate holds no
/// process-wide temporary-file list): this path is kept for one release,
/// removed in 0.3.0.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub use sdr_io as io;
pub mod report;
pub mod reward;
pub mod sentence_cost;
#[cfg(test)]
mod test_support;

pub use cost::{cosine_cost, CostMatrix, Element, EmbeddingSet, SetView};
pub use distance::Metric;
pub use error::{Result, SdrError, Side};
pub use report::{parse_plain, parse_report, parse_template, split_sentences, ParsedReport};
pub use sentence_cost::{Annotation, CostFamily, SentenceCost};
