//! A sentence cost beyond cosine ([`SentenceCost`]; the clinical cost of
//! SPEC §10) on the corpus side: selection, consensus and pruning scored
//! with the cost the reward reads.
//!
//! Every cost block a corpus distance reads (candidate rows x one corpus
//! set) goes through [`SentenceCost::apply`] as the reward's candidate
//! against its reference (the clinical cost:
//! `M'_{ij} = M_{ij} + λ/2 (n κ^A_i + m κ^B_j)`). The cost reads both
//! sets' annotations. A corpus is scored
//! against many candidates, so each distinct corpus sentence is annotated
//! once, when the corpus is prepared ([`CorpusCost::new`]), and each
//! distinct corpus set's annotations are gathered the first time a
//! candidate meets it; the candidates' come from [`SentenceCost::annotate`]
//! (the cost's cache), once per candidate and section.
//!
//! A cost that only adds non-negative values to `M` and keeps `max(M)` of
//! the cosine part as the OT family's scale ([`SentenceCost::adds_only`])
//! keeps every lower bound of [`crate::bounds`] computed on the cosine
//! block a lower bound of its distance for the metrics monotone in `M`
//! ([`crate::bounds::kind_for`]); pruning stays exact. Other costs turn the
//! bounds off.

use std::sync::{Arc, OnceLock};

use rayon::prelude::*;
use sdr_core::cost::PairCost;
use sdr_core::{Annotation, SentenceCost};

use crate::error::{CorpusError, Result};
use crate::index::CorpusIndex;
use crate::store::{Corpus, Section};

/// The sentences of one candidate, per section, in the order of its
/// embedded rows (one sentence per row). They travel beside the
/// [`crate::CandidateEmbedding`] of the same candidate, in a slice of the
/// same length, because the clinical cost reads the texts the rows were
/// embedded from.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CandidateSentences {
    pub findings: Vec<String>,
    pub impression: Vec<String>,
}

impl CandidateSentences {
    pub fn section(&self, s: Section) -> &[String] {
        match s {
            Section::Findings => &self.findings,
            Section::Impression => &self.impression,
        }
    }
}

/// One set's annotations, per sentence in row order (shared with the per-sentence table).
type SetNotes = Vec<Annotation>;

/// A [`SentenceCost`] prepared for one corpus index: the annotation of
/// every corpus sentence a section uses (computed once), and the
/// annotations of the distinct sets (gathered on first use).
pub struct CorpusCost<'c> {
    cost: &'c dyn SentenceCost,
    /// Annotation per corpus sentence (embedding row); `()` for rows no section uses.
    sentence_notes: Vec<Annotation>,
    /// Per section, per distinct set: its sentences' annotations in the set's row order.
    set_notes: [Vec<OnceLock<SetNotes>>; 2],
}

/// The name [`CorpusCost`] had when the clinical cost was the only one.
pub type CorpusClinical<'c> = CorpusCost<'c>;

impl<'c> CorpusCost<'c> {
    /// Prepares `cost` for `index`, whose embedding row `s` embeds the text
    /// `sentence(s)`. Annotates every sentence the sections use once (in
    /// parallel; the clinical cost's rule labeler needs no model).
    pub fn new<'t>(
        cost: &'c dyn SentenceCost,
        index: &CorpusIndex<'_>,
        sentence: impl Fn(usize) -> &'t str + Sync,
    ) -> Self {
        let n = index.view.n_sentences();
        let mut used = vec![false; n];
        for sec in Section::BOTH {
            for &s in &index.section(sec).universe {
                used[s as usize] = true;
            }
        }
        let none: Annotation = Arc::new(());
        let sentence_notes = (0..n)
            .into_par_iter()
            .with_min_len(256)
            .map(|s| {
                if used[s] {
                    cost.annotate_once(sentence(s))
                } else {
                    Arc::clone(&none)
                }
            })
            .collect();
        let sets = |sec: Section| {
            (0..index.section(sec).len())
                .map(|_| OnceLock::new())
                .collect()
        };
        CorpusCost {
            cost,
            sentence_notes,
            set_notes: [sets(Section::Findings), sets(Section::Impression)],
        }
    }

    /// [`CorpusCost::new`] with the corpus file's sentence table.
    pub fn from_corpus(
        cost: &'c dyn SentenceCost,
        corpus: &Corpus,
        index: &CorpusIndex<'_>,
    ) -> Self {
        CorpusCost::new(cost, index, |s| corpus.sentence(s))
    }

    /// The sentence cost in use.
    pub fn cost(&self) -> &'c dyn SentenceCost {
        self.cost
    }

    /// The annotation of corpus sentence (embedding row) `s`.
    pub fn sentence_note(&self, s: u32) -> &Annotation {
        &self.sentence_notes[s as usize]
    }

    /// The clinical facts of corpus sentence `s` (none under another cost).
    #[deprecated(
        since = "0.2.0",
        note = "use sentence_note (the cost's annotation); removed in 0.3.0"
    )]
    pub fn sentence_facts(&self, s: u32) -> &[sdr_core::cost::clinical::Fact] {
        use sdr_core::cost::clinical::FactList;
        self.sentence_notes[s as usize].facts()
    }

    /// The clinical fact lists of distinct set `s` of section `sec` (empty
    /// lists under another cost).
    #[deprecated(
        since = "0.2.0",
        note = "use set_notes (the cost's annotations); removed in 0.3.0"
    )]
    pub fn set_facts(
        &self,
        index: &CorpusIndex<'_>,
        sec: Section,
        s: usize,
    ) -> Vec<&[sdr_core::cost::clinical::Fact]> {
        use sdr_core::cost::clinical::FactList;
        self.set_notes(index, sec, s)
            .iter()
            .map(|a| a.facts())
            .collect()
    }

    /// The annotations of distinct set `s` of section `sec` (`s` < the
    /// section's number of sets), in the set's row order.
    pub fn set_notes(&self, index: &CorpusIndex<'_>, sec: Section, s: usize) -> &[Annotation] {
        let si = Section::BOTH.iter().position(|x| *x == sec).unwrap_or(0);
        self.set_notes[si][s].get_or_init(|| {
            index
                .section(sec)
                .set(s)
                .iter()
                .map(|&r| Arc::clone(&self.sentence_notes[r as usize]))
                .collect()
        })
    }

    /// `cosine` under the cost, with the candidate's annotations `a` (one
    /// per row) against a corpus set's `b` (one per column).
    pub(crate) fn penalize<'p>(
        &self,
        cosine: PairCost<'p>,
        a: &[Annotation],
        b: &[Annotation],
    ) -> sdr_core::Result<PairCost<'p>> {
        Ok(self.cost.apply(cosine, a, b)?.0)
    }
}

/// One candidate's annotations: per section (findings, impression), one per sentence.
pub(crate) type SectionNotes = [Vec<Annotation>; 2];

/// Annotations of the candidates' sentences, per candidate and section,
/// checked against their embedded row counts `rows[c]` (`None`: malformed,
/// skipped).
pub(crate) fn candidate_notes(
    cost: &dyn SentenceCost,
    sentences: &[Option<CandidateSentences>],
    rows: &[Option<[usize; 2]>],
) -> Result<Vec<Option<SectionNotes>>> {
    if sentences.len() != rows.len() {
        return Err(CorpusError::SentenceCount {
            what: "the candidates".into(),
            rows: rows.len(),
            sentences: sentences.len(),
        });
    }
    rows.iter()
        .zip(sentences)
        .enumerate()
        .map(|(c, (r, t))| {
            let Some(r) = r else { return Ok(None) };
            let Some(t) = t else {
                return Err(CorpusError::SentenceCount {
                    what: format!("candidate {c}"),
                    rows: r[0] + r[1],
                    sentences: 0,
                });
            };
            let mut out: SectionNotes = [Vec::new(), Vec::new()];
            for (k, sec) in Section::BOTH.into_iter().enumerate() {
                let texts: Vec<&str> = t.section(sec).iter().map(String::as_str).collect();
                if texts.len() != r[k] {
                    return Err(CorpusError::SentenceCount {
                        what: format!("candidate {c} {sec}"),
                        rows: r[k],
                        sentences: texts.len(),
                    });
                }
                out[k] = texts.iter().map(|t| cost.annotate(t)).collect();
            }
            Ok(Some(out))
        })
        .collect()
}
