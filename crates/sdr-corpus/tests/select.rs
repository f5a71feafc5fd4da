//! Selection semantics and batched scoring against direct distances.

mod common;

use sdr_core::{EmbeddingSet, Metric, Side};
use sdr_corpus::rng::SplitMix64;
use sdr_corpus::{
    argmin, consensus_scores, embed_candidates, Aggregation, CandidateEmbedding, CorpusIndex,
    HashEncoder, Policy, ScoreOptions, SentenceEncoder,
};

const DIM: usize = 24;

fn cand(enc: &HashEncoder, f: &[&str], i: &[&str]) -> CandidateEmbedding {
    CandidateEmbedding {
        findings: enc.embed(f).unwrap(),
        impression: enc.embed(i).unwrap(),
    }
}

fn widen(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

/// Batched scores equal per-report `Metric::distance` (f64 cosine) aggregated
/// by hand, over reports that have the section, within the f32 GEMM's rounding.
#[test]
fn batched_scores_match_direct_distances() {
    let data = common::random_corpus(60, 40, DIM, 11);
    let index = CorpusIndex::new(data.view()).unwrap();
    let enc = HashEncoder::new(DIM);
    let mut rng = SplitMix64::new(5);
    let cands: Vec<Option<CandidateEmbedding>> = (0..3)
        .map(|_| {
            let f: Vec<String> = (0..3).map(|_| common::random_sentence(&mut rng)).collect();
            let i: Vec<String> = (0..2).map(|_| common::random_sentence(&mut rng)).collect();
            let fr: Vec<&str> = f.iter().map(String::as_str).collect();
            let ir: Vec<&str> = i.iter().map(String::as_str).collect();
            Some(cand(&enc, &fr, &ir))
        })
        .collect();
    let metrics = [
        Metric::Chamfer,
        Metric::Hausdorff,
        Metric::Ot,
        Metric::HungNn,
    ];
    let policies: Vec<Policy> = metrics
        .iter()
        .flat_map(|&metric| {
            [
                Aggregation::Min,
                Aggregation::Avg,
                Aggregation::Knn { k: 3 },
            ]
            .into_iter()
            .map(move |agg| Policy { metric, agg })
        })
        .collect();
    let scores = index
        .score(&cands, &policies, ScoreOptions { prune: false })
        .unwrap();
    let view = data.view();
    for (pi, p) in policies.iter().enumerate() {
        for (c, cd) in cands.iter().enumerate() {
            let cd = cd.as_ref().unwrap();
            let mut total = 0.0;
            for (si, sec) in sdr_corpus::Section::BOTH.into_iter().enumerate() {
                let a = EmbeddingSet::from_flat(widen(cd.section(sec)), DIM, Side::A).unwrap();
                let idx = view.section(sec);
                let mut d: Vec<f64> = (0..idx.n_reports())
                    .filter(|&t| !idx.rows(t).is_empty())
                    .map(|t| {
                        let rows: Vec<f64> = idx
                            .rows(t)
                            .iter()
                            .flat_map(|&r| {
                                widen(&view.embeddings[r as usize * DIM..(r as usize + 1) * DIM])
                            })
                            .collect();
                        let b = EmbeddingSet::from_flat(rows, DIM, Side::B).unwrap();
                        p.metric.distance(&a.view(), &b.view()).unwrap()
                    })
                    .collect();
                d.sort_by(f64::total_cmp);
                let agg = match p.agg {
                    Aggregation::Min => d[0],
                    Aggregation::Avg => d.iter().sum::<f64>() / d.len() as f64,
                    Aggregation::Knn { k } => d[..k].iter().sum::<f64>() / k as f64,
                };
                let got = scores.sections[pi][c][si];
                assert!(
                    (got - agg).abs() < 2e-5,
                    "{p} cand {c} {sec}: {got} vs {agg}"
                );
                total += agg;
            }
            assert!((scores.total[pi][c] - total).abs() < 4e-5);
        }
    }
}

#[test]
fn malformed_candidates_score_infinity_and_ties_go_low() {
    let data = common::random_corpus(30, 20, DIM, 2);
    let index = CorpusIndex::new(data.view()).unwrap();
    let enc = HashEncoder::new(DIM);
    let texts = [
        "Findings: Lungs clear.", // no impression: malformed
        "Findings: Heart size normal. Lungs clear.\nImpression: No acute disease.",
        "<think>Heart size normal. Lungs clear.</think><answer>No acute disease.</answer>",
        "<think>Heart size normal.<answer>No acute disease.</answer>", // unclosed tag
    ];
    let cands = embed_candidates(&texts, &enc).unwrap();
    assert_eq!(
        cands.iter().map(Option::is_some).collect::<Vec<_>>(),
        [false, true, true, false]
    );
    let p = [Policy {
        metric: Metric::Chamfer,
        agg: Aggregation::Knn { k: 2 },
    }];
    let s = index.score(&cands, &p, ScoreOptions::default()).unwrap();
    assert_eq!(s.total[0][0], f64::INFINITY);
    assert_eq!(s.total[0][3], f64::INFINITY);
    // Candidates 1 and 2 hold the same sentences in two layouts: equal scores, 1 wins.
    assert_eq!(s.total[0][1], s.total[0][2]);
    assert!(s.total[0][1].is_finite());
    let sel = argmin(&s.total[0]);
    assert_eq!((sel.index, sel.all_malformed), (1, false));
}

#[test]
fn all_malformed_keeps_the_first() {
    let data = common::random_corpus(10, 10, DIM, 4);
    let index = CorpusIndex::new(data.view()).unwrap();
    let enc = HashEncoder::new(DIM);
    let cands = embed_candidates(&["no headers at all", "Impression: only."], &enc).unwrap();
    let p = [Policy {
        metric: Metric::Hausdorff,
        agg: Aggregation::Min,
    }];
    let s = index.score(&cands, &p, ScoreOptions::default()).unwrap();
    assert!(s.total[0].iter().all(|v| v.is_infinite()));
    let sel = argmin(&s.total[0]);
    assert_eq!((sel.index, sel.all_malformed), (0, true));
}

#[test]
fn knn_with_k_beyond_the_corpus_is_the_mean_of_all() {
    // Reports missing a section are left out of that section's aggregation:
    // knn with huge k must equal avg over the reports that have the section.
    let data = common::random_corpus(25, 15, DIM, 8);
    let index = CorpusIndex::new(data.view()).unwrap();
    assert!(index.section(sdr_corpus::Section::Findings).n_reports < 25);
    let enc = HashEncoder::new(DIM);
    let cands = vec![Some(cand(
        &enc,
        &["Heart size normal.", "Mild edema."],
        &["Stable."],
    ))];
    for metric in [Metric::Chamfer, Metric::Ot, Metric::HungPen { alpha: 0.1 }] {
        let p = [
            Policy {
                metric,
                agg: Aggregation::Knn { k: 1000 },
            },
            Policy {
                metric,
                agg: Aggregation::Avg,
            },
        ];
        for prune in [true, false] {
            let s = index.score(&cands, &p, ScoreOptions { prune }).unwrap();
            for si in 0..2 {
                let (a, b) = (s.sections[0][0][si], s.sections[1][0][si]);
                assert!((a - b).abs() < 1e-12, "{metric} prune={prune}: {a} vs {b}");
            }
        }
    }
}

#[test]
fn consensus_prefers_the_central_candidate() {
    let enc = HashEncoder::new(DIM);
    let c = |f: &[&str], i: &[&str]| Some(cand(&enc, f, i));
    let cands = vec![
        c(
            &["Heart size normal.", "Lungs clear."],
            &["No acute disease."],
        ),
        c(
            &["Heart size normal.", "Lungs clear."],
            &["No acute disease."],
        ),
        None,
        c(&["Large left pleural effusion."], &["Effusion, left."]),
        c(
            &["Heart size normal.", "Lungs clear.", "Mild spine changes."],
            &["No acute disease."],
        ),
    ];
    let s = consensus_scores(&cands, &Metric::Chamfer, DIM)
        .unwrap()
        .scores;
    assert_eq!(s[2], f64::INFINITY);
    // 0 and 1 are identical: equal scores, the tie goes to 0.
    assert_eq!(s[0], s[1]);
    assert_eq!(argmin(&s).index, 0);
    // The outlier is the farthest from the others.
    assert!(s[3] > s[0] && s[3] > s[4]);
    // A lone well-formed candidate scores 0 and wins.
    let lone = vec![None, c(&["A b."], &["C d."])];
    assert_eq!(
        consensus_scores(&lone, &Metric::Chamfer, DIM)
            .unwrap()
            .scores,
        [f64::INFINITY, 0.0]
    );
}

/// Identical one-sentence sections compare at cost exactly 0 through the f32
/// Gram matrix, so the OT family's `max(M) = 0` rule gives 0 (SPEC §3), not
/// the f32 noise normalised up to 1.
#[test]
fn identical_single_sentences_score_zero_in_the_ot_family() {
    let enc = HashEncoder::new(768);
    let one = || Some(cand(&enc, &["Heart size normal."], &["No acute disease."]));
    let cands = vec![one(), one()];
    for spec in [
        "ot",
        "sinkhorn:eps=0.1",
        "uot:eps=0.1,tau=1",
        "pot:rho=adaptive",
        "chamfer",
    ] {
        let metric: Metric = spec.parse().unwrap();
        let s = consensus_scores(&cands, &metric, 768).unwrap().scores;
        assert_eq!(s, [0.0, 0.0], "{spec}");
    }
}

/// GW through the Gram matrix follows the f64 path where a set has two rows:
/// the intra costs are exactly `[[0, 1], [1, 0]]` once normalised, so the
/// mirror descent stays at its starting plan as POT's does.
#[test]
fn gw_of_two_row_sets_matches_the_f64_path() {
    let enc = HashEncoder::new(768);
    let mut rng = SplitMix64::new(17);
    let metric: Metric = "gw:eps=0.1".parse().unwrap();
    for n in [2, 3, 5] {
        let f: Vec<String> = (0..2).map(|_| common::random_sentence(&mut rng)).collect();
        let g: Vec<String> = (0..n).map(|_| common::random_sentence(&mut rng)).collect();
        let fr: Vec<&str> = f.iter().map(String::as_str).collect();
        let gr: Vec<&str> = g.iter().map(String::as_str).collect();
        let x = cand(&enc, &fr, &fr);
        let y = cand(&enc, &gr, &gr);
        let s = consensus_scores(&[Some(x.clone()), Some(y.clone())], &metric, 768)
            .unwrap()
            .scores;
        let set = |v: &[f32], side| EmbeddingSet::from_flat(widen(v), 768, side).unwrap();
        let mut want = 0.0;
        for sec in sdr_corpus::Section::BOTH {
            let a = set(x.section(sec), Side::A);
            let b = set(y.section(sec), Side::B);
            want += metric.distance(&a.view(), &b.view()).unwrap();
        }
        assert!((s[0] - want).abs() < 1e-5, "2x{n}: {} vs {want}", s[0]);
    }
}

#[test]
fn best_of_k_is_the_argmin_of_the_policy_scores_through_the_embedder() {
    let data = common::random_corpus(30, 20, DIM, 2);
    let index = CorpusIndex::new(data.view()).unwrap();
    let enc = HashEncoder::new(DIM);
    let texts = [
        "Findings: Lungs clear.",
        "Findings: Heart size normal. Lungs clear.\nImpression: No acute disease.",
        "Findings: Large effusion.\nImpression: Pneumothorax.",
    ];
    let policy = Policy {
        metric: Metric::Chamfer,
        agg: Aggregation::Min,
    };
    let embedder = sdr_corpus::SectionEmbedder::transient(&enc);
    let got = sdr_corpus::best_of_k(&texts, &embedder, &index, &policy).unwrap();
    let cands = embed_candidates(&texts, &enc).unwrap();
    let s = index
        .score(&cands, &[policy], ScoreOptions::default())
        .unwrap();
    assert_eq!(got.scores, s.total[0]);
    assert_eq!(got.selection, argmin(&s.total[0]));
    assert_eq!(got.evaluated, s.evaluated);
    // The embedder kept every sentence: a second call embeds nothing new.
    let before = embedder.cache().stats().entries;
    sdr_corpus::best_of_k(&texts, &embedder, &index, &policy).unwrap();
    assert_eq!(embedder.cache().stats().entries, before);
    assert_eq!(before, 5);
}

#[test]
fn a_scorer_chooses_as_best_of_k_under_its_policy_and_cache() {
    let data = common::random_corpus(30, 20, DIM, 2);
    let index = CorpusIndex::new(data.view()).unwrap();
    let enc = HashEncoder::new(DIM);
    let texts = [
        "Findings: Lungs clear.",
        "Findings: Heart size normal. Lungs clear.\nImpression: No acute disease.",
        "Impression: Pneumothorax.",
    ];
    let policy = Policy {
        metric: Metric::Hausdorff,
        agg: Aggregation::Avg,
    };
    let embedder = sdr_corpus::SectionEmbedder::transient(&enc);
    let scorer = sdr_corpus::CorpusScorer::with_embedder(&index, embedder.clone(), policy);
    let got = scorer.best_of_k(&texts).unwrap();
    let want = sdr_corpus::best_of_k(
        &texts,
        &sdr_corpus::SectionEmbedder::transient(&enc),
        &index,
        &policy,
    )
    .unwrap();
    assert_eq!(got, want);
    // Through the scorer's embedder: its cache holds the sentences of the one
    // well-formed candidate now (malformed ones are not embedded).
    assert_eq!(embedder.cache().stats().entries, 3);
}
