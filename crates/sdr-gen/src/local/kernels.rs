//! Quantized matrix products for the weight types of small GGUFs (Q4_1,
//! Q8_0, and the Q5_0, Q4_K and Q6_K of llama.cpp's Q4_K_M files), with AVX2
//! where the CPU has it.
//!
//! Why not candle's `QMatMul`: candle 0.11 has no SIMD kernel for Q4_1 on
//! x86 (a scalar loop does every product), and its CPU thread pool spins,
//! which starves on a machine whose cores are busy with other work.
//!
//! The arithmetic is ggml's, as candle does it: each activation row is
//! quantized per block of 32 (Q8_1: `d = max|x|/127`, `q = round(x/d)`,
//! `s = d Σq`; Q8_0 the same without `s`); a block's integer dot product is
//! exact, and the blocks are summed in order in f32,
//! `Σ_b (Σq_w q_x) d_w d_x + m_w s_x` for Q4_1 (`w = d_w q + m_w`) and
//! `Σ_b (Σq_w q_x) d_w d_x` for Q8_0. So every output is the same number
//! whatever the number of rows, their order or the thread count, and the
//! same as candle's for Q4_1.
//!
//! The other types are rewritten exactly into these forms when loaded (every
//! weight keeps its value, checked against candle's dequantization):
//! Q5_0 (`w = d (q - 16)`, 5-bit `q`) is Q8_0 with the same scale; Q4_K
//! (super-blocks of 256 with 6-bit scales and minima per 32) is Q4_1 with
//! f32 scale `d·sc` and minimum `-dmin·m` per block of 32 (products of an
//! f16 and a 6-bit integer, exact in f32); Q6_K (`w = d·sc (q - 32)`, 8-bit
//! scales per 16) is 8-bit weights with two scales per block of 32
//! (`(Σ_{0..16} q_w q_x d_0 + Σ_{16..32} q_w q_x d_1) d_x`). Only the
//! activations differ from ggml there: ggml quantizes them per 256 (Q8_K)
//! for the K types, we per 32, which is finer.

use candle_core::quantized::{GgmlDType, QTensor};
use half::f16;
use rayon::prelude::*;

const QK: usize = 32;
/// Elements per super-block of the K types.
const QK_K: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// 4-bit `q`, `w = d q + m` (Q4_1, Q4_K).
    Q4_1,
    /// Signed 8-bit `q`, `w = d q` (Q8_0, Q5_0).
    Q8_0,
    /// Signed 8-bit `q`, `w = d q` with one `d` per 16 weights (Q6_K).
    Q8_16,
}

/// A quantized weight matrix of `n` rows (outputs) by `k` columns (inputs).
pub(crate) struct QWeight {
    kind: Kind,
    n: usize,
    k: usize,
    /// Per block: the scale (two for `Q8_16`), and for Q4_1 the minimum.
    d: Vec<f32>,
    m: Vec<f32>,
    /// Q4_1: 16 bytes of nibbles per block (low nibbles are elements 0..16,
    /// high nibbles 16..32); Q8_0 and Q8_16: 32 signed bytes per block.
    qs: Vec<u8>,
}

fn half(b: &[u8]) -> f32 {
    f16::from_le_bytes([b[0], b[1]]).to_f32()
}

/// The 6-bit scale and minimum of sub-block `j` of a Q4_K super-block (ggml's `get_scale_min_k4`).
fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Activation rows quantized per block of 32.
struct QActs {
    qs: Vec<i8>,
    d: Vec<f32>,
    s: Vec<f32>,
}

impl QWeight {
    /// The weight in our layout; `None` for a type these kernels do not handle.
    pub(crate) fn from_qtensor(t: &QTensor) -> Option<Result<Self, String>> {
        let dtype = t.dtype();
        let (kind, block, elems) = match dtype {
            GgmlDType::Q4_1 => (Kind::Q4_1, 20, QK),
            GgmlDType::Q8_0 => (Kind::Q8_0, 34, QK),
            GgmlDType::Q5_0 => (Kind::Q8_0, 22, QK),
            GgmlDType::Q4K => (Kind::Q4_1, 144, QK_K),
            GgmlDType::Q6K => (Kind::Q8_16, 210, QK_K),
            _ => return None,
        };
        Some(Self::parse(t, kind, block, elems))
    }

    fn parse(t: &QTensor, kind: Kind, block: usize, elems: usize) -> Result<Self, String> {
        let (n, k) = t.shape().dims2().map_err(|e| e.to_string())?;
        if k % elems != 0 {
            return Err(format!("row width {k} is not a multiple of {elems}"));
        }
        let data = t.data().map_err(|e| e.to_string())?;
        let blocks = n * k / elems;
        if data.len() != blocks * block {
            return Err(format!(
                "{} bytes for {blocks} blocks of {block}",
                data.len()
            ));
        }
        let small = n * k / QK;
        let mut w = Self {
            kind,
            n,
            k,
            d: Vec::with_capacity(if kind == Kind::Q8_16 {
                2 * small
            } else {
                small
            }),
            m: Vec::new(),
            qs: Vec::with_capacity(if kind == Kind::Q4_1 { 16 } else { QK } * small),
        };
        let dtype = t.dtype();
        for b in data.chunks_exact(block) {
            match dtype {
                GgmlDType::Q4_1 => {
                    w.d.push(half(&b[0..2]));
                    w.m.push(half(&b[2..4]));
                    w.qs.extend_from_slice(&b[4..20]);
                }
                GgmlDType::Q8_0 => {
                    w.d.push(half(&b[0..2]));
                    w.qs.extend_from_slice(&b[2..34]);
                }
                GgmlDType::Q5_0 => w.push_q5_0(b),
                GgmlDType::Q4K => w.push_q4k(b),
                _ => w.push_q6k(b),
            }
        }
        Ok(w)
    }

    /// One Q5_0 block (`d`, 32 high bits, 16 bytes of low nibbles) as Q8_0.
    fn push_q5_0(&mut self, b: &[u8]) {
        self.d.push(half(&b[0..2]));
        let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
        let qs = &b[6..22];
        let mut q = [0u8; QK];
        for j in 0..QK / 2 {
            let h0 = ((qh >> j) & 1) as u8;
            let h1 = ((qh >> (j + 16)) & 1) as u8;
            q[j] = (((qs[j] & 0x0F) | (h0 << 4)) as i8 - 16) as u8;
            q[j + QK / 2] = (((qs[j] >> 4) | (h1 << 4)) as i8 - 16) as u8;
        }
        self.qs.extend_from_slice(&q);
    }

    /// One Q4_K super-block (`d`, `dmin`, 12 bytes of 6-bit scales and
    /// minima, 128 bytes of nibbles) as eight Q4_1 blocks.
    fn push_q4k(&mut self, b: &[u8]) {
        let (d, dmin) = (half(&b[0..2]), half(&b[2..4]));
        let scales = &b[4..16];
        let qs = &b[16..144];
        for j in 0..QK_K / QK {
            let (sc, m) = scale_min_k4(j, scales);
            self.d.push(d * sc as f32);
            self.m.push(-(dmin * m as f32));
            // Sub-block j: the low (even j) or high (odd j) nibbles of the 32 bytes of chunk j / 2.
            let chunk = &qs[(j / 2) * 32..(j / 2) * 32 + 32];
            let v = |l: usize| {
                if j % 2 == 0 {
                    chunk[l] & 0x0F
                } else {
                    chunk[l] >> 4
                }
            };
            for i in 0..16 {
                self.qs.push(v(i) | (v(i + 16) << 4));
            }
        }
    }

    /// One Q6_K super-block (128 bytes of low nibbles, 64 of high bit pairs,
    /// 16 signed scales, `d`) as eight blocks of 8-bit weights, two scales each.
    fn push_q6k(&mut self, b: &[u8]) {
        let (ql, qh, sc) = (&b[0..128], &b[128..192], &b[192..208]);
        let d = half(&b[208..210]);
        self.d.extend(sc.iter().map(|&s| d * s as i8 as f32));
        let mut q = [0u8; QK_K];
        for h in 0..2 {
            let (ql, qh) = (&ql[64 * h..], &qh[32 * h..]);
            let y = &mut q[128 * h..];
            for l in 0..32 {
                let v = |low: u8, high: u8| (low | (high << 4)) as i8 - 32;
                y[l] = v(ql[l] & 0x0F, qh[l] & 3) as u8;
                y[l + 32] = v(ql[l + 32] & 0x0F, (qh[l] >> 2) & 3) as u8;
                y[l + 64] = v(ql[l] >> 4, (qh[l] >> 4) & 3) as u8;
                y[l + 96] = v(ql[l + 32] >> 4, (qh[l] >> 6) & 3) as u8;
            }
        }
        self.qs.extend_from_slice(&q);
    }

    /// The weights as f32, row-major (to check the conversions).
    #[cfg(test)]
    fn dequantize(&self) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.n * self.k);
        for b in 0..self.n * self.k / QK {
            for i in 0..QK {
                out.push(match self.kind {
                    Kind::Q4_1 => {
                        let byte = self.qs[b * 16 + i % 16];
                        let q = if i < 16 { byte & 0x0F } else { byte >> 4 };
                        self.d[b] * q as f32 + self.m[b]
                    }
                    Kind::Q8_0 => self.d[b] * self.qs[b * QK + i] as i8 as f32,
                    Kind::Q8_16 => self.d[2 * b + i / 16] * self.qs[b * QK + i] as i8 as f32,
                });
            }
        }
        out
    }

    /// `x W^T` for `m` stacked rows of `x` (`m × k`), giving `m × n`.
    pub(crate) fn matmul(&self, x: &[f32], m: usize) -> Vec<f32> {
        assert_eq!(x.len(), m * self.k, "matmul input is not {m} × {}", self.k);
        let acts = quantize(x, self.k, self.kind == Kind::Q4_1);
        let nb = self.k / QK;
        // Output columns in parallel chunks, computed column-major and then transposed.
        const CHUNK: usize = 32;
        let mut by_col = vec![0f32; self.n * m];
        by_col
            .par_chunks_mut(CHUNK * m)
            .enumerate()
            .for_each(|(c, out)| {
                let cols = c * CHUNK..(c * CHUNK + out.len() / m);
                columns(self, &acts, nb, m, cols, out);
            });
        let mut y = vec![0f32; m * self.n];
        for (j, col) in by_col.chunks_exact(m).enumerate() {
            for (r, v) in col.iter().enumerate() {
                y[r * self.n + j] = *v;
            }
        }
        y
    }
}

/// ggml's `quantize_row_q8_1` (or `q8_0` without the sums), as candle writes it.
fn quantize(x: &[f32], k: usize, sums: bool) -> QActs {
    let blocks = x.len() / QK;
    let mut a = QActs {
        qs: vec![0; x.len()],
        d: Vec::with_capacity(blocks),
        s: Vec::with_capacity(if sums { blocks } else { 0 }),
    };
    debug_assert_eq!(x.len() % k, 0);
    for (xb, qb) in x.chunks_exact(QK).zip(a.qs.chunks_exact_mut(QK)) {
        let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let d16 = f16::from_f32(d);
        let mut sum = 0i32;
        for (q, v) in qb.iter_mut().zip(xb) {
            *q = (v * id).round() as i8;
            sum += *q as i32;
        }
        a.d.push(d16.to_f32());
        if sums {
            a.s.push((f16::from_f32(sum as f32) * d16).to_f32());
        }
    }
    a
}

/// Output columns `cols` for all `m` rows into `out` (column-major).
fn columns(
    w: &QWeight,
    a: &QActs,
    nb: usize,
    m: usize,
    cols: std::ops::Range<usize>,
    out: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present; all loads stay within the block slices.
            unsafe { avx2::columns(w, a, nb, m, cols, out) };
            return;
        }
    }
    for (ci, j) in cols.enumerate() {
        for r in 0..m {
            let mut sumf = 0f32;
            for b in 0..nb {
                let (wb, xb) = (j * nb + b, r * nb + b);
                let xq = &a.qs[xb * QK..(xb + 1) * QK];
                sumf += match w.kind {
                    Kind::Q4_1 => {
                        let wq = &w.qs[wb * 16..(wb + 1) * 16];
                        let mut sumi = 0i32;
                        for i in 0..16 {
                            sumi += (wq[i] & 0x0F) as i32 * xq[i] as i32
                                + (wq[i] >> 4) as i32 * xq[i + 16] as i32;
                        }
                        sumi as f32 * w.d[wb] * a.d[xb] + w.m[wb] * a.s[xb]
                    }
                    Kind::Q8_0 => {
                        let wq = &w.qs[wb * QK..(wb + 1) * QK];
                        let sumi: i32 = wq
                            .iter()
                            .zip(xq)
                            .map(|(&p, &q)| p as i8 as i32 * q as i32)
                            .sum();
                        sumi as f32 * w.d[wb] * a.d[xb]
                    }
                    Kind::Q8_16 => {
                        let wq = &w.qs[wb * QK..(wb + 1) * QK];
                        let s = |r: std::ops::Range<usize>| -> i32 {
                            r.map(|i| wq[i] as i8 as i32 * xq[i] as i32).sum()
                        };
                        (s(0..16) as f32 * w.d[2 * wb] + s(16..32) as f32 * w.d[2 * wb + 1])
                            * a.d[xb]
                    }
                };
            }
            out[ci * m + r] = sumf;
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{Kind, QActs, QWeight, QK};
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2")]
    unsafe fn hsum(v: __m256i) -> i32 {
        hsum128(_mm_add_epi32(
            _mm256_castsi256_si128(v),
            _mm256_extracti128_si256(v, 1),
        ))
    }

    #[target_feature(enable = "avx2")]
    unsafe fn hsum128(s: __m128i) -> i32 {
        let s = _mm_hadd_epi32(s, s);
        let s = _mm_hadd_epi32(s, s);
        _mm_cvtsi128_si32(s)
    }

    /// Same sums as the scalar loop: the block's integer dot product by
    /// `maddubs` (unsigned × signed bytes, pairs summed in i16 without
    /// overflow since |pair| ≤ 2·127·128) and `madd`, then the f32 update.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn columns(
        w: &QWeight,
        a: &QActs,
        nb: usize,
        m: usize,
        cols: std::ops::Range<usize>,
        out: &mut [f32],
    ) {
        let low = _mm256_set1_epi8(0x0F);
        let ones = _mm256_set1_epi16(1);
        const ROWS: usize = 16;
        let mut acc = [0f32; ROWS];
        for (ci, j) in cols.enumerate() {
            for r0 in (0..m).step_by(ROWS) {
                let rows = ROWS.min(m - r0);
                acc[..rows].fill(0.0);
                for b in 0..nb {
                    let wb = j * nb + b;
                    match w.kind {
                        Kind::Q4_1 => {
                            let raw = _mm_loadu_si128(w.qs.as_ptr().add(wb * 16) as *const __m128i);
                            let wq = _mm256_and_si256(
                                _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw),
                                low,
                            );
                            let (wd, wm) = (w.d[wb], w.m[wb]);
                            for (i, acc) in acc[..rows].iter_mut().enumerate() {
                                let xb = (r0 + i) * nb + b;
                                let xq = _mm256_loadu_si256(
                                    a.qs.as_ptr().add(xb * QK) as *const __m256i
                                );
                                let p = _mm256_madd_epi16(_mm256_maddubs_epi16(wq, xq), ones);
                                *acc += hsum(p) as f32 * wd * a.d[xb] + wm * a.s[xb];
                            }
                        }
                        Kind::Q8_0 => {
                            let wq =
                                _mm256_loadu_si256(w.qs.as_ptr().add(wb * QK) as *const __m256i);
                            let wabs = _mm256_sign_epi8(wq, wq);
                            let wd = w.d[wb];
                            for (i, acc) in acc[..rows].iter_mut().enumerate() {
                                let xb = (r0 + i) * nb + b;
                                let xq = _mm256_loadu_si256(
                                    a.qs.as_ptr().add(xb * QK) as *const __m256i
                                );
                                // |w| · (x with w's sign) = w · x, lane by lane.
                                let p = _mm256_madd_epi16(
                                    _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(xq, wq)),
                                    ones,
                                );
                                *acc += hsum(p) as f32 * wd * a.d[xb];
                            }
                        }
                        Kind::Q8_16 => {
                            let wq =
                                _mm256_loadu_si256(w.qs.as_ptr().add(wb * QK) as *const __m256i);
                            let wabs = _mm256_sign_epi8(wq, wq);
                            let (d0, d1) = (w.d[2 * wb], w.d[2 * wb + 1]);
                            for (i, acc) in acc[..rows].iter_mut().enumerate() {
                                let xb = (r0 + i) * nb + b;
                                let xq = _mm256_loadu_si256(
                                    a.qs.as_ptr().add(xb * QK) as *const __m256i
                                );
                                // Lanes 0..4 of the i32 sums hold elements 0..16, lanes 4..8 the rest.
                                let p = _mm256_madd_epi16(
                                    _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(xq, wq)),
                                    ones,
                                );
                                let s0 = hsum128(_mm256_castsi256_si128(p));
                                let s1 = hsum128(_mm256_extracti128_si256(p, 1));
                                *acc += (s0 as f32 * d0 + s1 as f32 * d1) * a.d[xb];
                            }
                        }
                    }
                }
                out[ci * m + r0..ci * m + r0 + rows].copy_from_slice(&acc[..rows]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Module, Tensor};

    fn check(dtype: GgmlDType) {
        // k = 4 blocks: candle's unrolled Q4_1 path (taken depending on its threading) needs an even count.
        // The K types need whole super-blocks of 256.
        let k = if matches!(dtype, GgmlDType::Q4K | GgmlDType::Q6K) {
            512
        } else {
            128
        };
        let (n, m) = (40, 5);
        let w: Vec<f32> = (0..n * k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 40.0)
            .collect();
        let x: Vec<f32> = (0..m * k)
            .map(|i| ((i * 13 % 29) as f32 - 14.0) / 7.0)
            .collect();
        let wt = Tensor::from_vec(w, (n, k), &Device::Cpu).unwrap();
        let q = QTensor::quantize(&wt, dtype).unwrap();
        let ours = QWeight::from_qtensor(&q).unwrap().unwrap();
        let exact: Vec<f32> = q
            .dequantize(&Device::Cpu)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        assert_eq!(
            ours.dequantize(),
            exact,
            "{dtype:?}: weights are kept exactly"
        );
        let y = ours.matmul(&x, m);
        // Against the f32 product of the same weights, up to the 8-bit
        // activations: each is off by at most its block's step `max|x| / 127`.
        let amax = |v: &[f32]| v.iter().fold(0f32, |a, v| a.max(v.abs()));
        let scale = amax(&x) / 127.0 * amax(&exact) * k as f32;
        for r in 0..m {
            for j in 0..n {
                let dense: f32 = (0..k).map(|i| x[r * k + i] * exact[j * k + i]).sum();
                let got = y[r * n + j];
                assert!(
                    (got - dense).abs() < scale,
                    "{dtype:?} ({r}, {j}): {got} vs {dense}"
                );
            }
        }
        let xt = Tensor::from_vec(x.clone(), (m, k), &Device::Cpu).unwrap();
        let want: Vec<f32> = candle_core::quantized::QMatMul::from_qtensor(q)
            .unwrap()
            .forward(&xt)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        let diff = y
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        // The K types quantize the activations per 256 in candle (per 32
        // here): measured 1.5e-3 (Q4_K) and 9.4e-4 (Q6_K) on outputs of about 10.
        let tol = if matches!(dtype, GgmlDType::Q4K | GgmlDType::Q6K) {
            1e-2
        } else {
            1e-4
        };
        assert!(diff < tol, "{dtype:?}: {diff}");
        if dtype == GgmlDType::Q4_1 {
            assert_eq!(y, want, "Q4_1 is candle's arithmetic exactly");
        }
        // Each row alone gives the same numbers.
        for r in 0..m {
            let alone = ours.matmul(&x[r * k..(r + 1) * k], 1);
            assert_eq!(alone, y[r * n..(r + 1) * n], "row {r}");
        }
    }

    #[test]
    fn q4_1_matches_candle() {
        check(GgmlDType::Q4_1);
    }

    #[test]
    fn q8_0_matches_candle() {
        check(GgmlDType::Q8_0);
    }

    #[test]
    fn q5_0_as_q8_0() {
        check(GgmlDType::Q5_0);
    }

    #[test]
    fn q4k_as_q4_1() {
        check(GgmlDType::Q4K);
    }

    #[test]
    fn q6k_with_two_scales_per_block() {
        check(GgmlDType::Q6K);
    }
}
