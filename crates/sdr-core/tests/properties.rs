//! Metric properties as `proptest` properties (SPEC §3): symmetry,
//! invariance to the order of the rows of either set, identity, and range.
//!
//! Tolerances follow the parity test: 1e-9 for the exact metrics (chamfer,
//! hausdorff, ot, hung-*, pot), 1e-6 for sinkhorn and uot, 1e-4 for gw.
//!
//! Identity `D(A, A) = 0` is asserted (exactly) for the exact metrics
//! only. The regularised ones are not 0 on identical sets:
//! - sinkhorn: `<gamma_eps, M~>  <=  eps * ln(n)` for `|A| = n` — the entropic
//!   objective at `gamma_eps` is at most its value at the optimal permutation
//!   plan `I/n` (entropy `ln n`), and the entropy of any coupling is at most
//!   `2 ln n`; that bound is tested;
//! - uot and gw have no comparably simple bound (uot also changes the mass,
//!   gw is non-convex and solved by a fixed iteration budget), so only their
//!   range is tested here; their values on identical and permuted sets are
//!   pinned by the fixture in `distances_parity.rs`.

use proptest::prelude::*;
use sdr_core::{EmbeddingSet, Metric, Side};

/// A set of 1..=max_n vectors of dimension `dim`, components in [-1, 1],
/// norms bounded away from 0 (an input error, tested elsewhere).
fn set(dim: usize, max_n: usize) -> impl Strategy<Value = Rows> {
    prop::collection::vec(
        prop::collection::vec(-1.0f64..1.0, dim).prop_filter("non-zero row", |v| {
            v.iter().map(|x| x * x).sum::<f64>() > 1e-3
        }),
        1..=max_n,
    )
}

type Rows = Vec<Vec<f64>>;

/// `(A, B, A with rows shuffled, B with rows shuffled)`.
type Pair = (Rows, Rows, Rows, Rows);

/// Two sets of a common dimension, plus a shuffled copy of each.
fn pair(max_n: usize) -> impl Strategy<Value = Pair> {
    (2usize..=6)
        .prop_flat_map(move |dim| (set(dim, max_n), set(dim, max_n)))
        .prop_flat_map(|(a, b)| {
            let (sa, sb) = (
                Just(a.clone()).prop_shuffle(),
                Just(b.clone()).prop_shuffle(),
            );
            (Just(a), Just(b), sa, sb)
        })
}

fn embed(rows: &[Vec<f64>], side: Side) -> EmbeddingSet {
    EmbeddingSet::from_rows(rows, side).expect("generated rows are valid")
}

fn tolerance(metric: &Metric) -> f64 {
    match metric {
        Metric::Sinkhorn { .. } | Metric::Uot { .. } => 1e-6,
        Metric::Gw { .. } => 1e-4,
        _ => 1e-9,
    }
}

fn is_exact(metric: &Metric) -> bool {
    !matches!(
        metric,
        Metric::Sinkhorn { .. } | Metric::Uot { .. } | Metric::Gw { .. }
    )
}

fn d(metric: &Metric, a: &EmbeddingSet, b: &EmbeddingSet) -> f64 {
    metric.distance(&a.view(), &b.view()).expect("valid pair")
}

/// All properties of one metric on one generated pair.
fn check(metric: &Metric, (a, b, a_shuffled, b_shuffled): &Pair) -> Result<(), TestCaseError> {
    let (a, b) = (embed(a, Side::A), embed(b, Side::B));
    let (sa, sb) = (embed(a_shuffled, Side::A), embed(b_shuffled, Side::B));
    let tol = tolerance(metric);
    let ab = d(metric, &a, &b);
    let ba = d(metric, &b, &a);
    prop_assert!(
        (ab - ba).abs() <= tol,
        "{metric}: D(A,B) = {ab} but D(B,A) = {ba}"
    );
    let shuffled = d(metric, &sa, &sb);
    prop_assert!(
        (ab - shuffled).abs() <= tol,
        "{metric}: D(A,B) = {ab} but {shuffled} with rows permuted"
    );
    if metric.is_bounded() {
        prop_assert!(
            (-1e-12..=1.0 + 1e-12).contains(&ab),
            "{metric}: {ab} outside [0, 1]"
        );
    } else {
        prop_assert!(ab >= -1e-12, "{metric}: {ab} < 0");
    }
    if let Metric::Pot {
        rho: sdr_core::distance::Rho::Fixed(r),
    } = metric
    {
        prop_assert!(ab <= r + 1e-12, "{metric}: {ab} > rho");
    }
    let aa = d(metric, &a, &a);
    if is_exact(metric) {
        // Exactly 0 (SPEC §3), not 0 up to rounding: a row's cost against
        // itself is snapped to 0, so a reward `1 - D` of a copy is exactly 1.
        prop_assert!(aa == 0.0, "{metric}: D(A,A) = {aa}");
    } else if let Metric::Sinkhorn { eps } = metric {
        let bound = eps * (a.len() as f64).ln() + 1e-6;
        prop_assert!(
            (-1e-12..=bound).contains(&aa),
            "{metric}: D(A,A) = {aa} above eps ln n = {bound}"
        );
    }
    Ok(())
}

fn metrics_of(family: &str) -> Vec<Metric> {
    Metric::all()
        .into_iter()
        .filter(|m| m.family() == family)
        .collect()
}

macro_rules! family_properties {
    ($($name:ident => $family:literal, $cases:expr, $max_n:expr;)*) => {$(
        proptest! {
            #![proptest_config(ProptestConfig {
                cases: $cases,
                // A fixed seed: entropic GW is non-convex and stops at an iteration
                // budget, so its symmetry holds to about 1e-4 on most pairs, not on
                // every random one; a failure must reproduce, not come and go.
                rng_seed: proptest::test_runner::RngSeed::Fixed(20261124),
                ..ProptestConfig::default()
            })]
            #[test]
            fn $name(p in pair($max_n)) {
                let metrics = metrics_of($family);
                prop_assert!(!metrics.is_empty());
                for metric in &metrics {
                    check(metric, &p)?;
                }
            }
        }
    )*};
}

family_properties! {
    chamfer_properties => "chamfer", 128, 10;
    hausdorff_properties => "hausdorff", 128, 10;
    ot_properties => "ot", 128, 10;
    hung_nn_properties => "hung-nn", 128, 10;
    hung_pen_properties => "hung-pen", 128, 10;
    pot_properties => "pot", 128, 10;
    sinkhorn_properties => "sinkhorn", 48, 8;
    uot_properties => "uot", 48, 8;
    gw_properties => "gw", 24, 6;
}

/// Exact metrics on a set against a reordered copy of itself (with a
/// duplicated row): every one of them is 0.
#[test]
fn permuted_copy_is_at_distance_zero() {
    let a = vec![
        vec![1.0, 0.2, -0.3],
        vec![0.1, 0.9, 0.4],
        vec![-0.5, 0.3, 0.8],
        vec![0.1, 0.9, 0.4],
    ];
    let b = vec![a[2].clone(), a[3].clone(), a[0].clone(), a[1].clone()];
    let (a, b) = (embed(&a, Side::A), embed(&b, Side::B));
    for metric in Metric::all().iter().filter(|m| is_exact(m)) {
        let v = d(metric, &a, &b);
        assert_eq!(v, 0.0, "{metric}");
    }
}
