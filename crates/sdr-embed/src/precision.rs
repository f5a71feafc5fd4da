//! Numeric precision of an encoder's weights and activations: what `--precision` and
//! `precision=` name, and what [`crate::EncoderIdentity`] records.

use candle_core::DType;

use crate::error::{EmbedError, Result};

/// Numeric precision of weights and activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    /// 32-bit floats everywhere (the reference; parity >= 0.9999).
    #[default]
    F32,
    /// bfloat16 where this CPU computes it faster than f32, chosen at load time: the
    /// dense-layer GEMMs in bf16 ([`Precision::MixedBf16`]) on CPUs with AVX-512 BF16
    /// (our kernel, any build) or AMX-BF16 (MKL, in the `mkl` build that
    /// `scripts/setup.sh` makes); elsewhere f32, with a [`crate::Encoder::notice`]: without
    /// either, a bf16 GEMM runs no faster than f32 (bench/README.md).
    Bf16,
    /// bfloat16 weights and activations in candle (pooling in f32); slow on CPUs.
    Bf16Candle,
    /// IEEE half weights and activations (pooling in f32).
    F16,
    /// f32 activations, dense-layer GEMMs in bfloat16 (see `Bf16Gemm`:
    /// MKL with AMX, the AVX-512 BF16 kernel, or MKL). Needs AVX-512 BF16 or the `mkl`
    /// feature.
    MixedBf16,
}

impl Precision {
    pub(crate) fn dtype(self) -> DType {
        match self {
            Precision::F32 => DType::F32,
            Precision::Bf16 => DType::F32,
            Precision::Bf16Candle => DType::BF16,
            Precision::F16 => DType::F16,
            Precision::MixedBf16 => DType::F32,
        }
    }
}

impl std::fmt::Display for Precision {
    /// The spelling `FromStr` accepts (`f32`, `bf16`, ...).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
            Precision::Bf16Candle => "bf16-candle",
            Precision::F16 => "f16",
            Precision::MixedBf16 => "mixed-bf16",
        })
    }
}

impl std::str::FromStr for Precision {
    type Err = EmbedError;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "f32" | "fp32" => Ok(Precision::F32),
            "bf16" => Ok(Precision::Bf16),
            "bf16-candle" | "bf16_candle" => Ok(Precision::Bf16Candle),
            "f16" | "fp16" => Ok(Precision::F16),
            "mixed-bf16" | "mixed_bf16" => Ok(Precision::MixedBf16),
            _ => Err(EmbedError::InvalidOption {
                name: "precision",
                value: s.to_string(),
                reason: "expected f32, bf16, bf16-candle, f16 or mixed-bf16",
            }),
        }
    }
}
