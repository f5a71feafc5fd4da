//! The encoder's numeric kernels, private to the crate: the GEMMs' own micro-kernels
//! (AVX-512 f32 and bf16, MKL's packed GEMMs), and the passes the packed forward pass
//! runs on their outputs in place (bias plus activation, residual plus layer norm,
//! attention). The models in [`crate::models`] call them; which GEMM a dense layer uses
//! is chosen in [`crate::gemm`].

pub(crate) mod activation;
pub(crate) mod attention;
pub(crate) mod avx512_gemm;
#[cfg(feature = "mkl")]
pub(crate) mod mkl;
pub(crate) mod norm;

use candle_core::{DType, Result};
use candle_nn::Linear;

/// Rows per job of the row-wise passes (layer norm, activation) when they use the
/// rayon pool: enough work per job to cover its hand-off.
pub(crate) const ROWS_PER_JOB: usize = 16;

/// `y[r, j] += bias[j]` for every row `r` (nothing for an empty bias).
pub(crate) fn add_bias(y: &mut [f32], bias: &[f32]) {
    if bias.is_empty() {
        return;
    }
    for row in y.chunks_exact_mut(bias.len()) {
        row.iter_mut().zip(bias).for_each(|(v, b)| *v += b);
    }
}

/// `Σ f(x)` over `xs` with 16 independent partial sums, so that it vectorises without
/// reassociation by the compiler.
#[inline(always)]
pub(crate) fn sum16(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0f32; 16];
    let chunks = xs.chunks_exact(16);
    let tail: f32 = chunks.remainder().iter().map(|&x| f(x)).sum();
    for chunk in chunks {
        for (a, &x) in acc.iter_mut().zip(chunk) {
            *a += f(x);
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// A layer's f32 weights (`n x k`, row-major), `n`, `k` and bias.
pub(crate) type F32Parts = (Vec<f32>, usize, usize, Option<Vec<f32>>);

/// `linear`'s weights as [`F32Parts`].
pub(crate) fn f32_parts(linear: &Linear) -> Result<F32Parts> {
    let w = linear.weight().to_dtype(DType::F32)?;
    let (n, k) = w.dims2()?;
    let bias = match linear.bias() {
        Some(b) => Some(b.to_dtype(DType::F32)?.to_vec1::<f32>()?),
        None => None,
    };
    Ok((w.flatten_all()?.to_vec1::<f32>()?, n, k, bias))
}
