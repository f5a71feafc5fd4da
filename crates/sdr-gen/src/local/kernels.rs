//! Quantized matrix products for the weight types of small llama GGUFs
//! (Q4_1 and Q8_0), with AVX2 where the CPU has it.
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

use candle_core::quantized::{GgmlDType, QTensor};
use half::f16;
use rayon::prelude::*;

const QK: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Q4_1,
    Q8_0,
}

/// A quantized weight matrix of `n` rows (outputs) by `k` columns (inputs).
pub(crate) struct QWeight {
    kind: Kind,
    n: usize,
    k: usize,
    /// Per block: the scale, and for Q4_1 the minimum.
    d: Vec<f32>,
    m: Vec<f32>,
    /// Q4_1: 16 bytes of nibbles per block (low nibbles are elements 0..16,
    /// high nibbles 16..32); Q8_0: 32 signed bytes per block.
    qs: Vec<u8>,
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
        let (kind, block) = match t.dtype() {
            GgmlDType::Q4_1 => (Kind::Q4_1, 20),
            GgmlDType::Q8_0 => (Kind::Q8_0, 34),
            _ => return None,
        };
        Some(Self::parse(t, kind, block))
    }

    fn parse(t: &QTensor, kind: Kind, block: usize) -> Result<Self, String> {
        let (n, k) = t.shape().dims2().map_err(|e| e.to_string())?;
        if k % QK != 0 {
            return Err(format!("row width {k} is not a multiple of {QK}"));
        }
        let data = t.data().map_err(|e| e.to_string())?;
        let blocks = n * k / QK;
        if data.len() != blocks * block {
            return Err(format!(
                "{} bytes for {blocks} blocks of {block}",
                data.len()
            ));
        }
        let half = |b: &[u8]| f16::from_le_bytes([b[0], b[1]]).to_f32();
        let mut w = Self {
            kind,
            n,
            k,
            d: Vec::with_capacity(blocks),
            m: Vec::new(),
            qs: Vec::with_capacity(blocks * (block - 4)),
        };
        for b in data.chunks_exact(block) {
            w.d.push(half(&b[0..2]));
            match kind {
                Kind::Q4_1 => {
                    w.m.push(half(&b[2..4]));
                    w.qs.extend_from_slice(&b[4..20]);
                }
                Kind::Q8_0 => w.qs.extend_from_slice(&b[2..34]),
            }
        }
        Ok(w)
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
        let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
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
        let (n, k, m) = (40, 128, 5);
        let w: Vec<f32> = (0..n * k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 40.0)
            .collect();
        let x: Vec<f32> = (0..m * k)
            .map(|i| ((i * 13 % 29) as f32 - 14.0) / 7.0)
            .collect();
        let wt = Tensor::from_vec(w, (n, k), &Device::Cpu).unwrap();
        let q = QTensor::quantize(&wt, dtype).unwrap();
        let ours = QWeight::from_qtensor(&q).unwrap().unwrap();
        let y = ours.matmul(&x, m);
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
        assert!(diff < 1e-4, "{dtype:?}: {diff}");
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
}
