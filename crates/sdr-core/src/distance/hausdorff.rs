//! Symmetric Hausdorff distance.
//!
//! $$\mathcal D_{\mathrm{Hausdorff}}(A,B) = \max\Bigl\{\max_i \min_j M_{ij},\;
//!   \max_j \min_i M_{ij}\Bigr\}$$
//!
//! where `M` is the `n x m` cosine cost matrix. Range `[0, 1]`.
//! Reference: paper appendix A, Eq. (hausdorff).

use super::chamfer::row_col_minima;
use super::stop::Stop;
use super::Evaluation;
use crate::cost::{CostMatrix, PairCost};
use crate::error::Result;

/// Hausdorff distance from a cost matrix with `n, m >= 1`.
pub fn hausdorff(m: &CostMatrix) -> f64 {
    row_col_minima(m).into_iter().fold(0.0, f64::max)
}

/// The family's entry in the metric registry (`distance/spec.rs`); one pass
/// over the costs, not worth a stop check.
pub(crate) fn evaluate(cost: &PairCost<'_>, _: Stop<'_>) -> Result<Evaluation> {
    Ok(Evaluation::exact(hausdorff(&cost.cross)))
}
