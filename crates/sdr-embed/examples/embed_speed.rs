//! Throughput probe: `cargo run --release -p sdr-embed --example embed_speed -- N [f32|bf16|f16] [gemm|batches] [batch]`
//! Reads sentences (one per line) from stdin, embeds the first N distinct ones, prints sentences/s.

use std::io::BufRead;
use std::time::Instant;

use sdr_embed::{resolve_model_dir, Encoder, EncoderOptions, Parallelism, Precision};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(200);
    let precision: Precision = args
        .get(2)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or_default();
    let parallelism = match args.get(3).map(String::as_str) {
        Some("batches") => Parallelism::Batches,
        _ => Parallelism::Gemm,
    };
    let batch_size: usize = args.get(4).map(|s| s.parse()).transpose()?.unwrap_or(32);
    let mut seen = std::collections::HashSet::new();
    let mut lines = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        if !line.trim().is_empty() && seen.insert(line.clone()) {
            lines.push(line);
        }
        if lines.len() == n {
            break;
        }
    }
    let texts: Vec<&str> = lines.iter().map(String::as_str).collect();
    let dir = resolve_model_dir(None)?;
    let enc = Encoder::load(
        &dir,
        EncoderOptions {
            precision,
            parallelism,
            batch_size,
            cache: false,
            ..Default::default()
        },
    )?;
    let _ = enc.embed_uncached(&texts[..texts.len().min(8)])?;
    let t = Instant::now();
    let m = enc.embed_uncached(&texts)?;
    let dt = t.elapsed().as_secs_f64();
    let toks: usize = enc.token_counts(&texts)?.iter().sum();
    println!(
        "{} sentences ({} tokens) {:?} {:?} batch {}: {:.2} s, {:.1} sentences/s, first {:?}",
        m.rows(),
        toks,
        precision,
        parallelism,
        batch_size,
        dt,
        m.rows() as f64 / dt,
        &m.row(0)[..3]
    );
    Ok(())
}
