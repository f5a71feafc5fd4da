//! Explaining a reward: which sentences a set distance paired, at what cost,
//! which reference findings the candidate misses and which of its sentences
//! nothing in the reference supports (SPEC §9).
//!
//! A set distance is one number, but every metric of SPEC §3 is built from a
//! correspondence between the two sentence sets (nearest neighbours, an
//! assignment, a transport plan; see [`matching()`]). Per section, with the
//! cosine cost `M_ij = d(c_i, r_j)` between candidate sentence `c_i` and
//! reference sentence `r_j`, the explanation holds
//!
//! - the distance `D` and the section's reward term `1 - min(D, 1)` (SPEC §4);
//! - for each candidate sentence its partner `j` under the metric and `M_ij`
//!   (for plan-based metrics the reference sentence that receives most of its
//!   mass, with that mass), and the same for each reference sentence;
//! - with a threshold `tau` on nearest-neighbour costs, the missing reference
//!   sentences (no candidate sentence comes close) and the unsupported
//!   candidate sentences (close to no reference sentence: a likely
//!   hallucination):
//!
//! $$\mathrm{missing} = \{\, j : \min_i M_{ij} > \tau \,\},\qquad
//!   \mathrm{unsupported} = \{\, i : \min_j M_{ij} > \tau \,\}.$$
//!
//! The two lists use nearest neighbours for every metric, so they say what the
//! texts say rather than how a metric spreads mass: exact OT must send a
//! repeated sentence's mass to some other reference sentence, which its cost
//! shows, but the repeat is still supported. [`DEFAULT_THRESHOLD`] comes from
//! IU X-ray data (SPEC §9, `tools/explain_threshold.py`).
//!
//! This module takes embedded sentence sets; parsing and encoding are the
//! caller's (the CLI's `sdr explain`, Python's `sdr_rewards.explain`).

pub mod matching;

use serde::Serialize;

use crate::cost::{PairCost, SetView};
use crate::distance::Metric;
use crate::error::{Result, SdrError, Side};
use crate::report::Section;
use crate::reward::{section_term, RewardConfig};
use matching::{matching, nearest};

/// Default `tau`: a nearest-neighbour cosine cost above it means "not said".
/// Chosen on the IU X-ray train split (SPEC §9): the threshold that best
/// separates sentences whose finding another report states from sentences
/// whose finding it does not.
pub const DEFAULT_THRESHOLD: f64 = 0.2;

/// What to explain with: the reward's metric and weights, and `tau`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExplainOptions {
    pub reward: RewardConfig,
    /// `tau`, in `[0, 1]` (the range of the cosine cost).
    pub threshold: f64,
}

impl Default for ExplainOptions {
    fn default() -> Self {
        ExplainOptions {
            reward: RewardConfig::default(),
            threshold: DEFAULT_THRESHOLD,
        }
    }
}

impl ExplainOptions {
    /// The paper's reward weights with `metric`, and `threshold` (default
    /// [`DEFAULT_THRESHOLD`]).
    ///
    /// # Errors
    /// [`SdrError::BadThreshold`] when `threshold` is not in `[0, 1]`.
    pub fn new(metric: Metric, threshold: Option<f64>) -> Result<Self> {
        let threshold = check_threshold(threshold.unwrap_or(DEFAULT_THRESHOLD))?;
        Ok(ExplainOptions {
            reward: RewardConfig {
                metric,
                ..RewardConfig::default()
            },
            threshold,
        })
    }
}

fn check_threshold(value: f64) -> Result<f64> {
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(SdrError::BadThreshold { value })
    }
}

/// The sentences of one section with their embeddings (row `i` embeds
/// `text[i]`).
#[derive(Debug, Clone, Copy)]
pub struct Sentences<'a> {
    pub text: &'a [String],
    pub vectors: SetView<'a>,
}

/// Findings and Impression of one report, embedded.
#[derive(Debug, Clone, Copy)]
pub struct ReportSentences<'a> {
    pub findings: Sentences<'a>,
    pub impression: Sentences<'a>,
}

/// One sentence and its partner in the other list.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SentenceExplanation {
    pub sentence: String,
    /// Index of the partner in the other list; `None` when the metric leaves
    /// the sentence unpaired (Hung-Pen's surplus, mass partial OT does not move).
    #[serde(rename = "match")]
    pub matched: Option<usize>,
    /// `M_ij` of the pair (raw cosine cost, SPEC §3); `None` without a partner.
    pub cost: Option<f64>,
    /// Plan-based metrics only: the mass sent to (or received from) the
    /// partner, out of a total of 1 (each of `n` sentences holds `1/n`); 0
    /// without a partner.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mass: Option<f64>,
    /// The nearest sentence of the other list and its cost, which decide
    /// `missing` / `unsupported` (for Chamfer and Hausdorff also the partner).
    pub nearest: usize,
    pub nearest_cost: f64,
    /// With a cost beyond the cosine (the clinical cost, SPEC §10): what made
    /// this sentence costly, in words (e.g. `"side: present Atelectasis
    /// (left) vs present Atelectasis (right) in sentence 0"`); absent when
    /// nothing did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conflict: Option<String>,
}

/// The explanation of one section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SectionExplanation {
    /// `D(candidate, reference)`, exactly as the reward computes it.
    pub distance: f64,
    /// Whether the metric's solver converged (SPEC §3, "Convergence").
    pub converged: bool,
    /// The section's reward term `1 - min(D, 1)` (0 when `D` is not finite).
    pub reward: f64,
    pub candidate: Vec<SentenceExplanation>,
    pub reference: Vec<SentenceExplanation>,
    /// Reference indices whose nearest candidate sentence costs more than `tau`.
    pub missing: Vec<usize>,
    /// Candidate indices whose nearest reference sentence costs more than `tau`.
    pub unsupported: Vec<usize>,
}

/// Both sections of a well-formed candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExplainedSections {
    pub findings: SectionExplanation,
    pub impression: SectionExplanation,
}

/// The explanation of one candidate against its reference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReportExplanation {
    /// Canonical metric spec (SPEC §3).
    pub metric: String,
    /// The sentence cost when it is not the cosine (`clinical:lambda=1.5`;
    /// SPEC §10); set by the caller that chose it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<String>,
    /// `tau` used for `missing` / `unsupported`.
    pub threshold: f64,
    /// `R_fmt`: whether the candidate parsed into both sections.
    pub format_valid: bool,
    /// The reward `lambda_fmt R_fmt + lambda_sem (R_sem^F + R_sem^I)` (SPEC §4).
    pub reward: f64,
    /// `None` for a malformed candidate (reward 0).
    pub sections: Option<ExplainedSections>,
}

/// Explain one section: candidate sentences against reference sentences.
///
/// # Errors
/// [`SdrError::BadThreshold`] for `threshold` outside `[0, 1]`;
/// [`SdrError::SentenceCount`] when a text list and its vectors differ in
/// length; an empty set or a bad metric parameter as [`Metric::evaluate`].
///
/// ```
/// use sdr_core::explain::{explain_section, Sentences};
/// use sdr_core::{Metric, SetView};
/// let text = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
/// let (c, r) = (text(&["Heart normal.", "Big effusion."]), text(&["Heart normal."]));
/// let (cv, rv) = ([1.0, 0.0, 0.0, 1.0], [1.0, 0.0]);
/// let e = explain_section(
///     &Metric::Chamfer,
///     0.2,
///     &Sentences { text: &c, vectors: SetView::new(&cv, 2) },
///     &Sentences { text: &r, vectors: SetView::new(&rv, 2) },
/// )
/// .unwrap();
/// assert_eq!(e.unsupported, [1]); // cost 0.5 > 0.2
/// assert!(e.missing.is_empty());
/// assert_eq!(e.candidate[0].matched, Some(0));
/// ```
pub fn explain_section(
    metric: &Metric,
    threshold: f64,
    candidate: &Sentences<'_>,
    reference: &Sentences<'_>,
) -> Result<SectionExplanation> {
    let cost = cosine_section_cost(metric, candidate, reference)?;
    explain_section_with(metric, threshold, candidate, reference, &cost)
}

/// The paper's cost of a section pair, its counts checked.
fn cosine_section_cost(
    metric: &Metric,
    candidate: &Sentences<'_>,
    reference: &Sentences<'_>,
) -> Result<SectionCost> {
    check_counts(candidate, reference)?;
    let cost = PairCost::between(&candidate.vectors, &reference.vectors, metric.needs_intra())?;
    Ok(SectionCost::cosine(cost))
}

fn check_counts(candidate: &Sentences<'_>, reference: &Sentences<'_>) -> Result<()> {
    for (set, s) in [(Side::A, candidate), (Side::B, reference)] {
        if s.text.len() != s.vectors.n {
            return Err(SdrError::SentenceCount {
                set,
                sentences: s.text.len(),
                vectors: s.vectors.n,
            });
        }
    }
    Ok(())
}

/// The cost a section's distance reads, beside the cosine cost that
/// `missing` / `unsupported` and each pair's `cost` are stated in, and a
/// note per sentence saying what made it costly (the clinical cost's
/// conflicts; SPEC §10).
#[derive(Debug, Clone)]
pub struct SectionCost {
    /// What the metric reads.
    pub cost: PairCost<'static>,
    /// `(1 - cos) / 2` of the pairs (SPEC §3).
    pub cosine: crate::cost::CostMatrix,
    /// Per candidate sentence, per reference sentence: the note, if any.
    pub candidate_notes: Vec<Option<String>>,
    pub reference_notes: Vec<Option<String>>,
}

impl SectionCost {
    /// The paper's cost: the metric reads the cosine cost; no notes.
    pub fn cosine(cost: PairCost<'static>) -> Self {
        let cosine = cost.cross.as_ref().clone();
        let (n, m) = (cosine.n, cosine.m);
        SectionCost {
            cost,
            cosine,
            candidate_notes: vec![None; n],
            reference_notes: vec![None; m],
        }
    }
}

/// [`explain_section`] with the section's costs given by the caller
/// ([`SectionCost`]): the distance and the pairs are the metric's on
/// `cost.cost`; the costs shown, `missing` and `unsupported` are cosine.
///
/// # Errors
/// Those of [`explain_section`], and notes that do not have one entry per sentence.
pub fn explain_section_with(
    metric: &Metric,
    threshold: f64,
    candidate: &Sentences<'_>,
    reference: &Sentences<'_>,
    cost: &SectionCost,
) -> Result<SectionExplanation> {
    let threshold = check_threshold(threshold)?;
    check_counts(candidate, reference)?;
    let (n, m) = (candidate.text.len(), reference.text.len());
    if (cost.cosine.n, cost.cosine.m) != (n, m)
        || (cost.cost.cross.n, cost.cost.cross.m) != (n, m)
        || cost.candidate_notes.len() != n
        || cost.reference_notes.len() != m
    {
        return Err(SdrError::CostShape {
            n,
            m,
            len: cost.cost.cross.data.len(),
        });
    }
    let evaluation = metric.evaluate(&cost.cost)?;
    let pairs = matching(metric, &cost.cost)?;
    let (near_rows, near_cols) = nearest(&cost.cosine);
    let plan_based = pairs.plan.is_some();
    let side = |text: &[String],
                partners: &[Option<matching::Partner>],
                near: &[matching::Partner],
                notes: &[Option<String>],
                rows: bool| {
        text.iter()
            .zip(partners)
            .zip(near)
            .zip(notes)
            .enumerate()
            .map(|(k, (((sentence, p), nn), note))| SentenceExplanation {
                sentence: sentence.clone(),
                matched: p.map(|p| p.index),
                // The cosine cost of the pair, whatever the metric read.
                cost: p.map(|p| {
                    if rows {
                        cost.cosine.get(k, p.index)
                    } else {
                        cost.cosine.get(p.index, k)
                    }
                }),
                mass: plan_based.then(|| p.and_then(|p| p.mass).unwrap_or(0.0)),
                nearest: nn.index,
                nearest_cost: nn.cost,
                conflict: note.clone(),
            })
            .collect::<Vec<_>>()
    };
    let far = |near: &[matching::Partner]| {
        near.iter()
            .enumerate()
            .filter(|(_, p)| p.cost > threshold)
            .map(|(k, _)| k)
            .collect::<Vec<_>>()
    };
    Ok(SectionExplanation {
        distance: evaluation.value,
        converged: evaluation.converged,
        reward: section_term(&evaluation),
        candidate: side(
            candidate.text,
            &pairs.rows,
            &near_rows,
            &cost.candidate_notes,
            true,
        ),
        reference: side(
            reference.text,
            &pairs.cols,
            &near_cols,
            &cost.reference_notes,
            false,
        ),
        missing: far(&near_cols),
        unsupported: far(&near_rows),
    })
}

/// Explain one candidate report against its reference: both sections and the
/// reward they add up to. `candidate` is `None` when it is malformed (the
/// caller's parser decides, as for the reward): reward 0 and no sections.
/// `index` names the sample in errors.
///
/// # Errors
/// [`SdrError::EmptySection`] for a reference section without sentences
/// (SPEC §4), and the errors of [`explain_section`].
pub fn explain_report(
    options: &ExplainOptions,
    candidate: Option<&ReportSentences<'_>>,
    reference: &ReportSentences<'_>,
    index: usize,
) -> Result<ReportExplanation> {
    let metric = options.reward.metric;
    explain_report_with(options, candidate, reference, index, |_, c, r| {
        cosine_section_cost(&metric, c, r)
    })
}

/// [`explain_report`] with each section's costs from `section_cost(section,
/// candidate, reference)` (the clinical cost's hook; SPEC §10).
///
/// # Errors
/// Those of [`explain_report`] and of `section_cost`.
pub fn explain_report_with(
    options: &ExplainOptions,
    candidate: Option<&ReportSentences<'_>>,
    reference: &ReportSentences<'_>,
    index: usize,
    section_cost: impl Fn(Section, &Sentences<'_>, &Sentences<'_>) -> Result<SectionCost>,
) -> Result<ReportExplanation> {
    check_threshold(options.threshold)?;
    for (section, s) in [
        ("findings", &reference.findings),
        ("impression", &reference.impression),
    ] {
        if s.text.is_empty() || s.vectors.n == 0 {
            return Err(SdrError::EmptySection { index, section });
        }
    }
    let metric = &options.reward.metric;
    let explain = |section: Section, c: &Sentences<'_>, r: &Sentences<'_>| {
        let cost = section_cost(section, c, r)?;
        explain_section_with(metric, options.threshold, c, r, &cost)
    };
    let sections = match candidate {
        None => None,
        Some(c) => Some(ExplainedSections {
            findings: explain(Section::Findings, &c.findings, &reference.findings)?,
            impression: explain(Section::Impression, &c.impression, &reference.impression)?,
        }),
    };
    let reward = match &sections {
        None => 0.0,
        Some(s) => options
            .reward
            .combine(1.0, s.findings.reward, s.impression.reward),
    };
    Ok(ReportExplanation {
        metric: metric.to_string(),
        cost: None,
        threshold: options.threshold,
        format_valid: sections.is_some(),
        reward,
        sections,
    })
}

/// The sentences of one report, by section: `(findings, impression)`.
pub type SectionTexts<'a> = (&'a [String], &'a [String]);

/// [`explain_report`] for reports given as sentences, each sentence's vector
/// (`dim` floats, any norm) looked up by `vector_of`: builds and checks the four
/// embedding sets, then explains. What the CLI and the bindings share.
///
/// # Errors
/// A vector that is zero or not finite, and the errors of [`explain_report`].
pub fn explain_texts<'v>(
    options: &ExplainOptions,
    candidate: Option<SectionTexts<'_>>,
    reference: SectionTexts<'_>,
    dim: usize,
    vector_of: impl Fn(&str) -> &'v [f32],
    index: usize,
) -> Result<ReportExplanation> {
    let metric = options.reward.metric;
    explain_texts_with(
        options,
        candidate,
        reference,
        dim,
        vector_of,
        index,
        |_, c, r| cosine_section_cost(&metric, c, r),
    )
}

/// [`explain_texts`] with each section's costs from `section_cost` (see
/// [`explain_report_with`]).
///
/// # Errors
/// Those of [`explain_texts`] and of `section_cost`.
pub fn explain_texts_with<'v>(
    options: &ExplainOptions,
    candidate: Option<SectionTexts<'_>>,
    reference: SectionTexts<'_>,
    dim: usize,
    vector_of: impl Fn(&str) -> &'v [f32],
    index: usize,
    section_cost: impl Fn(Section, &Sentences<'_>, &Sentences<'_>) -> Result<SectionCost>,
) -> Result<ReportExplanation> {
    let set = |sentences: &[String], side: Side| {
        let data = sentences
            .iter()
            .flat_map(|s| vector_of(s).iter().map(|&x| f64::from(x)))
            .collect();
        crate::cost::EmbeddingSet::from_flat(data, dim, side)
    };
    let (rf, ri) = (set(reference.0, Side::B)?, set(reference.1, Side::B)?);
    let refs = ReportSentences {
        findings: Sentences {
            text: reference.0,
            vectors: rf.view(),
        },
        impression: Sentences {
            text: reference.1,
            vectors: ri.view(),
        },
    };
    match candidate {
        None => explain_report_with(options, None, &refs, index, section_cost),
        Some((f, i)) => {
            let (cf, ci) = (set(f, Side::A)?, set(i, Side::A)?);
            let cand = ReportSentences {
                findings: Sentences {
                    text: f,
                    vectors: cf.view(),
                },
                impression: Sentences {
                    text: i,
                    vectors: ci.view(),
                },
            };
            explain_report_with(options, Some(&cand), &refs, index, section_cost)
        }
    }
}

#[cfg(test)]
mod tests;
