//! The clinical cost (SPEC §10) as `proptest` properties: the paper's cosine
//! cost is unchanged bit for bit, a pair without conflicts scores the same
//! bits under the clinical cost as under the cosine cost for all fifteen
//! metrics, and a conflict never lowers a balanced distance (GW, which reads
//! only intra-set costs, stays equal) and adds exactly `λ/2 Σ κ / max M` to
//! the exact OT distance. UOT is left out of the monotonicity: its plan may
//! shed the mass of a penalised row (paying KL, which its reported value
//! `<γ, M~>` leaves out), so its value can fall (SPEC §10).

use proptest::prelude::*;
use sdr_core::cost::clinical::{ClinicalWeights, Fact, Laterality, Polarity};
use sdr_core::cost::{cosine_cost, PairCost};
use sdr_core::{EmbeddingSet, Metric, Side};

type Rows = Vec<Vec<f64>>;

fn set(dim: usize, max_n: usize) -> impl Strategy<Value = Rows> {
    prop::collection::vec(
        prop::collection::vec(-1.0f64..1.0, dim).prop_filter("non-zero row", |v| {
            v.iter().map(|x| x * x).sum::<f64>() > 1e-3
        }),
        1..=max_n,
    )
}

fn pair(max_n: usize) -> impl Strategy<Value = (Rows, Rows)> {
    (2usize..=6).prop_flat_map(move |dim| (set(dim, max_n), set(dim, max_n)))
}

fn polarity() -> impl Strategy<Value = Polarity> {
    prop_oneof![
        Just(Polarity::Present),
        Just(Polarity::Absent),
        Just(Polarity::Uncertain)
    ]
}

fn fact() -> impl Strategy<Value = Fact> {
    (
        0u16..4,
        polarity(),
        prop::option::of(prop_oneof![
            Just(Laterality::Left),
            Just(Laterality::Right),
            Just(Laterality::Bilateral)
        ]),
        prop::option::of(1u8..=3),
    )
        .prop_map(|(observation, polarity, side, grade)| Fact {
            observation,
            polarity,
            side,
            grade,
        })
}

fn facts(n: usize) -> impl Strategy<Value = Vec<Vec<Fact>>> {
    prop::collection::vec(prop::collection::vec(fact(), 0..3), n)
}

fn embed(rows: &[Vec<f64>], side: Side) -> EmbeddingSet {
    EmbeddingSet::from_rows(rows, side).expect("generated rows are valid")
}

fn values(pc: &PairCost<'_>) -> Vec<Option<u64>> {
    Metric::all()
        .iter()
        .map(|m| m.evaluate(pc).ok().map(|e| e.value.to_bits()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The cosine cost is the paper's: its OT-family scale is its own
    /// maximum, bit for bit, and agreeing facts change no metric's bits.
    #[test]
    fn agreeing_facts_change_nothing((a, b) in pair(5), f in facts(5)) {
        let (ea, eb) = (embed(&a, Side::A), embed(&b, Side::B));
        let cos = PairCost::between(&ea.view(), &eb.view(), true).unwrap();
        prop_assert_eq!(cos.cross.scale().to_bits(), cos.cross.max().to_bits());
        prop_assert_eq!(&*cos.cross, &cosine_cost(&ea.view(), &eb.view()));
        // Each set states the same facts in every sentence: no conflict.
        let fa: Vec<Vec<Fact>> = vec![f[0].clone(); a.len()];
        let fb: Vec<Vec<Fact>> = vec![f[0].clone(); b.len()];
        let (clin, conflicts) = cos.clone().clinical(&fa, &fb, &ClinicalWeights::default()).unwrap();
        prop_assert!(!conflicts.any());
        prop_assert_eq!(values(&clin), values(&cos));
    }

    /// A conflict never lowers a distance; exact OT moves by exactly
    /// `λ/2 (Σ κ^A + Σ κ^B) / max M`; GW does not move.
    #[test]
    fn conflicts_only_add((a, b) in pair(5), fa in facts(5), fb in facts(5)) {
        let (ea, eb) = (embed(&a, Side::A), embed(&b, Side::B));
        let (fa, fb) = (&fa[..a.len()], &fb[..b.len()]);
        let cos = PairCost::between(&ea.view(), &eb.view(), true).unwrap();
        let w = ClinicalWeights::default();
        let (clin, conflicts) = cos.clone().clinical(fa, fb, &w).unwrap();
        for m in Metric::all() {
            let (Ok(v0), Ok(v1)) = (m.evaluate(&cos), m.evaluate(&clin)) else { continue };
            let tol = match m { Metric::Sinkhorn { .. } | Metric::Uot { .. } => 1e-6, Metric::Gw { .. } => 1e-4, _ => 1e-9 };
            if matches!(m, Metric::Uot { .. }) {
                continue;
            }
            if matches!(m, Metric::Gw { .. }) {
                prop_assert_eq!(v0.value.to_bits(), v1.value.to_bits());
            } else {
                prop_assert!(v1.value >= v0.value - tol, "{}: {} < {}", m, v1.value, v0.value);
            }
        }
        let max = cos.cross.max();
        if max > 1e-12 {
            let k: f64 = conflicts.a.iter().chain(&conflicts.b).map(|c| c.map_or(0.0, |c| c.weight)).sum();
            let ot0 = Metric::Ot.evaluate(&cos).unwrap().value;
            let ot1 = Metric::Ot.evaluate(&clin).unwrap().value;
            prop_assert!((ot1 - ot0 - 0.5 * w.lambda * k / max).abs() < 1e-9, "{} vs {} + {}", ot1, ot0, 0.5 * w.lambda * k / max);
        }
    }
}
