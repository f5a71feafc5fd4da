//! CheXpert-rule F1 columns for selection tables (SPEC §8): corpus-level F1
//! of the rule-based labels (`sdr-clinical`) of the picked candidates against
//! the reference labels, and its seeded random baseline.
//!
//! Corpus-level F1 is not a mean of per-candidate values, so a random
//! baseline cannot average per-candidate scores: for each seed the labels of
//! the picks of [`random_choices`] are looked up (the caller labels every
//! candidate once), F1 is computed over the picked set, and the four values
//! are averaged over seeds. The same seeds give the same picks as
//! [`crate::baseline::random_baseline_seeded`], so every column of a table
//! sees the same random draws.
//!
//! Uncertain labels count as present by default
//! ([`UncertainPolicy::Positive`], the convention of the common CheXbert-F1
//! scripts). The labels come from rules, not from CheXbert, so the columns
//! are named "CheXpert-rule F1".

use sdr_clinical::{chexpert_f1, F1Report, Labels, UncertainPolicy};

use crate::baseline::{random_choices, Pool};
use crate::error::{EvalError, Result};

/// Column names of [`f1_columns`], in order.
pub const CHEXPERT_COLUMNS: [&str; 4] = [
    "CheXpert-rule F1 macro-14",
    "CheXpert-rule F1 micro-14",
    "CheXpert-rule F1 macro-5",
    "CheXpert-rule F1 micro-5",
];

/// Column names of the same F1 with the judge's labels (SPEC §8a), in [`f1_columns`] order.
pub const JUDGE_COLUMNS: [&str; 4] = [
    "judge F1 macro-14",
    "judge F1 micro-14",
    "judge F1 macro-5",
    "judge F1 micro-5",
];

/// The note that tables with [`JUDGE_COLUMNS`] print.
pub const JUDGE_NOTE: &str = "judge F1: the same corpus-level F1 with labels from the judge \
    (all-MiniLM-L6-v2 + LoRA trained on IU X-ray's human MeSH coding, not on the rules; SPEC \
    §8a), present or absent per observation; docs/results/judge.md gives its agreement with \
    the human coding.";

/// The note that tables with [`CHEXPERT_COLUMNS`] print.
pub fn note(policy: UncertainPolicy) -> String {
    format!(
        "CheXpert-rule F1: corpus-level F1 (not a per-study mean) of rule-based CheXpert labels \
         (sdr-clinical, no model weights; not CheXbert) of the picked reports against the \
         references, macro and micro over the 14 observations and over the 5 (Atelectasis, \
         Cardiomegaly, Consolidation, Edema, Pleural Effusion); uncertain labels count as {} \
         ({}).",
        match policy {
            UncertainPolicy::Positive => "present",
            UncertainPolicy::Negative => "absent",
        },
        match policy {
            UncertainPolicy::Positive =>
                "the CheXbert-F1 scripts' convention; --uncertain-negative counts them as absent",
            UncertainPolicy::Negative => "--uncertain-negative",
        }
    )
}

/// `[macro-14, micro-14, macro-5, micro-5]` F1 of a report.
pub fn f1_columns(r: &F1Report) -> [f64; 4] {
    [r.macro_14.f1, r.micro_14.f1, r.macro_5.f1, r.micro_5.f1]
}

/// One study's labels: one per candidate, and the reference's.
#[derive(Debug, Clone, Copy)]
pub struct LabelledStudy<'a> {
    pub candidates: &'a [Labels],
    pub reference: Labels,
}

/// [`f1_columns`] of the candidates `choices` picks (`choices[i]` indexes
/// the candidates of `studies[i]`).
///
/// # Errors
/// [`EvalError::Empty`] for no study, [`EvalError::LengthMismatch`] when
/// `choices` does not match, [`EvalError::BadParameter`] for an
/// out-of-range choice.
///
/// ```
/// use sdr_clinical::Labeler;
/// use sdr_eval::chexpert::{f1_of_choices, LabelledStudy};
/// let l = Labeler::default();
/// let cands = [l.label("Cardiomegaly."), l.label("No acute disease.")];
/// let s = [LabelledStudy { candidates: &cands, reference: l.label("Cardiomegaly.") }];
/// let f = f1_of_choices(&s, &[0], Default::default()).unwrap();
/// assert_eq!(f[0], 1.0 / 14.0); // one observation matched, 13 with no positives score 0
/// ```
pub fn f1_of_choices(
    studies: &[LabelledStudy],
    choices: &[usize],
    policy: UncertainPolicy,
) -> Result<[f64; 4]> {
    if studies.is_empty() {
        return Err(EvalError::Empty { what: "studies" });
    }
    if choices.len() != studies.len() {
        return Err(EvalError::LengthMismatch {
            what: "choices",
            expected: studies.len(),
            got: choices.len(),
        });
    }
    let mut hyps = Vec::with_capacity(studies.len());
    for (s, &c) in studies.iter().zip(choices) {
        hyps.push(*s.candidates.get(c).ok_or_else(|| EvalError::BadParameter {
            name: "choice",
            value: c.to_string(),
            message: "candidate index out of range",
        })?);
    }
    let refs: Vec<Labels> = studies.iter().map(|s| s.reference).collect();
    let r = chexpert_f1(&hyps, &refs, policy).map_err(|e| EvalError::BadParameter {
        name: "labels",
        value: e.to_string(),
        message: "CheXpert-rule F1 failed",
    })?;
    Ok(f1_columns(&r))
}

/// Seeded random baseline of the four F1 columns: mean over seeds
/// `base_seed .. base_seed + n_seeds` of [`f1_of_choices`] on that seed's
/// uniform picks from `pool` (`well_formed[i]` are study `i`'s flags).
///
/// # Errors
/// As [`f1_of_choices`] and [`random_choices`]; [`EvalError::BadParameter`]
/// when `n_seeds` is 0; [`EvalError::LengthMismatch`] when the flags do not
/// match the studies.
pub fn random_f1(
    studies: &[LabelledStudy],
    well_formed: &[&[bool]],
    pool: Pool,
    n_seeds: usize,
    base_seed: u64,
    policy: UncertainPolicy,
) -> Result<[f64; 4]> {
    if n_seeds == 0 {
        return Err(EvalError::BadParameter {
            name: "n_seeds",
            value: "0".into(),
            message: "at least one seed is needed",
        });
    }
    if well_formed.len() != studies.len() {
        return Err(EvalError::LengthMismatch {
            what: "well_formed flags",
            expected: studies.len(),
            got: well_formed.len(),
        });
    }
    for (s, f) in studies.iter().zip(well_formed) {
        if s.candidates.len() != f.len() {
            return Err(EvalError::LengthMismatch {
                what: "candidate labels",
                expected: f.len(),
                got: s.candidates.len(),
            });
        }
    }
    let mut sum = [0.0; 4];
    for s in 0..n_seeds as u64 {
        let choices = random_choices(well_formed, pool, base_seed.wrapping_add(s))?;
        let f = f1_of_choices(studies, &choices, policy)?;
        for (a, b) in sum.iter_mut().zip(f) {
            *a += b;
        }
    }
    Ok(sum.map(|v| v / n_seeds as f64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sdr_clinical::{Label, Observation};

    fn labels(obs: &[(Observation, Label)]) -> Labels {
        let mut l = Labels::default();
        for &(o, v) in obs {
            l[o] = Some(v);
        }
        l
    }

    #[test]
    fn uncertain_policy_changes_the_score() {
        let c = [labels(&[(Observation::Edema, Label::Uncertain)])];
        let s = [LabelledStudy {
            candidates: &c,
            reference: labels(&[(Observation::Edema, Label::Positive)]),
        }];
        let pos = f1_of_choices(&s, &[0], UncertainPolicy::Positive).unwrap();
        let neg = f1_of_choices(&s, &[0], UncertainPolicy::Negative).unwrap();
        // Edema is one of the five.
        assert_eq!(pos, [1.0 / 14.0, 1.0, 1.0 / 5.0, 1.0]);
        assert_eq!(neg, [0.0; 4]);
    }

    #[test]
    fn random_is_corpus_level_per_seed_then_mean() {
        // Two studies, two candidates each: one right, one empty. Per-seed
        // micro-14 F1 is 2tp/(2tp+fp+fn) over the picked pair, so the mean
        // over seeds is not the mean of per-candidate scores.
        let right = labels(&[(Observation::Cardiomegaly, Label::Positive)]);
        let c = [right, Labels::default()];
        let s = [
            LabelledStudy {
                candidates: &c,
                reference: right,
            },
            LabelledStudy {
                candidates: &c,
                reference: right,
            },
        ];
        let flags = [true, true];
        let wf: Vec<&[bool]> = vec![&flags, &flags];
        let r = random_f1(&s, &wf, Pool::All, 4000, 0, UncertainPolicy::Positive).unwrap();
        // Picks: both right (1/4) -> 1; one right (1/2) -> 2/3; none (1/4) -> 0.
        let expect = 0.25 + 0.5 * 2.0 / 3.0;
        assert!((r[1] - expect).abs() < 0.02, "{r:?}");
        assert!((r[1] - 0.5).abs() > 0.05);
        // The well-formed pool never picks the malformed (empty) candidate.
        let half = [true, false];
        let wf: Vec<&[bool]> = vec![&half, &half];
        let r = random_f1(&s, &wf, Pool::WellFormed, 10, 0, UncertainPolicy::Positive).unwrap();
        assert_eq!(r[1], 1.0);
    }

    #[test]
    fn errors() {
        let c = [Labels::default()];
        let s = [LabelledStudy {
            candidates: &c,
            reference: Labels::default(),
        }];
        assert!(f1_of_choices(&[], &[], UncertainPolicy::Positive).is_err());
        assert!(f1_of_choices(&s, &[1], UncertainPolicy::Positive).is_err());
        assert!(f1_of_choices(&s, &[0, 0], UncertainPolicy::Positive).is_err());
        let f = [true];
        let wf: Vec<&[bool]> = vec![&f];
        assert!(random_f1(&s, &wf, Pool::All, 0, 0, UncertainPolicy::Positive).is_err());
        let f2 = [true, true];
        let wf2: Vec<&[bool]> = vec![&f2];
        assert!(random_f1(&s, &wf2, Pool::All, 1, 0, UncertainPolicy::Positive).is_err());
    }
}
