//! A new sentence cost in one file and one registration: a test-only cost,
//! registered at start-up, reaches the reward and the explanation through
//! its spec, with no edit anywhere else (ARCHITECTURE.md, "A new sentence
//! cost").

use std::borrow::Cow;
use std::sync::Arc;

use sdr_core::cost::{CostMatrix, NamedCost, PairCost};
use sdr_core::explain::ExplainOptions;
use sdr_core::{parse_report, Annotation, CostFamily, Metric, SentenceCost};
use sdr_embed::{EmbedControl, HashEncoder, SectionEmbedder};
use sdr_reward::{parse_reference, Explainer, Reference, RewardOptions, Scorer};

/// Adds `weight` to each pair of sentences of which exactly one is negated.
#[derive(Debug)]
struct Negation {
    weight: f64,
}

fn negated(s: &str) -> bool {
    s.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| w == "no" || w == "not" || w == "without")
}

fn weight(spec: &NamedCost) -> Result<f64, String> {
    let mut w: f64 = 1.0;
    for (k, v) in spec.params() {
        match k {
            "weight" => {
                w = v
                    .parse()
                    .map_err(|_| format!("weight `{v}` is not a number"))?
            }
            _ => return Err(format!("unknown parameter `{k}` (expected: weight)")),
        }
    }
    if !(w.is_finite() && w >= 0.0) {
        return Err(format!("weight must be finite and >= 0, got {w}"));
    }
    Ok(w)
}

impl SentenceCost for Negation {
    fn spec(&self) -> String {
        format!("negation:weight={}", self.weight)
    }

    fn annotate(&self, sentence: &str) -> Annotation {
        Arc::new(negated(sentence))
    }

    fn apply<'a>(
        &self,
        cosine: PairCost<'a>,
        a: &[Annotation],
        b: &[Annotation],
    ) -> sdr_core::Result<(PairCost<'a>, bool)> {
        let flag = |x: &Annotation| x.downcast_ref::<bool>().copied().unwrap_or(false);
        let mut data = cosine.cross.data().to_vec();
        let mut changed = false;
        for (i, x) in a.iter().enumerate() {
            for (j, y) in b.iter().enumerate() {
                if flag(x) != flag(y) {
                    data[i * b.len() + j] += self.weight;
                    changed = true;
                }
            }
        }
        let cross = CostMatrix::new(a.len(), b.len(), data);
        Ok((
            PairCost {
                cross: Cow::Owned(cross),
                intra: cosine.intra,
            },
            changed,
        ))
    }
}

const NEGATION: CostFamily = CostFamily {
    name: "negation",
    params: "weight=W",
    check: |spec| weight(spec).map(|w| format!("negation:weight={w}")),
    open: |spec| {
        Ok(Arc::new(Negation {
            weight: weight(spec)?,
        }))
    },
};

const REFERENCE: &str = "Findings: There is a pleural effusion. Impression: Effusion.";
const NEGATED: &str = "<think>There is no pleural effusion.</think><answer>Effusion.</answer>";

#[test]
fn a_registered_cost_reaches_the_reward_and_the_explanation() {
    // Unknown until registered; then its spec parses, checks and reads back.
    assert!(sdr_clinical::parse_cost("negation").is_err());
    sdr_clinical::register_cost(NEGATION).unwrap();
    let kind = sdr_clinical::parse_cost("negation : weight = 0.25").unwrap();
    assert_eq!(kind.to_string(), "negation:weight=0.25");
    let e = sdr_clinical::parse_cost("negation:weight=-1").unwrap_err();
    assert!(e.to_string().contains("weight must be"), "{e}");
    assert!(sdr_clinical::cost_forms().contains(&"negation[:weight=W]".to_string()));

    // The reward: the negated sentence costs `weight` more under the new
    // cost (one sentence a side: Chamfer is the pair's cost).
    let encoder = Arc::new(HashEncoder::new(16));
    let refs = [Reference::Report(REFERENCE)];
    let score = |options: RewardOptions| {
        let scorer = Scorer::new(options, Some(encoder.clone())).unwrap();
        scorer.score(&[NEGATED], &refs).unwrap().0.remove(0)
    };
    let cosine = score(RewardOptions::default());
    let negation = score(RewardOptions::default().with_cost(kind));
    assert_eq!(cosine.format, 1.0);
    assert_eq!(negation.impression, cosine.impression);
    assert!(
        cosine.findings > 0.25 && (cosine.findings - negation.findings - 0.25).abs() < 1e-12,
        "{cosine:?} {negation:?}"
    );

    // The explanation names the cost and explains the same distance.
    let explainer =
        Explainer::new(ExplainOptions::new(Metric::Chamfer, None).unwrap(), &kind).unwrap();
    let embedder = SectionEmbedder::transient(encoder.as_ref());
    let reference = parse_reference(&Reference::Report(REFERENCE), 0).unwrap();
    let candidate = parse_report(NEGATED);
    let e = explainer
        .explain(
            &[(&candidate, &reference)],
            &embedder,
            &EmbedControl::default(),
        )
        .unwrap()
        .remove(0)
        .unwrap();
    assert_eq!(e.cost.as_deref(), Some("negation:weight=0.25"));
    assert!(
        (e.reward - negation.reward).abs() < 1e-12,
        "{} {}",
        e.reward,
        negation.reward
    );
}
