//! Times every metric spec over the pairs written by `bench/distances.py`.
//!
//! Usage: `bench-distances PAIRS.json PAIRS.bin` ; prints one JSON object with,
//! per spec, the seconds for all pairs on one thread and on all threads, and
//! the values (for the parity column of the table).

use std::time::Instant;

use anyhow::{Context, Result};
use rayon::prelude::*;
use sdr_core::{Metric, SetView};
use serde::Deserialize;

#[derive(Deserialize)]
struct Meta {
    dim: usize,
    /// `[n, m]` per pair; vectors are stored a-rows then b-rows, pair after pair.
    sizes: Vec<[usize; 2]>,
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(
        args.len() == 3,
        "usage: bench-distances PAIRS.json PAIRS.bin"
    );
    let meta: Meta = serde_json::from_str(
        &std::fs::read_to_string(&args[1]).with_context(|| format!("reading {}", args[1]))?,
    )?;
    let raw = std::fs::read(&args[2]).with_context(|| format!("reading {}", args[2]))?;
    let data: Vec<f64> = raw
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    let mut pairs = Vec::with_capacity(meta.sizes.len());
    let mut off = 0;
    for &[n, m] in &meta.sizes {
        let a = &data[off..off + n * meta.dim];
        off += n * meta.dim;
        let b = &data[off..off + m * meta.dim];
        off += m * meta.dim;
        pairs.push((a, b));
    }
    anyhow::ensure!(off == data.len(), "PAIRS.bin does not match PAIRS.json");
    let dim = meta.dim;
    let eval = |metric: &Metric, (a, b): &(&[f64], &[f64])| {
        metric
            .distance(&SetView::new(a, dim), &SetView::new(b, dim))
            .expect("benchmark pairs are valid")
    };
    let mut out = serde_json::Map::new();
    for metric in Metric::all() {
        // Warm-up pass so page faults and lazy init don't count.
        pairs.iter().take(50).for_each(|p| {
            eval(&metric, p);
        });
        let t = Instant::now();
        let values: Vec<f64> = pairs.iter().map(|p| eval(&metric, p)).collect();
        let single = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let par: Vec<f64> = pairs.par_iter().map(|p| eval(&metric, p)).collect();
        let parallel = t.elapsed().as_secs_f64();
        assert_eq!(values, par, "parallel and serial results differ");
        out.insert(
            metric.to_string(),
            serde_json::json!({"single": single, "parallel": parallel, "values": values}),
        );
    }
    out.insert(
        "threads".into(),
        serde_json::json!(rayon::current_num_threads()),
    );
    println!("{}", serde_json::Value::Object(out));
    Ok(())
}
