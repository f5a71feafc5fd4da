//! GELU in its exact erf form, `gelu(x) = x/2 · (1 + erf(x/√2))`, vectorised for f32 on
//! the CPU.
//!
//! candle evaluates erf with a scalar libm call per element; in all-mpnet-base-v2 that is
//! `tokens × 3072 × 12` calls per forward pass and about a sixth of the encoder's time.
//! Here erf is Abramowitz & Stegun 7.1.26 (absolute error ≤ 1.5e-7, below f32's
//! resolution of `1 + erf`) over a Cephes-style `exp`, written without branches so the
//! loop vectorises; AVX-512 is used when the CPU has it (checked at run time). Other
//! devices and dtypes go through candle's own `gelu_erf`.

use candle_core::{CpuStorage, CustomOp1, DType, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

/// `gelu_erf(xs)`: the vectorised kernel for contiguous f32 CPU tensors, candle's
/// otherwise.
pub fn gelu_erf(xs: &Tensor) -> Result<Tensor> {
    if xs.device().is_cpu() && xs.dtype() == DType::F32 {
        xs.contiguous()?.apply_op1_no_bwd(&GeluErf)
    } else {
        xs.gelu_erf()
    }
}

struct GeluErf;

/// Elements per parallel task: large enough that scheduling is noise next to the maths.
const CHUNK: usize = 1 << 14;

impl CustomOp1 for GeluErf {
    fn name(&self) -> &'static str {
        "sdr-gelu-erf"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let data = storage.as_slice::<f32>()?;
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("gelu_erf: input must be contiguous")
        };
        let src = &data[start..end];
        let mut out = vec![0f32; src.len()];
        out.par_chunks_mut(CHUNK)
            .zip(src.par_chunks(CHUNK))
            .for_each(|(o, i)| gelu_slice(i, o));
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }
}

/// `out[i] = gelu(src[i])`, with the widest SIMD the CPU offers.
pub fn gelu_slice(src: &[f32], out: &mut [f32]) {
    out.copy_from_slice(src);
    gelu_in_place(out)
}

/// `xs[i] = gelu(xs[i])`, with the widest SIMD the CPU offers.
pub fn gelu_in_place(xs: &mut [f32]) {
    gelu_bias_in_place(xs, &[])
}

/// `y[r, c] = gelu(y[r, c] + bias[c])` for every row `r` of `bias.len()` values (no bias
/// when `bias` is empty): one pass over the feed-forward activations instead of two.
pub fn gelu_bias_in_place(y: &mut [f32], bias: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F (checked just above).
            unsafe { gelu_avx512(y, bias) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            crate::kernels::add_bias(y, bias);
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            unsafe { gelu_avx2(y) };
            return;
        }
    }
    crate::kernels::add_bias(y, bias);
    gelu_portable(y)
}

/// The AVX-512 pass: the same formula as [`gelu`] on 16 lanes, with fused
/// multiply-adds, `1/(1 + p·a)` from `vrcp14ps` and one Newton step (relative error
/// about 2⁻²⁸), and the exponent applied with `vscalefps`. Written with intrinsics
/// because the compiler keeps the scalar form's separate multiplies and adds and its
/// division, which made this pass about a third slower.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn gelu_avx512(y: &mut [f32], bias: &[f32]) {
    use std::arch::x86_64::*;
    let cols = if bias.is_empty() { y.len() } else { bias.len() };
    if cols == 0 {
        return;
    }
    for row in y.chunks_mut(cols) {
        let mut c = 0;
        while c < row.len() {
            let lanes = (row.len() - c).min(16);
            let mask: __mmask16 = if lanes == 16 { !0 } else { (1u16 << lanes) - 1 };
            let at = row.as_mut_ptr().add(c);
            let mut x = _mm512_maskz_loadu_ps(mask, at);
            if !bias.is_empty() {
                x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask, bias.as_ptr().add(c)));
            }
            _mm512_mask_storeu_ps(at, mask, gelu16(x));
            c += 16;
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn gelu16(x: std::arch::x86_64::__m512) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;
    let k = _mm512_set1_ps;
    let one = k(1.0);
    let z = _mm512_mul_ps(x, k(std::f32::consts::FRAC_1_SQRT_2));
    let a = _mm512_abs_ps(z);
    let d = _mm512_fmadd_ps(k(ERF_P), a, one);
    let r = _mm512_rcp14_ps(d);
    let t = _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, k(2.0)));
    let mut poly = k(ERF_A[4]);
    for &coef in ERF_A[..4].iter().rev() {
        poly = _mm512_fmadd_ps(poly, t, k(coef));
    }
    poly = _mm512_mul_ps(poly, t);
    // exp(-a²), as in `exp_nonpositive`.
    let e_arg = _mm512_max_ps(
        _mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), a), a),
        k(-87.0),
    );
    let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
        _mm512_mul_ps(e_arg, k(std::f32::consts::LOG2_E)),
    );
    let rr = _mm512_fnmadd_ps(n, k(LN2_LO), _mm512_fnmadd_ps(n, k(LN2_HI), e_arg));
    let mut p = k(EXP_C[0]);
    for &coef in &EXP_C[1..] {
        p = _mm512_fmadd_ps(p, rr, k(coef));
    }
    let p = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, rr), rr, rr), one);
    let e = _mm512_scalef_ps(p, n);
    let erf_abs = _mm512_fnmadd_ps(poly, e, one);
    // erf(z) takes z's sign; x/2 · (1 + erf(z)).
    let sign = _mm512_castsi512_ps(_mm512_and_si512(
        _mm512_castps_si512(z),
        _mm512_set1_epi32(i32::MIN),
    ));
    let erf = _mm512_castsi512_ps(_mm512_or_si512(
        _mm512_castps_si512(erf_abs),
        _mm512_castps_si512(sign),
    ));
    _mm512_mul_ps(_mm512_mul_ps(k(0.5), x), _mm512_add_ps(one, erf))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gelu_avx2(xs: &mut [f32]) {
    gelu_portable(xs)
}

#[inline(always)]
fn gelu_portable(xs: &mut [f32]) {
    for x in xs {
        *x = gelu(*x);
    }
}

/// One element; branch-free so that the loops above vectorise.
// Abramowitz & Stegun 7.1.26: erf(a) = 1 - t·(a1 + t·(a2 + …)) · exp(-a²), t = 1/(1 + p·a).
const ERF_P: f32 = 0.327_591_1;
const ERF_A: [f32; 5] = [
    0.254_829_6,
    -0.284_496_74,
    1.421_413_8,
    -1.453_152_1,
    1.061_405_4,
];
// Cephes `expf`: ln 2 split in two for the range reduction, and the polynomial of
// `(exp(r) - 1 - r) / r²` from its highest coefficient.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
const EXP_C: [f32; 6] = [
    1.987_569_1e-4,
    1.398_199_9e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    1.666_666_5e-1,
    0.5,
];

#[inline(always)]
pub fn gelu(x: f32) -> f32 {
    let [a1, a2, a3, a4, a5] = ERF_A;
    let z = x * std::f32::consts::FRAC_1_SQRT_2;
    let a = z.abs();
    let t = 1.0 / (1.0 + ERF_P * a);
    let poly = t * (a1 + t * (a2 + t * (a3 + t * (a4 + t * a5))));
    let erf_abs = 1.0 - poly * exp_nonpositive(-a * a);
    0.5 * x * (1.0 + erf_abs.copysign(z))
}

/// `exp(y)` for `y <= 0` (Cephes `expf`: range reduction by `ln 2`, degree-6 polynomial),
/// flushed to `2^-126·p` below `-87` where the true value is under f32's normal range.
#[inline(always)]
pub(crate) fn exp_nonpositive(y: f32) -> f32 {
    // 1.5·2^23: adding then subtracting it rounds to the nearest integer without a branch.
    const ROUND: f32 = 12_582_912.0;
    let y = y.max(-87.0);
    let n = (y * std::f32::consts::LOG2_E + ROUND) - ROUND;
    let r = y - n * LN2_HI - n * LN2_LO;
    let [c0, c1, c2, c3, c4, c5] = EXP_C;
    let p = (((((c0 * r + c1) * r + c2) * r + c3) * r + c4) * r + c5) * r * r + r + 1.0;
    // `n` is a whole number in [-126, 0] (y >= -87), so the unchecked conversion is
    // exact; `as i32` would saturate, which LLVM does lane by lane (16 scalar converts
    // per vector: most of this function's time before).
    // SAFETY: finite and within i32's range, as above.
    let n = unsafe { n.to_int_unchecked::<i32>() };
    let scale = f32::from_bits(((n + 127) << 23) as u32);
    p * scale
}

/// The feed-forward activation of a model (`config.json`'s `hidden_act`).
#[derive(Clone, Copy)]
pub(crate) enum Act {
    GeluErf,
    GeluTanh,
    Relu,
}

/// `gelu` in its tanh form (`gelu_new`, `gelu_pytorch_tanh`).
fn gelu_tanh(x: f32) -> f32 {
    const C: f32 = 0.797_884_6; // √(2/π)
    0.5 * x * (1.0 + (C * (x + 0.044_715 * x * x * x)).tanh())
}

/// `y ← act(y + bias)` row by row (`bias`: one value per column).
pub(crate) fn activate(y: &mut [f32], bias: Option<&[f32]>, act: Act, threads: bool) {
    // Whole rows per job when there is a bias to add; the activation alone is
    // element-wise.
    let cols = bias.map_or(1024, <[f32]>::len).max(1);
    if threads {
        y.par_chunks_mut(cols * crate::kernels::ROWS_PER_JOB)
            .for_each(|rows| activate_rows(rows, bias, act));
    } else {
        activate_rows(y, bias, act)
    }
}

fn activate_rows(y: &mut [f32], bias: Option<&[f32]>, act: Act) {
    let bias = bias.unwrap_or_default();
    match act {
        Act::GeluErf => gelu_bias_in_place(y, bias),
        Act::GeluTanh => {
            crate::kernels::add_bias(y, bias);
            y.iter_mut().for_each(|v| *v = gelu_tanh(*v))
        }
        Act::Relu => {
            crate::kernels::add_bias(y, bias);
            y.iter_mut().for_each(|v| *v = v.max(0.0))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn reference(x: f64) -> f64 {
        0.5 * x * (1.0 + candle_core::cpu::erf::erf_f64(x * std::f64::consts::FRAC_1_SQRT_2))
    }

    #[test]
    fn matches_exact_gelu_to_f32_resolution() {
        // Dense sweep over the range a transformer's pre-activations take, plus tails.
        let mut worst = 0f64;
        let mut x = -12.0f32;
        while x <= 12.0 {
            let got = gelu(x) as f64;
            let want = reference(x as f64);
            let err = (got - want).abs() / want.abs().max(1.0);
            worst = worst.max(err);
            x += 1.0 / 1024.0;
        }
        assert!(worst < 5e-7, "max error {worst:e}");
        for x in [-100.0f32, -30.0, 30.0, 100.0, 0.0] {
            assert!(
                (gelu(x) as f64 - reference(x as f64)).abs() < 1e-5,
                "x = {x}"
            );
        }
    }

    #[test]
    fn fused_bias_pass_matches_exact_gelu_on_every_lane_and_tail() {
        // 37 columns: two full vectors and a masked tail of 5 per row.
        let cols = 37;
        let bias: Vec<f32> = (0..cols).map(|c| (c as f32 - 18.0) * 0.11).collect();
        let xs: Vec<f32> = (0..cols * 400)
            .map(|i| ((i * 7919) % 4001) as f32 / 4000.0 * 24.0 - 12.0)
            .collect();
        let mut got = xs.clone();
        gelu_bias_in_place(&mut got, &bias);
        let mut worst = 0f64;
        for (i, (&x, &g)) in xs.iter().zip(&got).enumerate() {
            let want = reference((x + bias[i % cols]) as f64);
            worst = worst.max((g as f64 - want).abs() / want.abs().max(1.0));
        }
        assert!(worst < 5e-7, "max error {worst:e}");
        // No bias: the plain pass, on a length that is not a multiple of 16.
        let mut plain = xs[..cols * 3].to_vec();
        gelu_in_place(&mut plain);
        for (&x, &g) in xs.iter().zip(&plain) {
            assert!((g as f64 - reference(x as f64)).abs() < 1e-6, "x = {x}");
        }
    }

    #[test]
    fn tensor_path_equals_candle_within_tolerance_and_keeps_shape() -> Result<()> {
        let xs = Tensor::randn(0f32, 3.0, (7, 3, 1000), &Device::Cpu)?;
        let ours = gelu_erf(&xs)?;
        let theirs = xs.gelu_erf()?;
        assert_eq!(ours.dims(), theirs.dims());
        let diff = (ours - theirs)?.abs()?.max_all()?.to_scalar::<f32>()?;
        assert!(diff < 5e-6, "max abs diff {diff}");
        // A non-contiguous view goes through the same kernel.
        let t = xs.transpose(0, 2)?;
        let d = (gelu_erf(&t)? - t.gelu_erf()?)?
            .abs()?
            .max_all()?
            .to_scalar::<f32>()?;
        assert!(d < 5e-6, "transposed: max abs diff {d}");
        Ok(())
    }

    #[test]
    fn slice_dispatch_equals_portable() {
        let src: Vec<f32> = (0..4099).map(|i| (i as f32 - 2049.0) / 97.0).collect();
        let mut a = vec![0f32; src.len()];
        let mut b = src.clone();
        gelu_slice(&src, &mut a);
        gelu_portable(&mut b);
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() <= 1e-6 * x.abs().max(1.0));
        }
    }
}
