//! The partial score of distance-guided pruning (paper Alg. 1, SPEC §6).
//!
//! $$\mathcal D(\hat y) = \frac{1}{|\mathcal S(\hat y)|}\sum_{S \in \mathcal S(\hat y)}
//!   \mathcal D^{agg}_S(\hat y), \qquad
//!   \mathcal S(\hat y) = \{S \in \{F, I\} : \mathcal E^S(\hat y) \neq \emptyset\}$$
//!
//! where `D^agg_S` is the corpus distance of section `S` aggregated over the
//! corpus under one [`Policy`] (SPEC §5), and `D = +inf` when neither section
//! holds a complete sentence yet. `sdr-gen`'s prune loop asks for these scores
//! through its `PartialScorer` trait; the CLI and the Python bindings wire
//! [`CorpusScorer`] in, so the rule lives here once.

use sdr_core::report::Section;
use sdr_embed::{EmbedControl, SectionBatch, SectionEmbedder};

use crate::agg::Policy;
use crate::clinical::{CandidateSentences, CorpusCost};
use crate::convergence::Convergence;
use crate::error::Result;
use crate::index::CorpusIndex;
use crate::score::{CandidateEmbedding, ScoreOptions};
use crate::select::{best_of_k_with, BestOfK};
use sdr_embed::SentenceEncoder;

/// The sentences of one partial output, per section.
#[derive(Debug, Clone, Copy)]
pub struct PartialSections<'a, S: AsRef<str>> {
    pub findings: &'a [S],
    pub impression: &'a [S],
}

/// Partial scores and how their distances ended.
#[derive(Debug, Clone, PartialEq)]
pub struct PartialScores {
    /// One score per partial output; lower is better.
    pub scores: Vec<f64>,
    /// Corpus distances computed, and how many did not converge or failed.
    pub evaluated: usize,
    pub convergence: Convergence,
}

/// SPEC §6's rule from a candidate's aggregated section distances `[D_F, D_I]`
/// and which sections hold a sentence: the mean over the present sections,
/// `+inf` when none is.
pub fn partial_score(distances: [f64; 2], present: [bool; 2]) -> f64 {
    match present {
        [false, false] => f64::INFINITY,
        [true, false] => distances[0],
        [false, true] => distances[1],
        [true, true] => (distances[0] + distances[1]) / 2.0,
    }
}

/// Scores partial outputs against a corpus under one policy.
pub struct CorpusScorer<'a> {
    index: &'a CorpusIndex<'a>,
    embedder: SectionEmbedder<'a>,
    policy: Policy,
    clinical: Option<&'a CorpusCost<'a>>,
}

impl<'a> CorpusScorer<'a> {
    /// Scores against `index`, embedding through `embedder` (clone it to share
    /// its cache).
    pub fn with_embedder(
        index: &'a CorpusIndex<'a>,
        embedder: SectionEmbedder<'a>,
        policy: Policy,
    ) -> Self {
        CorpusScorer {
            index,
            embedder,
            policy,
            clinical: None,
        }
    }

    /// Scores under the clinical cost (SPEC §10), prepared for the same
    /// index, instead of the cosine cost.
    pub fn with_clinical(mut self, clinical: &'a CorpusCost<'a>) -> Self {
        self.clinical = Some(clinical);
        self
    }

    /// [`CorpusScorer::with_embedder`] with a sentence cache of its own.
    ///
    /// Deprecated since 0.2.0 (kept for one release, see CHANGELOG.md): use
    /// [`CorpusScorer::with_embedder`] with the run's [`SectionEmbedder`].
    pub fn new(
        index: &'a CorpusIndex<'a>,
        encoder: &'a dyn SentenceEncoder,
        policy: Policy,
    ) -> Self {
        Self::with_embedder(index, SectionEmbedder::transient(encoder), policy)
    }

    /// The policy the scores aggregate with.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// The embedding stage the scorer embeds through.
    pub fn embedder(&self) -> &SectionEmbedder<'a> {
        &self.embedder
    }

    /// Standard best-of-K ([`crate::best_of_k_with`]) of the full candidate
    /// `texts` under this scorer's policy, cost and corpus, through its
    /// embedder (and so its sentence cache): the choice `sdr prune --replay`
    /// sets beside pruning's, scored as the partial scores are.
    ///
    /// # Errors
    /// Those of [`crate::best_of_k_with`].
    pub fn best_of_k(&self, texts: &[&str]) -> Result<BestOfK> {
        best_of_k_with(
            texts,
            &self.embedder,
            self.index,
            &self.policy,
            self.clinical,
        )
    }

    /// [`partial_score`] of every partial output: all complete sentences are
    /// embedded in one encoder call and scored in one corpus pass. Sentences
    /// are trimmed, and empty or blank ones dropped (SPEC §1), so a section
    /// of blanks counts as no section yet.
    ///
    /// # Errors
    /// The encoder's error, or the corpus scorer's (an embedding of another
    /// dimension or a zero/non-finite vector).
    pub fn score<S: AsRef<str>>(&self, parts: &[PartialSections<'_, S>]) -> Result<PartialScores> {
        fn clean<S: AsRef<str>>(section: &[S]) -> Vec<&str> {
            section
                .iter()
                .map(|s| s.as_ref().trim())
                .filter(|s| !s.is_empty())
                .collect()
        }
        let kept: Vec<[Vec<&str>; 2]> = parts
            .iter()
            .map(|p| [clean(p.findings), clean(p.impression)])
            .collect();
        let mut batch = SectionBatch::new();
        for [f, i] in &kept {
            batch.push(f, i);
        }
        let sets = self.embedder.embed(&batch, &EmbedControl::default())?;
        // The corpus scorer wants both sections; a missing one borrows the
        // other's rows and its distance is ignored by `partial_score`.
        let cands: Vec<_> = (0..kept.len())
            .map(|c| {
                let f = sets.view(c, Section::Findings).data;
                let i = sets.view(c, Section::Impression).data;
                match (!f.is_empty(), !i.is_empty()) {
                    (false, false) => None,
                    (true, true) => Some((f, i)),
                    (true, false) => Some((f, f)),
                    (false, true) => Some((i, i)),
                }
                .map(|(f, i)| CandidateEmbedding {
                    findings: f.to_vec(),
                    impression: i.to_vec(),
                })
            })
            .collect();
        // The texts follow the rows, a missing section borrowing the other's.
        let sentences: Vec<Option<CandidateSentences>> = match self.clinical {
            None => Vec::new(),
            Some(_) => kept
                .iter()
                .map(|[f, i]| {
                    let own = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
                    match (!f.is_empty(), !i.is_empty()) {
                        (false, false) => None,
                        (true, true) => Some((own(f), own(i))),
                        (true, false) => Some((own(f), own(f))),
                        (false, true) => Some((own(i), own(i))),
                    }
                    .map(|(findings, impression)| CandidateSentences {
                        findings,
                        impression,
                    })
                })
                .collect(),
        };
        let scored = self.index.score_with(
            &cands,
            std::slice::from_ref(&self.policy),
            ScoreOptions::default(),
            self.clinical.map(|c| (c, &sentences[..])),
        )?;
        let scores = kept
            .iter()
            .zip(&scored.sections[0])
            .map(|([f, i], &d)| partial_score(d, [!f.is_empty(), !i.is_empty()]))
            .collect();
        Ok(PartialScores {
            scores,
            evaluated: scored.evaluated,
            convergence: scored.convergence,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_over_the_sections_present() {
        assert_eq!(partial_score([0.2, 0.4], [true, true]), 0.30000000000000004);
        assert_eq!(partial_score([0.2, 0.4], [true, false]), 0.2);
        assert_eq!(partial_score([0.2, 0.4], [false, true]), 0.4);
        assert_eq!(partial_score([0.2, 0.4], [false, false]), f64::INFINITY);
    }
}
