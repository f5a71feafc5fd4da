//! Selection evaluation (SPEC §5, §7): every policy's score over the studies
//! next to the two random baselines, as the tables `sdr select-eval` writes,
//! overall and per stratum (paper appendix, "Stratified results").
//!
//! Two kinds of column:
//! - per-candidate metrics (BLEU, ROUGE, METEOR, chrF++, BERTScore): a
//!   policy scores the mean over studies of its picks' values; the random
//!   baselines average the seeded uniform picks
//!   ([`crate::baseline::random_baseline_seeded`]). Each candidate is scored
//!   once and the value reused by every policy and seed;
//! - CheXpert-rule F1 ([`crate::chexpert`]): corpus-level over the picked
//!   set, per policy, and per seed then averaged for the baselines.

use sdr_clinical::{Labels, UncertainPolicy};

use rayon::prelude::*;

use crate::baseline::{
    improvement_percent, policy_mean, random_baseline_seeded, random_choices, Pool, Study,
};
use crate::bootstrap::{interval_of, resample_indices, Interval, RESAMPLES, SEED};
use crate::chexpert::{f1_of_choices, random_f1, LabelledStudy, CHEXPERT_COLUMNS};
use crate::error::{EvalError, Result};
use crate::table::Table;

/// One study of one section: per-candidate values and labels, and each
/// policy's pick.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectionStudy {
    /// Whether each candidate parses into both sections.
    pub well_formed: Vec<bool>,
    /// `values[metric][candidate]` for the per-candidate metrics.
    pub values: Vec<Vec<f64>>,
    /// CheXpert-rule labels of each candidate's section.
    pub labels: Vec<Labels>,
    /// CheXpert-rule labels of the reference section.
    pub reference_labels: Labels,
    /// `chosen[policy]`: the candidate each policy picked.
    pub chosen: Vec<usize>,
}

/// What is evaluated, and how.
#[derive(Debug, Clone)]
pub struct SelectionConfig {
    /// Names of the per-candidate metrics, in [`SelectionStudy::values`] order.
    pub metrics: Vec<String>,
    /// Policy keys, in [`SelectionStudy::chosen`] order.
    pub policies: Vec<String>,
    /// Seeds averaged by each random baseline (seeds `0..seeds`).
    pub seeds: usize,
    /// How uncertain CheXpert labels count.
    pub uncertain: UncertainPolicy,
}

/// The scores of one group of studies (all, or one stratum).
#[derive(Debug, Clone, PartialEq)]
pub struct SelectionSummary {
    /// The metric columns followed by [`CHEXPERT_COLUMNS`].
    pub columns: Vec<String>,
    /// Studies in the group.
    pub n_studies: usize,
    /// Studies with at least one well-formed candidate.
    pub n_well_formed: usize,
    /// Random baselines per column: `[Pool::All, Pool::WellFormed]`.
    pub random: [Vec<f64>; 2],
    /// `policies[p][column]`.
    pub policies: Vec<Vec<f64>>,
    /// 95 % paired-bootstrap interval of each improvement over random
    /// ([`crate::bootstrap`]), `intervals[pool][p][column]`, pools as in
    /// [`SelectionSummary::random`]; `None` where a resample's baseline is 0.
    pub intervals: [Vec<Vec<Option<Interval>>>; 2],
}

/// Seeds of the random CheXpert-rule F1 baseline recomputed on each bootstrap
/// resample (the first of the point estimate's seeds): corpus-level F1 has no
/// per-study expectation, and 1,000 resamples x 1,000 seeds x every policy
/// would cost minutes per table.
pub const BOOTSTRAP_F1_SEEDS: usize = 50;

/// Mean of `values[i]` over the studies `idx`.
fn mean_at(values: &[f64], idx: &[usize]) -> f64 {
    idx.iter().map(|&i| values[i]).sum::<f64>() / idx.len() as f64
}

/// The paired-bootstrap intervals of every policy's improvement over the
/// `pool` baseline, `[policy][column]`. Per-candidate metrics compare the
/// policy's picks with each study's exact random expectation (the mean over
/// the pool); CheXpert-rule F1 is recomputed on each resample, for the policy
/// and for [`BOOTSTRAP_F1_SEEDS`] seeded random picks.
fn improvement_intervals(
    studies: &[&SelectionStudy],
    config: &SelectionConfig,
    pool: Pool,
    labelled: &[LabelledStudy],
    flags: &[&[bool]],
) -> Result<Vec<Vec<Option<Interval>>>> {
    let n = studies.len();
    let draws = resample_indices(n, RESAMPLES, SEED);
    let n_m = config.metrics.len();
    let mut out = vec![vec![None; n_m + CHEXPERT_COLUMNS.len()]; config.policies.len()];
    for m in 0..n_m {
        let expect: Vec<f64> = studies
            .iter()
            .map(|s| {
                let idx: Vec<usize> = (0..s.well_formed.len())
                    .filter(|&c| pool == Pool::All || s.well_formed[c])
                    .collect();
                // No well-formed candidate: the pool falls back to all of them.
                let idx = if idx.is_empty() {
                    (0..s.well_formed.len()).collect()
                } else {
                    idx
                };
                idx.iter().map(|&c| s.values[m][c]).sum::<f64>() / idx.len() as f64
            })
            .collect();
        let base: Vec<f64> = draws.par_iter().map(|d| mean_at(&expect, d)).collect();
        for (p, row) in out.iter_mut().enumerate() {
            let picked: Vec<f64> = studies.iter().map(|s| s.values[m][s.chosen[p]]).collect();
            let stats: Vec<(f64, f64)> = draws
                .par_iter()
                .zip(&base)
                .map(|(d, &b)| (mean_at(&picked, d), b))
                .collect();
            row[m] = interval_of(&stats)?;
        }
    }
    let seeds = config.seeds.clamp(1, BOOTSTRAP_F1_SEEDS);
    let seed_picks: Vec<Vec<usize>> = (0..seeds as u64)
        .map(|s| random_choices(flags, pool, s))
        .collect::<Result<_>>()?;
    let f1_at = |d: &[usize], choices: &dyn Fn(usize) -> usize| -> Result<[f64; 4]> {
        let sub: Vec<LabelledStudy> = d.iter().map(|&i| labelled[i]).collect();
        let ch: Vec<usize> = d.iter().map(|&i| choices(i)).collect();
        f1_of_choices(&sub, &ch, config.uncertain)
    };
    let base: Vec<[f64; 4]> = draws
        .par_iter()
        .map(|d| {
            let mut sum = [0.0; 4];
            for picks in &seed_picks {
                let f = f1_at(d, &|i| picks[i])?;
                for (a, b) in sum.iter_mut().zip(f) {
                    *a += b;
                }
            }
            Ok(sum.map(|v| v / seeds as f64))
        })
        .collect::<Result<_>>()?;
    for (p, row) in out.iter_mut().enumerate() {
        let pol: Vec<[f64; 4]> = draws
            .par_iter()
            .map(|d| f1_at(d, &|i| studies[i].chosen[p]))
            .collect::<Result<_>>()?;
        for k in 0..CHEXPERT_COLUMNS.len() {
            let stats: Vec<(f64, f64)> = pol.iter().zip(&base).map(|(a, b)| (a[k], b[k])).collect();
            row[n_m + k] = interval_of(&stats)?;
        }
    }
    Ok(out)
}

fn pool_index(pool: Pool) -> usize {
    match pool {
        Pool::All => 0,
        Pool::WellFormed => 1,
    }
}

/// Scores every policy and both random baselines over `studies`.
///
/// # Errors
/// [`EvalError::Empty`] for no study, [`EvalError::LengthMismatch`] when a
/// study's values, labels or picks do not match `config`, and the errors of
/// the baseline functions (non-finite values, out-of-range picks).
pub fn summarize(
    studies: &[&SelectionStudy],
    config: &SelectionConfig,
) -> Result<SelectionSummary> {
    if studies.is_empty() {
        return Err(EvalError::Empty { what: "studies" });
    }
    for s in studies {
        let k = s.well_formed.len();
        let checks = [
            ("metric rows", config.metrics.len(), s.values.len()),
            ("candidate labels", k, s.labels.len()),
            ("policy picks", config.policies.len(), s.chosen.len()),
        ];
        for (what, expected, got) in checks {
            if expected != got {
                return Err(EvalError::LengthMismatch {
                    what,
                    expected,
                    got,
                });
            }
        }
    }
    let mut columns = config.metrics.clone();
    columns.extend(CHEXPERT_COLUMNS.iter().map(|s| s.to_string()));
    let n_cols = columns.len();
    let n_m = config.metrics.len();
    let mut random = [vec![0.0; n_cols], vec![0.0; n_cols]];
    let mut policies = vec![vec![0.0; n_cols]; config.policies.len()];
    let picks: Vec<Vec<usize>> = (0..config.policies.len())
        .map(|p| studies.iter().map(|s| s.chosen[p]).collect())
        .collect();
    for m in 0..n_m {
        let st: Vec<Study> = studies
            .iter()
            .map(|s| Study {
                values: &s.values[m],
                well_formed: &s.well_formed,
            })
            .collect();
        for pool in [Pool::All, Pool::WellFormed] {
            random[pool_index(pool)][m] = random_baseline_seeded(&st, pool, config.seeds, 0)?.mean;
        }
        for (row, choices) in policies.iter_mut().zip(&picks) {
            row[m] = policy_mean(&st, choices)?;
        }
    }
    let labelled: Vec<LabelledStudy> = studies
        .iter()
        .map(|s| LabelledStudy {
            candidates: &s.labels,
            reference: s.reference_labels,
        })
        .collect();
    let flags: Vec<&[bool]> = studies.iter().map(|s| s.well_formed.as_slice()).collect();
    for pool in [Pool::All, Pool::WellFormed] {
        let f = random_f1(&labelled, &flags, pool, config.seeds, 0, config.uncertain)?;
        random[pool_index(pool)][n_m..].copy_from_slice(&f);
    }
    for (row, choices) in policies.iter_mut().zip(&picks) {
        row[n_m..].copy_from_slice(&f1_of_choices(&labelled, choices, config.uncertain)?);
    }
    let intervals = [
        improvement_intervals(studies, config, Pool::All, &labelled, &flags)?,
        improvement_intervals(studies, config, Pool::WellFormed, &labelled, &flags)?,
    ];
    Ok(SelectionSummary {
        columns,
        n_studies: studies.len(),
        n_well_formed: studies
            .iter()
            .filter(|s| s.well_formed.iter().any(|&w| w))
            .count(),
        random,
        policies,
        intervals,
    })
}

impl SelectionSummary {
    /// Appends `other`'s F1 columns (its last four) under `names`: the same studies and
    /// picks summarised with another labeler's labels (the judge's, SPEC §8a).
    ///
    /// # Errors
    /// [`EvalError::LengthMismatch`] when `other` does not summarise the same studies and
    /// policies.
    pub fn append_f1_columns(&mut self, other: &SelectionSummary, names: &[&str; 4]) -> Result<()> {
        if other.n_studies != self.n_studies || other.policies.len() != self.policies.len() {
            return Err(EvalError::LengthMismatch {
                what: "summaries to join",
                expected: self.policies.len(),
                got: other.policies.len(),
            });
        }
        let tail = |v: &[f64]| v[v.len() - 4..].to_vec();
        self.columns.extend(names.iter().map(|s| s.to_string()));
        for (mine, theirs) in self.random.iter_mut().zip(&other.random) {
            mine.extend(tail(theirs));
        }
        for (mine, theirs) in self.policies.iter_mut().zip(&other.policies) {
            mine.extend(tail(theirs));
        }
        for (mine, theirs) in self.intervals.iter_mut().zip(&other.intervals) {
            for (m, t) in mine.iter_mut().zip(theirs) {
                m.extend_from_slice(&t[t.len() - 4..]);
            }
        }
        Ok(())
    }
}

/// Random-baseline row labels, in `[Pool::All, Pool::WellFormed]` order.
pub const RANDOM_ROWS: [&str; 2] = ["random (all candidates)", "random (well-formed only)"];

impl SelectionSummary {
    /// Improvement over the `pool` baseline in %, `[policy][column]`; `None`
    /// where the baseline is 0.
    pub fn improvement(&self, pool: Pool) -> Vec<Vec<Option<f64>>> {
        let base = &self.random[pool_index(pool)];
        self.policies
            .iter()
            .map(|row| {
                row.iter()
                    .zip(base)
                    .map(|(&p, &r)| improvement_percent(p, r).ok())
                    .collect()
            })
            .collect()
    }

    /// The values table: both random baselines, then one row per policy.
    ///
    /// # Errors
    /// [`EvalError::LengthMismatch`] when `policies` does not match.
    pub fn values_table(&self, title: String, policies: &[String]) -> Result<Table> {
        self.check_policies(policies)?;
        let mut t = Table::new(title, "policy", self.columns.clone());
        for (label, row) in RANDOM_ROWS.iter().zip(&self.random) {
            t.push_row(*label, row.iter().map(|&v| Some(v)).collect())?;
        }
        for (k, row) in policies.iter().zip(&self.policies) {
            t.push_row(k.clone(), row.iter().map(|&v| Some(v)).collect())?;
        }
        Ok(t)
    }

    /// The improvement-over-random table (in %, 2 decimals) for `pool`.
    ///
    /// # Errors
    /// [`EvalError::LengthMismatch`] when `policies` does not match.
    pub fn improvement_table(
        &self,
        title: String,
        policies: &[String],
        pool: Pool,
    ) -> Result<Table> {
        self.check_policies(policies)?;
        let mut t = Table::new(title, "policy", self.columns.clone());
        t.decimals = 2;
        for (p, (k, row)) in policies.iter().zip(self.improvement(pool)).enumerate() {
            // An interval only beside a change that is reported.
            let ci = row
                .iter()
                .zip(&self.intervals[pool_index(pool)][p])
                .map(|(v, ci)| v.and(*ci))
                .collect();
            t.push_row(k.clone(), row)?;
            t.set_intervals(p, ci)?;
        }
        Ok(t)
    }

    fn check_policies(&self, policies: &[String]) -> Result<()> {
        if policies.len() != self.policies.len() {
            return Err(EvalError::LengthMismatch {
                what: "policy keys",
                expected: self.policies.len(),
                got: policies.len(),
            });
        }
        Ok(())
    }
}

/// The headline stratified table (paper, "Stratified results"): the policy
/// with the largest mean improvement over the `pool` baseline across every
/// (group x headline column) cell, its scores, the baseline's, and the
/// improvement, with one block of `headline` columns per group.
///
/// # Errors
/// [`EvalError::Empty`] for no group, [`EvalError::BadParameter`] for a
/// headline column the summaries lack, [`EvalError::LengthMismatch`] when
/// `policies` does not match.
pub fn strata_table(
    title: String,
    groups: &[(String, &SelectionSummary)],
    policies: &[String],
    headline: &[&str],
    pool: Pool,
) -> Result<Table> {
    let first = groups.first().ok_or(EvalError::Empty {
        what: "strata groups",
    })?;
    first.1.check_policies(policies)?;
    let mut cols = Vec::new();
    for (g, s) in groups {
        s.check_policies(policies)?;
        for h in headline {
            let i =
                s.columns
                    .iter()
                    .position(|c| c == h)
                    .ok_or_else(|| EvalError::BadParameter {
                        name: "headline column",
                        value: h.to_string(),
                        message: "not a column of the summaries",
                    })?;
            cols.push((g.clone(), *s, i));
        }
    }
    let improve: Vec<Vec<Vec<Option<f64>>>> =
        groups.iter().map(|(_, s)| s.improvement(pool)).collect();
    let cell = |p: usize, c: usize| {
        let g = c / headline.len();
        improve[g][p][cols[c].2]
    };
    let mean_improvement = |p: usize| {
        let v: Vec<f64> = (0..cols.len()).filter_map(|c| cell(p, c)).collect();
        if v.is_empty() {
            f64::NEG_INFINITY
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    // Ties go to the first policy in file order.
    let best = (0..policies.len())
        .map(|p| (p, mean_improvement(p)))
        .fold(None, |acc: Option<(usize, f64)>, (p, v)| match acc {
            Some((_, bv)) if bv >= v => acc,
            _ => Some((p, v)),
        })
        .map(|(p, _)| p)
        .ok_or(EvalError::Empty { what: "policies" })?;
    let columns = cols
        .iter()
        .map(|(g, s, i)| format!("{g}: {}", s.columns[*i]))
        .collect();
    let mut t = Table::new(title, "row", columns);
    t.push_row(
        format!("best policy: {}", policies[best]),
        cols.iter()
            .map(|(_, s, i)| Some(s.policies[best][*i]))
            .collect(),
    )?;
    t.push_row(
        RANDOM_ROWS[pool_index(pool)],
        cols.iter()
            .map(|(_, s, i)| Some(s.random[pool_index(pool)][*i]))
            .collect(),
    )?;
    t.push_row(
        "improvement over random, %",
        (0..cols.len()).map(|c| cell(best, c)).collect(),
    )?;
    t.set_intervals(
        2,
        cols.iter()
            .enumerate()
            .map(|(c, (_, s, i))| cell(best, c).and(s.intervals[pool_index(pool)][best][*i]))
            .collect(),
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sdr_clinical::{Label, Observation};

    fn cardio() -> Labels {
        let mut l = Labels::default();
        l[Observation::Cardiomegaly] = Some(Label::Positive);
        l
    }

    /// Two candidates per study: 0 is right (value 1, right labels), 1 is
    /// wrong (value 0, no labels). Policy "good" picks 0, "bad" picks 1.
    fn study(wf1: bool) -> SelectionStudy {
        SelectionStudy {
            well_formed: vec![true, wf1],
            values: vec![vec![1.0, 0.0]],
            labels: vec![cardio(), Labels::default()],
            reference_labels: cardio(),
            chosen: vec![0, 1],
        }
    }

    fn config() -> SelectionConfig {
        SelectionConfig {
            metrics: vec!["ROUGE-L".into()],
            policies: vec!["good".into(), "bad".into()],
            seeds: 400,
            uncertain: UncertainPolicy::Positive,
        }
    }

    #[test]
    fn policies_and_baselines() {
        let studies = [study(true), study(false)];
        let refs: Vec<&SelectionStudy> = studies.iter().collect();
        let s = summarize(&refs, &config()).unwrap();
        assert_eq!(s.columns.len(), 5);
        assert_eq!(s.columns[1], "CheXpert-rule F1 macro-14");
        assert_eq!(s.policies[0], vec![1.0, 1.0 / 14.0, 1.0, 1.0 / 5.0, 1.0]);
        assert_eq!(s.policies[1], vec![0.0; 5]);
        // All: a fair coin per study; well-formed: study 2 always picks 0.
        assert!((s.random[0][0] - 0.5).abs() < 0.05, "{:?}", s.random);
        assert!((s.random[1][0] - 0.75).abs() < 0.05, "{:?}", s.random);
        assert!(s.random[1][2] > s.random[0][2]);
        assert_eq!(s.n_well_formed, 2);
        let imp = s.improvement(Pool::All);
        assert!((imp[0][0].unwrap() - 100.0).abs() < 20.0);
        assert!((imp[1][0].unwrap() + 100.0).abs() < 1e-9);
        let keys = config().policies;
        let t = s.values_table("v".into(), &keys).unwrap();
        assert_eq!(t.rows.len(), 4);
        assert_eq!(t.rows[0].label, RANDOM_ROWS[0]);
        assert!(s.values_table("v".into(), &keys[..1]).is_err());
        let t = s
            .improvement_table("i".into(), &keys, Pool::WellFormed)
            .unwrap();
        assert_eq!(t.rows.len(), 2);
        assert_eq!(t.decimals, 2);
    }

    #[test]
    fn strata_table_picks_the_best_policy() {
        let studies = [study(true), study(true), study(false)];
        let all: Vec<&SelectionStudy> = studies.iter().collect();
        let a = summarize(&all, &config()).unwrap();
        let b = summarize(&all[2..], &config()).unwrap();
        let groups = [("all".to_string(), &a), ("abnormal".to_string(), &b)];
        let keys = config().policies;
        let heads = ["ROUGE-L", "CheXpert-rule F1 micro-14"];
        let t = strata_table("s".into(), &groups, &keys, &heads, Pool::All).unwrap();
        assert_eq!(t.rows[0].label, "best policy: good");
        assert_eq!(t.columns[3], "abnormal: CheXpert-rule F1 micro-14");
        assert_eq!(t.rows[0].cells, vec![Some(1.0); 4]);
        assert_eq!(t.rows[1].label, RANDOM_ROWS[0]);
        assert!(t.rows[2].cells.iter().all(|c| c.unwrap() > 0.0));
        assert!(strata_table("s".into(), &groups, &keys, &["nope"], Pool::All).is_err());
        assert!(strata_table("s".into(), &[], &keys, &heads, Pool::All).is_err());
    }

    #[test]
    fn shape_errors() {
        let mut s = study(true);
        s.chosen.pop();
        assert!(summarize(&[&s], &config()).is_err());
        let mut s = study(true);
        s.labels.pop();
        assert!(summarize(&[&s], &config()).is_err());
        assert!(summarize(&[], &config()).is_err());
        let mut s = study(true);
        s.chosen[0] = 5;
        assert!(summarize(&[&s], &config()).is_err());
    }
}
