//! Symmetric Chamfer distance.
//!
//! $$\mathcal D_{\mathrm{Chamfer}}(A,B) = \tfrac12\Bigl(\frac1n\sum_{i=1}^n \min_j M_{ij}
//!   + \frac1m\sum_{j=1}^m \min_i M_{ij}\Bigr)$$
//!
//! where `M` is the `n x m` cosine cost matrix. Range `[0, 1]`.
//! Reference: paper appendix A, Eq. (chamfer).

use super::stop::Stop;
use super::Evaluation;
use crate::cost::{CostMatrix, PairCost};
use crate::error::Result;

/// Row minima then column minima of `M` (`n + m` values, one buffer), in one
/// pass. NaN entries are skipped, as `f64::min` skips them; of `-0.0` and
/// `+0.0` either may come back (as from `f64::min`; cosine costs are never
/// `-0.0`).
pub(crate) fn row_col_minima(m: &CostMatrix) -> Vec<f64> {
    let mut minima = vec![f64::INFINITY; m.n + m.m];
    #[cfg(target_arch = "x86_64")]
    if (1..=wide::LANES).contains(&m.m) && wide::available() {
        // SAFETY: AVX-512F is available, m.m <= LANES.
        unsafe { wide::minima(m, &mut minima) };
        return minima;
    }
    let (rmin, cmin) = minima.split_at_mut(m.n);
    for (i, r) in rmin.iter_mut().enumerate() {
        for (cj, &c) in cmin.iter_mut().zip(m.row(i)) {
            *r = r.min(c);
            *cj = cj.min(c);
        }
    }
    minima
}

/// [`row_col_minima`] for rows of up to 16 costs, each row in two AVX-512
/// registers: the column minima are lane-wise, the row minimum one
/// reduction, with no scalar compare chain and no loop exit per row to
/// mispredict (report-sized sets have 3-12 sentences).
#[cfg(target_arch = "x86_64")]
mod wide {
    use crate::cost::CostMatrix;
    use std::arch::x86_64::*;

    pub(super) const LANES: usize = 16;

    pub(super) fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx512f")
    }

    /// # Safety
    /// AVX-512F must be available; `m.m <= LANES`,
    /// `minima.len() == m.n + m.m`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn minima(m: &CostMatrix, minima: &mut [f64]) {
        let inf = _mm512_set1_pd(f64::INFINITY);
        let (k_lo, k_hi) = (lanes(m.m.min(8)), lanes(m.m.saturating_sub(8)));
        let (mut c_lo, mut c_hi) = (inf, inf);
        for (i, row) in m.data.chunks_exact(m.m).enumerate() {
            // SAFETY: the masks cover the row's m.m values only.
            let (lo, hi) = unsafe {
                (
                    _mm512_mask_loadu_pd(inf, k_lo, row.as_ptr()),
                    _mm512_mask_loadu_pd(inf, k_hi, row.as_ptr().wrapping_add(8)),
                )
            };
            // `min_pd(x, y)` gives `y` where either is NaN, so a NaN in the
            // first operand is skipped as f64::min skips it; the high lanes
            // are the second operand below, so their NaN become +inf.
            let hi = _mm512_mask_mov_pd(inf, _mm512_cmp_pd_mask::<_CMP_ORD_Q>(hi, hi), hi);
            minima[i] = _mm512_reduce_min_pd(_mm512_min_pd(lo, hi));
            c_lo = _mm512_min_pd(lo, c_lo);
            c_hi = _mm512_min_pd(hi, c_hi);
        }
        let mut cols = [0.0; LANES];
        // SAFETY: `cols` holds 16 values.
        unsafe {
            _mm512_storeu_pd(cols.as_mut_ptr(), c_lo);
            _mm512_storeu_pd(cols.as_mut_ptr().add(8), c_hi);
        }
        minima[m.n..].copy_from_slice(&cols[..m.m]);
    }

    /// The mask of the first `k <= 8` lanes.
    fn lanes(k: usize) -> __mmask8 {
        ((1u32 << k) - 1) as __mmask8
    }
}

/// Chamfer distance from a cost matrix with `n, m >= 1`.
pub fn chamfer(m: &CostMatrix) -> f64 {
    let minima = row_col_minima(m);
    let (rmin, cmin) = minima.split_at(m.n);
    let a = rmin.iter().sum::<f64>() / m.n as f64;
    let b = cmin.iter().sum::<f64>() / m.m as f64;
    0.5 * (a + b)
}

/// The family's entry in the metric registry (`distance/spec.rs`); one pass
/// over the costs, not worth a stop check.
pub(crate) fn evaluate(cost: &PairCost<'_>, _: Stop<'_>) -> Result<Evaluation> {
    Ok(Evaluation::exact(chamfer(&cost.cross)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::lcg;

    #[test]
    fn minima_match_a_scan_of_each_row_and_column() {
        #[cfg(target_arch = "x86_64")]
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("no AVX-512 here: both sides run the scalar scan");
        }
        // Widths on both sides of the 8- and 16-lane loads, with NaN entries
        // (skipped) and rows or columns that are all NaN (+inf).
        let mut seed = 19u64;
        for n in 1..=6 {
            for m in 1..=18 {
                for nan_rate in [0.0, 0.2, 1.0] {
                    let data: Vec<f64> = (0..n * m)
                        .map(|_| {
                            let x = lcg(&mut seed);
                            if lcg(&mut seed) < nan_rate {
                                f64::NAN
                            } else {
                                x
                            }
                        })
                        .collect();
                    let c = CostMatrix::new(n, m, data);
                    let mut want = Vec::new();
                    for i in 0..n {
                        want.push((0..m).map(|j| c.get(i, j)).fold(f64::INFINITY, f64::min));
                    }
                    for j in 0..m {
                        want.push((0..n).map(|i| c.get(i, j)).fold(f64::INFINITY, f64::min));
                    }
                    let got = row_col_minima(&c);
                    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&want), "{n}x{m}, NaN rate {nan_rate}");
                }
            }
        }
    }
}
