//! Best-of-K selection (paper Eq. selection-rule, SPEC §5) and consensus
//! selection (minimum Bayes risk).
//!
//! $$\hat y^\star = \operatorname*{arg\,min}_{k} \mathcal D(\hat y^{(k)})$$
//!
//! Ties go to the lowest index; a malformed candidate scores `+inf`; when
//! every candidate is malformed the first is kept and
//! [`Selection::all_malformed`] says so.

use std::sync::Arc;

use sdr_core::cost::PairCost;
use sdr_core::report::parse_report;
use sdr_core::{Annotation, Metric, ParsedReport, SentenceCost};
use sdr_embed::{EmbedControl, SectionBatch, SectionEmbedder};

use crate::agg::Policy;
use crate::clinical::{CandidateSentences, CorpusCost};
use crate::convergence::{Convergence, Tally};
use crate::error::{CorpusError, Result};
use crate::gram::{gram, inverse_norms};
use crate::index::CorpusIndex;
use crate::score::{CandidateEmbedding, ScoreOptions};
use crate::store::Section;
use sdr_embed::SentenceEncoder;

/// The outcome of one selection.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    pub index: usize,
    pub all_malformed: bool,
}

/// Argmin of `scores`, ties to the lowest index; `+inf`/NaN never win over a
/// finite score; all non-finite keeps index 0 (`scores` non-empty).
pub fn argmin(scores: &[f64]) -> Selection {
    let mut best: Option<(usize, f64)> = None;
    for (i, &s) in scores.iter().enumerate() {
        if !s.is_finite() {
            continue;
        }
        match best {
            Some((_, b)) if s >= b => {}
            _ => best = Some((i, s)),
        }
    }
    match best {
        Some((index, _)) => Selection {
            index,
            all_malformed: false,
        },
        None => Selection {
            index: 0,
            all_malformed: true,
        },
    }
}

/// Candidate texts parsed (template or plain headers, SPEC §1) and embedded
/// through `embedder` (one encoder call for their new sentences); `None` for a
/// candidate that does not parse into both sections.
pub fn embed_candidate_texts(
    texts: &[&str],
    embedder: &SectionEmbedder<'_>,
) -> Result<Vec<Option<CandidateEmbedding>>> {
    Ok(embed_candidate_sentences(texts, embedder)?.0)
}

/// [`embed_candidate_texts`], with each well-formed candidate's sentences
/// beside its embedding (what the clinical cost reads, SPEC §10).
#[allow(clippy::type_complexity)]
pub fn embed_candidate_sentences(
    texts: &[&str],
    embedder: &SectionEmbedder<'_>,
) -> Result<(
    Vec<Option<CandidateEmbedding>>,
    Vec<Option<CandidateSentences>>,
)> {
    let parsed: Vec<_> = texts.iter().map(|t| parse_report(t)).collect();
    let well =
        |p: &ParsedReport| p.format_valid && !p.findings.is_empty() && !p.impression.is_empty();
    let mut batch = SectionBatch::new();
    for p in &parsed {
        if well(p) {
            batch.push(&p.findings, &p.impression);
        } else {
            batch.push_empty();
        }
    }
    let sets = embedder.embed(&batch, &EmbedControl::default())?;
    let emb = parsed
        .iter()
        .enumerate()
        .map(|(c, p)| {
            well(p).then(|| CandidateEmbedding {
                findings: sets.view(c, Section::Findings).data.to_vec(),
                impression: sets.view(c, Section::Impression).data.to_vec(),
            })
        })
        .collect();
    let sentences = parsed
        .into_iter()
        .map(|p| {
            well(&p).then_some(CandidateSentences {
                findings: p.findings,
                impression: p.impression,
            })
        })
        .collect();
    Ok((emb, sentences))
}

/// [`embed_candidate_texts`] with a cache of its own for this call.
///
/// Deprecated since 0.2.0 (kept for one release, see CHANGELOG.md): use
/// [`embed_candidate_texts`] with the run's [`SectionEmbedder`] (one cache).
pub fn embed_candidates(
    texts: &[&str],
    encoder: &dyn SentenceEncoder,
) -> Result<Vec<Option<CandidateEmbedding>>> {
    embed_candidate_texts(texts, &SectionEmbedder::transient(encoder))
}

/// The outcome of standard best-of-K under one corpus policy.
#[derive(Debug, Clone, PartialEq)]
pub struct BestOfK {
    /// The candidate chosen (ties to the lowest index).
    pub selection: Selection,
    /// `D_F + D_I` of each candidate (`+inf` when malformed).
    pub scores: Vec<f64>,
    /// Corpus distances computed, and how many did not converge or failed.
    pub evaluated: usize,
    pub convergence: Convergence,
}

/// Standard best-of-K (paper Eq. selection-rule, SPEC §5) under one corpus
/// `policy`: the candidate texts parsed and embedded through `embedder`,
/// scored against `index`, the argmin. What `sdr prune` sets beside pruning's
/// choice, and what Python and the server can call too.
pub fn best_of_k(
    texts: &[&str],
    embedder: &SectionEmbedder<'_>,
    index: &CorpusIndex<'_>,
    policy: &Policy,
) -> Result<BestOfK> {
    best_of_k_with(texts, embedder, index, policy, None)
}

/// [`best_of_k`] under the clinical cost (SPEC §10) when `clinical` is
/// given (prepared for `index`); `None` is the cosine cost.
pub fn best_of_k_with(
    texts: &[&str],
    embedder: &SectionEmbedder<'_>,
    index: &CorpusIndex<'_>,
    policy: &Policy,
    clinical: Option<&CorpusCost<'_>>,
) -> Result<BestOfK> {
    let (emb, sentences) = embed_candidate_sentences(texts, embedder)?;
    let s = index.score_with(
        &emb,
        std::slice::from_ref(policy),
        ScoreOptions::default(),
        clinical.map(|c| (c, &sentences[..])),
    )?;
    let scores = s.total.into_iter().next().unwrap_or_default();
    Ok(BestOfK {
        selection: argmin(&scores),
        scores,
        evaluated: s.evaluated,
        convergence: s.convergence,
    })
}

/// Consensus scores of the candidates, with how their distances ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Consensus {
    pub scores: Vec<f64>,
    /// Pair distances computed (per section), and how many did not converge or failed.
    pub evaluated: usize,
    pub convergence: Convergence,
}

/// Consensus (minimum Bayes risk) scores: for each well-formed candidate, the
/// mean over the *other* well-formed candidates of `D_F + D_I` between the
/// two; `+inf` for malformed ones; `0` for a lone well-formed candidate.
/// No corpus is involved.
///
/// $$s(\hat y^{(k)}) = \frac{1}{|W|-1}\sum_{l\in W,\ l\ne k}
///   \bigl[\mathcal D(\mathcal E^F_k, \mathcal E^F_l) + \mathcal D(\mathcal E^I_k, \mathcal E^I_l)\bigr]$$
///
/// where `W` is the set of well-formed candidates. The returned
/// [`Consensus::convergence`] counts the pair distances that did not converge
/// or failed.
pub fn consensus_scores(
    cands: &[Option<CandidateEmbedding>],
    metric: &Metric,
    dim: usize,
) -> Result<Consensus> {
    consensus_scores_with(cands, metric, dim, None)
}

/// [`consensus_scores`] under the clinical cost (SPEC §10) when `clinical`
/// gives it with the candidates' sentences (`sentences[c]` beside
/// `cands[c]`); `None` is the cosine cost.
///
/// # Errors
/// Those of [`consensus_scores`], and [`CorpusError::SentenceCount`] when a
/// well-formed candidate's sentences do not match its rows.
pub fn consensus_scores_with(
    cands: &[Option<CandidateEmbedding>],
    metric: &Metric,
    dim: usize,
    clinical: Option<(&dyn SentenceCost, &[Option<CandidateSentences>])>,
) -> Result<Consensus> {
    let tally = Tally::default();
    let live: Vec<usize> = (0..cands.len()).filter(|&c| cands[c].is_some()).collect();
    let mut pair_sum = vec![vec![0.0f64; cands.len()]; cands.len()];
    for sec in Section::BOTH {
        // One Gram matrix of all live candidates' sentences of this section.
        let mut rows = Vec::new();
        let mut ranges = Vec::new();
        for &c in &live {
            let e = cands[c].as_ref().map(|x| x.section(sec)).unwrap_or(&[]);
            let start = rows.len() / dim;
            rows.extend_from_slice(e);
            ranges.push(start..rows.len() / dim);
        }
        let inv = inverse_norms(&rows, dim, "the candidates")?;
        let q = rows.len() / dim;
        let g = gram(&rows, &rows, dim);
        // Each live candidate's sentences of this section, checked against its rows.
        let notes: Option<(&dyn SentenceCost, Vec<Vec<Annotation>>)> = match clinical {
            None => None,
            Some((cost, sentences)) => {
                let mut t = Vec::with_capacity(live.len());
                for (x, &c) in live.iter().enumerate() {
                    let s: Vec<Annotation> = sentences
                        .get(c)
                        .and_then(Option::as_ref)
                        .map(|s| s.section(sec).iter().map(|t| cost.annotate(t)).collect())
                        .unwrap_or_default();
                    if s.len() != ranges[x].len() {
                        return Err(CorpusError::SentenceCount {
                            what: format!("candidate {c} {sec}"),
                            rows: ranges[x].len(),
                            sentences: s.len(),
                        });
                    }
                    t.push(s);
                }
                Some((cost, t))
            }
        };
        // One direction's distance, under the sentence cost when there is one.
        let value = |a: usize, b: usize| -> f64 {
            let pair = PairCost::from_gram(
                &g,
                q,
                &inv,
                ranges[a].clone(),
                ranges[b].clone(),
                metric.needs_intra(),
            );
            match &notes {
                None => tally.value(metric, &pair),
                // Counts checked above.
                Some((cost, t)) => match cost.apply(pair, &t[a], &t[b]) {
                    Ok((p, _)) => tally.value(metric, &p),
                    Err(_) => tally.failed(),
                },
            }
        };
        for x in 0..live.len() {
            for y in x + 1..live.len() {
                let d = value(x, y);
                // Under an asymmetric cost (the clinical cost with a finding
                // added and one omitted weighed apart), `y` read as the
                // candidate against `x` is another pair.
                let back = match &notes {
                    Some((cost, _)) if !cost.symmetric() => value(y, x),
                    _ => d,
                };
                pair_sum[live[x]][live[y]] += d;
                pair_sum[live[y]][live[x]] += back;
            }
        }
    }
    let scores = (0..cands.len())
        .map(|c| {
            if cands[c].is_none() {
                f64::INFINITY
            } else if live.len() == 1 {
                0.0
            } else {
                live.iter()
                    .filter(|&&l| l != c)
                    .map(|&l| pair_sum[c][l])
                    .sum::<f64>()
                    / (live.len() - 1) as f64
            }
        })
        .collect();
    let pairs = live.len() * live.len().saturating_sub(1) / 2;
    Ok(Consensus {
        scores,
        evaluated: 2 * pairs,
        convergence: tally.counts(),
    })
}

/// What one selection scores per study: corpus policies and consensus metrics under one
/// sentence cost, and the output key of each (`{prefix}{policy}` for the corpus policies,
/// then `{prefix}{metric}@consensus`), in that order.
pub struct SelectionPlan {
    pub policies: Vec<Policy>,
    pub consensus: Vec<Metric>,
    pub keys: Vec<String>,
    pub opts: ScoreOptions,
    /// The sentence cost (the clinical cost of SPEC §10); `None` is the
    /// paper's cosine cost.
    pub clinical: Option<Arc<dyn SentenceCost>>,
}

/// One study's scores under every key of a [`SelectionPlan`] (lower is better; pick with
/// [`argmin`]), with the distances computed and how many did not converge.
#[derive(Debug, Clone, Default)]
pub struct PlanScores {
    pub per_policy: Vec<Vec<f64>>,
    pub evaluated: usize,
    pub convergence: Convergence,
}

impl SelectionPlan {
    /// `prefix` names the cost in the keys (`""` for cosine, `"clinical/"`).
    pub fn new(
        policies: Vec<Policy>,
        consensus: Vec<Metric>,
        prefix: &str,
        opts: ScoreOptions,
        clinical: Option<Arc<dyn SentenceCost>>,
    ) -> Self {
        let keys = policies
            .iter()
            .map(|p| format!("{prefix}{p}"))
            .chain(consensus.iter().map(|m| format!("{prefix}{m}@consensus")))
            .collect();
        SelectionPlan {
            policies,
            consensus,
            keys,
            opts,
            clinical,
        }
    }

    /// Every key's scores of one study's candidates (`cands`, and `sentences[c]`, candidate
    /// `c`'s sentences, read under the clinical cost, whose corpus side `corpus_clinical`
    /// then is). `index` is needed when the plan has corpus policies.
    ///
    /// # Errors
    /// [`CorpusError::InvalidOption`] for corpus policies without `index`; the scorers'
    /// errors.
    pub fn scores(
        &self,
        index: Option<&CorpusIndex<'_>>,
        corpus_clinical: Option<&CorpusCost<'_>>,
        cands: &[Option<CandidateEmbedding>],
        sentences: &[Option<CandidateSentences>],
        dim: usize,
    ) -> Result<PlanScores> {
        let mut out = PlanScores::default();
        if !self.policies.is_empty() {
            let Some(ix) = index else {
                return Err(CorpusError::InvalidOption {
                    name: "index",
                    value: "none".into(),
                    reason: "corpus policies need the corpus".into(),
                });
            };
            let clin = corpus_clinical.map(|c| (c, sentences));
            let s = ix.score_with(cands, &self.policies, self.opts, clin)?;
            out.evaluated += s.evaluated;
            out.convergence += s.convergence;
            out.per_policy.extend(s.total);
        }
        for m in &self.consensus {
            let clin = self.clinical.as_deref().map(|c| (c, sentences));
            let c = consensus_scores_with(cands, m, dim, clin)?;
            out.evaluated += c.evaluated;
            out.convergence += c.convergence;
            out.per_policy.push(c.scores);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmin_ties_and_malformed() {
        assert_eq!(argmin(&[0.3, 0.1, 0.1]).index, 1);
        assert_eq!(argmin(&[f64::INFINITY, 0.5, 0.2]).index, 2);
        let s = argmin(&[f64::INFINITY, f64::INFINITY]);
        assert_eq!(
            s,
            Selection {
                index: 0,
                all_malformed: true
            }
        );
        assert_eq!(argmin(&[f64::NAN, 0.9]).index, 1);
    }
}

#[cfg(test)]
mod plan_tests {
    use super::*;
    use crate::agg::Aggregation;

    #[test]
    fn a_plan_keys_corpus_policies_then_consensus_and_needs_the_corpus_for_policies() {
        let policy = Policy {
            metric: Metric::Chamfer,
            agg: Aggregation::Min,
        };
        let plan = SelectionPlan::new(
            vec![policy],
            vec![Metric::Hausdorff],
            "clinical/",
            ScoreOptions::default(),
            None,
        );
        assert_eq!(
            plan.keys,
            ["clinical/chamfer@min", "clinical/hausdorff@consensus"]
        );
        let e = plan.scores(None, None, &[], &[], 4).unwrap_err();
        assert!(
            e.to_string().contains("corpus policies need the corpus"),
            "{e}"
        );
        // Consensus alone needs no corpus.
        let plan = SelectionPlan::new(
            vec![],
            vec![Metric::Chamfer],
            "",
            ScoreOptions::default(),
            None,
        );
        let s = plan
            .scores(None, None, &[None, None], &[None, None], 4)
            .unwrap();
        assert_eq!(s.per_policy.len(), 1);
        assert_eq!(s.per_policy[0].len(), 2);
    }
}
