//! The clinical sentence cost (SPEC §10) on the corpus side: selection,
//! consensus and pruning scored with the cosine cost plus the conflict
//! penalty of `sdr_core::cost::clinical`.
//!
//! Every cost block a corpus distance reads (candidate rows x one corpus
//! set) is penalised as the reward penalises a candidate against its
//! reference: `M'_{ij} = M_{ij} + λ/2 (n κ^A_i + m κ^B_j)`, with `κ` the
//! sentences' worst conflicts with the other set. The conflicts need the
//! facts of both sets' sentences. A corpus is scored against many
//! candidates, so the facts of each distinct corpus sentence are labelled
//! once, when the corpus is prepared ([`CorpusClinical::new`]), and each
//! distinct corpus set's fact lists are gathered the first time a candidate
//! meets it; the candidates' facts come from [`ClinicalCost::facts`] (its
//! cache), once per candidate and section.
//!
//! The penalty only adds non-negative values to `M` and keeps `max(M)` of
//! the cosine part as the OT family's scale, so every lower bound of
//! [`crate::bounds`] computed on the cosine block stays a lower bound of
//! the penalised distance for the metrics monotone in `M`
//! ([`crate::bounds::kind_under`] lists them); pruning stays exact.

use std::sync::{Arc, OnceLock};

use rayon::prelude::*;
use sdr_clinical::ClinicalCost;
use sdr_core::cost::clinical::{Fact, FactList};
use sdr_core::cost::PairCost;

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

/// One set's facts, per sentence in row order (shared with the per-sentence table).
type SetFacts = Vec<Arc<Vec<Fact>>>;

/// A [`ClinicalCost`] prepared for one corpus index: the facts of every
/// corpus sentence a section uses (labelled once), and the fact lists of
/// the distinct sets (gathered on first use).
pub struct CorpusClinical<'c> {
    cost: &'c ClinicalCost,
    /// Facts per corpus sentence (embedding row); empty for rows no section uses.
    sentence_facts: Vec<Arc<Vec<Fact>>>,
    /// Per section, per distinct set: its sentences' facts in the set's row order.
    set_facts: [Vec<OnceLock<SetFacts>>; 2],
}

impl<'c> CorpusClinical<'c> {
    /// Prepares `cost` for `index`, whose embedding row `s` embeds the text
    /// `sentence(s)`. Labels every sentence the sections use once (in
    /// parallel; the rule labeler needs no model).
    pub fn new<'t>(
        cost: &'c ClinicalCost,
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
        let none = Arc::new(Vec::new());
        let sentence_facts = (0..n)
            .into_par_iter()
            .with_min_len(256)
            .map(|s| {
                if used[s] {
                    Arc::new(cost.labeler().sentence_facts(sentence(s)))
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
        CorpusClinical {
            cost,
            sentence_facts,
            set_facts: [sets(Section::Findings), sets(Section::Impression)],
        }
    }

    /// [`CorpusClinical::new`] with the corpus file's sentence table.
    pub fn from_corpus(cost: &'c ClinicalCost, corpus: &Corpus, index: &CorpusIndex<'_>) -> Self {
        CorpusClinical::new(cost, index, |s| corpus.sentence(s))
    }

    /// The clinical cost in use.
    pub fn cost(&self) -> &'c ClinicalCost {
        self.cost
    }

    /// The facts of corpus sentence (embedding row) `s`.
    pub fn sentence_facts(&self, s: u32) -> &[Fact] {
        &self.sentence_facts[s as usize]
    }

    /// The fact lists of distinct set `s` of section `sec` (`s` < the
    /// section's number of sets), in the set's row order.
    pub fn set_facts(&self, index: &CorpusIndex<'_>, sec: Section, s: usize) -> &[Arc<Vec<Fact>>] {
        let si = Section::BOTH.iter().position(|x| *x == sec).unwrap_or(0);
        self.set_facts[si][s].get_or_init(|| {
            index
                .section(sec)
                .set(s)
                .iter()
                .map(|&r| Arc::clone(&self.sentence_facts[r as usize]))
                .collect()
        })
    }

    /// `cosine` penalised by the conflicts of the candidate's facts `a`
    /// (one list per row) against a corpus set's facts `b` (one per column).
    pub(crate) fn penalize<'p, F: FactList, G: FactList>(
        &self,
        cosine: PairCost<'p>,
        a: &[F],
        b: &[G],
    ) -> PairCost<'p> {
        // The counts were checked by `candidate_facts` and the weights by
        // `ClinicalCost::new`: the only errors `PairCost::clinical` has.
        cosine
            .clinical(a, b, self.cost.weights())
            .expect("fact counts checked against the rows; weights checked on construction")
            .0
    }
}

/// One candidate's facts: per section (findings, impression), one list per sentence.
pub(crate) type SectionFacts = [Vec<Arc<Vec<Fact>>>; 2];

/// Facts of the candidates' sentences, per candidate and section, checked
/// against their embedded row counts `rows[c]` (`None`: malformed, skipped).
pub(crate) fn candidate_facts(
    cost: &ClinicalCost,
    sentences: &[Option<CandidateSentences>],
    rows: &[Option<[usize; 2]>],
) -> Result<Vec<Option<SectionFacts>>> {
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
            let mut out: SectionFacts = [Vec::new(), Vec::new()];
            for (k, sec) in Section::BOTH.into_iter().enumerate() {
                let texts: Vec<&str> = t.section(sec).iter().map(String::as_str).collect();
                if texts.len() != r[k] {
                    return Err(CorpusError::SentenceCount {
                        what: format!("candidate {c} {sec}"),
                        rows: r[k],
                        sentences: texts.len(),
                    });
                }
                out[k] = cost.facts(&texts);
            }
            Ok(Some(out))
        })
        .collect()
}
