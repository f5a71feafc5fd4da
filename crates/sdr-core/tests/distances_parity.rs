//! Parity of every metric with the Python references (POT 0.9.7, SciPy) on
//! the pairs of `tests/fixtures/distances.json`.
//!
//! Equivalent Python (the generating code is `tools/fixtures/distances.py`):
//!
//! ```python
//! M = np.clip((1 - (A @ B.T) / np.outer(norm(A), norm(B))) / 2, 0, 1); Mt = M / M.max()
//! ot.emd2(p, q, Mt)                                            # ot
//! (ot.sinkhorn(p, q, Mt, eps, method='sinkhorn_log', stopThr=1e-12) * Mt).sum()
//! (ot.unbalanced.sinkhorn_unbalanced(p, q, Mt, 0.1, tau, reg_type='entropy') * Mt).sum()
//! ot.gromov.entropic_gromov_wasserstein(C1, C2, p, q, 'square_loss', epsilon=0.1)  # gw (loss w/o entropy)
//! scipy.optimize.linear_sum_assignment(M)                       # hung-nn, hung-pen
//! ot.partial.partial_wasserstein2(p, q, Mt, m=rho)              # pot
//! ```
//!
//! Tolerances: exact metrics (chamfer, hausdorff, ot, hung-*, pot) 1e-9;
//! sinkhorn and uot 1e-6; gw 1e-4.

mod common;

use std::sync::OnceLock;

use common::{distance_fixture, FixturePair};
use sdr_core::Metric;

fn pairs() -> &'static [FixturePair] {
    static PAIRS: OnceLock<Vec<FixturePair>> = OnceLock::new();
    PAIRS.get_or_init(|| distance_fixture().1)
}

fn tolerance(metric: &Metric) -> f64 {
    match metric {
        Metric::Sinkhorn { .. } | Metric::Uot { .. } => 1e-6,
        Metric::Gw { .. } => 1e-4,
        _ => 1e-9,
    }
}

/// Compare every metric of `family` on every pair; fail listing the offenders.
fn check_family(family: &str) {
    let pairs = pairs();
    assert!(pairs.len() >= 250, "fixture has only {} pairs", pairs.len());
    let mut failures = Vec::new();
    let mut checked = 0usize;
    let mut worst = (0.0f64, String::new());
    for pair in pairs {
        for (spec, expected) in &pair.values {
            let metric: Metric = spec.parse().expect("fixture keys are canonical specs");
            if metric.family() != family {
                continue;
            }
            assert_eq!(&metric.to_string(), spec, "fixture key is not canonical");
            let got = metric
                .distance(&pair.a.view(), &pair.b.view())
                .expect("fixture sets are valid");
            let dev = (got - expected).abs();
            checked += 1;
            let tag = format!(
                "pair {} ({}, {}x{}) {spec}: got {got:.17}, expected {expected:.17}, |diff| {dev:.3e}",
                pair.index,
                pair.kind,
                pair.a.len(),
                pair.b.len()
            );
            if dev > worst.0 || worst.1.is_empty() {
                worst = (dev, tag.clone());
            }
            // NaN deviations fail too.
            if dev.is_nan() || dev > tolerance(&metric) {
                failures.push(tag);
            }
        }
    }
    assert!(checked > 0, "no fixture values for family {family}");
    println!(
        "{family}: {checked} values, max |diff| {:.3e} at {}",
        worst.0, worst.1
    );
    assert!(
        failures.is_empty(),
        "{family}: {} of {checked} values out of tolerance:\n{}",
        failures.len(),
        failures
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn fixture_covers_every_metric() {
    let (header, pairs) = distance_fixture();
    let keys: Vec<String> = Metric::all().iter().map(|m| m.to_string()).collect();
    let listed: Vec<&str> = header["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(listed, keys);
    for p in &pairs {
        let have: Vec<&str> = p.values.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(have, keys, "pair {}", p.index);
    }
}

#[test]
fn parity_chamfer() {
    check_family("chamfer");
}

#[test]
fn parity_hausdorff() {
    check_family("hausdorff");
}

#[test]
fn parity_ot() {
    check_family("ot");
}

#[test]
fn parity_sinkhorn() {
    check_family("sinkhorn");
}

#[test]
fn parity_uot() {
    check_family("uot");
}

#[test]
fn parity_gw() {
    check_family("gw");
}

#[test]
fn parity_hung_nn() {
    check_family("hung-nn");
}

#[test]
fn parity_hung_pen() {
    check_family("hung-pen");
}

#[test]
fn parity_pot() {
    check_family("pot");
}
