//! One pair of report-sized sets (768-d f32 rows, clustered like sentence
//! embeddings), held in cache: the cosine cost matrix alone, and Chamfer,
//! Hausdorff and Hung-Pen through the library's path (`Metric::distance`).
//!
//! A third group times 2,000 distinct pairs (92 MB, read from memory, each
//! pair once per pass) on one thread: one `Metric::distance` call after
//! another, against the batch entry point `Metric::distances`, whose products
//! bring the next pair's rows into L2. Repeating a few pairs in cache also
//! lets the branch predictor learn the assignment solver's branches; fresh
//! pairs do not.
//!
//! A fourth group times the step after the products alone: Chamfer,
//! Hung-NN and Hung-Pen on 1,000 precomputed cost matrices of sizes 3..12
//! (in L2, too many for the branch predictor to learn).
//!
//! `cargo bench -p sdr-core --bench pair_metrics`. Whole-workload ratios
//! against POT/SciPy (with the pairs read from memory) are in
//! `bench/distances.py`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use sdr_core::distance::{chamfer::chamfer, hungarian};
use sdr_core::{cosine_cost, CostMatrix, Metric, SetView};

const DIM: usize = 768;

fn lcg(seed: &mut u64) -> f64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*seed >> 11) as f64 / (1u64 << 53) as f64
}

/// `k` rows around 8 shared centres with noise 0.6 (as bench/distances.py).
fn set(k: usize, seed: &mut u64) -> Vec<f32> {
    let mut centre_seed = 1;
    let centres: Vec<f64> = (0..8 * DIM).map(|_| lcg(&mut centre_seed) - 0.5).collect();
    let mut out = Vec::with_capacity(k * DIM);
    for _ in 0..k {
        let c = (lcg(seed) * 8.0) as usize % 8;
        for x in &centres[c * DIM..(c + 1) * DIM] {
            out.push((x + 0.6 * (lcg(seed) - 0.5)) as f32);
        }
    }
    out
}

fn bench(c: &mut Criterion) {
    let mut seed = 5;
    for (n, m) in [(8, 8), (12, 12), (4, 11)] {
        let (a, b) = (set(n, &mut seed), set(m, &mut seed));
        let (va, vb) = (SetView::new(&a, DIM), SetView::new(&b, DIM));
        let mut g = c.benchmark_group(format!("{n}x{m}"));
        g.bench_function("cost matrix", |bn| {
            bn.iter(|| cosine_cost(black_box(&va), black_box(&vb)))
        });
        for (name, metric) in [
            ("chamfer", Metric::Chamfer),
            ("hausdorff", Metric::Hausdorff),
            ("hung-pen", Metric::HungPen { alpha: 0.5 }),
        ] {
            g.bench_function(name, |bn| {
                bn.iter(|| metric.distance(black_box(&va), black_box(&vb)).unwrap())
            });
        }
        g.finish();
    }
}

/// Twenty pairs of sizes 3..=12 per side, every metric call in turn: the
/// size mix of `bench/distances.py`, still in cache (~0.9 MB).
fn bench_mixed(c: &mut Criterion) {
    let mut seed = 11;
    let pairs: Vec<(Vec<f32>, Vec<f32>)> = (0..20)
        .map(|_| {
            let n = 3 + (lcg(&mut seed) * 10.0) as usize;
            let m = 3 + (lcg(&mut seed) * 10.0) as usize;
            (set(n, &mut seed), set(m, &mut seed))
        })
        .collect();
    let mut g = c.benchmark_group("mixed 3-12, 20 pairs");
    for (name, metric) in [
        ("chamfer", Metric::Chamfer),
        ("hung-pen", Metric::HungPen { alpha: 0.5 }),
    ] {
        g.bench_function(name, |bn| {
            bn.iter(|| {
                pairs
                    .iter()
                    .map(|(a, b)| {
                        let (va, vb) = (SetView::new(a, DIM), SetView::new(b, DIM));
                        metric.distance(black_box(&va), black_box(&vb)).unwrap()
                    })
                    .sum::<f64>()
            })
        });
    }
    g.finish();
}

/// 2,000 distinct pairs from memory, one thread: pair by pair, and batched.
fn bench_stream(c: &mut Criterion) {
    let mut seed = 13;
    let sizes: Vec<(usize, usize)> = (0..2000)
        .map(|_| {
            let n = 3 + (lcg(&mut seed) * 10.0) as usize;
            (n, 3 + (lcg(&mut seed) * 10.0) as usize)
        })
        .collect();
    // One buffer, pair after pair, as a stream of pairs is laid out.
    let mut data = Vec::new();
    for &(n, m) in &sizes {
        data.extend(set(n, &mut seed));
        data.extend(set(m, &mut seed));
    }
    let mut pairs = Vec::with_capacity(sizes.len());
    let mut off = 0;
    for &(n, m) in &sizes {
        let a = SetView::new(&data[off..off + n * DIM], DIM);
        off += n * DIM;
        let b = SetView::new(&data[off..off + m * DIM], DIM);
        off += m * DIM;
        pairs.push((a, b));
    }
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let mut g = c.benchmark_group("2000 pairs from memory, 1 thread");
    g.sample_size(20);
    for (name, metric) in [
        ("chamfer", Metric::Chamfer),
        ("hung-pen", Metric::HungPen { alpha: 0.5 }),
    ] {
        g.bench_function(format!("{name}, pair by pair"), |bn| {
            bn.iter(|| {
                pairs
                    .iter()
                    .map(|(a, b)| metric.distance(black_box(a), black_box(b)).unwrap())
                    .sum::<f64>()
            })
        });
        g.bench_function(format!("{name}, batched"), |bn| {
            bn.iter(|| one.install(|| metric.distances(black_box(&pairs)).unwrap()))
        });
    }
    g.finish();
}

/// 1,000 cost matrices of sizes 3..=12 per side: the metrics' own step.
fn bench_matrices(c: &mut Criterion) {
    let mut seed = 17;
    let costs: Vec<CostMatrix> = (0..1000)
        .map(|_| {
            let n = 3 + (lcg(&mut seed) * 10.0) as usize;
            let m = 3 + (lcg(&mut seed) * 10.0) as usize;
            let (a, b) = (set(n, &mut seed), set(m, &mut seed));
            cosine_cost(&SetView::new(&a, DIM), &SetView::new(&b, DIM))
        })
        .collect();
    let mut g = c.benchmark_group("1000 cost matrices");
    g.bench_function("chamfer", |bn| {
        bn.iter(|| costs.iter().map(|m| chamfer(black_box(m))).sum::<f64>())
    });
    g.bench_function("hung-nn", |bn| {
        bn.iter(|| {
            costs
                .iter()
                .map(|m| hungarian::hung_nn(black_box(m)).unwrap())
                .sum::<f64>()
        })
    });
    g.bench_function("hung-pen", |bn| {
        bn.iter(|| {
            costs
                .iter()
                .map(|m| hungarian::hung_pen(black_box(m), 0.5).unwrap())
                .sum::<f64>()
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = bench, bench_mixed, bench_stream, bench_matrices
}
criterion_main!(benches);
