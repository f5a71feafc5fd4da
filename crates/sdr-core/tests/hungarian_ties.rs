//! Hung-NN under ties: SciPy's assignment, SciPy's value (SPEC §3, "Ties").
//!
//! Where several assignments are optimal, Hung-NN's value depends on which
//! elements of the larger set the assignment leaves unmatched. The cases of
//! `tests/fixtures/hungarian_ties.json` (costs in multiples of 1/4, so most
//! have several optima; written by `tools/fixtures/hungarian_ties.py` with
//! `scipy.optimize.linear_sum_assignment`) must give SciPy's pairs and value.

use sdr_core::distance::hungarian::{hung_nn, hung_pen, linear_sum_assignment};
use sdr_core::CostMatrix;
use serde::Deserialize;

#[derive(Deserialize)]
struct Case {
    n: usize,
    m: usize,
    cost: Vec<f64>,
    pairs: Vec<(usize, usize)>,
    hung_nn: f64,
}

#[derive(Deserialize)]
struct Fixture {
    cases: Vec<Case>,
}

#[test]
fn ties_resolve_as_scipy_does() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/hungarian_ties.json"
    );
    let fixture: Fixture =
        serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("json");
    assert_eq!(fixture.cases.len(), 400);
    let mut failures = Vec::new();
    for (k, c) in fixture.cases.iter().enumerate() {
        let m = CostMatrix::new(c.n, c.m, c.cost.clone());
        let lsa = linear_sum_assignment(&m).unwrap();
        let nn = hung_nn(&m).unwrap();
        if lsa.pairs != c.pairs || (nn - c.hung_nn).abs() > 1e-12 {
            failures.push(format!(
                "case {k} ({}x{}): pairs {:?} vs SciPy {:?}, hung-nn {nn} vs {}",
                c.n, c.m, lsa.pairs, c.pairs, c.hung_nn
            ));
        }
        // Hung-Pen's faster search finds an assignment of the same cost.
        let matched: f64 = c.pairs.iter().map(|&(i, j)| c.cost[i * c.m + j]).sum();
        let pen = hung_pen(&m, 0.0).unwrap() * c.n.min(c.m) as f64;
        assert!(
            (pen - matched).abs() < 1e-12,
            "case {k}: {pen} vs {matched}"
        );
    }
    assert!(
        failures.is_empty(),
        "{} of 400:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
