//! How the set distances behind corpus and consensus scores ended (SPEC §3):
//! a distance whose solver stopped at its iteration cap keeps its last
//! iterate and is counted as unconverged; one whose solver failed scores NaN
//! (never selected) and is counted as failed. Nothing is dropped silently.

use std::sync::atomic::{AtomicUsize, Ordering};

use sdr_core::cost::PairCost;
use sdr_core::Metric;

/// Counts of distances that did not converge or failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Convergence {
    /// Distances computed with an unconverged solver (value: its last iterate).
    pub unconverged: usize,
    /// Distances whose solver returned an error (value: NaN).
    pub failed: usize,
}

impl Convergence {
    /// Whether every distance converged.
    pub fn is_clean(&self) -> bool {
        self.unconverged == 0 && self.failed == 0
    }
}

impl std::ops::AddAssign for Convergence {
    fn add_assign(&mut self, o: Convergence) {
        self.unconverged += o.unconverged;
        self.failed += o.failed;
    }
}

/// [`Convergence`] counted from parallel workers.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    unconverged: AtomicUsize,
    failed: AtomicUsize,
}

impl Tally {
    /// A metric's value on one pair, converged or not (selection ranks sets
    /// by it), counted here when it did not converge or failed. Metrics here
    /// are parsed and GW always gets its intra costs, so a failure marks a
    /// bug or degenerate input; its NaN is never selected.
    pub(crate) fn value(&self, metric: &Metric, cost: &PairCost<'_>) -> f64 {
        match metric.evaluate(cost) {
            Ok(e) => {
                if !e.converged {
                    self.unconverged.fetch_add(1, Ordering::Relaxed);
                }
                e.value
            }
            Err(_) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                f64::NAN
            }
        }
    }

    /// A pair whose cost could not be formed (a sentence cost refused its
    /// annotations): NaN, counted as failed, as [`Tally::value`] counts a
    /// failed metric.
    pub(crate) fn failed(&self) -> f64 {
        self.failed.fetch_add(1, Ordering::Relaxed);
        f64::NAN
    }

    pub(crate) fn counts(&self) -> Convergence {
        Convergence {
            unconverged: self.unconverged.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sdr_core::CostMatrix;

    #[test]
    fn counts_unconverged_and_failed() {
        let t = Tally::default();
        let m = CostMatrix::new(2, 2, vec![0.0, 0.5, 0.5, 0.0]);
        let v = t.value(&Metric::Chamfer, &PairCost::borrowed(&m, None));
        assert_eq!(v, 0.0);
        assert!(t.counts().is_clean());
        // GW without its intra-set costs is an error: NaN, counted.
        let v = t.value(&Metric::Gw { eps: 0.1 }, &PairCost::borrowed(&m, None));
        assert!(v.is_nan());
        assert_eq!(
            t.counts(),
            Convergence {
                unconverged: 0,
                failed: 1
            }
        );
        let mut c = Convergence::default();
        c += t.counts();
        c += t.counts();
        assert_eq!(c.failed, 2);
    }
}
