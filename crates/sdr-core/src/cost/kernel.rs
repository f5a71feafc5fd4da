//! Blocks of f64 dot products `out[i * nb + j] = a_i . b_j`, the inner loop
//! of every cosine cost matrix.
//!
//! Why f64 SIMD and not an f32 GEMM: the parity tests hold exact metrics to
//! 1e-9 of POT/SciPy, and f32 products put ~1e-7 into every cosine at 768
//! dimensions. f64 with fused multiply-adds keeps errors at ~1e-16 and, with
//! AVX-512 (8 lanes), brings a 12 x 12 x 768 block to about a microsecond;
//! a GEMM library's packing costs more than the product at these sizes.
//!
//! With AVX-512 the squared norms come from the same tiles
//! ([`dots_with_norms`]): the first tile of each row and column of tiles
//! also accumulates `x . x` from the chunks it has loaded. A separate norm
//! pass was the first to read the rows, so it waited on memory with nothing
//! to overlap (f32 widening there also competed with the FMAs for the same
//! pipes).
//!
//! Pairs read from memory once each (a batch of pairs, see
//! [`crate::distance::evaluate_pairs`]) wait on DRAM as long as they
//! compute: the rows of one pair are a few short streams that the hardware
//! prefetchers pick up too late. So the fused tiles can also bring the next
//! pair's rows into L2 (`next`), a few cache lines per chunk step, spread
//! over the whole product, so the next pair finds its rows in L2.
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
            unsafe { x86::tiled::<x86::F64>(a, b, dim, out, None, None) };
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

/// [`dots`] plus, with `sq`, the squared norm of every row of `a` and `b`,
/// each the chain of `dot(x, x)`, accumulated by the tiles that load the
/// rows anyway: no separate pass reads the rows first. The rows in `next`
/// are brought into L2 meanwhile (see the module docs; empty slices for
/// none). `false` (outputs untouched) where AVX-512 is missing; callers then
/// use [`dots`] and [`self_dot`].
pub(crate) fn dots_with_norms(
    a: &[f64],
    b: &[f64],
    dim: usize,
    out: &mut [f64],
    sq: Option<(&mut [f64], &mut [f64])>,
    next: [&[f64]; 2],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    return x86::fused::<x86::F64>(a, b, dim, out, sq, next);
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (a, b, dim, out, sq, next);
        false
    }
}

/// Whether [`dots_with_norms`] runs here (AVX-512).
pub(crate) fn fused_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    return x86::has_avx512();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// [`dots_with_norms`] for f32 rows, widened in registers (the bits of the
/// f64 widening, as [`dots_f32`]).
pub(crate) fn dots_with_norms_f32(
    a: &[f32],
    b: &[f32],
    dim: usize,
    out: &mut [f64],
    sq: Option<(&mut [f64], &mut [f64])>,
    next: [&[f32]; 2],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    return x86::fused::<x86::Widened>(a, b, dim, out, sq, next);
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (a, b, dim, out, sq, next);
        false
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
            return unsafe { x86::sq_norm::<x86::F64>(x) };
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
            unsafe { x86::tiled::<x86::Widened>(a, b, dim, out, None, None) };
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
            return unsafe { x86::sq_norm::<x86::Widened>(x) };
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
    /// 4 `b` chunks and one `a` chunk fit the 32 AVX-512 registers, with the
    /// 8 norm accumulators of the fused tiles.
    const TA: usize = 4;
    /// Rows of `a` per tile when no norms are fused (they come precomputed,
    /// from sets that repeat): 24 accumulators. f32 rows are widened on the
    /// FMA ports (`vcvtps2pd`), once per row and chunk, so 6 x 4 tiles widen
    /// 10 chunks per 24 FMAs where 4 x 4 ones widen 8 per 16 (Hung-Pen on 576
    /// shared sets: about 8 % faster). With the norm accumulators they would
    /// spill.
    const TA_NO_NORMS: usize = 6;
    const TB: usize = 4;

    /// One way of accumulating products in 512-bit lanes: the element type of
    /// the rows, the accumulator vector, and how chunks of `W` elements load.
    pub(super) trait Lanes {
        type Elem: Copy;
        type V: Copy;
        /// Elements per chunk.
        const W: usize;
        unsafe fn zero() -> Self::V;
        unsafe fn load(p: *const Self::Elem) -> Self::V;
        /// The first `rest < W` elements; the other lanes read as zero.
        unsafe fn load_rest(rest: usize, p: *const Self::Elem) -> Self::V;
        unsafe fn fma(x: Self::V, y: Self::V, acc: Self::V) -> Self::V;
        unsafe fn add(x: Self::V, y: Self::V) -> Self::V;
        unsafe fn sum(v: Self::V) -> f64;
    }

    /// f64 rows in 8 f64 lanes.
    pub(super) struct F64;
    /// f32 rows widened to 8 f64 lanes: the products are exact, as for `F64`
    /// on the widened rows.
    pub(super) struct Widened;
    impl Lanes for F64 {
        type Elem = f64;
        type V = __m512d;
        const W: usize = 8;
        #[inline(always)]
        unsafe fn zero() -> __m512d {
            _mm512_setzero_pd()
        }
        #[inline(always)]
        unsafe fn load(p: *const f64) -> __m512d {
            _mm512_loadu_pd(p)
        }
        #[inline(always)]
        unsafe fn load_rest(rest: usize, p: *const f64) -> __m512d {
            _mm512_maskz_loadu_pd(((1u16 << rest) - 1) as __mmask8, p)
        }
        #[inline(always)]
        unsafe fn fma(x: __m512d, y: __m512d, acc: __m512d) -> __m512d {
            _mm512_fmadd_pd(x, y, acc)
        }
        #[inline(always)]
        unsafe fn add(x: __m512d, y: __m512d) -> __m512d {
            _mm512_add_pd(x, y)
        }
        #[inline(always)]
        unsafe fn sum(v: __m512d) -> f64 {
            _mm512_reduce_add_pd(v)
        }
    }

    impl Lanes for Widened {
        type Elem = f32;
        type V = __m512d;
        const W: usize = 8;
        #[inline(always)]
        unsafe fn zero() -> __m512d {
            _mm512_setzero_pd()
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> __m512d {
            _mm512_cvtps_pd(_mm256_loadu_ps(p))
        }
        #[inline(always)]
        unsafe fn load_rest(rest: usize, p: *const f32) -> __m512d {
            _mm512_cvtps_pd(_mm256_maskz_loadu_ps(((1u16 << rest) - 1) as __mmask8, p))
        }
        #[inline(always)]
        unsafe fn fma(x: __m512d, y: __m512d, acc: __m512d) -> __m512d {
            _mm512_fmadd_pd(x, y, acc)
        }
        #[inline(always)]
        unsafe fn add(x: __m512d, y: __m512d) -> __m512d {
            _mm512_add_pd(x, y)
        }
        #[inline(always)]
        unsafe fn sum(v: __m512d) -> f64 {
            _mm512_reduce_add_pd(v)
        }
    }

    /// One `RA x RB` tile of products: rows of `a` from `a`, rows of `b`
    /// from `b`, written at `out` with row stride `nb`. With `NA` (`NB`) the
    /// squared norms of the tile's `a` (`b`) rows are accumulated too, from
    /// the chunks already in registers, into `sq_a` (`sq_b`): each the same
    /// chain as the product of a row with itself.
    #[target_feature(enable = "avx512f,avx512vl")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile<L: Lanes, const RA: usize, const RB: usize, const NA: bool, const NB: bool>(
        a: *const L::Elem,
        b: *const L::Elem,
        dim: usize,
        out: *mut f64,
        nb: usize,
        sq_a: *mut f64,
        sq_b: *mut f64,
        ahead: &mut Ahead,
    ) {
        let (full, rest) = (dim / L::W, dim % L::W);
        let mut acc = [[L::zero(); RB]; RA];
        let mut vy = [L::zero(); RB];
        let mut na = [L::zero(); RA];
        let mut nbs = [L::zero(); RB];
        // One chunk: `$load_b(t)` / `$load_a(s)` give row t of b / row s of a.
        macro_rules! step {
            ($load_b:expr, $load_a:expr) => {
                for (t, y) in vy.iter_mut().enumerate() {
                    *y = $load_b(t);
                    if NB {
                        nbs[t] = L::fma(*y, *y, nbs[t]);
                    }
                }
                for (s, row) in acc.iter_mut().enumerate() {
                    let vx = $load_a(s);
                    if NA {
                        na[s] = L::fma(vx, vx, na[s]);
                    }
                    for (c, y) in row.iter_mut().zip(&vy) {
                        *c = L::fma(vx, *y, *c);
                    }
                }
            };
        }
        for k in 0..full {
            ahead.issue();
            step!(|t: usize| L::load(b.add(t * dim + L::W * k)), |s: usize| {
                L::load(a.add(s * dim + L::W * k))
            });
        }
        if rest > 0 {
            step!(
                |t: usize| L::load_rest(rest, b.add(t * dim + L::W * full)),
                |s: usize| L::load_rest(rest, a.add(s * dim + L::W * full))
            );
        }
        for (s, row) in acc.iter().enumerate() {
            for (t, c) in row.iter().enumerate() {
                *out.add(s * nb + t) = L::sum(*c);
            }
        }
        if NA {
            for (s, n) in na.iter().enumerate() {
                *sq_a.add(s) = L::sum(*n);
            }
        }
        if NB {
            for (t, n) in nbs.iter().enumerate() {
                *sq_b.add(t) = L::sum(*n);
            }
        }
    }

    /// Cache lines to bring in while a product runs: the spans still to
    /// fetch and how many lines to request per chunk step, so that the
    /// requests spread over the whole product instead of filling the miss
    /// queues at its start (which stalls the FMAs behind them).
    pub(super) struct Ahead {
        spans: [(*const u8, *const u8); 2],
        at: usize,
        per_step: usize,
        nta: bool,
    }

    /// Whether the next pair's lines are requested with `prefetchnta`
    /// rather than `prefetcht1`: on AMD. On the distance benchmark's 10,000
    /// distinct pairs (462 MB), a Zen 5 host ran Chamfer, Hausdorff and
    /// Hung-Pen 13-14 % faster on one thread with `nta`, and 0-10 % on two
    /// (which share the memory bandwidth); on the Xeon of sessions 15-18,
    /// `t1` was the best hint tried (`t2` no better; bench/README.md).
    pub(super) fn prefer_nta() -> bool {
        static NTA: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *NTA.get_or_init(|| {
            let id = __cpuid(0);
            // "AuthenticAMD", in the order EBX, EDX, ECX.
            (id.ebx, id.edx, id.ecx) == (0x6874_7541, 0x6974_6e65, 0x444d_4163)
        })
    }

    impl Ahead {
        fn none() -> Ahead {
            Ahead {
                spans: [(std::ptr::null(), std::ptr::null()); 2],
                at: 2,
                per_step: 0,
                nta: false,
            }
        }

        /// `next` spread over `steps` chunk steps.
        fn new<T>(next: [&[T]; 2], steps: usize) -> Ahead {
            let span = |s: &[T]| {
                let r = s.as_ptr_range();
                // From the line holding the first byte.
                let start = (r.start as usize & !63) as *const u8;
                (start, r.end as *const u8)
            };
            let lines: usize = next
                .iter()
                .map(|s| std::mem::size_of_val(*s).div_ceil(64) + 1)
                .sum();
            Ahead {
                spans: [span(next[0]), span(next[1])],
                at: 0,
                per_step: lines.div_ceil(steps.max(1)),
                nta: prefer_nta(),
            }
        }

        /// Request this step's share of lines (`prefetcht1`: into L2, so
        /// the rows the tiles are using stay in L1; `prefetchnta` on AMD,
        /// see [`prefer_nta`]).
        #[inline(always)]
        unsafe fn issue(&mut self) {
            let mut left = self.per_step;
            while left > 0 && self.at < 2 {
                let (cur, end) = &mut self.spans[self.at];
                if *cur < *end {
                    if self.nta {
                        _mm_prefetch::<_MM_HINT_NTA>(cur.cast());
                    } else {
                        _mm_prefetch::<_MM_HINT_T1>(cur.cast());
                    }
                    *cur = cur.wrapping_add(64);
                    left -= 1;
                } else {
                    self.at += 1;
                }
            }
        }
    }

    /// All products `a_i . b_j` into `out`; with `sq`, also the squared norms
    /// of the rows of `a` and `b` (the first tile of each row and column of
    /// tiles accumulates them), so rows are first read by the loop that
    /// multiplies them and nothing streams from memory on its own. The rows
    /// of `next` are brought into L2 on the way (see [`Ahead`]).
    #[target_feature(enable = "avx512f,avx512vl")]
    pub(super) unsafe fn tiled<L: Lanes>(
        a: &[L::Elem],
        b: &[L::Elem],
        dim: usize,
        out: &mut [f64],
        sq: Option<(&mut [f64], &mut [f64])>,
        next: Option<[&[L::Elem]; 2]>,
    ) {
        let (na, nb) = (a.len() / dim, b.len() / dim);
        let norms = sq.is_some();
        let ta = if norms { TA } else { TA_NO_NORMS };
        let mut ahead = match next {
            Some(next) => {
                // Lines are requested in the full chunk steps only.
                let steps = na.div_ceil(ta) * nb.div_ceil(TB) * (dim / L::W).max(1);
                Ahead::new(next, steps)
            }
            None => Ahead::none(),
        };
        let (ap, bp, op) = (a.as_ptr(), b.as_ptr(), out.as_mut_ptr());
        let (sa, sb) = match sq {
            Some((sa, sb)) => {
                assert!(
                    sa.len() == na && sb.len() == nb,
                    "norms of the wrong length"
                );
                (sa.as_mut_ptr(), sb.as_mut_ptr())
            }
            None => (std::ptr::null_mut(), std::ptr::null_mut()),
        };
        let mut i = 0;
        while i < na {
            let ra = (na - i).min(ta);
            let mut j = 0;
            while j < nb {
                let rb = (nb - j).min(TB);
                let (x, y, o) = (ap.add(i * dim), bp.add(j * dim), op.add(i * nb + j));
                let (qa, qb) = (sa.wrapping_add(i), sb.wrapping_add(j));
                let (with_a, with_b) = (norms && j == 0, norms && i == 0);
                macro_rules! go {
                    ($($r:literal, $c:literal);*) => {
                        match (ra, rb, with_a, with_b) {
                            $(
                                ($r, $c, false, false) => tile::<L, $r, $c, false, false>(x, y, dim, o, nb, qa, qb, &mut ahead),
                                ($r, $c, true, false) => tile::<L, $r, $c, true, false>(x, y, dim, o, nb, qa, qb, &mut ahead),
                                ($r, $c, false, true) => tile::<L, $r, $c, false, true>(x, y, dim, o, nb, qa, qb, &mut ahead),
                                ($r, $c, true, true) => tile::<L, $r, $c, true, true>(x, y, dim, o, nb, qa, qb, &mut ahead),
                            )*
                            _ => unreachable!("tile sizes are 1..=6 by 1..=4"),
                        }
                    };
                }
                go!(6, 4; 6, 3; 6, 2; 6, 1; 5, 4; 5, 3; 5, 2; 5, 1;
                    4, 4; 4, 3; 4, 2; 4, 1; 3, 4; 3, 3; 3, 2; 3, 1;
                    2, 4; 2, 3; 2, 2; 2, 1; 1, 4; 1, 3; 1, 2; 1, 1);
                j += rb;
            }
            i += ra;
        }
    }

    /// [`tiled`] with the norms (when `sq`) and the next rows, where AVX-512
    /// is present (`false` otherwise).
    pub(super) fn fused<L: Lanes>(
        a: &[L::Elem],
        b: &[L::Elem],
        dim: usize,
        out: &mut [f64],
        sq: Option<(&mut [f64], &mut [f64])>,
        next: [&[L::Elem]; 2],
    ) -> bool {
        if dim == 0 || !has_avx512() {
            return false;
        }
        let products = (a.len() / dim) * (b.len() / dim);
        assert_eq!(out.len(), products, "dots: output of the wrong length");
        let next = (!next.iter().all(|s| s.is_empty())).then_some(next);
        // SAFETY: the features were detected at run time.
        unsafe { tiled::<L>(a, b, dim, out, sq, next) };
        true
    }

    /// Four partial sums over interleaved chunks, then one reduction.
    #[target_feature(enable = "avx512f,avx512vl")]
    pub(super) unsafe fn sq_norm<L: Lanes>(x: &[L::Elem]) -> f64 {
        let p = x.as_ptr();
        let full = x.len() / L::W;
        let mut acc = [L::zero(); 4];
        let mut k = 0;
        while k + 4 <= full {
            for (t, s) in acc.iter_mut().enumerate() {
                let v = L::load(p.add(L::W * (k + t)));
                *s = L::fma(v, v, *s);
            }
            k += 4;
        }
        for k in k..full {
            let v = L::load(p.add(L::W * k));
            acc[0] = L::fma(v, v, acc[0]);
        }
        let rest = x.len() % L::W;
        if rest > 0 {
            let v = L::load_rest(rest, p.add(L::W * full));
            acc[0] = L::fma(v, v, acc[0]);
        }
        L::sum(L::add(L::add(acc[0], acc[1]), L::add(acc[2], acc[3])))
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

    /// The prefetch hint follows the CPU's vendor as the kernel reports it.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    #[test]
    fn nta_is_chosen_on_amd_only() {
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let vendor = info
            .lines()
            .find_map(|l| l.strip_prefix("vendor_id"))
            .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_string());
        if let Some(vendor) = vendor {
            assert_eq!(x86::prefer_nta(), vendor == "AuthenticAMD", "{vendor}");
        }
    }

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
            for (na, nb) in [(1, 1), (2, 3), (5, 4), (3, 9), (7, 6), (13, 5), (12, 12)] {
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
    fn fused_norms_are_the_rows_own_products() {
        let mut seed = 13;
        for dim in [1, 7, 8, 9, 768, 771] {
            for (na, nb) in [(1, 1), (3, 5), (4, 4), (5, 9), (12, 12)] {
                let a = values(na * dim, &mut seed);
                let b = values(nb * dim, &mut seed);
                let (mut out, mut sa, mut sb) = (vec![0.0; na * nb], vec![0.0; na], vec![0.0; nb]);
                // Rows brought into L2 on the way (here: misaligned spans of
                // the operands themselves) change nothing.
                let next = [&b[nb * dim / 2..], &a[1..]];
                if !dots_with_norms(&a, &b, dim, &mut out, Some((&mut sa, &mut sb)), next) {
                    return; // no AVX-512 here: callers take dots + self_dot
                }
                let mut plain = vec![0.0; na * nb];
                dots(&a, &b, dim, &mut plain);
                assert_eq!(out, plain, "products change with the norms fused in");
                for (rows, sq) in [(&a, &sa), (&b, &sb)] {
                    for (i, x) in rows.chunks_exact(dim).enumerate() {
                        let mut own = [0.0];
                        dots(x, x, dim, &mut own);
                        assert_eq!(sq[i], own[0], "dim {dim}: norm {i} is not dot(x, x)");
                    }
                }
                // The f32 rows give the bits of their widening, norms included.
                let narrow = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<_>>();
                let (na32, nb32) = (narrow(&a), narrow(&b));
                let wide = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<_>>();
                let (mut o1, mut s1a, mut s1b) = (vec![0.0; na * nb], vec![0.0; na], vec![0.0; nb]);
                let (mut o2, mut s2a, mut s2b) = (vec![0.0; na * nb], vec![0.0; na], vec![0.0; nb]);
                let none: [&[f64]; 2] = [&[], &[]];
                dots_with_norms_f32(
                    &na32,
                    &nb32,
                    dim,
                    &mut o1,
                    Some((&mut s1a, &mut s1b)),
                    [&nb32, &[]],
                );
                dots_with_norms(
                    &wide(&na32),
                    &wide(&nb32),
                    dim,
                    &mut o2,
                    Some((&mut s2a, &mut s2b)),
                    none,
                );
                assert_eq!((o1, s1a, s1b), (o2, s2a, s2b));
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
