//! The record `sdr prune` writes per study (one JSON line), and what a resumed
//! run reads back of it.

use serde::{Deserialize, Serialize};

use super::{PruneConfig, Round};
use crate::{RunSettings, SamplingSettings};

/// One pruned study; field order is the JSON line's.
#[derive(Debug, Serialize)]
pub struct PruneRecord<'a> {
    pub id: String,
    /// `replay` or `live`.
    pub mode: &'static str,
    /// The policy key, with the cost's prefix (`clinical/chamfer@min`).
    pub policy: String,
    pub warmup: usize,
    pub fraction: f64,
    pub chosen: usize,
    pub text: &'a str,
    pub tokens_used: usize,
    pub tokens_produced: usize,
    pub tokens_full: Option<usize>,
    pub saving: Option<f64>,
    pub estimated_tokens: bool,
    /// Replay only: standard best-of-K under the same policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standard_chosen: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standard_text: Option<&'a str>,
    pub rounds: &'a [Round],
    pub candidate_tokens: Vec<usize>,
    pub seconds: f64,
    pub survivors: usize,
    /// The corpus file's `meta_sha256`, which covers its metadata and,
    /// through `content_sha256`, its data.
    pub corpus_sha256: &'a str,
    /// Live only: how the candidates were generated.
    #[serde(flatten)]
    pub generation: Option<Generation>,
    pub distances: Distances,
}

/// What generated a live study's candidates: with the pruning settings,
/// everything that determines its record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Generation {
    pub backend: String,
    pub prompt: String,
    pub context: Option<String>,
    pub seed: u64,
    pub sampling: Sampling,
}

/// A live study's sampling settings, as its record holds them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sampling {
    pub k: usize,
    pub temperature: f64,
    pub top_p: f64,
    pub max_tokens: usize,
    pub repetition_penalty: f64,
    pub prefill: Option<String>,
}

impl Generation {
    /// The settings a live record generated so holds, for `--resume`'s check.
    pub fn settings(
        self,
        policy: &str,
        config: PruneConfig,
        corpus_sha256: &str,
        tokens_full: Option<usize>,
    ) -> RunSettings {
        let s = self.sampling;
        RunSettings {
            mode: Some("live".into()),
            backend: Some(self.backend),
            prompt: Some(self.prompt),
            context: self.context,
            seed: Some(self.seed),
            sampling: SamplingSettings {
                k: Some(s.k),
                temperature: Some(s.temperature),
                top_p: Some(s.top_p),
                max_tokens: Some(s.max_tokens),
                repetition_penalty: Some(s.repetition_penalty),
                prefill: s.prefill,
            },
            policy: Some(policy.to_string()),
            warmup: Some(config.warmup),
            fraction: Some(config.fraction),
            survivors: Some(config.survivors),
            corpus_sha256: Some(corpus_sha256.to_string()),
            tokens_full,
        }
    }
}

/// Corpus distances a study computed, and how many of them did not converge
/// or failed: the counts behind the warnings at the end, kept per study so
/// that a resumed run says what an uninterrupted one says.
#[derive(Debug, Serialize, Deserialize, Default, Clone, Copy, PartialEq, Eq)]
pub struct Distances {
    pub evaluated: usize,
    pub unconverged: usize,
    pub failed: usize,
}

impl std::ops::AddAssign for Distances {
    fn add_assign(&mut self, o: Self) {
        self.evaluated += o.evaluated;
        self.unconverged += o.unconverged;
        self.failed += o.failed;
    }
}

impl std::ops::Sub for Distances {
    type Output = Self;
    fn sub(self, o: Self) -> Self {
        Distances {
            evaluated: self.evaluated - o.evaluated,
            unconverged: self.unconverged - o.unconverged,
            failed: self.failed - o.failed,
        }
    }
}

/// What the summary line and the warnings count of a kept record.
#[derive(Debug, Clone, Deserialize)]
pub struct KeptCounts {
    pub chosen: usize,
    pub tokens_used: usize,
    pub tokens_full: Option<usize>,
    #[serde(default)]
    pub standard_chosen: Option<usize>,
    pub distances: Distances,
}
