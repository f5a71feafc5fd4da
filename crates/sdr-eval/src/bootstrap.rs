//! Paired bootstrap over studies: a 95 % interval for every relative change
//! the result tables report ("improvement over random", "against SFT",
//! "against standard").
//!
//! Both sides of a comparison are scored on the same studies, so a resample
//! draws `n` study indices with replacement and evaluates *both* sides on
//! them (paired): the study-to-study spread common to both cancels. For a
//! resample `I` the relative change is
//!
//! $$ \Delta(I) = 100 \, \frac{a(I) - b(I)}{b(I)} $$
//!
//! with `a` the policy's and `b` the baseline's statistic on the studies of
//! `I` (a mean of per-study values, or a corpus-level score such as
//! CheXpert-rule F1 recomputed on the resampled set). The interval is the
//! percentile interval (Efron & Tibshirani, "An Introduction to the
//! Bootstrap", 1993, §13.3): the 2.5th and 97.5th percentiles of the
//! [`RESAMPLES`] values of `Δ`, with linear interpolation between order
//! statistics (numpy's default). The draws come from SplitMix64 seeded with
//! [`SEED`], so a table is reproduced exactly.
//!
//! A resample whose baseline is 0 has no relative change; when any resample
//! has none the interval is not reported (`None`), as the table reports no
//! change where the full baseline is 0.

use rayon::prelude::*;

use crate::baseline::SplitMix64;
use crate::error::{EvalError, Result};

/// Resamples per interval.
pub const RESAMPLES: usize = 1000;
/// Seed of the resampling generator.
pub const SEED: u64 = 43;
/// Coverage of the interval.
pub const LEVEL: f64 = 0.95;

/// A two-sided percentile interval of a relative change, in %.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

impl Interval {
    /// Whether 0 lies outside the interval: the change is unlikely to be
    /// resampling noise at the 5 % level.
    pub fn excludes_zero(&self) -> bool {
        self.low > 0.0 || self.high < 0.0
    }
}

/// The `resamples` index sets of a paired bootstrap over `n` studies: each
/// `n` indices drawn uniformly with replacement, from SplitMix64(`seed`).
pub fn resample_indices(n: usize, resamples: usize, seed: u64) -> Vec<Vec<usize>> {
    let mut rng = SplitMix64::new(seed);
    (0..resamples)
        .map(|_| (0..n).map(|_| rng.below(n as u64) as usize).collect())
        .collect()
}

/// Percentile `q` in `[0, 1]` of sorted values, interpolating linearly
/// between order statistics (numpy `percentile`, method "linear").
fn percentile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// The [`LEVEL`] interval of `100 (a - b) / b` over the resamples of `n`
/// studies, where `stat(I)` returns `(a(I), b(I))` for the studies listed in
/// `I` (repeats included). `None` when some resample's baseline is 0.
///
/// # Errors
/// [`EvalError::Empty`] for no study or no resample;
/// [`EvalError::NonFinite`] when a statistic is NaN or infinite.
///
/// ```
/// use sdr_eval::bootstrap::relative_change_interval;
/// // The policy is 10 % above the baseline on every study: every resample agrees.
/// let b = [1.0, 2.0, 3.0, 4.0];
/// let mean = |v: &[f64], i: &[usize]| i.iter().map(|&k| v[k]).sum::<f64>() / i.len() as f64;
/// let ci = relative_change_interval(4, 1000, 43, |i| (1.1 * mean(&b, i), mean(&b, i)))
///     .unwrap().unwrap();
/// assert!((ci.low - 10.0).abs() < 1e-9 && (ci.high - 10.0).abs() < 1e-9);
/// ```
pub fn relative_change_interval<F>(
    n: usize,
    resamples: usize,
    seed: u64,
    stat: F,
) -> Result<Option<Interval>>
where
    F: Fn(&[usize]) -> (f64, f64) + Sync,
{
    if n == 0 {
        return Err(EvalError::Empty { what: "studies" });
    }
    if resamples == 0 {
        return Err(EvalError::Empty {
            what: "bootstrap resamples",
        });
    }
    let draws = resample_indices(n, resamples, seed);
    let stats: Vec<(f64, f64)> = draws.par_iter().map(|idx| stat(idx)).collect();
    interval_of(&stats)
}

/// The [`LEVEL`] percentile interval of `100 (a - b) / b` over resampled
/// statistics `(a, b)`, one pair per resample (for callers that compute
/// several columns per resample at once). `None` when some `b` is 0.
///
/// # Errors
/// [`EvalError::Empty`] for no resample, [`EvalError::NonFinite`] for a NaN
/// or infinite statistic.
pub fn interval_of(stats: &[(f64, f64)]) -> Result<Option<Interval>> {
    if stats.is_empty() {
        return Err(EvalError::Empty {
            what: "bootstrap resamples",
        });
    }
    let mut values = Vec::with_capacity(stats.len());
    for (i, &(a, b)) in stats.iter().enumerate() {
        for v in [a, b] {
            if !v.is_finite() {
                return Err(EvalError::NonFinite {
                    what: "bootstrap statistic (resample)",
                    index: i,
                    value: v,
                });
            }
        }
        if b == 0.0 {
            return Ok(None);
        }
        values.push(100.0 * (a - b) / b);
    }
    values.sort_by(f64::total_cmp);
    let tail = (1.0 - LEVEL) / 2.0;
    Ok(Some(Interval {
        low: percentile(&values, tail),
        high: percentile(&values, 1.0 - tail),
    }))
}

/// [`relative_change_interval`] of the mean of per-study values: `policy[i]`
/// and `baseline[i]` are study `i`'s values, [`RESAMPLES`] resamples from
/// [`SEED`].
///
/// # Errors
/// [`EvalError::LengthMismatch`] for lists of different lengths, plus those
/// of [`relative_change_interval`].
pub fn paired_mean_change(policy: &[f64], baseline: &[f64]) -> Result<Option<Interval>> {
    if policy.len() != baseline.len() {
        return Err(EvalError::LengthMismatch {
            what: "baseline values (one per study, paired with the policy's)",
            expected: policy.len(),
            got: baseline.len(),
        });
    }
    let mean = |v: &[f64], idx: &[usize]| idx.iter().map(|&i| v[i]).sum::<f64>() / idx.len() as f64;
    relative_change_interval(policy.len(), RESAMPLES, SEED, |idx| {
        (mean(policy, idx), mean(baseline, idx))
    })
}

/// How an interval is printed beside its change: `[low, high]` with
/// `decimals`, and `*` when it excludes 0.
pub fn format_interval(ci: &Interval, decimals: usize) -> String {
    format!(
        "[{:+.d$}, {:+.d$}]{}",
        ci.low,
        ci.high,
        if ci.excludes_zero() { "*" } else { "" },
        d = decimals
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resamples_are_seeded_and_in_range() {
        let a = resample_indices(7, 50, 43);
        assert_eq!(a, resample_indices(7, 50, 43));
        assert_ne!(a, resample_indices(7, 50, 44));
        assert!(a.iter().all(|r| r.len() == 7 && r.iter().all(|&i| i < 7)));
    }

    #[test]
    fn percentile_interpolates_like_numpy() {
        // numpy.percentile([1, 2, 3, 4], [2.5, 97.5]) == [1.075, 3.925]
        let s = [1.0, 2.0, 3.0, 4.0];
        assert!((percentile(&s, 0.025) - 1.075).abs() < 1e-12);
        assert!((percentile(&s, 0.975) - 3.925).abs() < 1e-12);
    }

    /// Policy = baseline + noise of known spread: the 95 % interval of the
    /// relative change is close to the normal one, estimate ± 1.96 SE.
    #[test]
    fn width_matches_the_normal_approximation() {
        let n = 400;
        let mut rng = SplitMix64::new(1);
        let base: Vec<f64> = (0..n).map(|_| 1.0).collect();
        // Differences uniform on [-0.5, 0.5] around +0.1: sd 1/sqrt(12).
        let pol: Vec<f64> = (0..n)
            .map(|_| 1.1 + (rng.below(1_000_001) as f64 / 1e6 - 0.5))
            .collect();
        let ci = paired_mean_change(&pol, &base).unwrap().unwrap();
        let mean = pol.iter().sum::<f64>() / n as f64;
        let sd = (pol.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
        let half = 100.0 * 1.96 * sd / (n as f64).sqrt();
        let est = 100.0 * (mean - 1.0);
        assert!(ci.low < est && est < ci.high, "{ci:?} {est}");
        let width = ci.high - ci.low;
        assert!(
            (width / (2.0 * half) - 1.0).abs() < 0.15,
            "{width} vs {}",
            2.0 * half
        );
        assert!(ci.excludes_zero());
    }

    #[test]
    fn zero_baselines_and_bad_input() {
        // One study with baseline 0: some resamples are all that study.
        let ci = paired_mean_change(&[1.0, 1.0], &[0.0, 1.0]).unwrap();
        assert!(ci.is_none());
        assert!(paired_mean_change(&[1.0], &[1.0, 2.0]).is_err());
        assert!(paired_mean_change(&[], &[]).is_err());
        assert!(paired_mean_change(&[f64::NAN], &[1.0]).is_err());
        let noise = paired_mean_change(&[1.0, 0.5, 1.5, 1.0], &[1.0, 1.5, 0.5, 1.0])
            .unwrap()
            .unwrap();
        assert!(!noise.excludes_zero(), "{noise:?}");
        assert_eq!(
            format_interval(
                &Interval {
                    low: 1.234,
                    high: 5.0
                },
                1
            ),
            "[+1.2, +5.0]*"
        );
    }
}
