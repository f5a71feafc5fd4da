//! CheXpert-rule F1 between candidate and reference labels (SPEC §8).
//!
//! Per observation the task is binary: present (positive, and uncertain
//! under [`UncertainPolicy::Positive`]) or not (negative, not mentioned).
//! Precision, recall and F1 follow scikit-learn with `zero_division=0`, the
//! convention of the common CheXbert-F1 scripts: a ratio with a zero
//! denominator is 0, so an observation with no positives in either
//! candidates or references scores F1 = 0 and still counts in the macro
//! average.

use serde::Serialize;

use crate::error::{ClinicalError, Result};
use crate::observation::{Labels, Observation};

/// How an uncertain (`-1`) label counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum UncertainPolicy {
    /// Uncertain counts as present (the CheXbert-F1 scripts' convention).
    #[default]
    Positive,
    /// Uncertain counts as absent.
    Negative,
}

impl UncertainPolicy {
    fn as_positive(self) -> bool {
        self == UncertainPolicy::Positive
    }
}

/// Precision, recall and F1.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Scores {
    /// TP / (TP + FP), 0 when nothing is predicted present.
    pub precision: f64,
    /// TP / (TP + FN), 0 when nothing is present in the references.
    pub recall: f64,
    /// 2 TP / (2 TP + FP + FN), 0 when both are empty.
    pub f1: f64,
}

impl Scores {
    /// From counts, with 0 for every zero denominator.
    pub fn from_counts(tp: usize, fp: usize, fn_: usize) -> Scores {
        let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        Scores {
            precision: ratio(tp, tp + fp),
            recall: ratio(tp, tp + fn_),
            f1: ratio(2 * tp, 2 * tp + fp + fn_),
        }
    }
}

/// One observation's counts and scores over a corpus.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObservationScore {
    /// The observation (serialised by name).
    #[serde(serialize_with = "ser_name")]
    pub observation: Observation,
    /// Pairs present in both.
    pub tp: usize,
    /// Pairs present in the candidate only.
    pub fp: usize,
    /// Pairs present in the reference only (serialised as `fn`).
    #[serde(rename = "fn")]
    pub fn_: usize,
    /// Reference positives (`tp + fn`).
    pub support: usize,
    /// Precision, recall and F1 (serialised inline).
    #[serde(flatten)]
    pub scores: Scores,
}

fn ser_name<S: serde::Serializer>(o: &Observation, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(o.name())
}

/// Corpus-level CheXpert-rule F1: per observation, and macro / micro over
/// all 14 and over the five of [`Observation::FIVE`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct F1Report {
    /// Number of candidate/reference pairs.
    pub n: usize,
    /// How uncertain labels counted.
    pub policy: UncertainPolicy,
    /// All 14, in CheXpert's order.
    pub per_observation: Vec<ObservationScore>,
    /// Macro average over all 14 observations.
    pub macro_14: Scores,
    /// Micro average over all 14 observations.
    pub micro_14: Scores,
    /// Macro average over [`Observation::FIVE`].
    pub macro_5: Scores,
    /// Micro average over [`Observation::FIVE`].
    pub micro_5: Scores,
}

impl F1Report {
    /// The scores of `o`.
    pub fn observation(&self, o: Observation) -> &ObservationScore {
        &self.per_observation[o.index()]
    }

    /// Macro average (mean of per-observation P, R and F1) over `obs`;
    /// all zero for an empty list.
    pub fn macro_over(&self, obs: &[Observation]) -> Scores {
        if obs.is_empty() {
            return Scores::default();
        }
        let n = obs.len() as f64;
        let sum = |f: fn(&Scores) -> f64| {
            obs.iter()
                .map(|&o| f(&self.observation(o).scores))
                .sum::<f64>()
                / n
        };
        Scores {
            precision: sum(|s| s.precision),
            recall: sum(|s| s.recall),
            f1: sum(|s| s.f1),
        }
    }

    /// Micro average (scores of the pooled counts) over `obs`.
    pub fn micro_over(&self, obs: &[Observation]) -> Scores {
        let (mut tp, mut fp, mut fn_) = (0, 0, 0);
        for &o in obs {
            let s = self.observation(o);
            tp += s.tp;
            fp += s.fp;
            fn_ += s.fn_;
        }
        Scores::from_counts(tp, fp, fn_)
    }
}

/// CheXpert-rule F1 of candidate labels `hyps` against references `refs`
/// (pairs by position). Errors when the lengths differ.
///
/// # Examples
/// ```
/// use sdr_clinical::{chexpert_f1, Label, Labels, Observation, UncertainPolicy};
///
/// let mut a = Labels::default();
/// a[Observation::Edema] = Some(Label::Uncertain);
/// let mut b = Labels::default();
/// b[Observation::Edema] = Some(Label::Positive);
/// let r = chexpert_f1(&[a], &[b], UncertainPolicy::Positive).unwrap();
/// assert_eq!(r.observation(Observation::Edema).scores.f1, 1.0);
/// let r = chexpert_f1(&[a], &[b], UncertainPolicy::Negative).unwrap();
/// assert_eq!(r.observation(Observation::Edema).scores.f1, 0.0);
/// ```
pub fn chexpert_f1(hyps: &[Labels], refs: &[Labels], policy: UncertainPolicy) -> Result<F1Report> {
    if hyps.len() != refs.len() {
        return Err(ClinicalError::LengthMismatch {
            hyps: hyps.len(),
            refs: refs.len(),
        });
    }
    let u = policy.as_positive();
    let per_observation = Observation::ALL
        .into_iter()
        .map(|o| {
            let (mut tp, mut fp, mut fn_) = (0, 0, 0);
            for (h, r) in hyps.iter().zip(refs) {
                match (h.is_positive(o, u), r.is_positive(o, u)) {
                    (true, true) => tp += 1,
                    (true, false) => fp += 1,
                    (false, true) => fn_ += 1,
                    (false, false) => {}
                }
            }
            ObservationScore {
                observation: o,
                tp,
                fp,
                fn_,
                support: tp + fn_,
                scores: Scores::from_counts(tp, fp, fn_),
            }
        })
        .collect();
    let mut report = F1Report {
        n: hyps.len(),
        policy,
        per_observation,
        macro_14: Scores::default(),
        micro_14: Scores::default(),
        macro_5: Scores::default(),
        micro_5: Scores::default(),
    };
    report.macro_14 = report.macro_over(&Observation::ALL);
    report.micro_14 = report.micro_over(&Observation::ALL);
    report.macro_5 = report.macro_over(&Observation::FIVE);
    report.micro_5 = report.micro_over(&Observation::FIVE);
    Ok(report)
}

/// Example-level F1 of one candidate/reference pair: F1 between the sets of
/// present observations over all 14, `2|H∩R| / (|H| + |R|)`, and 1.0 when
/// both sets are empty.
///
/// # Examples
/// ```
/// use sdr_clinical::{example_f1, Labeler, UncertainPolicy};
///
/// let l = Labeler::default();
/// let hyp = l.label("Cardiomegaly. Small left pleural effusion.");
/// let reference = l.label("Cardiomegaly. No effusion.");
/// // {Cardiomegaly, Pleural Effusion} against {Cardiomegaly}.
/// assert!((example_f1(&hyp, &reference, UncertainPolicy::Positive) - 2.0 / 3.0).abs() < 1e-12);
/// ```
pub fn example_f1(hyp: &Labels, reference: &Labels, policy: UncertainPolicy) -> f64 {
    let u = policy.as_positive();
    let (mut both, mut h, mut r) = (0usize, 0usize, 0usize);
    for o in Observation::ALL {
        let (a, b) = (hyp.is_positive(o, u), reference.is_positive(o, u));
        both += usize::from(a && b);
        h += usize::from(a);
        r += usize::from(b);
    }
    if h + r == 0 {
        1.0
    } else {
        2.0 * both as f64 / (h + r) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observation::Label::*;
    use Observation::*;

    fn labels(pairs: &[(Observation, crate::Label)]) -> Labels {
        let mut l = Labels::default();
        for &(o, v) in pairs {
            l[o] = Some(v);
        }
        l
    }

    #[test]
    fn counts_macro_micro_and_zero_division() {
        let hyps = [
            labels(&[(Cardiomegaly, Positive), (Edema, Positive)]),
            labels(&[(Cardiomegaly, Negative), (Edema, Uncertain)]),
            labels(&[(NoFinding, Positive)]),
        ];
        let refs = [
            labels(&[(Cardiomegaly, Positive)]),
            labels(&[(Cardiomegaly, Positive), (Edema, Positive)]),
            labels(&[(NoFinding, Positive)]),
        ];
        let r = chexpert_f1(&hyps, &refs, UncertainPolicy::Positive).unwrap();
        let c = r.observation(Cardiomegaly);
        assert_eq!((c.tp, c.fp, c.fn_, c.support), (1, 0, 1, 2));
        assert!((c.scores.f1 - 2.0 / 3.0).abs() < 1e-12);
        let e = r.observation(Edema);
        assert_eq!((e.tp, e.fp, e.fn_), (1, 1, 0));
        assert!((e.scores.precision - 0.5).abs() < 1e-12 && e.scores.recall == 1.0);
        assert_eq!(r.observation(NoFinding).scores.f1, 1.0);
        // Eleven observations without any positive score 0 and count.
        assert_eq!(r.observation(Fracture).scores, Scores::default());
        let expected_macro = (2.0 / 3.0 + 2.0 / 3.0 + 1.0) / 14.0;
        assert!((r.macro_14.f1 - expected_macro).abs() < 1e-12);
        // Micro: tp 3, fp 1, fn 1.
        assert!((r.micro_14.f1 - 6.0 / 8.0).abs() < 1e-12);
        // Five: Atelectasis, Cardiomegaly, Consolidation, Edema, Pleural Effusion.
        assert!((r.macro_5.f1 - (2.0 / 3.0 + 2.0 / 3.0) / 5.0).abs() < 1e-12);
        assert!((r.micro_5.f1 - 4.0 / 6.0).abs() < 1e-12);

        // Uncertain as absent: the second Edema pair becomes a miss.
        let r = chexpert_f1(&hyps, &refs, UncertainPolicy::Negative).unwrap();
        let e = r.observation(Edema);
        assert_eq!((e.tp, e.fp, e.fn_), (0, 1, 1));
    }

    #[test]
    fn length_mismatch_is_an_error() {
        let e = chexpert_f1(&[Labels::default()], &[], UncertainPolicy::Positive).unwrap_err();
        assert_eq!(
            e.to_string(),
            "1 candidate label sets but 0 reference label sets"
        );
    }

    #[test]
    fn example_f1_sets() {
        let p = UncertainPolicy::Positive;
        let empty = Labels::default();
        assert_eq!(example_f1(&empty, &empty, p), 1.0);
        let a = labels(&[(Edema, Uncertain), (Pneumothorax, Negative)]);
        assert_eq!(example_f1(&a, &empty, p), 0.0);
        assert_eq!(example_f1(&a, &empty, UncertainPolicy::Negative), 1.0);
        let b = labels(&[(Edema, Positive), (Fracture, Positive)]);
        assert!((example_f1(&a, &b, p) - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(example_f1(&a, &b, p), example_f1(&b, &a, p));
    }

    #[test]
    fn report_serialises_with_names() {
        let r = chexpert_f1(
            &[Labels::default()],
            &[Labels::default()],
            UncertainPolicy::Positive,
        )
        .unwrap();
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["per_observation"][10]["observation"], "Pleural Effusion");
        assert_eq!(v["per_observation"][10]["fn"], 0);
        assert_eq!(v["policy"], "positive");
        assert!(v["macro_14"]["f1"].is_number());
    }
}
