//! GEMM throughput at the feed-forward shape of all-mpnet-base-v2 (tokens × 768 × 3072):
//! candle's f32 matmul (MKL-backed with `--features mkl`), the AVX-512 f32 GEMM of the
//! packed forward pass, the bf16 GEMMs behind
//! `Precision::MixedBf16` (MKL's with `--features mkl`; the AVX-512 BF16 kernel where
//! the CPU has it), and the instruction peaks they are bounded by: independent f32 FMAs
//! and bf16 dot products (`vdpbf16ps`) on 512-bit registers, on 1 and on all threads.
//!
//! `cargo run --release -p sdr-embed --features bench-internals --example gemm_peak [--features mkl] -- [M] [reps] [K] [N]`

use std::time::Instant;

use candle_core::{Device, Module, Tensor};
use sdr_embed::bench_internals::{self as kernels, Bf16Gemm, Dense};

fn main() -> candle_core::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let m: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(256);
    let reps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
    let k: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(768);
    let n: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(3072);
    let dev = Device::Cpu;
    let x = Tensor::randn(0f32, 1.0, (m, k), &dev)?;
    let w = Tensor::randn(0f32, 0.02, (n, k), &dev)?;
    let flops = 2.0 * (m * k * n) as f64 * reps as f64;
    let linear = || candle_nn::Linear::new(w.clone(), None);
    let mut layers = vec![("f32 candle", Dense::new(linear(), false)?)];
    if cfg!(feature = "mkl") {
        layers.push(("bf16 mkl", Dense::bf16_with(linear(), Some(Bf16Gemm::Mkl))?));
    }
    if kernels::supported() {
        layers.push((
            "bf16 avx512",
            Dense::bf16_with(linear(), Some(Bf16Gemm::Avx512))?,
        ));
    }
    layers.push((
        "f32 picked (F32Gemm::here)",
        Dense::for_slices(linear(), false)?,
    ));
    if kernels::supported_f32() {
        let wv = w.flatten_all()?.to_vec1::<f32>()?;
        let packed = kernels::PackedWeights::f32(&wv, n, k, None);
        layers.push(("f32 avx512", Dense::Avx512F32(packed)));
    }
    for (name, layer) in layers {
        let _ = layer.forward(&x)?;
        let t = Instant::now();
        for _ in 0..reps {
            let _ = layer.forward(&x)?;
        }
        let dt = t.elapsed().as_secs_f64();
        println!("{name}: {m}x{k}x{n}: {:.1} GFLOP/s", flops / dt / 1e9);
    }
    #[cfg(target_arch = "x86_64")]
    peaks::print();
    Ok(())
}

#[cfg(target_arch = "x86_64")]
mod peaks {
    use std::arch::x86_64::*;
    use std::time::Instant;

    const CHAINS: usize = 12;
    const STEPS: usize = 20_000_000;

    /// 12 independent accumulator chains: enough to cover the instruction's latency,
    /// so the loop runs at its issue rate.
    #[target_feature(enable = "avx512f")]
    unsafe fn fma_f32() -> f32 {
        let mut acc = [_mm512_setzero_ps(); CHAINS];
        let (a, b) = (_mm512_set1_ps(1.000_000_1), _mm512_set1_ps(0.999_999));
        for _ in 0..STEPS {
            for c in acc.iter_mut() {
                *c = _mm512_fmadd_ps(a, b, *c);
            }
        }
        _mm512_reduce_add_ps(
            acc.iter()
                .fold(_mm512_setzero_ps(), |s, c| _mm512_add_ps(s, *c)),
        )
    }

    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn dot_bf16() -> f32 {
        let mut acc = [_mm512_setzero_ps(); CHAINS];
        // bf16 1.0 in every half-lane.
        let one: __m512bh = std::mem::transmute(_mm512_set1_epi16(0x3f80));
        for _ in 0..STEPS {
            for c in acc.iter_mut() {
                *c = _mm512_dpbf16_ps(*c, one, one);
            }
        }
        _mm512_reduce_add_ps(
            acc.iter()
                .fold(_mm512_setzero_ps(), |s, c| _mm512_add_ps(s, *c)),
        )
    }

    fn gflops(threads: usize, flops_per_op: f64, op: unsafe fn() -> f32) -> f64 {
        let t = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..threads {
                // SAFETY: callers check the CPU features first.
                s.spawn(|| std::hint::black_box(unsafe { op() }));
            }
        });
        let ops = (threads * CHAINS * STEPS) as f64;
        ops * flops_per_op / t.elapsed().as_secs_f64() / 1e9
    }

    pub fn print() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            return;
        }
        let all = std::thread::available_parallelism().map_or(1, |n| n.get());
        let bf16 = std::arch::is_x86_feature_detected!("avx512bf16");
        for threads in [1, all] {
            // One 512-bit FMA: 16 lanes x 2 flops; one vdpbf16ps: 16 lanes x 2 pairs x 2.
            print!(
                "peak, {threads} thread(s): f32 FMA {:.1} GFLOP/s",
                gflops(threads, 32.0, fma_f32)
            );
            if bf16 {
                print!(
                    ", bf16 vdpbf16ps {:.1} GFLOP/s",
                    gflops(threads, 64.0, dot_bf16)
                );
            }
            println!();
        }
    }
}
