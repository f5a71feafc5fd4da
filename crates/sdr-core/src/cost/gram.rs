//! Dot products of many sentence embeddings at once (one f32 GEMM), and the
//! cosine cost read from them: the path of the reference corpus, where one
//! product of all candidate sentences with all corpus sentences serves every
//! pair of sets (blocks are read by [`super::PairCost::from_gram`]).
//!
//! With inverse row norms `1/|x|` kept beside the raw dot products, the cost
//! of SPEC §3 is `d = (1 - (x.y) / (|x||y|)) / 2`, clamped to `[0, 1]`.
//! Every cost read from a Gram matrix goes through [`cost`], so bounds and
//! exact distances see bit-identical numbers. f32 products are fine here
//! (selection compares sets, it does not claim POT parity); the per-pair path
//! of [`super::cosine_cost`] stays in f64.

use super::{row_fault, RowFault};

/// `out[r * p_b + c] = a_r . b_c` for `a` (`p_a x dim`) and `b` (`p_b x dim`),
/// row-major; the result is `p_a x p_b`. Uses `gemm` on the rayon pool.
pub fn gram(a: &[f32], b: &[f32], dim: usize) -> Vec<f32> {
    let pa = a.len() / dim;
    let pb = b.len() / dim;
    let mut out = vec![0f32; pa * pb];
    if pa == 0 || pb == 0 {
        return out;
    }
    let threads = rayon::current_num_threads();
    let par = if pa * pb * dim >= 1 << 16 && threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: dst is pa x pb (row stride pb), lhs is a (pa x dim, row stride
    // dim), rhs is b^T (dim x pb: element (k, j) at b[j * dim + k], so row
    // stride 1 and column stride dim). All buffers have the sizes implied.
    unsafe {
        gemm::gemm(
            pa,
            pb,
            dim,
            out.as_mut_ptr(),
            1,
            pb as isize,
            false,
            a.as_ptr(),
            1,
            dim as isize,
            b.as_ptr(),
            dim as isize,
            1,
            0.0f32,
            1.0f32,
            false,
            false,
            false,
            par,
        );
    }
    out
}

/// A row that cannot enter a cosine cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadRow {
    pub row: usize,
    pub fault: RowFault,
}

/// Inverse L2 norms of the rows (`dim` columns each), checked with the same
/// [`row_fault`] as [`super::EmbeddingSet`].
pub fn inverse_norms(data: &[f32], dim: usize) -> std::result::Result<Vec<f64>, BadRow> {
    data.chunks_exact(dim)
        .enumerate()
        .map(|(row, v)| {
            if let Some(fault) = row_fault(v) {
                return Err(BadRow { row, fault });
            }
            let n = v
                .iter()
                .map(|&x| f64::from(x) * f64::from(x))
                .sum::<f64>()
                .sqrt();
            if n == 0.0 || !n.is_finite() {
                // Every component underflowed when squared.
                return Err(BadRow {
                    row,
                    fault: RowFault::Zero,
                });
            }
            Ok(1.0 / n)
        })
        .collect()
}

/// Costs below this are f32 rounding of a zero cost, and [`cost`] returns
/// exactly 0. An f32 dot product of two 768-d unit vectors is off by up to
/// ~1e-7, so a sentence compared with itself costs ~1e-8 rather than 0; the
/// OT family's `M / max(M)` would blow that up to order one (SPEC §3: when
/// `max(M) = 0` their distance is 0) and one-sentence sections equal to a
/// corpus entry would score 1. Distinct sentences lie much farther apart
/// (paraphrases differing in one word cost ~1e-3).
pub const GRAM_ZERO_COST: f64 = 1e-6;

/// Cosine cost from a raw dot product and the two inverse norms.
#[inline(always)]
pub fn cost(dot: f32, inv_a: f64, inv_b: f64) -> f64 {
    let d = ((1.0 - f64::from(dot) * inv_a * inv_b) * 0.5).clamp(0.0, 1.0);
    if d < GRAM_ZERO_COST {
        0.0
    } else {
        d
    }
}

/// The intra-set cost matrix of `n` rows from their dot products `dot(i, j)`
/// (`i < j` only asked): exactly symmetric with a zero diagonal, as in exact
/// arithmetic. GW's mirror descent starts at the fixed point `p q^T` of a
/// 2-row set's `[[0, 1], [1, 0]]`; f32 noise on the diagonal or across it
/// would push it off there (to another plan) where the f64 path and POT stay.
pub fn intra_cost(n: usize, inv: &[f64], dot: impl Fn(usize, usize) -> f32) -> super::CostMatrix {
    let mut data = vec![0.0; n * n];
    for i in 0..n {
        for j in i + 1..n {
            let c = cost(dot(i, j), inv[i], inv[j]);
            data[i * n + j] = c;
            data[j * n + i] = c;
        }
    }
    super::CostMatrix::new(n, n, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gram_matches_naive_products() {
        let dim = 37;
        let a: Vec<f32> = (0..5 * dim).map(|i| ((i * 7 % 13) as f32) - 6.0).collect();
        let b: Vec<f32> = (0..400 * dim)
            .map(|i| ((i * 5 % 11) as f32) * 0.5 - 2.0)
            .collect();
        let g = gram(&a, &b, dim);
        for r in 0..5 {
            for c in 0..400 {
                let naive: f32 = (0..dim).map(|k| a[r * dim + k] * b[c * dim + k]).sum();
                assert!((g[r * 400 + c] - naive).abs() <= 1e-3 * naive.abs().max(1.0));
            }
        }
    }

    #[test]
    fn cost_is_clamped_and_norm_free() {
        let v = [3.0f32, 4.0];
        let inv = inverse_norms(&v, 2).unwrap();
        assert!((cost(25.0, inv[0], inv[0])).abs() < 1e-12);
        assert!((cost(-25.0, inv[0], inv[0]) - 1.0).abs() < 1e-12);
        assert_eq!(
            inverse_norms(&[1.0, 1.0, 0.0, 0.0], 2),
            Err(BadRow {
                row: 1,
                fault: RowFault::Zero
            })
        );
        assert_eq!(
            inverse_norms(&[f32::NAN, 1.0], 2).unwrap_err().fault,
            RowFault::NotFinite
        );
    }

    #[test]
    fn gram_blocks_agree_with_the_f64_path() {
        use crate::cost::{cosine_cost, PairCost, SetView};
        let dim = 24;
        let rows: Vec<f32> = (0..7 * dim)
            .map(|i| ((i * 7 % 19) as f32) * 0.25 - 2.0)
            .collect();
        let g = gram(&rows, &rows, dim);
        let inv = inverse_norms(&rows, dim).unwrap();
        let pc = PairCost::from_gram(&g, 7, &inv, 0..3, 3..7, true);
        let wide: Vec<f64> = rows.iter().map(|&x| f64::from(x)).collect();
        let a = SetView::new(&wide[..3 * dim], dim);
        let b = SetView::new(&wide[3 * dim..], dim);
        let exact = cosine_cost(&a, &b);
        for (x, y) in pc.cross.data.iter().zip(&exact.data) {
            assert!((x - y).abs() < 1e-6, "{x} vs {y}");
        }
        let (ia, ib) = pc.intra.as_ref().unwrap();
        assert_eq!((ia.n, ib.n), (3, 4));
        for m in [ia, ib] {
            for i in 0..m.n {
                assert_eq!(m.get(i, i), 0.0);
                for j in 0..m.n {
                    assert_eq!(m.get(i, j).to_bits(), m.get(j, i).to_bits());
                }
            }
        }
    }

    #[test]
    fn a_row_against_itself_costs_exactly_zero() {
        // 768-d rows whose f32 self products round: the cost snaps to 0, so
        // the OT family's max(M) = 0 rule applies (SPEC §3).
        let dim = 768;
        let rows: Vec<f32> = (0..3 * dim)
            .map(|i| ((i as f32) * 0.618_034).sin() * 0.37 + 0.01)
            .collect();
        let g = gram(&rows, &rows, dim);
        let inv = inverse_norms(&rows, dim).unwrap();
        for i in 0..3 {
            assert_eq!(cost(g[i * 3 + i], inv[i], inv[i]), 0.0);
        }
        let pc = crate::cost::PairCost::from_gram(&g, 3, &inv, 0..1, 0..1, false);
        assert_eq!(pc.cross.max(), 0.0);
        assert!(pc.cross.normalized().is_none());
    }
}
