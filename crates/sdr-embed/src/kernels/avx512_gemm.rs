//! GEMMs for AVX-512 CPUs, `Y = X Wᵀ + b` with `W` packed once when the layer is built:
//!
//! - **bf16**, for CPUs with AVX-512 BF16 and no AMX (AMD Zen 4/5, Intel Cooper Lake):
//!   $$Y = \operatorname{bf16}(X)\,\operatorname{bf16}(W)^\top + b$$
//!   with both inputs rounded to bf16 (nearest even), products accumulated in f32 and an
//!   f32 output: the numerics of MKL's `cblas_gemm_bf16bf16f32`, which the encoder's
//!   mixed precision uses on AMX CPUs.
//! - **f32**, `vfmadd` on the same tiles: the encoder's f32 dense layers.
//!
//! Why kernels of our own: no Rust crate has AVX-512 BF16 GEMMs (`gemm` covers
//! f32/f64/f16), and MKL's bf16 GEMM does not issue `vdpbf16ps` on AMD CPUs. On the
//! project's 2-core Zen 4 machine at 256 x 768 x 3072 it runs at 187 GFLOP/s, its f32
//! rate, while PyTorch's oneDNN bf16 GEMM reaches 425 and the instruction's peak is 468.
//! In f32, MKL and the `gemm` crate reach 83-86 % of the FMA peak at 512 x 768 x 3072 on
//! one thread; these tiles, fed from packed panels, get closer
//! (`cargo run --release -p sdr-embed --features bench-internals --example gemm_peak`).
//!
//! Layout. `vdpbf16ps` multiplies pairs of bf16 values held in each 32-bit lane and
//! adds both products to an f32 lane. So `X` is converted into rows of (x[2p], x[2p+1])
//! pairs, and `W` is packed into panels of 32 output columns: for each pair index `p`,
//! 32 lanes (two 512-bit registers) holding (w[j][2p], w[j][2p+1]). In f32 a lane holds
//! one value, `X` is read as it is and a panel step is one inner index. The micro-kernel
//! keeps a 12 x 32 block of `Y` in 24 registers; each step loads two `W` registers,
//! broadcasts one lane per row of `X`, and issues 24 dot products or FMAs. Blocks of 8
//! panels (256 columns) over 384 steps of the inner dimension (384 KiB) stay in L2 while
//! every row block of `X` passes over them; the 256-column blocks are spread over
//! rayon's threads.

use half::bf16;
use rayon::prelude::*;

use crate::stored::Stored;

/// Output columns per panel (two 16-lane registers).
const NR: usize = 32;
/// Rows of `X` per micro-kernel call.
const MR: usize = 12;
/// Panels per L2 block (256 columns).
const PANELS_PER_BLOCK: usize = 8;
/// Steps of the inner dimension (bf16 pairs or f32 values) per L2 block.
const KC: usize = 384;
/// Rows of `X` per parallel job (8 micro-kernel rows).
const MC: usize = 8 * MR;

/// Whether this CPU can run the f32 GEMM ([`PackedWeights::f32`]).
pub fn supported_f32() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether this CPU can run the bf16 GEMM ([`PackedWeights::bf16`]).
pub fn supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The CPU features that decide which of these GEMMs run, for the packed-weights
/// cache's key.
pub(crate) fn features() -> String {
    format!("avx512f {} avx512bf16 {}", supported_f32(), supported())
}

/// Two bf16 values (nearest even) in one 32-bit lane, `lo` in the low half.
fn pair(lo: f32, hi: f32) -> u32 {
    u32::from(bf16::from_f32(lo).to_bits()) | (u32::from(bf16::from_f32(hi).to_bits()) << 16)
}

/// A dense layer's weights `W` (`n x k`, out x in) and bias, packed for the kernel.
pub struct PackedWeights {
    /// Panels of [`NR`] lanes per inner step: bf16 pairs, or f32 bits; packed here,
    /// or mapped from the packed-weights cache.
    panels: Stored<u32>,
    bias: Option<Vec<f32>>,
    n: usize,
    k: usize,
    bf16: bool,
}

impl PackedWeights {
    /// Packs `w` (`n x k`, row-major) and the optional bias (`n` values) for the bf16
    /// GEMM.
    pub fn bf16(w: &[f32], n: usize, k: usize, bias: Option<Vec<f32>>) -> Self {
        Self::pack(w, n, k, bias, true)
    }

    /// As [`PackedWeights::bf16`], for the f32 GEMM.
    pub fn f32(w: &[f32], n: usize, k: usize, bias: Option<Vec<f32>>) -> Self {
        Self::pack(w, n, k, bias, false)
    }

    fn pack(w: &[f32], n: usize, k: usize, bias: Option<Vec<f32>>, bf16: bool) -> Self {
        assert_eq!(w.len(), n * k, "GEMM: weights are not n x k");
        if let Some(b) = &bias {
            assert_eq!(b.len(), n, "GEMM: bias is not n long");
        }
        let (k2, n_panels) = (steps(k, bf16), n.div_ceil(NR));
        let mut panels = vec![0u32; n_panels * k2 * NR];
        // Column by column of each panel (rows of `w`); lanes past `n` and the odd
        // `k`'s last half-pair stay zero.
        panels
            .par_chunks_exact_mut(k2 * NR)
            .enumerate()
            .for_each(|(q, panel)| {
                let mut pairs = vec![0u32; if bf16 { k2 } else { 0 }];
                for c in 0..NR.min(n - q * NR) {
                    let row = &w[(q * NR + c) * k..(q * NR + c + 1) * k];
                    if bf16 {
                        pack_pairs(row, &mut pairs);
                        for (p, &two) in pairs.iter().enumerate() {
                            panel[p * NR + c] = two;
                        }
                    } else {
                        for (p, v) in row.iter().enumerate() {
                            panel[p * NR + c] = v.to_bits();
                        }
                    }
                }
            });
        PackedWeights {
            panels: panels.into(),
            bias,
            n,
            k,
            bf16,
        }
    }

    /// Weights packed earlier ([`PackedWeights::panels`] of a layer of these `n`, `k`
    /// and precision), such as a slice of the packed-weights cache; `None` where
    /// `panels` or `bias` has the wrong length for them.
    pub(crate) fn from_panels(
        panels: Stored<u32>,
        bias: Option<Vec<f32>>,
        n: usize,
        k: usize,
        bf16: bool,
    ) -> Option<Self> {
        let fits = panels.len() == n.div_ceil(NR) * steps(k, bf16) * NR
            && bias.as_ref().is_none_or(|b| b.len() == n);
        fits.then_some(PackedWeights {
            panels,
            bias,
            n,
            k,
            bf16,
        })
    }

    /// The packed panels, for [`PackedWeights::from_panels`].
    pub(crate) fn panels(&self) -> &Stored<u32> {
        &self.panels
    }

    pub(crate) fn bias(&self) -> Option<&[f32]> {
        self.bias.as_deref()
    }

    /// Whether the panels hold bf16 pairs (else f32 values).
    pub(crate) fn is_bf16(&self) -> bool {
        self.bf16
    }

    pub fn out_dim(&self) -> usize {
        self.n
    }

    pub fn in_dim(&self) -> usize {
        self.k
    }

    /// `Y = X W^T + b` for `X` of `m` rows (`m x k`, row-major); `m x n` out.
    ///
    /// # Panics
    /// When the CPU lacks the instructions (check [`supported`] or [`supported_f32`]
    /// first) or `x` is not `m x k`.
    pub fn forward(&self, x: &[f32], m: usize) -> Vec<f32> {
        if self.bf16 {
            assert!(supported(), "bf16 GEMM: this CPU has no AVX-512 BF16");
        } else {
            assert!(supported_f32(), "f32 GEMM: this CPU has no AVX-512");
        }
        assert_eq!(x.len(), m * self.k, "GEMM: input is not m x k");
        if m == 0 || self.n == 0 {
            return vec![0f32; m * self.n];
        }
        // Left unset: the first chunk of the inner dimension writes every element.
        let mut y: Vec<f32> = Vec::with_capacity(m * self.n);
        #[cfg(target_arch = "x86_64")]
        {
            let k2 = steps(self.k, self.bf16);
            let packed;
            let a: &[u32] = if self.bf16 {
                packed = pack_rows(x, m, self.k);
                &packed
            } else {
                // SAFETY: f32 and u32 have the same size and alignment; the kernel reads
                // these lanes back as f32.
                unsafe { std::slice::from_raw_parts(x.as_ptr().cast::<u32>(), x.len()) }
            };
            let n_panels = self.n.div_ceil(NR);
            let out = OutPtr(y.as_mut_ptr());
            // Jobs are (column block, row chunk), column-block-major: a thread's share
            // is a run of whole column blocks, so each block of `W` leaves memory once
            // per thread, and the 768-column layers (3 blocks) still split evenly.
            let row_chunks = m.div_ceil(MC);
            (0..n_panels.div_ceil(PANELS_PER_BLOCK) * row_chunks)
                .into_par_iter()
                .for_each(|job| {
                    let (block, chunk) = (job / row_chunks, job % row_chunks);
                    let panels =
                        block * PANELS_PER_BLOCK..((block + 1) * PANELS_PER_BLOCK).min(n_panels);
                    let rows = chunk * MC..((chunk + 1) * MC).min(m);
                    // SAFETY: the instructions were checked above; each job writes only
                    // its own rows and columns of `y` (disjoint across jobs); every
                    // pointer stays within `a`, `self.panels` and `y` (see
                    // `x86::block_impl`).
                    unsafe {
                        if self.bf16 {
                            x86::block_bf16(a, k2, rows, self, panels, out)
                        } else {
                            x86::block_f32(a, k2, rows, self, panels, out)
                        }
                    };
                });
            // SAFETY: the blocks wrote all `m * n` values (first chunk: every row of
            // every panel, masked to the `n` columns).
            unsafe { y.set_len(m * self.n) };
        }
        y
    }
}

/// Inner steps of the kernel for `k` values: pairs in bf16, values in f32.
fn steps(k: usize, bf16: bool) -> usize {
    if bf16 {
        k.div_ceil(2)
    } else {
        k
    }
}

/// `y`'s buffer, shared by the column blocks that each write their own columns.
#[derive(Clone, Copy)]
struct OutPtr(*mut f32);
// SAFETY: the blocks write disjoint columns; `forward` outlives them.
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

/// Rows of `x` as bf16 pairs (the tail pair of an odd `k` padded with zero).
fn pack_rows(x: &[f32], m: usize, k: usize) -> Vec<u32> {
    let mut a = Vec::new();
    pack_rows_into(x, m, k, &mut a);
    a
}

/// [`pack_rows`] into `a` (resized to `m` rows of `k.div_ceil(2)` pairs, every one
/// written), so that a caller can keep the allocation.
pub(crate) fn pack_rows_into(x: &[f32], m: usize, k: usize, a: &mut Vec<u32>) {
    let k2 = k.div_ceil(2);
    a.resize(m * k2, 0);
    for (row, out) in x.chunks_exact(k).zip(a.chunks_exact_mut(k2)) {
        pack_pairs(row, out);
    }
}

/// One row as bf16 pairs into `out` (`row.len().div_ceil(2)` lanes), with
/// `vcvtne2ps2bf16` where the CPU has it.
fn pack_pairs(row: &[f32], out: &mut [u32]) {
    let k = row.len();
    #[cfg(target_arch = "x86_64")]
    // SAFETY: AVX-512 BF16 is checked first.
    let done = if supported() {
        unsafe { x86::pack_row(row, out) }
    } else {
        0
    };
    #[cfg(not(target_arch = "x86_64"))]
    let done = 0;
    for p in done..k.div_ceil(2) {
        let hi = if 2 * p + 1 < k { row[2 * p + 1] } else { 0.0 };
        out[p] = pair(row[2 * p], hi);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{OutPtr, PackedWeights, KC, MR, NR};
    use std::arch::x86_64::*;
    use std::ops::Range;

    /// Converts the leading multiple of 32 values of `row` into 16-pair chunks of `out`
    /// (`vcvtne2ps2bf16` rounds to nearest even, as [`super::pair`] does); returns how
    /// many pairs it wrote.
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub(super) unsafe fn pack_row(row: &[f32], out: &mut [u32]) -> usize {
        let chunks = row.len() / 32;
        for c in 0..chunks {
            let lo = _mm512_loadu_ps(row.as_ptr().add(32 * c));
            let hi = _mm512_loadu_ps(row.as_ptr().add(32 * c + 16));
            // The second argument fills the low half: values stay in order.
            let v: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(hi, lo));
            _mm512_storeu_si512(out.as_mut_ptr().add(16 * c).cast(), v);
        }
        16 * chunks
    }

    /// [`block_impl`] with bf16 dot products.
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub(super) unsafe fn block_bf16(
        a: &[u32],
        k2: usize,
        rows: Range<usize>,
        w: &PackedWeights,
        panels: Range<usize>,
        out: OutPtr,
    ) {
        block_impl::<true>(a, k2, rows, w, panels, out)
    }

    /// [`block_impl`] with f32 FMAs.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn block_f32(
        a: &[u32],
        k2: usize,
        rows: Range<usize>,
        w: &PackedWeights,
        panels: Range<usize>,
        out: OutPtr,
    ) {
        block_impl::<false>(a, k2, rows, w, panels, out)
    }

    /// One block of `y`, `rows` x the columns of `panels`: every row block of `a`
    /// against every panel, the inner dimension in chunks of `KC` steps. Inlined into
    /// the wrappers above, which enable the instructions it uses.
    ///
    /// Each `MR x KC` block of `a` is first copied into a buffer with rows `KC` apart.
    /// Read in place, rows `k` values apart land in the same few L1 sets when `k` is
    /// a multiple of 1024 (the 3072-wide feed-forward input): the broadcasts then
    /// missed L1, and that layer ran at 193 GFLOP/s against 282 for `k = 768`.
    #[inline(always)]
    unsafe fn block_impl<const BF16: bool>(
        a: &[u32],
        k2: usize,
        rows: Range<usize>,
        w: &PackedWeights,
        panels: Range<usize>,
        out: OutPtr,
    ) {
        let n = w.n;
        let mut abuf = vec![0u32; MR * KC];
        let mut p0 = 0;
        while p0 < k2 {
            let kc = (k2 - p0).min(KC);
            let mut i0 = rows.start;
            while i0 < rows.end {
                let mr = (rows.end - i0).min(MR);
                for r in 0..mr {
                    let from = (i0 + r) * k2 + p0;
                    abuf[r * KC..r * KC + kc].copy_from_slice(&a[from..from + kc]);
                }
                for q in panels.clone() {
                    let cols = (n - q * NR).min(NR);
                    let bias = w.bias.as_ref().map(|b| b.as_ptr().add(q * NR));
                    let job = Tile {
                        a: abuf.as_ptr(),
                        lda: KC,
                        b: w.panels.as_ptr().add((q * k2 + p0) * NR),
                        kc,
                        y: out.0.add(i0 * n + q * NR),
                        ldy: n,
                        cols,
                        // The first chunk starts from the bias (or zero), later ones
                        // from what the earlier chunks left in `y`.
                        start: if p0 == 0 { Start::Bias(bias) } else { Start::Y },
                    };
                    macro_rules! go {
                        ($($r:literal)*) => {
                            match mr {
                                $($r => tile::<$r, BF16>(&job),)*
                                _ => unreachable!("1..=MR rows"),
                            }
                        };
                    }
                    go!(1 2 3 4 5 6 7 8 9 10 11 12);
                }
                i0 += mr;
            }
            p0 += kc;
        }
    }

    #[derive(Clone, Copy)]
    enum Start {
        Bias(Option<*const f32>),
        Y,
    }

    struct Tile {
        a: *const u32,
        lda: usize,
        b: *const u32,
        kc: usize,
        y: *mut f32,
        ldy: usize,
        /// Columns of this panel inside `y` (32 but at the last panel).
        cols: usize,
        start: Start,
    }

    /// `R` rows by 32 columns of `y`, over `kc` steps.
    #[inline(always)]
    unsafe fn tile<const R: usize, const BF16: bool>(t: &Tile) {
        let lo_mask = mask(t.cols.min(16));
        let hi_mask = mask(t.cols.saturating_sub(16));
        let mut acc = [[_mm512_setzero_ps(); 2]; R];
        match t.start {
            Start::Bias(None) => {}
            Start::Bias(Some(b)) => {
                let b0 = _mm512_maskz_loadu_ps(lo_mask, b);
                let b1 = _mm512_maskz_loadu_ps(hi_mask, b.add(16));
                acc.iter_mut().for_each(|r| *r = [b0, b1]);
            }
            Start::Y => {
                for (r, row) in acc.iter_mut().enumerate() {
                    let y = t.y.add(r * t.ldy);
                    *row = [
                        _mm512_maskz_loadu_ps(lo_mask, y),
                        _mm512_maskz_loadu_ps(hi_mask, y.add(16)),
                    ];
                }
            }
        }
        if BF16 {
            for p in 0..t.kc {
                let w0: __m512bh = std::mem::transmute(_mm512_loadu_si512(t.b.add(p * NR).cast()));
                let w1: __m512bh =
                    std::mem::transmute(_mm512_loadu_si512(t.b.add(p * NR + 16).cast()));
                for (r, row) in acc.iter_mut().enumerate() {
                    let x: __m512bh =
                        std::mem::transmute(_mm512_set1_epi32(*t.a.add(r * t.lda + p) as i32));
                    row[0] = _mm512_dpbf16_ps(row[0], x, w0);
                    row[1] = _mm512_dpbf16_ps(row[1], x, w1);
                }
            }
        } else {
            let (a, b) = (t.a.cast::<f32>(), t.b.cast::<f32>());
            for p in 0..t.kc {
                let w0 = _mm512_loadu_ps(b.add(p * NR));
                let w1 = _mm512_loadu_ps(b.add(p * NR + 16));
                for (r, row) in acc.iter_mut().enumerate() {
                    let x = _mm512_set1_ps(*a.add(r * t.lda + p));
                    row[0] = _mm512_fmadd_ps(x, w0, row[0]);
                    row[1] = _mm512_fmadd_ps(x, w1, row[1]);
                }
            }
        }
        for (r, row) in acc.iter().enumerate() {
            let y = t.y.add(r * t.ldy);
            _mm512_mask_storeu_ps(y, lo_mask, row[0]);
            _mm512_mask_storeu_ps(y.add(16), hi_mask, row[1]);
        }
    }

    fn mask(lanes: usize) -> __mmask16 {
        ((1u32 << lanes) - 1) as __mmask16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> f32 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((*seed >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    }

    /// For an even `k`, packed pairs read as u16 are each value's bf16 bits in order
    /// (what MKL's bf16 GEMM is handed), whichever conversion ran; a kept buffer of
    /// another size changes nothing.
    #[test]
    fn packed_pairs_are_the_bf16_values_in_order() {
        let mut seed = 11;
        let mut kept = vec![7u32; 5];
        for (m, k) in [(3, 64), (2, 70), (5, 2)] {
            let x: Vec<f32> = (0..m * k).map(|_| 300.0 * lcg(&mut seed)).collect();
            pack_rows_into(&x, m, k, &mut kept);
            let bits: Vec<u16> = kept
                .iter()
                .flat_map(|p| [*p as u16, (*p >> 16) as u16])
                .collect();
            let want: Vec<u16> = x.iter().map(|&v| bf16::from_f32(v).to_bits()).collect();
            assert_eq!(bits, want, "{m} x {k}");
        }
    }

    /// The same sum in f64, over the bf16-rounded inputs with `round`: the kernels may
    /// differ only by their f32 accumulation.
    fn reference(
        x: &[f32],
        w: &[f32],
        b: Option<&[f32]>,
        (m, n, k): (usize, usize, usize),
        round: bool,
    ) -> Vec<f64> {
        let r = |v: f32| {
            if round {
                f64::from(bf16::from_f32(v).to_f32())
            } else {
                f64::from(v)
            }
        };
        let mut y = vec![0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                let s: f64 = (0..k).map(|t| r(x[i * k + t]) * r(w[j * k + t])).sum();
                y[i * n + j] = s + b.map_or(0.0, |b| f64::from(b[j]));
            }
        }
        y
    }

    #[test]
    fn matches_a_reference_for_every_edge() {
        for bf16 in [true, false] {
            if (bf16 && !supported()) || !supported_f32() {
                eprintln!("skipped (bf16: {bf16}): no AVX-512 (BF16) on this CPU");
                continue;
            }
            let mut seed = 7;
            // Row counts around MR and past one MC chunk of a job, column counts
            // around NR and the 256-column block, inner dimensions odd, below one
            // 32-value chunk, and past one KC chunk.
            for (m, n, k) in [
                (1, 1, 1),
                (5, 33, 7),
                (12, 32, 32),
                (13, 70, 65),
                (25, 300, 1539),
                (3, 2304, 768),
                (2 * MC + 7, 520, 800),
            ] {
                let x: Vec<f32> = (0..m * k).map(|_| lcg(&mut seed)).collect();
                let w: Vec<f32> = (0..n * k).map(|_| lcg(&mut seed) * 0.1).collect();
                for bias in [
                    None,
                    Some((0..n).map(|_| lcg(&mut seed)).collect::<Vec<f32>>()),
                ] {
                    let layer = if bf16 {
                        PackedWeights::bf16(&w, n, k, bias.clone())
                    } else {
                        PackedWeights::f32(&w, n, k, bias.clone())
                    };
                    let got = layer.forward(&x, m);
                    let want = reference(&x, &w, bias.as_deref(), (m, n, k), bf16);
                    for (i, (g, r)) in got.iter().zip(&want).enumerate() {
                        // f32 accumulation of k products of magnitude <= 0.05.
                        let tol = 1e-6 * (k as f64).sqrt() + 1e-6 * r.abs();
                        assert!(
                            (f64::from(*g) - r).abs() <= tol,
                            "bf16 {bf16} {m}x{n}x{k} [{i}]: {g} vs {r}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn no_rows_give_no_output() {
        if !supported() {
            return;
        }
        let layer = PackedWeights::bf16(&[1.0; 6], 2, 3, None);
        assert!(layer.forward(&[], 0).is_empty());
        let layer = PackedWeights::f32(&[1.0; 6], 2, 3, None);
        assert!(layer.forward(&[], 0).is_empty());
    }
}
