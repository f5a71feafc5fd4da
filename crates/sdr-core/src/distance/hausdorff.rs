//! Symmetric Hausdorff distance.
//!
//! $$\mathcal D_{\mathrm{Hausdorff}}(A,B) = \max\Bigl\{\max_i \min_j M_{ij},\;
//!   \max_j \min_i M_{ij}\Bigr\}$$
//!
//! where `M` is the `n x m` cosine cost matrix. Range `[0, 1]`.
//! Reference: paper appendix A, Eq. (hausdorff).

use super::chamfer::row_col_minima;
use crate::cost::CostMatrix;

/// Hausdorff distance from a cost matrix with `n, m >= 1`.
pub fn hausdorff(m: &CostMatrix) -> f64 {
    let (rmin, cmin) = row_col_minima(m);
    rmin.iter().chain(cmin.iter()).copied().fold(0.0, f64::max)
}
