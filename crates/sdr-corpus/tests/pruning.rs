//! Lower-bound pruning gives exactly the brute-force aggregates.

mod common;

use sdr_core::Metric;
use sdr_corpus::rng::SplitMix64;
use sdr_corpus::{
    Aggregation, CandidateEmbedding, CorpusIndex, HashEncoder, Policy, ScoreOptions,
    SentenceEncoder,
};

const DIM: usize = 16;

fn candidates(seed: u64, k: usize) -> Vec<Option<CandidateEmbedding>> {
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
            Some(CandidateEmbedding {
                findings: enc.embed(&f).unwrap(),
                impression: enc.embed(&i).unwrap(),
            })
        })
        .collect()
}

/// Metrics with a lower bound (the others are never pruned).
pub fn bounded() -> Vec<Metric> {
    Metric::all()
        .into_iter()
        .filter(|m| sdr_corpus::bounds::kind(m) != sdr_corpus::bounds::BoundKind::None)
        .collect()
}

#[test]
fn pruned_equals_brute_force() {
    for seed in 0..4u64 {
        // Sizes past one pruning round (256 sets) so the bound order matters.
        let data = common::random_corpus(900, 120, DIM, 100 + seed);
        let index = CorpusIndex::new(data.view()).unwrap();
        let cands = candidates(seed, 4);
        let policies: Vec<Policy> = bounded()
            .into_iter()
            .flat_map(|metric| {
                [
                    Aggregation::Min,
                    Aggregation::Knn { k: 1 },
                    Aggregation::Knn { k: 5 },
                    Aggregation::Knn { k: 40 },
                ]
                .into_iter()
                .map(move |agg| Policy { metric, agg })
            })
            .collect();
        let pruned = index
            .score(&cands, &policies, ScoreOptions { prune: true })
            .unwrap();
        let brute = index
            .score(&cands, &policies, ScoreOptions { prune: false })
            .unwrap();
        assert_eq!(pruned.sections, brute.sections, "seed {seed}");
        assert_eq!(pruned.total, brute.total);
        // And pruning did skip work.
        assert!(
            pruned.evaluated < brute.evaluated,
            "{} vs {}",
            pruned.evaluated,
            brute.evaluated
        );
    }
}

#[test]
fn pruning_skips_most_of_a_large_corpus_for_chamfer_min() {
    let base = common::random_corpus(300, 200, DIM, 7);
    let big = sdr_corpus::synth::resample(&base, 20_000, 1);
    let index = CorpusIndex::new(big.view()).unwrap();
    let cands = candidates(9, 5);
    let p = [Policy {
        metric: Metric::Chamfer,
        agg: Aggregation::Min,
    }];
    let pruned = index
        .score(&cands, &p, ScoreOptions { prune: true })
        .unwrap();
    let brute = index
        .score(&cands, &p, ScoreOptions { prune: false })
        .unwrap();
    assert_eq!(pruned.total, brute.total);
    let sets: usize = sdr_corpus::Section::BOTH
        .iter()
        .map(|&s| index.section(s).len())
        .sum();
    assert_eq!(brute.evaluated, sets * 5);
    assert!(
        pruned.evaluated * 4 < brute.evaluated,
        "{} of {}",
        pruned.evaluated,
        brute.evaluated
    );
}

/// Blank sentences in a partial output are dropped before embedding (SPEC
/// §1): a partial with only blanks in a section scores as if the section had
/// not started, and blanks beside real sentences change nothing.
#[test]
fn partial_scores_drop_blank_sentences() {
    use sdr_corpus::{CorpusScorer, PartialSections};
    let data = common::random_corpus(40, 30, DIM, 7);
    let index = CorpusIndex::new(data.view()).unwrap();
    let enc = HashEncoder::new(DIM);
    let policy = Policy {
        metric: Metric::Chamfer,
        agg: Aggregation::Min,
    };
    let scorer = CorpusScorer::new(&index, &enc, policy);
    let part = |f: &'static [&'static str], i: &'static [&'static str]| PartialSections {
        findings: f,
        impression: i,
    };
    let clean = scorer
        .score(&[
            part(&["No acute disease."], &[]),
            part(&["The heart is normal.", "Lungs are clear."], &["Normal."]),
        ])
        .unwrap();
    let blanks = scorer
        .score(&[
            part(&["", "No acute disease.", "   "], &["\t"]),
            part(
                &[" The heart is normal. ", "", "Lungs are clear."],
                &["Normal.", " "],
            ),
        ])
        .unwrap();
    assert_eq!(blanks.scores, clean.scores);
    let only_blanks = scorer.score(&[part(&["", "  "], &[])]).unwrap();
    assert_eq!(only_blanks.scores, vec![f64::INFINITY]);
}
