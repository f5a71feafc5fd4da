//! Corpus scoring under the clinical sentence cost (SPEC §10): conflicts
//! change the choice, pruning stays exact, and the cosine cost is untouched.

mod common;

use sdr_clinical::{ClinicalCost, Labeler};
use sdr_core::cost::clinical::ClinicalWeights;
use sdr_core::Metric;
use sdr_corpus::rng::SplitMix64;
use sdr_corpus::{
    argmin, consensus_scores, consensus_scores_with, Aggregation, CandidateEmbedding,
    CandidateSentences, CorpusClinical, CorpusData, CorpusIndex, HashEncoder, Policy, ScoreOptions,
    SentenceEncoder, SourceReport,
};

const DIM: usize = 16;

/// A candidate's embedding and sentences from its texts.
fn candidate(
    enc: &HashEncoder,
    f: &[&str],
    i: &[&str],
) -> (CandidateEmbedding, CandidateSentences) {
    let own = |s: &[&str]| s.iter().map(|x| x.to_string()).collect();
    (
        CandidateEmbedding {
            findings: enc.embed(f).unwrap(),
            impression: enc.embed(i).unwrap(),
        },
        CandidateSentences {
            findings: own(f),
            impression: own(i),
        },
    )
}

/// Random candidates over the words of the random corpora (which name
/// effusions, pneumothoraces, sides and "no"), so facts conflict often.
#[allow(clippy::type_complexity)]
fn random_candidates(
    seed: u64,
    k: usize,
) -> (
    Vec<Option<CandidateEmbedding>>,
    Vec<Option<CandidateSentences>>,
) {
    let enc = HashEncoder::new(DIM);
    let mut rng = SplitMix64::new(seed);
    (0..k)
        .map(|_| {
            let nf = 1 + rng.below(5) as usize;
            let ni = 1 + rng.below(3) as usize;
            let f: Vec<String> = (0..nf).map(|_| common::random_sentence(&mut rng)).collect();
            let i: Vec<String> = (0..ni).map(|_| common::random_sentence(&mut rng)).collect();
            let f: Vec<&str> = f.iter().map(String::as_str).collect();
            let i: Vec<&str> = i.iter().map(String::as_str).collect();
            let (e, s) = candidate(&enc, &f, &i);
            (Some(e), Some(s))
        })
        .unzip()
}

fn clinical_of<'c>(
    cost: &'c ClinicalCost,
    data: &CorpusData,
    index: &CorpusIndex<'_>,
) -> CorpusClinical<'c> {
    CorpusClinical::new(cost, index, |s| data.sentences[s].as_str())
}

fn every_policy() -> Vec<Policy> {
    Metric::all()
        .into_iter()
        .flat_map(|metric| {
            [
                Aggregation::Min,
                Aggregation::Avg,
                Aggregation::Knn { k: 1 },
                Aggregation::Knn { k: 5 },
                Aggregation::Knn { k: 40 },
            ]
            .into_iter()
            .map(move |agg| Policy { metric, agg })
        })
        .collect()
}

/// A candidate that cosine prefers but whose finding is on the other side
/// than the corpus's loses to one that agrees, under the clinical cost only.
#[test]
fn a_side_conflict_changes_the_choice() {
    let report = |id: &str, f: &[&str], i: &[&str]| SourceReport {
        id: id.into(),
        findings: f.iter().map(|s| s.to_string()).collect(),
        impression: i.iter().map(|s| s.to_string()).collect(),
    };
    let data = common::build(
        vec![
            report(
                "r0",
                &[
                    "There is a small right pleural effusion.",
                    "The heart is normal in size.",
                ],
                &["Small right pleural effusion."],
            ),
            report(
                "r1",
                &[
                    "There is a small right pleural effusion.",
                    "Heart size is normal.",
                ],
                &["Small right pleural effusion."],
            ),
        ],
        DIM,
    );
    let index = CorpusIndex::new(data.view()).unwrap();
    let enc = HashEncoder::new(DIM);
    // c0 differs from the corpus by one word, the side; c1 words the same
    // finding differently.
    let (e0, s0) = candidate(
        &enc,
        &[
            "There is a small left pleural effusion.",
            "The heart is normal in size.",
        ],
        &["Small left pleural effusion."],
    );
    let (e1, s1) = candidate(
        &enc,
        &["Right pleural effusion, small.", "Heart size normal."],
        &["Right effusion, small."],
    );
    let cands = vec![Some(e0), Some(e1)];
    let sentences = vec![Some(s0), Some(s1)];
    let cost = ClinicalCost::default();
    let clin = clinical_of(&cost, &data, &index);
    let policies = [
        Policy {
            metric: Metric::Chamfer,
            agg: Aggregation::Min,
        },
        Policy {
            metric: Metric::Ot,
            agg: Aggregation::Avg,
        },
    ];
    let cos = index
        .score(&cands, &policies, ScoreOptions::default())
        .unwrap();
    let cl = index
        .score_with(
            &cands,
            &policies,
            ScoreOptions::default(),
            Some((&clin, &sentences)),
        )
        .unwrap();
    let lambda = cost.weights().lambda;
    for (p, policy) in policies.iter().enumerate() {
        assert_eq!(
            argmin(&cos.total[p]).index,
            0,
            "{policy}: cosine prefers the one-word edit"
        );
        assert_eq!(
            argmin(&cl.total[p]).index,
            1,
            "{policy}: clinical prefers the agreeing side"
        );
        // The side swap is penalised in both sections; the agreeing candidate is not.
        assert!(cl.total[p][0] >= cos.total[p][0] + lambda / 2.0, "{policy}");
        assert_eq!(cl.total[p][1], cos.total[p][1], "{policy}");
    }
}

/// Pruning under the clinical cost returns exactly the unpruned scores, for
/// every metric and aggregation, and the penalty is seen (scores never fall
/// below the cosine ones for the metrics monotone in the cost, and rise for
/// some).
#[test]
fn pruned_equals_unpruned_under_the_clinical_cost() {
    let cost = ClinicalCost::default();
    // No `avg`: a metric with an `avg` policy is computed in full anyway.
    let policies: Vec<Policy> = every_policy()
        .into_iter()
        .filter(|p| p.agg != Aggregation::Avg)
        .collect();
    let mut raised = 0;
    for seed in 0..3u64 {
        // Past one pruning round (256 sets), so the bound order matters.
        let data = common::random_corpus(700, 120, DIM, 300 + seed);
        let index = CorpusIndex::new(data.view()).unwrap();
        let clin = clinical_of(&cost, &data, &index);
        let (cands, sentences) = random_candidates(seed, 3);
        let on = Some((&clin, &sentences[..]));
        let pruned = index
            .score_with(&cands, &policies, ScoreOptions { prune: true }, on)
            .unwrap();
        let full = index
            .score_with(&cands, &policies, ScoreOptions { prune: false }, on)
            .unwrap();
        for (p, policy) in policies.iter().enumerate() {
            assert_eq!(pruned.total[p], full.total[p], "seed {seed}, {policy}");
        }
        assert!(
            pruned.evaluated < full.evaluated,
            "seed {seed}: nothing was pruned"
        );
        let cos = index
            .score(&cands, &policies, ScoreOptions { prune: false })
            .unwrap();
        for (p, policy) in policies.iter().enumerate() {
            if matches!(
                policy.metric,
                Metric::Sinkhorn { .. } | Metric::Uot { .. } | Metric::Gw { .. }
            ) {
                continue;
            }
            for c in 0..cands.len() {
                assert!(
                    full.total[p][c] >= cos.total[p][c] - 1e-12,
                    "seed {seed}, {policy}, candidate {c}"
                );
                raised += (full.total[p][c] > cos.total[p][c] + 1e-9) as usize;
            }
        }
    }
    assert!(raised > 0, "the clinical cost never changed a score");
}

/// With `λ = 0` the clinical cost is the cosine cost, bit for bit, and
/// `score_with(None)` is `score`.
#[test]
fn zero_strength_and_no_cost_are_the_cosine_scores() {
    let data = common::random_corpus(300, 80, DIM, 7);
    let index = CorpusIndex::new(data.view()).unwrap();
    let (cands, sentences) = random_candidates(9, 4);
    let policies = every_policy();
    let cos = index
        .score(&cands, &policies, ScoreOptions::default())
        .unwrap();
    let none = index
        .score_with(&cands, &policies, ScoreOptions::default(), None)
        .unwrap();
    assert_eq!(cos, none);
    let zero = ClinicalCost::new(
        Labeler::default(),
        ClinicalWeights {
            lambda: 0.0,
            ..Default::default()
        },
    )
    .unwrap();
    let clin = clinical_of(&zero, &data, &index);
    let z = index
        .score_with(
            &cands,
            &policies,
            ScoreOptions { prune: false },
            Some((&clin, &sentences)),
        )
        .unwrap();
    let c = index
        .score(&cands, &policies, ScoreOptions { prune: false })
        .unwrap();
    assert_eq!(z.total, c.total);
    for m in Metric::all() {
        let a = consensus_scores(&cands, &m, DIM).unwrap();
        let b = consensus_scores_with(&cands, &m, DIM, Some((&zero, &sentences))).unwrap();
        assert_eq!(a.scores, b.scores, "{m}");
    }
}

/// Consensus under the clinical cost penalises the candidate whose finding
/// the others contradict.
#[test]
fn consensus_sees_the_odd_finding_out() {
    let enc = HashEncoder::new(DIM);
    let agree = ["No pneumothorax.", "The heart is normal in size."];
    let (a, sa) = candidate(&enc, &agree, &["No acute disease."]);
    let (b, sb) = candidate(&enc, &agree, &["No acute cardiopulmonary disease."]);
    let (c, sc) = candidate(
        &enc,
        &["There is a pneumothorax.", "The heart is normal in size."],
        &["No acute disease."],
    );
    let cands = vec![Some(a), Some(b), Some(c)];
    let sentences = vec![Some(sa), Some(sb), Some(sc)];
    let cost = ClinicalCost::default();
    let cos = consensus_scores(&cands, &Metric::Chamfer, DIM).unwrap();
    let cl =
        consensus_scores_with(&cands, &Metric::Chamfer, DIM, Some((&cost, &sentences))).unwrap();
    assert!(
        cl.scores[2] - cos.scores[2] > cost.weights().lambda / 4.0,
        "{:?} vs {:?}",
        cl.scores,
        cos.scores
    );
    assert_eq!(argmin(&cl.scores).index, 0);
}

/// Sentences that do not match the embedded rows are refused, naming the candidate.
#[test]
fn a_sentence_count_mismatch_is_an_error() {
    let data = common::random_corpus(50, 30, DIM, 1);
    let index = CorpusIndex::new(data.view()).unwrap();
    let (cands, mut sentences) = random_candidates(2, 2);
    sentences[1]
        .as_mut()
        .unwrap()
        .findings
        .push("Extra sentence.".into());
    let cost = ClinicalCost::default();
    let clin = clinical_of(&cost, &data, &index);
    let p = [Policy {
        metric: Metric::Chamfer,
        agg: Aggregation::Min,
    }];
    let err = index
        .score_with(
            &cands,
            &p,
            ScoreOptions::default(),
            Some((&clin, &sentences)),
        )
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("candidate 1 findings:"), "{err}");
}
