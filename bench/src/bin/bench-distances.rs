//! Times every metric spec over the pairs written by `bench/distances.py`.
//!
//! Usage: `bench-distances PAIRS.json PAIRS.bin [SPEC;SPEC...]` (default: every
//! metric). PAIRS.json holds `dim`, the row count of every set (`sets`) and
//! the two set indices of every pair (`pairs`); PAIRS.bin the sets' rows, one
//! set after the other, as little-endian f64 holding f32 values. Prints one
//! JSON object with, per spec, the seconds for all pairs on one thread and on
//! all threads (the median of `BENCH_REPEAT` passes, default 3, each
//! repeating the pairs until it has lasted `BENCH_MIN_SECONDS`, default
//! 0.25, and giving the seconds of one run over them), and the
//! values (for the parity column of the table), and under `read_single` /
//! `read_parallel` the same for reading every pair's rows once with no
//! arithmetic, timed just before each pass: the memory system's ceiling on
//! any metric's pairs/s in this layout, at that moment.

use std::time::Instant;

use anyhow::{Context, Result};
use sdr_core::{Metric, SetView};
use serde::Deserialize;

#[derive(Deserialize)]
struct Meta {
    dim: usize,
    /// Rows per set; the sets' rows are stored one set after the other.
    sets: Vec<usize>,
    /// The two sets of each pair.
    pairs: Vec<[usize; 2]>,
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(
        args.len() == 3 || args.len() == 4,
        "usage: bench-distances PAIRS.json PAIRS.bin [SPEC;SPEC...]"
    );
    let metrics: Vec<Metric> = match args.get(3) {
        None => Metric::all(),
        Some(list) => list
            .split(';')
            .map(|s| {
                s.parse::<Metric>()
                    .with_context(|| format!("metric spec {s:?}"))
            })
            .collect::<Result<_>>()?,
    };
    let meta: Meta = serde_json::from_str(
        &std::fs::read_to_string(&args[1]).with_context(|| format!("reading {}", args[1]))?,
    )?;
    let raw = std::fs::read(&args[2]).with_context(|| format!("reading {}", args[2]))?;
    let data: Vec<f64> = raw
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    // Encoders emit f32 and the pairs are f32 values stored as f64 (see
    // bench/distances.py): the sets are timed as f32 rows, the way the reward
    // holds them, after checking that nothing is lost.
    let narrow: Vec<f32> = data.iter().map(|&x| x as f32).collect();
    anyhow::ensure!(
        narrow.iter().zip(&data).all(|(&n, &x)| f64::from(n) == x),
        "PAIRS.bin holds values that are not f32 values"
    );
    let mut sets = Vec::with_capacity(meta.sets.len());
    let mut off = 0;
    for &n in &meta.sets {
        anyhow::ensure!(
            off + n * meta.dim <= data.len(),
            "PAIRS.bin is shorter than PAIRS.json says"
        );
        sets.push(SetView::new(&narrow[off..off + n * meta.dim], meta.dim));
        off += n * meta.dim;
    }
    anyhow::ensure!(off == data.len(), "PAIRS.bin does not match PAIRS.json");
    let mut pairs = Vec::with_capacity(meta.pairs.len());
    for &[i, j] in &meta.pairs {
        let set = |k: usize| {
            sets.get(k)
                .copied()
                .with_context(|| format!("PAIRS.json: no set {k}"))
        };
        pairs.push((set(i)?, set(j)?));
    }
    drop(data);
    let repeat: usize = match std::env::var("BENCH_REPEAT") {
        Ok(v) => v
            .parse()
            .ok()
            .filter(|&r| r >= 1)
            .with_context(|| format!("BENCH_REPEAT={v:?} is not a count >= 1"))?,
        Err(_) => 3,
    };
    // Both passes go through the batch entry point (each pair bringing the
    // next one's rows into L2), on a one-thread pool and on all threads.
    let serial = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    let run = |metric: &Metric| metric.distances(&pairs).expect("benchmark pairs are valid");
    let median = |t: &[f64]| {
        let mut t = t.to_vec();
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    };
    let mut out = serde_json::Map::new();
    // Every pair's rows read once, in the order and split the metrics use.
    let read = || -> f32 {
        use rayon::prelude::*;
        (0..pairs.len())
            .into_par_iter()
            .map(|k| row_sum(pairs[k].0.data) + row_sum(pairs[k].1.data))
            .sum()
    };
    // Seconds per run of `f`, over as many runs as fill BENCH_MIN_SECONDS
    // (default 0.25): one run over 10,000 pairs takes about 10 ms, short
    // enough for a scheduler tick or a worker's wake-up to move it by a
    // tenth. Repeating the pairs does not change what is measured: the
    // 462 MB of distinct rows do not fit any cache, and 576 shared sets
    // stay in L3 either way.
    let min_seconds: f64 = match std::env::var("BENCH_MIN_SECONDS") {
        Ok(v) => v
            .parse()
            .ok()
            .filter(|s: &f64| s.is_finite() && *s >= 0.0)
            .with_context(|| format!("BENCH_MIN_SECONDS={v:?} is not a number of seconds"))?,
        Err(_) => 0.25,
    };
    let timed = |f: &dyn Fn()| {
        let (t, mut runs) = (Instant::now(), 0u32);
        loop {
            f();
            runs += 1;
            if t.elapsed().as_secs_f64() >= min_seconds {
                return t.elapsed().as_secs_f64() / f64::from(runs);
            }
        }
    };
    for metric in metrics {
        // Warm-up pass so page faults and lazy init don't count.
        metric.distances(&pairs[..50.min(pairs.len())])?;
        // Each pass REPEAT times, the median kept: the all-threads pass reads
        // the pairs from memory with both cores and varies by +-15 % between
        // passes on this VM. Each pass follows a read-only pass, so the
        // metric and the memory ceiling are timed in the same seconds (the
        // host's memory bandwidth moves by a third within a minute).
        // The values once, untimed (each timed pass repeats its runs).
        let values = serial.install(|| run(&metric));
        assert_eq!(values, run(&metric), "parallel and serial results differ");
        let (mut single_passes, mut parallel_passes) = (Vec::new(), Vec::new());
        let (mut read_single, mut read_parallel) = (Vec::new(), Vec::new());
        for _ in 0..repeat {
            read_single.push(timed(&|| {
                std::hint::black_box(serial.install(read));
            }));
            single_passes.push(timed(&|| {
                std::hint::black_box(serial.install(|| run(&metric)));
            }));
        }
        for _ in 0..repeat {
            read_parallel.push(timed(&|| {
                std::hint::black_box(read());
            }));
            parallel_passes.push(timed(&|| {
                std::hint::black_box(run(&metric));
            }));
        }
        out.insert(
            metric.to_string(),
            serde_json::json!({"single": median(&single_passes),
                "parallel": median(&parallel_passes), "values": values,
                "single_passes": single_passes, "parallel_passes": parallel_passes,
                "read_single": median(&read_single), "read_parallel": median(&read_parallel)}),
        );
    }
    out.insert(
        "threads".into(),
        serde_json::json!(rayon::current_num_threads()),
    );
    println!("{}", serde_json::Value::Object(out));
    Ok(())
}

/// Sum of a set's rows in 16 lanes (vectorised, so only memory bounds it).
fn row_sum(x: &[f32]) -> f32 {
    let mut acc = [0f32; 16];
    let mut chunks = x.chunks_exact(16);
    for c in &mut chunks {
        for (s, v) in acc.iter_mut().zip(c) {
            *s += v;
        }
    }
    acc.iter().sum::<f32>() + chunks.remainder().iter().sum::<f32>()
}
