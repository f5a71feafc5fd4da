//! Blocks of f64 dot products `out[i * nb + j] = a_i . b_j`, the inner loop
//! of every cosine cost matrix.
//!
//! Why f64 SIMD and not an f32 GEMM: the parity tests hold exact metrics to
//! 1e-9 of POT/SciPy, and f32 products put ~1e-7 into every cosine at 768
//! dimensions. f64 with fused multiply-adds keeps errors at ~1e-16 and, with
//! AVX-512 (8 lanes), brings a 12 x 12 x 768 block to about a microsecond;
//! a GEMM library's packing costs more than the product at these sizes.
//!
//! Every path computes `dot(x, y)` with the same operation order whatever the
//! position of `x` and `y` in their blocks (lane-wise accumulation over
//! chunks of the dimension, then one horizontal sum), and FMA is symmetric in
//! its factors, so `dot(x, y) == dot(y, x)` bit for bit: `M(A, B)` is exactly
//! the transpose of `M(B, A)`.

/// Writes the `na x nb` products of the rows of `a` and `b` (row-major,
/// `dim` columns each) into `out`, which must hold exactly `na * nb` values.
pub(crate) fn dots(a: &[f64], b: &[f64], dim: usize, out: &mut [f64]) {
    if dim == 0 {
        out.fill(0.0);
        return;
    }
    let (na, nb) = (a.len() / dim, b.len() / dim);
    assert_eq!(out.len(), na * nb, "dots: output of the wrong length");
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the feature was detected at run time.
            unsafe { x86::dots_avx512(a, b, dim, out) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the features were detected at run time.
            unsafe { x86::dots_avx2(a, b, dim, out) };
            return;
        }
    }
    for (i, x) in a.chunks_exact(dim).enumerate() {
        for (j, y) in b.chunks_exact(dim).enumerate() {
            out[i * nb + j] = dot_portable(x, y);
        }
    }
}

/// `x . x` with the same kernel (the squared norm of a row).
pub(crate) fn self_dot(x: &[f64]) -> f64 {
    let mut out = [0.0];
    dots(x, x, x.len(), &mut out);
    out[0]
}

/// Four independent accumulators let the compiler vectorise without
/// reassociation flags (SSE2 on any x86-64).
fn dot_portable(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    let chunks = a.len() / 4;
    for k in 0..chunks {
        for l in 0..4 {
            acc[l] += a[4 * k + l] * b[4 * k + l];
        }
    }
    let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for k in chunks * 4..a.len() {
        s += a[k] * b[k];
    }
    s
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Rows of `b` taken together against one row of `a`: each chunk of `a`
    /// is loaded once for four products.
    const TILE: usize = 4;

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn dots_avx512(a: &[f64], b: &[f64], dim: usize, out: &mut [f64]) {
        let nb = b.len() / dim;
        let full = dim / 8;
        let rest = dim % 8;
        // Lanes past the end of a row read as zero.
        let mask: __mmask8 = ((1u16 << rest) - 1) as __mmask8;
        for (i, x) in a.chunks_exact(dim).enumerate() {
            let xp = x.as_ptr();
            let mut j = 0;
            while j + TILE <= nb {
                let yp = b.as_ptr().add(j * dim);
                let mut acc = [_mm512_setzero_pd(); TILE];
                for k in 0..full {
                    let vx = _mm512_loadu_pd(xp.add(8 * k));
                    for (t, s) in acc.iter_mut().enumerate() {
                        *s = _mm512_fmadd_pd(vx, _mm512_loadu_pd(yp.add(t * dim + 8 * k)), *s);
                    }
                }
                if rest > 0 {
                    let vx = _mm512_maskz_loadu_pd(mask, xp.add(8 * full));
                    for (t, s) in acc.iter_mut().enumerate() {
                        let vy = _mm512_maskz_loadu_pd(mask, yp.add(t * dim + 8 * full));
                        *s = _mm512_fmadd_pd(vx, vy, *s);
                    }
                }
                for (t, s) in acc.iter().enumerate() {
                    out[i * nb + j + t] = _mm512_reduce_add_pd(*s);
                }
                j += TILE;
            }
            for j in j..nb {
                let yp = b.as_ptr().add(j * dim);
                let mut s = _mm512_setzero_pd();
                for k in 0..full {
                    let vx = _mm512_loadu_pd(xp.add(8 * k));
                    s = _mm512_fmadd_pd(vx, _mm512_loadu_pd(yp.add(8 * k)), s);
                }
                if rest > 0 {
                    let vx = _mm512_maskz_loadu_pd(mask, xp.add(8 * full));
                    let vy = _mm512_maskz_loadu_pd(mask, yp.add(8 * full));
                    s = _mm512_fmadd_pd(vx, vy, s);
                }
                out[i * nb + j] = _mm512_reduce_add_pd(s);
            }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn hsum256(v: __m256d) -> f64 {
        let lo = _mm256_castpd256_pd128(v);
        let hi = _mm256_extractf128_pd(v, 1);
        let s = _mm_add_pd(lo, hi);
        _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)))
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dots_avx2(a: &[f64], b: &[f64], dim: usize, out: &mut [f64]) {
        let nb = b.len() / dim;
        let full = dim / 4;
        let rest = dim % 4;
        // maskload reads lanes whose mask has the sign bit set; others are 0.
        let lanes = [
            if rest > 0 { -1i64 } else { 0 },
            if rest > 1 { -1 } else { 0 },
            if rest > 2 { -1 } else { 0 },
            0,
        ];
        let mask = _mm256_loadu_si256(lanes.as_ptr().cast());
        for (i, x) in a.chunks_exact(dim).enumerate() {
            let xp = x.as_ptr();
            let mut j = 0;
            while j + TILE <= nb {
                let yp = b.as_ptr().add(j * dim);
                let mut acc = [_mm256_setzero_pd(); TILE];
                for k in 0..full {
                    let vx = _mm256_loadu_pd(xp.add(4 * k));
                    for (t, s) in acc.iter_mut().enumerate() {
                        *s = _mm256_fmadd_pd(vx, _mm256_loadu_pd(yp.add(t * dim + 4 * k)), *s);
                    }
                }
                if rest > 0 {
                    let vx = _mm256_maskload_pd(xp.add(4 * full), mask);
                    for (t, s) in acc.iter_mut().enumerate() {
                        let vy = _mm256_maskload_pd(yp.add(t * dim + 4 * full), mask);
                        *s = _mm256_fmadd_pd(vx, vy, *s);
                    }
                }
                for (t, s) in acc.iter().enumerate() {
                    out[i * nb + j + t] = hsum256(*s);
                }
                j += TILE;
            }
            for j in j..nb {
                let yp = b.as_ptr().add(j * dim);
                let mut s = _mm256_setzero_pd();
                for k in 0..full {
                    let vx = _mm256_loadu_pd(xp.add(4 * k));
                    s = _mm256_fmadd_pd(vx, _mm256_loadu_pd(yp.add(4 * k)), s);
                }
                if rest > 0 {
                    let vx = _mm256_maskload_pd(xp.add(4 * full), mask);
                    let vy = _mm256_maskload_pd(yp.add(4 * full), mask);
                    s = _mm256_fmadd_pd(vx, vy, s);
                }
                out[i * nb + j] = hsum256(s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::lcg;

    fn naive(a: &[f64], b: &[f64], dim: usize) -> Vec<f64> {
        let mut out = Vec::new();
        for x in a.chunks_exact(dim) {
            for y in b.chunks_exact(dim) {
                out.push(x.iter().zip(y).map(|(p, q)| p * q).sum());
            }
        }
        out
    }

    fn values(n: usize, seed: &mut u64) -> Vec<f64> {
        (0..n).map(|_| lcg(seed) - 0.5).collect()
    }

    #[test]
    fn matches_naive_products_for_every_tail_and_tile() {
        let mut seed = 3;
        // Dimensions around the 4- and 8-lane widths; set sizes around the tile.
        for dim in [1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 768, 771] {
            for (na, nb) in [(1, 1), (2, 3), (5, 4), (3, 9), (12, 12)] {
                let a = values(na * dim, &mut seed);
                let b = values(nb * dim, &mut seed);
                let mut out = vec![0.0; na * nb];
                dots(&a, &b, dim, &mut out);
                for (got, want) in out.iter().zip(naive(&a, &b, dim)) {
                    assert!(
                        (got - want).abs() <= 1e-13 * dim as f64,
                        "{dim}: {got} vs {want}"
                    );
                }
                // Exact symmetry: M(A, B) is the transpose of M(B, A).
                let mut back = vec![0.0; na * nb];
                dots(&b, &a, dim, &mut back);
                for i in 0..na {
                    for j in 0..nb {
                        assert_eq!(out[i * nb + j], back[j * na + i]);
                    }
                }
            }
        }
    }

    #[test]
    fn portable_path_matches_the_dispatched_one() {
        let mut seed = 9;
        let dim = 37;
        let a = values(6 * dim, &mut seed);
        let mut out = vec![0.0; 36];
        dots(&a, &a, dim, &mut out);
        for i in 0..6 {
            for j in 0..6 {
                let p = dot_portable(&a[i * dim..(i + 1) * dim], &a[j * dim..(j + 1) * dim]);
                assert!((out[i * 6 + j] - p).abs() < 1e-14);
            }
        }
    }
}
