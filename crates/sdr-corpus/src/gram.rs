//! Dot products of many sentence embeddings at once (one f32 GEMM), and the
//! cosine cost read from them.
//!
//! With inverse row norms `1/|x|` kept beside the raw dot products, the cost
//! of SPEC §3 is `d = (1 - (x.y) / (|x||y|)) / 2`, clamped to `[0, 1]`.
//! Every cost used by selection goes through [`cost`], so bounds and exact
//! distances see bit-identical numbers.

use crate::error::{CorpusError, Result};

/// `out[r * p + c] = a_r . b_c` for `a` (`p_a x dim`) and `b` (`p_b x dim`),
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

/// Inverse L2 norms of the rows; an error names a zero or non-finite row.
pub fn inverse_norms(data: &[f32], dim: usize, what: &str) -> Result<Vec<f64>> {
    data.chunks_exact(dim)
        .enumerate()
        .map(|(i, row)| {
            if row.iter().any(|x| !x.is_finite()) {
                return Err(CorpusError::BadVector {
                    what: what.to_string(),
                    index: i,
                    fault: "not finite",
                });
            }
            let n = row
                .iter()
                .map(|&x| (x as f64) * (x as f64))
                .sum::<f64>()
                .sqrt();
            if n == 0.0 || !n.is_finite() {
                return Err(CorpusError::BadVector {
                    what: what.to_string(),
                    index: i,
                    fault: "the zero vector",
                });
            }
            Ok(1.0 / n)
        })
        .collect()
}

/// Cosine cost from a raw dot product and the two inverse norms.
#[inline(always)]
pub fn cost(dot: f32, inv_a: f64, inv_b: f64) -> f64 {
    ((1.0 - (dot as f64) * inv_a * inv_b) * 0.5).clamp(0.0, 1.0)
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
        let inv = inverse_norms(&v, 2, "x").unwrap();
        assert!((cost(25.0, inv[0], inv[0])).abs() < 1e-12);
        assert!((cost(-25.0, inv[0], inv[0]) - 1.0).abs() < 1e-12);
        assert!(inverse_norms(&[0.0, 0.0], 2, "x").is_err());
        assert!(inverse_norms(&[f32::NAN, 1.0], 2, "x").is_err());
    }
}
