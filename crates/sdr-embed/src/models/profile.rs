//! Where the packed encoder's time goes, stage by stage: the roofline's next question
//! (bench/README.md), which stage keeps the encoder from the CPU's GEMM peak.
//!
//! Recorded only with the feature `bench-internals` (`examples/encoder_profile.rs`
//! reads it); without it [`timed`] is the closure itself and costs nothing. Each
//! stage adds the time of the thread that ran it, so with batches running one per
//! core a stage's seconds are core-seconds.

// Without the feature only the stage names and FLOP counts are compiled in, unread.
#![cfg_attr(not(feature = "bench-internals"), allow(dead_code))]

/// A stage of [`super::packed::PackedMpnet::forward`] and its pooling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Word + position embeddings and their layer norm.
    Embeddings,
    /// The fused Q, K, V projection (a GEMM).
    Qkv,
    /// Scores, relative-position bias, softmax and the weighted values, per sentence and head.
    Attention,
    /// The attention output projection (a GEMM).
    AttnOut,
    /// Bias, residual and layer norm after attention.
    AttnNorm,
    /// The feed-forward up projection (a GEMM).
    FfnIn,
    /// Bias and GELU.
    Activation,
    /// The feed-forward down projection (a GEMM).
    FfnOut,
    /// Bias, residual and layer norm after the feed-forward block.
    OutNorm,
    /// Mean pooling and L2 normalisation.
    Pooling,
}

impl Stage {
    /// Every stage, in the order of the forward pass.
    pub const ALL: [Stage; 10] = [
        Stage::Embeddings,
        Stage::Qkv,
        Stage::Attention,
        Stage::AttnOut,
        Stage::AttnNorm,
        Stage::FfnIn,
        Stage::Activation,
        Stage::FfnOut,
        Stage::OutNorm,
        Stage::Pooling,
    ];

    /// Its name in the profile's table.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Embeddings => "embeddings + norm",
            Stage::Qkv => "QKV projection",
            Stage::Attention => "attention",
            Stage::AttnOut => "attention output",
            Stage::AttnNorm => "residual + norm (attention)",
            Stage::FfnIn => "feed-forward in",
            Stage::Activation => "bias + GELU",
            Stage::FfnOut => "feed-forward out",
            Stage::OutNorm => "residual + norm (feed-forward)",
            Stage::Pooling => "pooling",
        }
    }

    /// Whether the stage is one of the dense GEMMs (the FLOPs the roofline counts).
    pub fn is_gemm(self) -> bool {
        matches!(
            self,
            Stage::Qkv | Stage::AttnOut | Stage::FfnIn | Stage::FfnOut
        )
    }
}

/// One stage's totals since the last [`reset`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StageTotal {
    pub stage: Stage,
    /// Seconds of the threads that ran it, summed.
    pub seconds: f64,
    /// Floating-point operations it did (multiply and add counted apart).
    pub flops: u64,
}

// Compiled for the crate's tests too, so that CI tests the recorder without the feature.
#[cfg(any(test, feature = "bench-internals"))]
mod record {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::{Stage, StageTotal};

    #[allow(clippy::declare_interior_mutable_const)]
    const ZERO: AtomicU64 = AtomicU64::new(0);
    static NANOS: [AtomicU64; Stage::ALL.len()] = [ZERO; Stage::ALL.len()];
    static FLOPS: [AtomicU64; Stage::ALL.len()] = [ZERO; Stage::ALL.len()];

    pub(crate) fn timed<R>(stage: Stage, flops: u64, f: impl FnOnce() -> R) -> R {
        let start = std::time::Instant::now();
        let r = f();
        let nanos = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        NANOS[stage as usize].fetch_add(nanos, Ordering::Relaxed);
        FLOPS[stage as usize].fetch_add(flops, Ordering::Relaxed);
        r
    }

    pub fn totals() -> Vec<StageTotal> {
        Stage::ALL
            .iter()
            .map(|&stage| StageTotal {
                stage,
                seconds: NANOS[stage as usize].load(Ordering::Relaxed) as f64 * 1e-9,
                flops: FLOPS[stage as usize].load(Ordering::Relaxed),
            })
            .collect()
    }

    pub fn reset() {
        for a in NANOS.iter().chain(FLOPS.iter()) {
            a.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(feature = "bench-internals")]
pub(crate) use record::timed;
#[cfg(feature = "bench-internals")]
pub use record::{reset, totals};

#[cfg(not(feature = "bench-internals"))]
#[inline(always)]
pub(crate) fn timed<R>(_stage: Stage, _flops: u64, f: impl FnOnce() -> R) -> R {
    f()
}

/// FLOPs of `Y = X Wᵀ` with `m` rows, `k` inputs and `n` outputs.
pub(crate) fn gemm_flops(m: usize, k: usize, n: usize) -> u64 {
    2 * (m * k * n) as u64
}

/// FLOPs of attention's two products (`q·k` scores and the weighted values) over
/// sentences of `lens` tokens and `hidden` features.
pub(crate) fn attention_flops(lens: &[usize], hidden: usize) -> u64 {
    lens.iter().map(|&l| 4 * (l * l * hidden) as u64).sum()
}

#[cfg(test)]
mod tests {
    use super::record::{timed, totals};
    use super::*;

    #[test]
    fn a_stage_adds_its_time_and_flops() {
        // Other tests may run the encoder meanwhile: compare before and after.
        let of = |t: Vec<StageTotal>| *t.iter().find(|s| s.stage == Stage::FfnIn).unwrap();
        let before = of(totals());
        let r = timed(Stage::FfnIn, 7, || {
            std::thread::sleep(std::time::Duration::from_millis(2));
            5
        });
        assert_eq!(r, 5);
        let after = of(totals());
        assert!(
            after.seconds - before.seconds >= 0.002,
            "{before:?} {after:?}"
        );
        assert!(after.flops - before.flops >= 7, "{before:?} {after:?}");
    }
}
