//! Symmetric Chamfer distance.
//!
//! $$\mathcal D_{\mathrm{Chamfer}}(A,B) = \tfrac12\Bigl(\frac1n\sum_{i=1}^n \min_j M_{ij}
//!   + \frac1m\sum_{j=1}^m \min_i M_{ij}\Bigr)$$
//!
//! where `M` is the `n x m` cosine cost matrix. Range `[0, 1]`.
//! Reference: paper appendix A, Eq. (chamfer).

use super::Evaluation;
use crate::cost::{CostMatrix, PairCost};
use crate::error::Result;

/// Row minima then column minima of `M` (`n + m` values, one buffer), in one pass.
pub(crate) fn row_col_minima(m: &CostMatrix) -> Vec<f64> {
    let mut minima = vec![f64::INFINITY; m.n + m.m];
    let (rmin, cmin) = minima.split_at_mut(m.n);
    for (i, r) in rmin.iter_mut().enumerate() {
        for (cj, &c) in cmin.iter_mut().zip(m.row(i)) {
            *r = r.min(c);
            *cj = cj.min(c);
        }
    }
    minima
}

/// Chamfer distance from a cost matrix with `n, m >= 1`.
pub fn chamfer(m: &CostMatrix) -> f64 {
    let minima = row_col_minima(m);
    let (rmin, cmin) = minima.split_at(m.n);
    let a = rmin.iter().sum::<f64>() / m.n as f64;
    let b = cmin.iter().sum::<f64>() / m.m as f64;
    0.5 * (a + b)
}

/// The family's entry in the metric registry (`distance/spec.rs`).
pub(crate) fn evaluate(cost: &PairCost<'_>) -> Result<Evaluation> {
    Ok(Evaluation::exact(chamfer(&cost.cross)))
}
