//! Where the encoder's time goes, stage by stage (the roofline's next question, issue 53):
//!
//! ```sh
//! cargo build --release -p sdr-embed --features bench-internals --example encoder_profile
//! target/release/examples/encoder_profile N [f32|bf16] [auto|gemm|batches] [batch] [--json] < sentences.txt
//! ```
//!
//! Embeds the first N distinct lines of stdin once to warm up, then again with the stage
//! clock on, and prints a Markdown table: per stage its core-seconds, share, GFLOP and
//! GFLOP/s per core-second. With batches running one per core (`batches`, or `auto` on
//! many sentences) each stage's time is the core's own; with `gemm` the calling thread
//! waits for the pool, so a stage's time is the machine's. Compare a GEMM row's rate
//! with `gemm_peak`'s peak divided by its thread count. `--json` prints the totals as one
//! JSON object instead (what `bench/embed.py --profile` reads).

use std::io::BufRead;
use std::time::Instant;

use sdr_embed::bench_internals::profile::{reset, totals};
use sdr_embed::{resolve_model_dir, Encoder, EncoderOptions, Parallelism, Precision};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let json = std::env::args().any(|a| a == "--json");
    let args: Vec<String> = std::env::args().filter(|a| a != "--json").collect();
    let n: usize = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(500);
    let precision: Precision = args
        .get(2)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or_default();
    let parallelism = match args.get(3).map(String::as_str) {
        None | Some("auto") => Parallelism::Auto,
        Some("gemm") => Parallelism::Gemm,
        Some("batches") => Parallelism::Batches,
        Some(other) => {
            return Err(format!("parallelism {other:?}: expected auto, gemm or batches").into())
        }
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
    if lines.is_empty() {
        return Err("stdin: no sentences (one per line)".into());
    }
    let texts: Vec<&str> = lines.iter().map(String::as_str).collect();
    let enc = Encoder::load(
        &resolve_model_dir(None)?,
        EncoderOptions {
            precision,
            parallelism,
            batch_size,
            cache: false,
            ..Default::default()
        },
    )?;
    let _ = enc.embed_uncached(&texts)?;
    reset();
    let t = Instant::now();
    let m = enc.embed_uncached(&texts)?;
    let wall = t.elapsed().as_secs_f64();
    let stages = totals();
    let timed: f64 = stages.iter().map(|s| s.seconds).sum();
    if timed == 0.0 {
        return Err("no stage was timed: this encoder does not run the packed CPU path".into());
    }
    let tokens: usize = enc.token_counts(&texts)?.iter().sum();
    let threads = rayon::current_num_threads();
    if json {
        let stages: Vec<_> = stages
            .iter()
            .map(|s| {
                serde_json::json!({"stage": s.stage.name(), "gemm": s.stage.is_gemm(),
                    "seconds": s.seconds, "flops": s.flops})
            })
            .collect();
        let out = serde_json::json!({"sentences": m.rows(), "tokens": tokens,
            "precision": format!("{precision:?}"), "parallelism": format!("{parallelism:?}"),
            "batch_size": batch_size, "threads": threads, "wall_s": wall, "stages": stages});
        println!("{out}");
        return Ok(());
    }
    println!(
        "{} sentences, {tokens} tokens, {precision:?}, {parallelism:?}, batch {batch_size}, \
         {threads} threads: {wall:.2} s wall, {:.1} sentences/s; {timed:.2} s timed in stages",
        m.rows(),
        m.rows() as f64 / wall,
    );
    println!();
    println!("| stage | seconds | share | GFLOP | GFLOP/s over its own time |");
    println!("|---|---:|---:|---:|---:|");
    let row = |name: &str, secs: f64, flops: u64| {
        let gflop = flops as f64 * 1e-9;
        let rate = if flops > 0 && secs > 0.0 {
            format!("{:.0}", gflop / secs)
        } else {
            String::new()
        };
        let gflop = if flops > 0 {
            format!("{gflop:.0}")
        } else {
            String::new()
        };
        println!(
            "| {name} | {secs:.3} | {:.1} % | {gflop} | {rate} |",
            100.0 * secs / timed
        );
    };
    for s in &stages {
        row(s.stage.name(), s.seconds, s.flops);
    }
    let (gemm_s, gemm_f) = stages
        .iter()
        .filter(|s| s.stage.is_gemm())
        .fold((0.0, 0), |(t, f), s| (t + s.seconds, f + s.flops));
    row("**all dense GEMMs**", gemm_s, gemm_f);
    Ok(())
}
