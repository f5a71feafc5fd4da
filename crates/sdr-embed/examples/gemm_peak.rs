//! GEMM throughput at the feed-forward shape of all-mpnet-base-v2 (tokens × 768 × 3072):
//! candle's f32 matmul (MKL-backed with `--features mkl`) and, with `mkl`, the bf16 GEMM
//! behind `Precision::MixedBf16`.
//!
//! `cargo run --release -p sdr-embed --example gemm_peak [--features mkl] -- [M] [reps]`

use std::time::Instant;

use candle_core::{Device, Module, Tensor};
use sdr_embed::linear::Dense;

fn main() -> candle_core::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let m: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(256);
    let reps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
    let (k, n) = (768usize, 3072usize);
    let dev = Device::Cpu;
    let x = Tensor::randn(0f32, 1.0, (m, k), &dev)?;
    let w = Tensor::randn(0f32, 0.02, (n, k), &dev)?;
    let flops = 2.0 * (m * k * n) as f64 * reps as f64;
    let mut variants = vec![("f32 candle", false)];
    if cfg!(feature = "mkl") {
        variants.push(("bf16 mkl", true));
    }
    for (name, bf16) in variants {
        let layer = Dense::new(candle_nn::Linear::new(w.clone(), None), bf16)?;
        let _ = layer.forward(&x)?;
        let t = Instant::now();
        for _ in 0..reps {
            let _ = layer.forward(&x)?;
        }
        let dt = t.elapsed().as_secs_f64();
        println!("{name}: {m}x{k}x{n}: {:.1} GFLOP/s", flops / dt / 1e9);
    }
    if sdr_embed::bf16_gemm::supported() {
        let wv = w.flatten_all()?.to_vec1::<f32>()?;
        let xv = x.flatten_all()?.to_vec1::<f32>()?;
        let layer = sdr_embed::bf16_gemm::Bf16Weights::new(&wv, n, k, None);
        let _ = layer.forward(&xv, m);
        let t = Instant::now();
        for _ in 0..reps {
            let _ = layer.forward(&xv, m);
        }
        let dt = t.elapsed().as_secs_f64();
        println!("bf16 avx512: {m}x{k}x{n}: {:.1} GFLOP/s", flops / dt / 1e9);
    }
    Ok(())
}
