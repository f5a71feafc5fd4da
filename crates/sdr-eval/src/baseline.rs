//! Random baselines for best-of-K selection (SPEC §5, §7).
//!
//! Given, per study, the metric value of each of its K candidates, a random
//! baseline picks one candidate per study uniformly at random and averages
//! the picked values over the studies. Two pools are used:
//!
//! - [`Pool::All`]: all K candidates;
//! - [`Pool::WellFormed`]: only the candidates that parse into both
//!   sections. A study without any well-formed candidate falls back to all
//!   its candidates (there is nothing to discard).
//!
//! For corpus-level metrics (corpus BLEU, corpus chrF++), which are not
//! means of per-candidate values, [`seeded_corpus_baseline`] evaluates the
//! caller's metric on each seed's picks ([`random_choices`]).
//!
//! The seeded estimate averages `n_seeds` such draws (SplitMix64 generator,
//! seed `base_seed + s` for draw `s`, so runs are reproducible). Its
//! expectation is known exactly: the mean over studies of the mean value of
//! the pool, returned by [`random_expectation`]. Improvement over random is
//! `(policy - random) / random * 100` ([`improvement_percent`]).

use crate::error::{EvalError, Result};

/// Which candidates a random pick may choose from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Pool {
    All,
    WellFormed,
}

/// One study: the evaluation-metric value of each candidate and whether it
/// is well-formed.
#[derive(Debug, Clone, Copy)]
pub struct Study<'a> {
    pub values: &'a [f64],
    pub well_formed: &'a [bool],
}

/// A seeded random-baseline estimate.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SeededBaseline {
    /// Mean over seeds of the per-seed mean picked value.
    pub mean: f64,
    /// Standard error of that mean (sample std over seeds / sqrt(n_seeds)).
    pub std_error: f64,
    /// The per-seed means.
    pub per_seed: Vec<f64>,
}

/// SplitMix64 (Steele, Lea, Flood 2014): small, fast, reproducible.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform integer in `0..n` (`n > 0`), unbiased by rejection.
    pub fn below(&mut self, n: u64) -> u64 {
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % n;
            }
        }
    }
}

fn validate(studies: &[Study]) -> Result<()> {
    if studies.is_empty() {
        return Err(EvalError::Empty { what: "studies" });
    }
    for (i, s) in studies.iter().enumerate() {
        if s.values.is_empty() {
            return Err(EvalError::Empty {
                what: "candidates of a study",
            });
        }
        if s.values.len() != s.well_formed.len() {
            return Err(EvalError::LengthMismatch {
                what: "well_formed flags",
                expected: s.values.len(),
                got: s.well_formed.len(),
            });
        }
        if let Some(&v) = s.values.iter().find(|v| !v.is_finite()) {
            return Err(EvalError::NonFinite {
                what: "study metric values",
                index: i,
                value: v,
            });
        }
    }
    Ok(())
}

/// The indices a random pick may choose among candidates with these flags.
fn pool_indices(well_formed: &[bool], pool: Pool) -> Vec<usize> {
    let all: Vec<usize> = (0..well_formed.len()).collect();
    match pool {
        Pool::All => all,
        Pool::WellFormed => {
            let wf: Vec<usize> = all.iter().copied().filter(|&i| well_formed[i]).collect();
            if wf.is_empty() {
                all
            } else {
                wf
            }
        }
    }
}

/// Exact expectation of the random baseline: mean over studies of the mean
/// value over the pool.
///
/// # Errors
/// [`EvalError::Empty`], [`EvalError::LengthMismatch`] or
/// [`EvalError::NonFinite`] for malformed studies.
///
/// ```
/// use sdr_eval::baseline::{random_expectation, Pool, Study};
/// let s = [Study { values: &[1.0, 0.0, 0.5], well_formed: &[true, false, true] }];
/// assert_eq!(random_expectation(&s, Pool::All).unwrap(), 0.5);
/// assert_eq!(random_expectation(&s, Pool::WellFormed).unwrap(), 0.75);
/// ```
pub fn random_expectation(studies: &[Study], pool: Pool) -> Result<f64> {
    validate(studies)?;
    let total: f64 = studies
        .iter()
        .map(|s| {
            let idx = pool_indices(s.well_formed, pool);
            idx.iter().map(|&i| s.values[i]).sum::<f64>() / idx.len() as f64
        })
        .sum();
    Ok(total / studies.len() as f64)
}

/// Seeded random baseline averaged over `n_seeds` draws.
///
/// # Errors
/// As [`random_expectation`], plus [`EvalError::BadParameter`] when
/// `n_seeds` is 0.
pub fn random_baseline_seeded(
    studies: &[Study],
    pool: Pool,
    n_seeds: usize,
    base_seed: u64,
) -> Result<SeededBaseline> {
    validate(studies)?;
    let flags: Vec<&[bool]> = studies.iter().map(|s| s.well_formed).collect();
    seeded_corpus_baseline(&flags, pool, n_seeds, base_seed, |choices| {
        let sum: f64 = studies
            .iter()
            .zip(choices)
            .map(|(st, &c)| st.values[c])
            .sum();
        Ok(sum / studies.len() as f64)
    })
}

/// The random picks of one seed: for each study (given by its well-formed
/// flags, one per candidate) a uniform index into its pool. Seed `s` always
/// gives the same picks; [`random_baseline_seeded`] uses seeds
/// `base_seed .. base_seed + n_seeds`.
///
/// # Errors
/// [`EvalError::Empty`] for no study or a study without candidates.
pub fn random_choices(well_formed: &[&[bool]], pool: Pool, seed: u64) -> Result<Vec<usize>> {
    if well_formed.is_empty() {
        return Err(EvalError::Empty { what: "studies" });
    }
    let mut rng = SplitMix64::new(seed);
    well_formed
        .iter()
        .map(|flags| {
            if flags.is_empty() {
                return Err(EvalError::Empty {
                    what: "candidates of a study",
                });
            }
            let p = pool_indices(flags, pool);
            Ok(p[rng.below(p.len() as u64) as usize])
        })
        .collect()
}

/// A seeded random baseline for any metric of the picked candidates, e.g. a
/// corpus-level one (corpus BLEU, corpus chrF++) that is not a mean of
/// per-candidate values: `metric(choices)` is evaluated for the picks of each
/// of `n_seeds` seeds and averaged.
///
/// # Errors
/// As [`random_choices`], [`EvalError::BadParameter`] when `n_seeds` is 0,
/// [`EvalError::NonFinite`] when `metric` returns a non-finite value, and
/// any error of `metric`.
pub fn seeded_corpus_baseline<F>(
    well_formed: &[&[bool]],
    pool: Pool,
    n_seeds: usize,
    base_seed: u64,
    metric: F,
) -> Result<SeededBaseline>
where
    F: Fn(&[usize]) -> Result<f64>,
{
    if n_seeds == 0 {
        return Err(EvalError::BadParameter {
            name: "n_seeds",
            value: "0".into(),
            message: "at least one seed is needed",
        });
    }
    let mut per_seed = Vec::with_capacity(n_seeds);
    for s in 0..n_seeds as u64 {
        let choices = random_choices(well_formed, pool, base_seed.wrapping_add(s))?;
        let v = metric(&choices)?;
        if !v.is_finite() {
            return Err(EvalError::NonFinite {
                what: "seeded baseline metric",
                index: s as usize,
                value: v,
            });
        }
        per_seed.push(v);
    }
    let n = per_seed.len() as f64;
    let mean = per_seed.iter().sum::<f64>() / n;
    let std_error = if per_seed.len() > 1 {
        (per_seed.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt() / n.sqrt()
    } else {
        0.0
    };
    Ok(SeededBaseline {
        mean,
        std_error,
        per_seed,
    })
}

/// Mean metric value of the candidates a policy chose (`choices[i]` indexes
/// the candidates of `studies[i]`).
///
/// # Errors
/// As [`random_expectation`], plus [`EvalError::LengthMismatch`] when
/// `choices` does not match `studies` and [`EvalError::BadParameter`] for an
/// out-of-range choice.
pub fn policy_mean(studies: &[Study], choices: &[usize]) -> Result<f64> {
    validate(studies)?;
    if choices.len() != studies.len() {
        return Err(EvalError::LengthMismatch {
            what: "choices",
            expected: studies.len(),
            got: choices.len(),
        });
    }
    let mut total = 0.0;
    for (s, &c) in studies.iter().zip(choices) {
        let v = s.values.get(c).ok_or_else(|| EvalError::BadParameter {
            name: "choice",
            value: c.to_string(),
            message: "candidate index out of range",
        })?;
        total += v;
    }
    Ok(total / studies.len() as f64)
}

/// Improvement of `policy` over `random` in percent:
/// `(policy - random) / random * 100`.
///
/// # Errors
/// [`EvalError::BadParameter`] when `random` is 0 or either value is not
/// finite.
///
/// ```
/// assert_eq!(sdr_eval::baseline::improvement_percent(0.3, 0.2).unwrap().round(), 50.0);
/// ```
pub fn improvement_percent(policy: f64, random: f64) -> Result<f64> {
    if !policy.is_finite() || !random.is_finite() || random == 0.0 {
        return Err(EvalError::BadParameter {
            name: "random",
            value: format!("{random} (policy {policy})"),
            message: "improvement needs finite values and a non-zero random baseline",
        });
    }
    Ok((policy - random) / random * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_is_in_range_and_covers() {
        let mut r = SplitMix64::new(7);
        let mut seen = [false; 5];
        for _ in 0..200 {
            let x = r.below(5) as usize;
            seen[x] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn seeded_is_deterministic_and_close_to_exact() {
        let vals: Vec<Vec<f64>> = (0..50)
            .map(|i| {
                (0..5)
                    .map(|k| ((i * 7 + k * 13) % 17) as f64 / 17.0)
                    .collect()
            })
            .collect();
        let wf: Vec<Vec<bool>> = (0..50)
            .map(|i| (0..5).map(|k| (i + k) % 3 != 0).collect())
            .collect();
        let studies: Vec<Study> = vals
            .iter()
            .zip(&wf)
            .map(|(v, w)| Study {
                values: v,
                well_formed: w,
            })
            .collect();
        for pool in [Pool::All, Pool::WellFormed] {
            let a = random_baseline_seeded(&studies, pool, 200, 1).unwrap();
            let b = random_baseline_seeded(&studies, pool, 200, 1).unwrap();
            assert_eq!(a, b);
            let exact = random_expectation(&studies, pool).unwrap();
            assert!(
                (a.mean - exact).abs() < 4.0 * a.std_error,
                "{pool:?} {} {exact} {}",
                a.mean,
                a.std_error
            );
            assert!(a.std_error > 0.0);
        }
    }

    #[test]
    fn corpus_baseline_sees_the_same_picks() {
        let v = [0.0, 1.0, 2.0];
        let f = [true, false, true];
        let studies = [Study {
            values: &v,
            well_formed: &f,
        }; 4];
        let flags: Vec<&[bool]> = vec![&f; 4];
        let a = random_baseline_seeded(&studies, Pool::WellFormed, 50, 9).unwrap();
        let b = seeded_corpus_baseline(&flags, Pool::WellFormed, 50, 9, |c| {
            assert!(c.iter().all(|&i| i != 1), "malformed candidate picked");
            Ok(c.iter().map(|&i| v[i]).sum::<f64>() / c.len() as f64)
        })
        .unwrap();
        assert_eq!(a, b);
        assert!(seeded_corpus_baseline(&flags, Pool::All, 3, 0, |_| Ok(f64::NAN)).is_err());
        assert!(random_choices(&[], Pool::All, 0).is_err());
        assert!(random_choices(&[&[]], Pool::All, 0).is_err());
    }

    #[test]
    fn errors() {
        assert!(random_expectation(&[], Pool::All).is_err());
        let s = [Study {
            values: &[f64::NAN],
            well_formed: &[true],
        }];
        assert!(random_expectation(&s, Pool::All).is_err());
        let s = [Study {
            values: &[1.0],
            well_formed: &[],
        }];
        assert!(random_expectation(&s, Pool::All).is_err());
        let s = [Study {
            values: &[1.0],
            well_formed: &[true],
        }];
        assert!(random_baseline_seeded(&s, Pool::All, 0, 0).is_err());
        assert!(policy_mean(&s, &[1]).is_err());
        assert!(improvement_percent(1.0, 0.0).is_err());
    }
}
