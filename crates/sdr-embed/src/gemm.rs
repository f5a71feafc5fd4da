//! Dense layers of the encoder: candle's `Linear`, or a mixed-precision layer whose GEMM
//! runs in bfloat16 (bf16 inputs, f32 accumulation and output) and whose activations
//! stay f32 between layers: only the matrix product rounds its inputs to bf16.
//!
//! The bf16 GEMM is MKL's `cblas_gemm_bf16bf16f32_compute` on weights packed once, on CPUs
//! with AMX (the `mkl` build),
//! else the AVX-512 BF16 kernel of [`crate::kernels::avx512_gemm`] where the CPU has that
//! instruction set (2.1x MKL's bf16 GEMM on a Zen 4; bench/README.md), else MKL's.
//!
//! [`Dense::for_slices`] builds the layers of the packed forward pass
//! (`crate::models::packed`), called on slices: f32 through the GEMM [`F32Gemm::here`] picks
//! (MKL on Intel CPUs in the `mkl` build, else the AVX-512 kernel where the CPU has
//! AVX-512, else MKL or the `gemm` crate).

use std::sync::OnceLock;

use candle_core::{DType, Module, Result, Tensor};
use candle_nn::Linear;

use crate::cpu::{cpu_has_amx_bf16, cpu_is_intel};
use crate::kernels::avx512_gemm::{self, PackedWeights};
#[cfg(feature = "mkl")]
use crate::kernels::mkl;
use crate::kernels::{add_bias, f32_parts};
use crate::models::pack_format::{PackReader, PackWriter};
use crate::stored::Stored;

/// Tags of the layers the packed-weights cache stores (`Dense::write_to`).
const TAG_AVX512_F32: u64 = 1;
const TAG_AVX512_BF16: u64 = 2;
const TAG_F32: u64 = 3;

/// Which bf16 GEMM the mixed-precision dense layers use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bf16Gemm {
    /// Intel MKL (AMX tiles where present).
    Mkl,
    /// `kernels/avx512_gemm.rs`: `vdpbf16ps` on AVX-512 BF16.
    Avx512,
}

impl Bf16Gemm {
    /// The fastest one this build and CPU offer: MKL with AMX, else AVX-512 BF16, else
    /// MKL (slower than its f32 GEMM); `None` without MKL or AVX-512 BF16.
    pub fn pick(amx_bf16: bool, avx512_bf16: bool) -> Option<Bf16Gemm> {
        let mkl = cfg!(feature = "mkl");
        if mkl && amx_bf16 {
            Some(Bf16Gemm::Mkl)
        } else if avx512_bf16 {
            Some(Bf16Gemm::Avx512)
        } else if mkl {
            Some(Bf16Gemm::Mkl)
        } else {
            None
        }
    }

    /// [`Bf16Gemm::pick`] for this machine (the CPU is read once).
    pub fn here() -> Option<Bf16Gemm> {
        static HERE: OnceLock<Option<Bf16Gemm>> = OnceLock::new();
        *HERE.get_or_init(|| Bf16Gemm::pick(cpu_has_amx_bf16(), avx512_gemm::supported()))
    }
}

/// Which f32 GEMM the dense layers of the packed forward pass use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum F32Gemm {
    /// `kernels/avx512_gemm.rs` with `vfmadd`.
    Avx512,
    /// MKL's `sgemm` on a packed `W` in the `mkl` build, else the `gemm` crate.
    Library,
}

/// Environment variable that forces the f32 GEMM (`avx512` or `mkl`), for A/B timing.
pub const F32_GEMM_ENV: &str = "SDR_F32_GEMM";

impl F32Gemm {
    /// The faster one for this build and CPU: MKL on Intel CPUs in the `mkl` build
    /// (its kernels reach ~90 % of the FMA peak there, ours ~65 %; measured on an
    /// Intel host, see bench/README.md's history), else the AVX-512 kernel where the
    /// CPU has AVX-512 (on a Zen 4 it beat MKL's `sgemm` by 1.3x), else the library.
    pub fn pick(mkl: bool, intel: bool, avx512: bool) -> F32Gemm {
        if avx512 && !(mkl && intel) {
            F32Gemm::Avx512
        } else {
            F32Gemm::Library
        }
    }

    /// [`F32Gemm::pick`] for this build and machine, or what [`F32_GEMM_ENV`] forces
    /// (`avx512` only where the CPU has it). Read once.
    pub fn here() -> F32Gemm {
        static HERE: OnceLock<F32Gemm> = OnceLock::new();
        *HERE.get_or_init(|| {
            let avx512 = avx512_gemm::supported_f32();
            match std::env::var(F32_GEMM_ENV).as_deref() {
                Ok("avx512") if avx512 => F32Gemm::Avx512,
                Ok("mkl") => F32Gemm::Library,
                _ => F32Gemm::pick(cfg!(feature = "mkl"), cpu_is_intel(), avx512),
            }
        })
    }
}

/// A dense layer `y = x W^T + b`.
pub enum Dense {
    /// Plain candle (f32 / bf16 / f16 according to the weights' dtype).
    Candle(Linear),
    /// f32 weights called on slices: MKL's `sgemm` in the `mkl` build, else the `gemm`
    /// crate (the GEMMs candle itself calls), without a tensor around each call.
    F32(F32Weights),
    /// bf16 GEMM through MKL, f32 in and out.
    #[cfg(feature = "mkl")]
    MklBf16(mkl::Bf16Linear),
    /// bf16 GEMM with AVX-512 BF16, f32 in and out.
    Avx512Bf16(PackedWeights),
    /// f32 GEMM with AVX-512 (slices only).
    Avx512F32(PackedWeights),
}

impl Dense {
    /// Wraps `linear`; with `mixed_bf16` converts its weights to bf16 for the GEMM
    /// [`Bf16Gemm::here`] picks.
    pub fn new(linear: Linear, mixed_bf16: bool) -> Result<Self> {
        if !mixed_bf16 {
            return Ok(Dense::Candle(linear));
        }
        Self::bf16_with(linear, Bf16Gemm::here())
    }

    /// For [`Dense::apply`] on slices: f32 weights, or bf16 GEMMs with `mixed_bf16`.
    pub fn for_slices(linear: Linear, mixed_bf16: bool) -> Result<Self> {
        if mixed_bf16 {
            return Self::bf16_with(linear, Bf16Gemm::here());
        }
        let (w, n, k, bias) = f32_parts(&linear)?;
        Self::from_parts(&w, n, k, bias, false)
    }

    /// [`Dense::for_slices`] from `W` (`n x k`, out x in, row-major) and its bias
    /// as slices, such as tensors read in place from a memory-mapped checkpoint:
    /// the weights are packed straight from `w`, with no candle tensor between.
    pub fn from_parts(
        w: &[f32],
        n: usize,
        k: usize,
        bias: Option<Vec<f32>>,
        mixed_bf16: bool,
    ) -> Result<Self> {
        if w.len() != n * k || bias.as_ref().is_some_and(|b| b.len() != n) {
            candle_core::bail!("dense layer: weights are not {n} x {k} (or the bias not {n} long)")
        }
        if mixed_bf16 {
            return match Bf16Gemm::here() {
                Some(Bf16Gemm::Avx512) if avx512_gemm::supported() => {
                    Ok(Dense::Avx512Bf16(PackedWeights::bf16(w, n, k, bias)))
                }
                #[cfg(feature = "mkl")]
                Some(Bf16Gemm::Mkl) => {
                    Ok(Dense::MklBf16(mkl::Bf16Linear::from_slice(w, n, k, bias)))
                }
                gemm => {
                    let weight = Tensor::from_slice(w, (n, k), &candle_core::Device::Cpu)?;
                    let bias = bias
                        .map(|b| Tensor::from_vec(b, n, &candle_core::Device::Cpu))
                        .transpose()?;
                    Self::bf16_with(Linear::new(weight, bias), gemm)
                }
            };
        }
        if F32Gemm::here() == F32Gemm::Avx512 {
            return Ok(Dense::Avx512F32(PackedWeights::f32(w, n, k, bias)));
        }
        Ok(Dense::F32(F32Weights::new(w, bias, n, k)))
    }

    pub fn in_dim(&self) -> usize {
        match self {
            Dense::Candle(l) => l.weight().dims().last().copied().unwrap_or(0),
            Dense::F32(w) => w.k,
            #[cfg(feature = "mkl")]
            Dense::MklBf16(l) => l.in_dim,
            Dense::Avx512Bf16(w) | Dense::Avx512F32(w) => w.in_dim(),
        }
    }

    pub fn out_dim(&self) -> usize {
        match self {
            Dense::Candle(l) => l.weight().dims().first().copied().unwrap_or(0),
            Dense::F32(w) => w.n,
            #[cfg(feature = "mkl")]
            Dense::MklBf16(l) => l.out_dim,
            Dense::Avx512Bf16(w) | Dense::Avx512F32(w) => w.out_dim(),
        }
    }

    /// `Y = X W^T + b` for `x` of `m` rows (`m x in_dim`, row-major); `m x out_dim` out.
    /// `threads`: whether the GEMM may use the rayon pool (off when the caller already
    /// runs one batch per core).
    pub fn apply(&self, x: &[f32], m: usize, threads: bool) -> Result<Vec<f32>> {
        let k = self.check_input(x, m)?;
        match self {
            Dense::Candle(l) => {
                let xs = Tensor::from_slice(x, (m, k), &candle_core::Device::Cpu)?;
                l.forward(&xs)?.flatten_all()?.to_vec1::<f32>()
            }
            Dense::F32(w) => Ok(w.forward(x, m, threads)),
            #[cfg(feature = "mkl")]
            Dense::MklBf16(l) => Ok(l.forward_slice(x, m)),
            Dense::Avx512Bf16(w) | Dense::Avx512F32(w) => Ok(w.forward(x, m)),
        }
    }

    /// [`Dense::apply`] without the bias, into `out` (resized to `m x out_dim`; its
    /// allocation is reused from call to call). Returns the bias that is still to be
    /// added, so that the pass that reads `Y` next (the activation, the residual
    /// layer norm, attention's operand copies) adds it, instead of the GEMM reading a
    /// bias-filled `Y` it first had to write; `None` where the layer has no bias or
    /// its GEMM has added it already.
    pub fn apply_unbiased<'a>(
        &'a self,
        x: &[f32],
        m: usize,
        threads: bool,
        out: &mut Vec<f32>,
    ) -> Result<Option<&'a [f32]>> {
        self.check_input(x, m)?;
        match self {
            Dense::F32(w) => {
                w.gemm_into(x, m, threads, out);
                Ok(w.bias.as_deref())
            }
            // MKL's AMX kernel for beta = 0 made the whole bf16 encoder 10 % slower
            // than a bias-filled `C` and beta = 1: the bias goes in first here.
            #[cfg(feature = "mkl")]
            Dense::MklBf16(l) => {
                l.gemm_into(x, m, out);
                Ok(None)
            }
            _ => {
                *out = self.apply(x, m, threads)?;
                Ok(None)
            }
        }
    }

    /// `in_dim`, once `x` is checked to hold `m` rows of it.
    fn check_input(&self, x: &[f32], m: usize) -> Result<usize> {
        let k = self.in_dim();
        if x.len() != m * k {
            candle_core::bail!("dense layer: input of {} values is not {m} x {k}", x.len())
        }
        Ok(k)
    }

    /// Adds this layer to a packed-weights file: its kernel, shape and packed values.
    /// `false` for a layer whose packing cannot be stored (candle's, MKL's opaque
    /// packed formats).
    pub(crate) fn write_to<'a>(&'a self, w: &mut PackWriter<'a>) -> bool {
        let (tag, n, k, bias) = match self {
            Dense::Avx512F32(p) | Dense::Avx512Bf16(p) => {
                let tag = if p.is_bf16() {
                    TAG_AVX512_BF16
                } else {
                    TAG_AVX512_F32
                };
                (tag, p.out_dim(), p.in_dim(), p.bias())
            }
            #[cfg(not(feature = "mkl"))]
            Dense::F32(f) => (TAG_F32, f.n, f.k, f.bias.as_deref()),
            _ => return false,
        };
        for v in [tag, n as u64, k as u64, u64::from(bias.is_some())] {
            w.meta(v);
        }
        match self {
            Dense::Avx512F32(p) | Dense::Avx512Bf16(p) => w.values(p.panels()),
            #[cfg(not(feature = "mkl"))]
            Dense::F32(f) => w.values(&f.w),
            _ => unreachable!("matched above"),
        }
        if let Some(b) = bias {
            w.values(b);
        }
        true
    }

    /// The layer [`Dense::write_to`] wrote, `n x k` with `mixed_bf16` as
    /// [`Dense::from_parts`] would build it on this machine (its values read in
    /// place from the file); an error for anything else, such as a file from a
    /// machine whose GEMM differs.
    pub(crate) fn read_from(
        r: &mut PackReader,
        n: usize,
        k: usize,
        mixed_bf16: bool,
    ) -> Result<Self> {
        let (tag, n2, k2, has_bias) = (r.meta()?, r.meta()?, r.meta()?, r.meta()?);
        if (n2, k2) != (n as u64, k as u64) || has_bias > 1 {
            candle_core::bail!("packed-weights file: a layer of {n2} x {k2}, expected {n} x {k}")
        }
        let here = match (mixed_bf16, Bf16Gemm::here(), F32Gemm::here()) {
            (true, Some(Bf16Gemm::Avx512), _) if avx512_gemm::supported() => TAG_AVX512_BF16,
            (false, _, F32Gemm::Avx512) => TAG_AVX512_F32,
            (false, _, F32Gemm::Library) if cfg!(not(feature = "mkl")) => TAG_F32,
            _ => 0,
        };
        if tag != here {
            candle_core::bail!(
                "packed-weights file: a layer of kernel {tag}, this machine's is {here}"
            )
        }
        let bad =
            || candle_core::Error::Msg(format!("packed-weights file: a {n} x {k} layer's values"));
        if tag == TAG_F32 {
            let w = r.values::<f32>()?;
            let bias = if has_bias == 1 { Some(r.vec(n)?) } else { None };
            if w.len() != n * k {
                return Err(bad());
            }
            return Ok(Dense::F32(F32Weights::from_stored(w, bias, n, k)));
        }
        let panels = r.values::<u32>()?;
        let bias = if has_bias == 1 { Some(r.vec(n)?) } else { None };
        let bf16 = tag == TAG_AVX512_BF16;
        let p = PackedWeights::from_panels(panels, bias, n, k, bf16).ok_or_else(bad)?;
        Ok(if bf16 {
            Dense::Avx512Bf16(p)
        } else {
            Dense::Avx512F32(p)
        })
    }

    /// Whether the layer's weights are pages of a shared file mapping.
    #[cfg(test)]
    pub(crate) fn is_mapped(&self) -> bool {
        match self {
            Dense::Avx512F32(p) | Dense::Avx512Bf16(p) => p.panels().is_mapped(),
            #[cfg(not(feature = "mkl"))]
            Dense::F32(f) => f.w.is_mapped(),
            _ => false,
        }
    }

    /// `linear` with its GEMM in bf16 on `gemm` (an error where this build or CPU
    /// lacks it).
    pub fn bf16_with(linear: Linear, gemm: Option<Bf16Gemm>) -> Result<Self> {
        match gemm {
            Some(Bf16Gemm::Avx512) if avx512_gemm::supported() => {
                let (w, n, k, bias) = f32_parts(&linear)?;
                Ok(Dense::Avx512Bf16(PackedWeights::bf16(&w, n, k, bias)))
            }
            #[cfg(feature = "mkl")]
            Some(Bf16Gemm::Mkl) => Ok(Dense::MklBf16(mkl::Bf16Linear::new(&linear)?)),
            _ => candle_core::bail!(
                "mixed bf16 ({gemm:?}) needs a CPU with AVX-512 BF16 or a build with the `mkl` feature"
            ),
        }
    }
}

impl Module for Dense {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        match self {
            Dense::Candle(l) => l.forward(xs),
            // The slice kernels, on the tensor's values.
            _ => {
                let mut dims = xs.dims().to_vec();
                let k = *dims.last().unwrap_or(&0);
                if k != self.in_dim() {
                    candle_core::bail!("dense layer: input dim {k}, expected {}", self.in_dim())
                }
                let m = xs.elem_count() / k.max(1);
                let x = xs.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
                if let Some(last) = dims.last_mut() {
                    *last = self.out_dim();
                }
                Tensor::from_vec(self.apply(&x, m, true)?, dims, xs.device())
            }
        }
    }
}

/// f32 `W` (`n x k`, out x in, row-major) and bias. In the `mkl` build `W` is kept only
/// in MKL's packed layout (`cblas_sgemm_pack`), packed once at load instead of on
/// every call.
pub struct F32Weights {
    #[cfg(not(feature = "mkl"))]
    w: Stored<f32>,
    #[cfg(feature = "mkl")]
    packed: mkl::PackedB,
    bias: Option<Vec<f32>>,
    n: usize,
    k: usize,
}

impl F32Weights {
    /// Borrows `w` (read in place from the checkpoint, say): MKL packs it straight
    /// into its layout, and only the other builds keep a copy.
    fn new(w: &[f32], bias: Option<Vec<f32>>, n: usize, k: usize) -> Self {
        Self {
            #[cfg(feature = "mkl")]
            packed: mkl::PackedB::new(w, n, k),
            #[cfg(not(feature = "mkl"))]
            w: Stored::Owned(w.to_vec()),
            bias,
            n,
            k,
        }
    }

    /// `w` as [`F32Weights::new`] keeps it, read in place from the packed-weights
    /// cache (`w.len() == n * k`, checked by the caller).
    #[cfg(not(feature = "mkl"))]
    fn from_stored(w: Stored<f32>, bias: Option<Vec<f32>>, n: usize, k: usize) -> Self {
        Self { w, bias, n, k }
    }

    /// Never called: the `mkl` build's layers are not stored (`Dense::write_to`).
    #[cfg(feature = "mkl")]
    fn from_stored(w: Stored<f32>, bias: Option<Vec<f32>>, n: usize, k: usize) -> Self {
        Self::new(&w, bias, n, k)
    }

    fn forward(&self, x: &[f32], m: usize, threads: bool) -> Vec<f32> {
        let mut y = Vec::new();
        self.gemm_into(x, m, threads, &mut y);
        if let Some(b) = &self.bias {
            add_bias(&mut y, b);
        }
        y
    }

    /// `y = x Wᵀ` (no bias), `y` resized to `m x n`; what it held is overwritten
    /// unread.
    fn gemm_into(&self, x: &[f32], m: usize, threads: bool, y: &mut Vec<f32>) {
        let (n, k) = (self.n, self.k);
        y.resize(m * n, 0.0);
        if m == 0 || n == 0 {
            return;
        }
        #[cfg(feature = "mkl")]
        {
            let _ = (threads, k); // MKL's own threading (see the encoder's `blas_single_threaded`)
            self.packed.gemm(x, m, y);
        }
        #[cfg(not(feature = "mkl"))]
        {
            let parallelism = if threads {
                gemm::Parallelism::Rayon(0)
            } else {
                gemm::Parallelism::None
            };
            // y := x·Wᵀ (y not read); x is m x k row-major; Wᵀ (k x n) is `w` read
            // with row stride 1 and column stride k.
            // SAFETY: every index the strides reach lies inside x (m·k), w (n·k), y (m·n).
            unsafe {
                gemm::gemm(
                    m,
                    n,
                    k,
                    y.as_mut_ptr(),
                    1,
                    n as isize,
                    false,
                    x.as_ptr(),
                    1,
                    k as isize,
                    self.w.as_ptr(),
                    k as isize,
                    1,
                    1.0,
                    1.0,
                    false,
                    false,
                    false,
                    parallelism,
                )
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn f32_gemm_is_mkl_on_intel_in_the_mkl_build_else_avx512_where_present() {
        use F32Gemm::*;
        assert_eq!(F32Gemm::pick(true, true, true), Library);
        assert_eq!(F32Gemm::pick(true, false, true), Avx512);
        assert_eq!(F32Gemm::pick(false, true, true), Avx512);
        assert_eq!(F32Gemm::pick(false, false, true), Avx512);
        for (mkl, intel) in [(true, true), (true, false), (false, true), (false, false)] {
            assert_eq!(F32Gemm::pick(mkl, intel, false), Library);
        }
    }

    /// The slice path (MKL's packed B in the `mkl` build, the `gemm` crate otherwise)
    /// against candle's `Linear`, for row counts unlike the one packing saw.
    #[test]
    fn f32_slices_match_candle_linear_for_any_rows() {
        let dev = Device::Cpu;
        let (n, k) = (300, 200);
        let w = Tensor::randn(0f32, 0.1, (n, k), &dev).unwrap();
        let b = Tensor::randn(0f32, 0.1, n, &dev).unwrap();
        let linear = Linear::new(w, Some(b));
        let dense = Dense::for_slices(linear.clone(), false).unwrap();
        assert!(matches!(dense, Dense::F32(_) | Dense::Avx512F32(_)));
        assert_eq!((dense.in_dim(), dense.out_dim()), (k, n));
        // The path CPUs without AVX-512 take (MKL's packed B, or the `gemm` crate),
        // whatever this CPU has.
        let (w, n2, k2, bias) = f32_parts(&linear).unwrap();
        let portable = Dense::F32(F32Weights::new(&w, bias, n2, k2));
        for m in [1usize, 5, 12, 100, 257] {
            let x = Tensor::randn(0f32, 1.0, (m, k), &dev).unwrap();
            let want = linear.forward(&x).unwrap().flatten_all().unwrap();
            let want = want.to_vec1::<f32>().unwrap();
            let xs = x.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            for (layer, threads) in [
                (&dense, false),
                (&dense, true),
                (&portable, false),
                (&portable, true),
            ] {
                let got = layer.apply(&xs, m, threads).unwrap();
                assert_eq!(got.len(), m * n);
                let worst = got
                    .iter()
                    .zip(&want)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0f32, f32::max);
                assert!(worst < 1e-4, "m={m} threads={threads}: max |diff| {worst}");
                // Without the bias, into a kept buffer whose old values (NaN, of
                // another size) must not be read; the bias it returns completes it.
                let mut kept = vec![f32::NAN; 7 + m];
                let left = layer.apply_unbiased(&xs, m, threads, &mut kept).unwrap();
                if let Some(b) = left {
                    add_bias(&mut kept, b);
                }
                assert_eq!(kept, got, "m={m} threads={threads}");
            }
        }
        let e = dense.apply(&[0.0; 3], 1, false).unwrap_err().to_string();
        assert!(e.contains("not 1 x 200"), "{e}");
    }

    /// MKL's bf16 layer built from slices (packed once, the odd-`k` rows padded to
    /// pairs) against the product of the bf16-rounded operands in f64.
    #[cfg(feature = "mkl")]
    #[test]
    fn mkl_bf16_from_slices_is_the_bf16_rounded_product_for_odd_and_even_k() {
        use half::bf16;
        let round = |v: f32| bf16::from_f32(v).to_f32() as f64;
        for (n, k) in [(5usize, 7usize), (33, 64), (9, 129)] {
            let w: Vec<f32> = (0..n * k)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 97.0)
                .collect();
            let bias: Vec<f32> = (0..n).map(|j| j as f32 * 0.01 - 0.02).collect();
            let layer = Dense::MklBf16(mkl::Bf16Linear::from_slice(&w, n, k, Some(bias.clone())));
            for m in [1usize, 3, 300] {
                let x: Vec<f32> = (0..m * k)
                    .map(|i| ((i * 53 % 89) as f32 - 44.0) / 61.0)
                    .collect();
                let got = layer.apply(&x, m, false).unwrap();
                for r in 0..m {
                    for j in 0..n {
                        let want: f64 = bias[j] as f64
                            + (0..k)
                                .map(|c| round(x[r * k + c]) * round(w[j * k + c]))
                                .sum::<f64>();
                        let g = got[r * n + j] as f64;
                        assert!(
                            (g - want).abs() <= 1e-4 * want.abs().max(1.0),
                            "n={n} k={k} m={m} ({r}, {j}): {g} against {want}"
                        );
                    }
                }
            }
        }
    }
}
