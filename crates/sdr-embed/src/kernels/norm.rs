//! `x ← LN(x + bias + residual)` over the rows of a GEMM's output, in place.

use rayon::prelude::*;

use super::{sum16, ROWS_PER_JOB};

/// Layer-norm parameters `γ`, `β`, `ε`.
pub(crate) struct Norm {
    pub(crate) gamma: Vec<f32>,
    pub(crate) beta: Vec<f32>,
    pub(crate) eps: f32,
}

/// `x ← LN(x + bias + residual)` row by row (mean, then the variance about it, in
/// f32); `bias` has one value per column.
pub(crate) fn layer_norm(
    x: &mut [f32],
    bias: Option<&[f32]>,
    residual: Option<&[f32]>,
    norm: &Norm,
    threads: bool,
) {
    let h = norm.gamma.len();
    if !threads || h == 0 {
        return layer_norm_rows(x, bias, residual, norm);
    }
    let chunk = h * ROWS_PER_JOB;
    x.par_chunks_mut(chunk).enumerate().for_each(|(i, rows)| {
        let res = residual.map(|r| &r[i * chunk..][..rows.len()]);
        layer_norm_rows(rows, bias, res, norm)
    });
}

fn layer_norm_rows(x: &mut [f32], bias: Option<&[f32]>, residual: Option<&[f32]>, norm: &Norm) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F (checked just above).
            unsafe { layer_norm_avx512(x, bias, residual, norm) };
            return;
        }
    }
    layer_norm_portable(x, bias, residual, norm)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn layer_norm_avx512(
    x: &mut [f32],
    bias: Option<&[f32]>,
    residual: Option<&[f32]>,
    norm: &Norm,
) {
    layer_norm_portable(x, bias, residual, norm)
}

#[inline(always)]
fn layer_norm_portable(x: &mut [f32], bias: Option<&[f32]>, residual: Option<&[f32]>, norm: &Norm) {
    let h = norm.gamma.len();
    for (r, row) in x.chunks_exact_mut(h).enumerate() {
        if let Some(b) = bias {
            row.iter_mut().zip(b).for_each(|(v, b)| *v += b);
        }
        if let Some(res) = residual {
            row.iter_mut()
                .zip(&res[r * h..(r + 1) * h])
                .for_each(|(v, a)| *v += a);
        }
        let mean = sum16(row, |v| v) / h as f32;
        let var = sum16(row, |v| (v - mean) * (v - mean)) / h as f32;
        let inv = 1.0 / (var + norm.eps).sqrt();
        for ((v, g), b) in row.iter_mut().zip(&norm.gamma).zip(&norm.beta) {
            *v = (*v - mean) * inv * g + b;
        }
    }
}
