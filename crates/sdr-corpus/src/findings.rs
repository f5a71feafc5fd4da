//! Impressions chosen by their own Findings (SPEC §10a): best-of-K with no
//! reference and no corpus, for a report whose Findings are dictated and
//! whose Impression a model drafts.
//!
//! Each candidate Impression `I` is checked against the study's Findings `F`
//! by [`sdr_clinical::Consistency`] (contradictions, unsupported findings,
//! omitted abnormal findings; lower is better), and ordered by
//!
//! $$\bigl(s(I \mid F),\ \vec d(I, F),\ k\bigr) \text{ lexicographically}, \qquad
//!   \vec d(I, F) = \frac{1}{|I|}\sum_{i \in I}\min_{j \in F} \frac{1 - \cos(e_i, e_j)}{2}$$
//!
//! where `s` is the consistency score (compared at 1e-9), `d` the directed
//! Chamfer distance from the Impression's sentence embeddings to the
//! Findings' (each Impression sentence should say something a Findings
//! sentence says), which orders the candidates that state no finding
//! ("No acute cardiopulmonary abnormality." against "Normal chest."), and `k`
//! the candidate's index. A candidate with no sentence is malformed: it
//! scores `+inf` and is kept only when every candidate is malformed (the
//! first, as [`crate::select::argmin`] does).

use sdr_clinical::{Consistency, ConsistencyReport};
use sdr_core::report::split_sentences;
use sdr_core::SetView;
use sdr_embed::{EmbedControl, SectionBatch, SectionEmbedder};

use crate::error::{CorpusError, Result};
use crate::select::Selection;
use crate::store::Section;

/// The key of this policy in `sdr select`'s output.
pub const FINDINGS_POLICY: &str = "findings-consistency";

/// One candidate's scores.
#[derive(Debug, Clone, PartialEq)]
pub struct FindingsScore {
    /// The consistency check (`None` for a candidate with no sentence).
    pub report: Option<ConsistencyReport>,
    /// `d(I, F)`, the directed Chamfer distance of its sentences to the
    /// Findings' (`+inf` for a candidate with no sentence).
    pub semantic: f64,
}

impl FindingsScore {
    /// The consistency score, `+inf` for a candidate with no sentence.
    pub fn score(&self) -> f64 {
        self.report.as_ref().map_or(f64::INFINITY, |r| r.score)
    }
}

/// The outcome of one study.
#[derive(Debug, Clone, PartialEq)]
pub struct FindingsSelection {
    /// The candidate chosen.
    pub selection: Selection,
    /// Per candidate, its scores.
    pub candidates: Vec<FindingsScore>,
}

/// One study to select for: its candidate Impressions and its Findings.
#[derive(Debug, Clone, Copy)]
pub struct FindingsStudy<'a> {
    /// The candidate Impression texts.
    pub candidates: &'a [&'a str],
    /// The Findings text.
    pub findings: &'a str,
}

/// The candidate [`FindingsSelection`] of each study, with one encoder call
/// for the new sentences of all of them.
///
/// # Errors
/// A study with no candidate, or whose Findings have no sentence
/// ([`CorpusError::InvalidOption`] naming the study's position), and what
/// the encoder refuses.
pub fn select_by_findings(
    studies: &[FindingsStudy<'_>],
    embedder: &SectionEmbedder<'_>,
    check: &Consistency,
) -> Result<Vec<FindingsSelection>> {
    let bad = |s: usize, reason: &str| CorpusError::InvalidOption {
        name: "study",
        value: s.to_string(),
        reason: reason.to_string(),
    };
    let findings: Vec<Vec<String>> = studies
        .iter()
        .map(|s| split_sentences(s.findings))
        .collect();
    let impressions: Vec<Vec<Vec<String>>> = studies
        .iter()
        .map(|s| s.candidates.iter().map(|c| split_sentences(c)).collect())
        .collect();
    for (s, study) in studies.iter().enumerate() {
        if study.candidates.is_empty() {
            return Err(bad(s, "no candidate Impression"));
        }
        if findings[s].is_empty() {
            return Err(bad(s, "the Findings have no sentence"));
        }
    }
    // One report per candidate: the study's Findings and the candidate
    // (the embedder embeds each distinct sentence once).
    let mut batch = SectionBatch::new();
    for (f, cands) in findings.iter().zip(&impressions) {
        for c in cands {
            if c.is_empty() {
                batch.push_empty();
            } else {
                batch.push(f, c);
            }
        }
    }
    let sets = embedder.embed(&batch, &EmbedControl::default())?;
    let mut report = 0;
    let mut out = Vec::with_capacity(studies.len());
    for ((f, cands), study) in findings.iter().zip(&impressions).zip(studies) {
        let f_text: Vec<&str> = f.iter().map(String::as_str).collect();
        let mut scores = Vec::with_capacity(cands.len());
        for c in cands {
            let score = if c.is_empty() {
                FindingsScore {
                    report: None,
                    semantic: f64::INFINITY,
                }
            } else {
                let i_text: Vec<&str> = c.iter().map(String::as_str).collect();
                FindingsScore {
                    report: Some(check.check_sentences(&i_text, &f_text)),
                    semantic: directed_chamfer(
                        &sets.view(report, Section::Impression),
                        &sets.view(report, Section::Findings),
                    ),
                }
            };
            scores.push(score);
            report += 1;
        }
        debug_assert_eq!(scores.len(), study.candidates.len());
        out.push(FindingsSelection {
            selection: choose(&scores),
            candidates: scores,
        });
    }
    Ok(out)
}

/// The lexicographic argmin of (score at 1e-9, semantic, index); a
/// candidate with no sentence never wins over one with.
pub fn choose(scores: &[FindingsScore]) -> Selection {
    let key = |s: &FindingsScore| ((s.score() * 1e9).round(), s.semantic);
    let mut best: Option<(usize, (f64, f64))> = None;
    for (i, s) in scores.iter().enumerate() {
        if s.report.is_none() {
            continue;
        }
        let k = key(s);
        let better = match best {
            None => true,
            Some((_, b)) => k.0 < b.0 || (k.0 == b.0 && k.1 < b.1),
        };
        if better {
            best = Some((i, k));
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

/// `d(A, B)`: the mean over `a`'s rows of the smallest cosine cost
/// `(1 - cos) / 2` to `b`'s rows (a zero row has cosine 0 with any).
pub fn directed_chamfer(a: &SetView<'_, f32>, b: &SetView<'_, f32>) -> f64 {
    let (n, m) = (a.n, b.n);
    if n == 0 || m == 0 {
        return f64::INFINITY;
    }
    let norm = |r: &[f32]| {
        r.iter()
            .map(|&x| f64::from(x) * f64::from(x))
            .sum::<f64>()
            .sqrt()
    };
    let b_norms: Vec<f64> = (0..m).map(|j| norm(b.row(j))).collect();
    let mut total = 0.0;
    for i in 0..n {
        let ra = a.row(i);
        let na = norm(ra);
        let mut best = f64::INFINITY;
        for (j, &nb) in b_norms.iter().enumerate() {
            let dot: f64 = ra
                .iter()
                .zip(b.row(j))
                .map(|(&x, &y)| f64::from(x) * f64::from(y))
                .sum();
            let cos = if na > 0.0 && nb > 0.0 {
                (dot / (na * nb)).clamp(-1.0, 1.0)
            } else {
                0.0
            };
            best = best.min((1.0 - cos) / 2.0);
        }
        total += best;
    }
    total / n as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoder::HashEncoder;

    fn select(cands: &[&str], findings: &str) -> FindingsSelection {
        let enc = HashEncoder::new(32);
        let embedder = SectionEmbedder::transient(&enc);
        let check = Consistency::default();
        let study = FindingsStudy {
            candidates: cands,
            findings,
        };
        select_by_findings(&[study], &embedder, &check)
            .unwrap()
            .remove(0)
    }

    /// IU X-ray uid 267.
    const F: &str = "Endotracheal tube and NG tube have been removed. Mild patchy bilateral \
        airspace disease. There are small bilateral pleural effusions. No pneumothorax. Heart and \
        mediastinum are stable with normal size heart. Degenerative changes in the spine.";

    #[test]
    fn the_consistent_impression_wins_whatever_its_index() {
        let faithful = "Small bilateral pleural effusions with a few scattered areas of patchy \
            bilateral airspace disease.";
        let cands = [
            "No pleural effusion. Patchy bilateral airspace disease.",
            "No acute cardiopulmonary abnormality.",
            faithful,
            "",
        ];
        let s = select(&cands, F);
        assert_eq!(s.selection.index, 2, "{s:?}");
        assert!(!s.selection.all_malformed);
        assert_eq!(s.candidates[3].score(), f64::INFINITY);
        assert!(s.candidates[0].report.as_ref().unwrap().contradiction > 0.0);
        assert!(s.candidates[0].score() > s.candidates[2].score());
        assert!(s.candidates[1].score() > s.candidates[2].score());
    }

    #[test]
    fn ties_go_to_the_closer_impression_then_the_lower_index() {
        let normal = "The lungs are clear. No pneumothorax or pleural effusion. Heart size normal.";
        // Both state no finding: the one that repeats a Findings sentence is closer.
        let s = select(&["Normal chest x-XXXX.", "The lungs are clear."], normal);
        assert_eq!(s.candidates[0].score(), 0.0);
        assert_eq!(s.candidates[1].score(), 0.0);
        assert_eq!(s.candidates[1].semantic, 0.0);
        assert_eq!(s.selection.index, 1, "{s:?}");
        let s = select(&["The lungs are clear.", "The lungs are clear."], normal);
        assert_eq!(s.selection.index, 0);
    }

    #[test]
    fn all_empty_keeps_the_first_and_bad_studies_are_errors() {
        let s = select(&["", " "], F);
        assert_eq!(
            s.selection,
            Selection {
                index: 0,
                all_malformed: true
            }
        );
        let enc = HashEncoder::new(8);
        let embedder = SectionEmbedder::transient(&enc);
        let check = Consistency::default();
        let ok = ["No acute disease."];
        let err = select_by_findings(
            &[
                FindingsStudy {
                    candidates: &ok,
                    findings: F,
                },
                FindingsStudy {
                    candidates: &ok,
                    findings: "  ",
                },
            ],
            &embedder,
            &check,
        )
        .unwrap_err();
        assert!(err.to_string().contains("`1`"), "{err}");
        assert!(
            err.to_string().contains("Findings have no sentence"),
            "{err}"
        );
        let err = select_by_findings(
            &[FindingsStudy {
                candidates: &[],
                findings: F,
            }],
            &embedder,
            &check,
        )
        .unwrap_err();
        assert!(err.to_string().contains("no candidate"), "{err}");
    }

    #[test]
    fn directed_chamfer_is_zero_on_a_subset_and_directed() {
        let a = [1.0f32, 0.0];
        let b = [1.0f32, 0.0, 0.0, 1.0];
        let (va, vb) = (SetView::new(&a[..], 2), SetView::new(&b[..], 2));
        assert_eq!(directed_chamfer(&va, &vb), 0.0);
        assert!((directed_chamfer(&vb, &va) - 0.25).abs() < 1e-12);
    }
}
