//! Aggregations over the corpus and selection policies (paper Eq. aggregations,
//! SPEC §5).
//!
//! $$\mathcal D^{\min}_S = \min_t \mathcal D_{S,t},\qquad
//! \mathcal D^{\mathrm{avg}}_S = \frac1N\sum_t \mathcal D_{S,t},\qquad
//! \mathcal D^{\mathrm{kNN}}_S = \frac1k\sum_{t\in\mathcal N_k}\mathcal D_{S,t}$$
//!
//! where `N` counts the reports that have section `S` and `N_k` indexes the
//! `k` smallest distances (all of them when fewer than `k` reports have `S`).

use std::fmt;
use std::str::FromStr;

use sdr_core::Metric;

use crate::error::{CorpusError, Result};

/// Default `k` of `knn`.
pub const DEFAULT_K: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Aggregation {
    Min,
    Avg,
    Knn { k: usize },
}

impl Aggregation {
    /// `min`, `avg`, `knn:k=5`: the three of the paper, in table order.
    pub fn all() -> [Aggregation; 3] {
        [
            Aggregation::Min,
            Aggregation::Avg,
            Aggregation::Knn { k: DEFAULT_K },
        ]
    }

    /// How many of the smallest distances this aggregation needs
    /// (`None`: all of them).
    pub fn needs_smallest(&self) -> Option<usize> {
        match self {
            Aggregation::Min => Some(1),
            Aggregation::Knn { k } => Some(*k),
            Aggregation::Avg => None,
        }
    }
}

impl fmt::Display for Aggregation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Aggregation::Min => f.write_str("min"),
            Aggregation::Avg => f.write_str("avg"),
            Aggregation::Knn { k } => write!(f, "knn:k={k}"),
        }
    }
}

impl FromStr for Aggregation {
    type Err = CorpusError;
    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim();
        let bad = |reason: String| CorpusError::InvalidOption {
            name: "agg",
            value: s.to_string(),
            reason,
        };
        match s {
            "min" => return Ok(Aggregation::Min),
            "avg" | "mean" => return Ok(Aggregation::Avg),
            "knn" => return Ok(Aggregation::Knn { k: DEFAULT_K }),
            _ => {}
        }
        let Some(param) = s.strip_prefix("knn:") else {
            return Err(bad("expected min, avg, knn or knn:k=K".into()));
        };
        let v = param
            .trim()
            .strip_prefix("k=")
            .ok_or_else(|| bad("the parameter of knn is `k=K`".into()))?;
        let k: usize = v
            .trim()
            .parse()
            .map_err(|_| bad(format!("`k={v}` is not a positive integer")))?;
        if k == 0 {
            return Err(bad("k must be at least 1".into()));
        }
        Ok(Aggregation::Knn { k })
    }
}

/// A selection policy: a set distance and an aggregation over the corpus.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    pub metric: Metric,
    pub agg: Aggregation,
}

impl fmt::Display for Policy {
    /// The output key, `metric@agg`, e.g. `sinkhorn:eps=0.1@knn:k=5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.metric, self.agg)
    }
}

/// The 45 policies of the paper: 15 metric specs (SPEC §3) x min, avg, knn:k=5,
/// metric-major.
pub fn all_policies() -> Vec<Policy> {
    Metric::all()
        .into_iter()
        .flat_map(|metric| {
            Aggregation::all()
                .into_iter()
                .map(move |agg| Policy { metric, agg })
        })
        .collect()
}

/// Mean of the `k` smallest values of a multiset given as `(value, count)`
/// pairs sorted by value: each unit of count is added on its own, in order,
/// so the result depends only on the multiset (not on how equal values are
/// split between entries). Fewer than `k` elements: the mean of all.
pub fn mean_of_smallest(sorted: &[(f64, u32)], k: usize) -> f64 {
    let mut left = k;
    let mut sum = 0.0;
    let mut taken = 0usize;
    'outer: for &(v, c) in sorted {
        for _ in 0..c {
            if left == 0 {
                break 'outer;
            }
            sum += v;
            left -= 1;
            taken += 1;
        }
    }
    if taken == 0 {
        f64::NAN
    } else {
        sum / taken as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_display() {
        assert_eq!("min".parse::<Aggregation>().unwrap(), Aggregation::Min);
        assert_eq!("knn".parse::<Aggregation>().unwrap().to_string(), "knn:k=5");
        assert_eq!(
            "knn:k=12".parse::<Aggregation>().unwrap(),
            Aggregation::Knn { k: 12 }
        );
        assert!("knn:k=0".parse::<Aggregation>().is_err());
        assert!("knn:j=3".parse::<Aggregation>().is_err());
        assert!("max".parse::<Aggregation>().is_err());
        let p = all_policies();
        assert_eq!(p.len(), 45);
        assert_eq!(p[0].to_string(), "chamfer@min");
        assert_eq!(p[44].to_string(), "pot:rho=0.8@knn:k=5");
    }

    #[test]
    fn mean_of_smallest_counts_multiplicity() {
        let s = [(0.1, 2), (0.2, 1), (0.5, 4)];
        assert!((mean_of_smallest(&s, 1) - 0.1).abs() < 1e-15);
        assert!((mean_of_smallest(&s, 3) - (0.4 / 3.0)).abs() < 1e-15);
        assert!((mean_of_smallest(&s, 4) - 0.225).abs() < 1e-15);
        // k larger than the multiset: mean of all seven.
        assert!((mean_of_smallest(&s, 100) - 2.4 / 7.0).abs() < 1e-15);
    }
}
