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
        if x86::has_avx512() {
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

/// `x . x`, the squared norm of a row. Four partial sums over interleaved
/// chunks, so the loop is not bound by the latency of one FMA chain (a
/// 768-d row is 96 dependent FMAs otherwise, as long as a 4 x 4 tile of
/// products). Norms only scale cosines, so their summation order need not
/// match [`dots`].
pub(crate) fn self_dot(x: &[f64]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if x86::has_avx512() {
            // SAFETY: the feature was detected at run time.
            return unsafe { x86::self_dot_avx512(x) };
        }
    }
    let mut out = [0.0];
    dots(x, x, x.len(), &mut out);
    out[0]
}

/// [`dots`] for f32 rows, widened to f64 in registers: the products of two
/// f32 values are exact in f64, so this equals [`dots`] on the widened rows
/// (same summation order, same bits on the AVX-512 path).
pub(crate) fn dots_f32(a: &[f32], b: &[f32], dim: usize, out: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    {
        if dim > 0 && x86::has_avx512() {
            let (na, nb) = (a.len() / dim, b.len() / dim);
            assert_eq!(out.len(), na * nb, "dots: output of the wrong length");
            // SAFETY: the features were detected at run time.
            unsafe { x86::dots_avx512_f32(a, b, dim, out) };
            return;
        }
    }
    // Elsewhere: the f64 path on widened copies (same products, same checks).
    let wide = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<f64>>();
    dots(&wide(a), &wide(b), dim, out)
}

/// [`self_dot`] of an f32 row, in f64.
pub(crate) fn self_dot_f32(x: &[f32]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if x86::has_avx512() {
            // SAFETY: the features were detected at run time.
            return unsafe { x86::self_dot_avx512_f32(x) };
        }
    }
    let wide: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    self_dot(&wide)
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

    /// The AVX-512 paths use 512-bit f64 lanes and masked 256-bit f32 loads.
    pub(super) fn has_avx512() -> bool {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vl")
    }

    /// AVX2: rows of `b` taken together against one row of `a`: each chunk of
    /// `a` is loaded once for four products.
    const TILE: usize = 4;

    /// Register tiles of `RA` rows of `a` by `RB` rows of `b`: each chunk of
    /// the dimension is loaded once per row and feeds `RA * RB` products, so
    /// a 4 x 4 tile needs 8 loads per 16 FMAs (1 x 4 needed 5 per 4) and the
    /// loop runs at the FMA rate rather than the load rate. 16 accumulators,
    /// 4 `b` chunks and one `a` chunk fit the 32 AVX-512 registers.
    const TA: usize = 4;
    const TB: usize = 4;

    /// Eight consecutive elements widened to f64 lanes: the whole chunk, or
    /// its first lanes under `mask` (the others read as zero).
    pub(super) trait Lanes: Copy {
        unsafe fn load(p: *const Self) -> __m512d;
        unsafe fn load_masked(mask: __mmask8, p: *const Self) -> __m512d;
    }

    impl Lanes for f64 {
        #[inline(always)]
        unsafe fn load(p: *const f64) -> __m512d {
            _mm512_loadu_pd(p)
        }
        #[inline(always)]
        unsafe fn load_masked(mask: __mmask8, p: *const f64) -> __m512d {
            _mm512_maskz_loadu_pd(mask, p)
        }
    }

    impl Lanes for f32 {
        #[inline(always)]
        unsafe fn load(p: *const f32) -> __m512d {
            _mm512_cvtps_pd(_mm256_loadu_ps(p))
        }
        #[inline(always)]
        unsafe fn load_masked(mask: __mmask8, p: *const f32) -> __m512d {
            _mm512_cvtps_pd(_mm256_maskz_loadu_ps(mask, p))
        }
    }

    /// One `RA x RB` tile of products: rows of `a` from `a`, rows of `b`
    /// from `b`, written at `out` with row stride `nb`.
    #[target_feature(enable = "avx512f,avx512vl")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile<T: Lanes, const RA: usize, const RB: usize>(
        a: *const T,
        b: *const T,
        dim: usize,
        out: *mut f64,
        nb: usize,
        full: usize,
        rest: usize,
        mask: __mmask8,
    ) {
        let mut acc = [[_mm512_setzero_pd(); RB]; RA];
        let mut vy = [_mm512_setzero_pd(); RB];
        for k in 0..full {
            for (t, y) in vy.iter_mut().enumerate() {
                *y = T::load(b.add(t * dim + 8 * k));
            }
            for (s, row) in acc.iter_mut().enumerate() {
                let vx = T::load(a.add(s * dim + 8 * k));
                for (c, y) in row.iter_mut().zip(&vy) {
                    *c = _mm512_fmadd_pd(vx, *y, *c);
                }
            }
        }
        if rest > 0 {
            for (t, y) in vy.iter_mut().enumerate() {
                *y = T::load_masked(mask, b.add(t * dim + 8 * full));
            }
            for (s, row) in acc.iter_mut().enumerate() {
                let vx = T::load_masked(mask, a.add(s * dim + 8 * full));
                for (c, y) in row.iter_mut().zip(&vy) {
                    *c = _mm512_fmadd_pd(vx, *y, *c);
                }
            }
        }
        for (s, row) in acc.iter().enumerate() {
            for (t, c) in row.iter().enumerate() {
                *out.add(s * nb + t) = _mm512_reduce_add_pd(*c);
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512vl")]
    unsafe fn tiled<T: Lanes>(a: &[T], b: &[T], dim: usize, out: &mut [f64]) {
        let (na, nb) = (a.len() / dim, b.len() / dim);
        let full = dim / 8;
        let rest = dim % 8;
        // Lanes past the end of a row read as zero.
        let mask: __mmask8 = ((1u16 << rest) - 1) as __mmask8;
        let (ap, bp, op) = (a.as_ptr(), b.as_ptr(), out.as_mut_ptr());
        let mut i = 0;
        while i < na {
            let ra = (na - i).min(TA);
            let mut j = 0;
            while j < nb {
                let rb = (nb - j).min(TB);
                let (x, y, o) = (ap.add(i * dim), bp.add(j * dim), op.add(i * nb + j));
                macro_rules! go {
                    ($($r:literal, $c:literal);*) => {
                        match (ra, rb) {
                            $(($r, $c) => tile::<T, $r, $c>(x, y, dim, o, nb, full, rest, mask),)*
                            _ => unreachable!("tile sizes are 1..=4"),
                        }
                    };
                }
                go!(4, 4; 4, 3; 4, 2; 4, 1; 3, 4; 3, 3; 3, 2; 3, 1;
                    2, 4; 2, 3; 2, 2; 2, 1; 1, 4; 1, 3; 1, 2; 1, 1);
                j += rb;
            }
            i += ra;
        }
    }

    /// Four partial sums over interleaved chunks, then one reduction.
    #[target_feature(enable = "avx512f,avx512vl")]
    unsafe fn sq_norm<T: Lanes>(x: &[T]) -> f64 {
        let p = x.as_ptr();
        let full = x.len() / 8;
        let mut acc = [_mm512_setzero_pd(); 4];
        let mut k = 0;
        while k + 4 <= full {
            for (t, s) in acc.iter_mut().enumerate() {
                let v = T::load(p.add(8 * (k + t)));
                *s = _mm512_fmadd_pd(v, v, *s);
            }
            k += 4;
        }
        for k in k..full {
            let v = T::load(p.add(8 * k));
            acc[0] = _mm512_fmadd_pd(v, v, acc[0]);
        }
        let rest = x.len() % 8;
        if rest > 0 {
            let v = T::load_masked(((1u16 << rest) - 1) as __mmask8, p.add(8 * full));
            acc[0] = _mm512_fmadd_pd(v, v, acc[0]);
        }
        let s = _mm512_add_pd(_mm512_add_pd(acc[0], acc[1]), _mm512_add_pd(acc[2], acc[3]));
        _mm512_reduce_add_pd(s)
    }

    #[target_feature(enable = "avx512f,avx512vl")]
    pub(super) unsafe fn self_dot_avx512(x: &[f64]) -> f64 {
        sq_norm(x)
    }

    #[target_feature(enable = "avx512f,avx512vl")]
    pub(super) unsafe fn self_dot_avx512_f32(x: &[f32]) -> f64 {
        sq_norm(x)
    }

    #[target_feature(enable = "avx512f,avx512vl")]
    pub(super) unsafe fn dots_avx512(a: &[f64], b: &[f64], dim: usize, out: &mut [f64]) {
        tiled(a, b, dim, out)
    }

    #[target_feature(enable = "avx512f,avx512vl")]
    pub(super) unsafe fn dots_avx512_f32(a: &[f32], b: &[f32], dim: usize, out: &mut [f64]) {
        tiled(a, b, dim, out)
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
    fn f32_rows_give_the_bits_of_their_f64_widening() {
        let mut seed = 5;
        for dim in [1, 7, 8, 9, 768, 771] {
            for (na, nb) in [(1, 1), (3, 5), (4, 4), (9, 12)] {
                let a: Vec<f32> = values(na * dim, &mut seed)
                    .iter()
                    .map(|&x| x as f32)
                    .collect();
                let b: Vec<f32> = values(nb * dim, &mut seed)
                    .iter()
                    .map(|&x| x as f32)
                    .collect();
                let wide = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<_>>();
                let (wa, wb) = (wide(&a), wide(&b));
                let (mut narrow, mut widened) = (vec![0.0; na * nb], vec![0.0; na * nb]);
                dots_f32(&a, &b, dim, &mut narrow);
                dots(&wa, &wb, dim, &mut widened);
                assert_eq!(narrow, widened, "dim {dim}, {na} x {nb}");
                assert_eq!(self_dot_f32(&a[..dim]), self_dot(&wa[..dim]));
            }
        }
    }

    #[test]
    fn norms_match_a_naive_sum() {
        let mut seed = 11;
        for dim in [1, 5, 8, 31, 32, 33, 768] {
            let x = values(dim, &mut seed);
            let want: f64 = x.iter().map(|v| v * v).sum();
            assert!((self_dot(&x) - want).abs() <= 1e-14 * want.max(1.0));
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
