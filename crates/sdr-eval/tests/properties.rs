//! Properties of the text metrics on random token sequences: bounds,
//! identity, symmetry where the definition is symmetric, and agreement
//! between sentence- and corpus-level forms of one segment.

use proptest::prelude::*;
use sdr_eval::bertscore::{bert_score_pair, TokenEmbeddings};
use sdr_eval::bleu::{corpus_bleu, sentence_bleu, Smoothing};
use sdr_eval::chrf::{corpus_chrf, sentence_chrf, ChrfConfig};
use sdr_eval::meteor::{single_meteor, MeteorConfig};
use sdr_eval::rouge::{rouge, rouge_l, rouge_n};

/// Sentences over a small vocabulary, so that n-grams repeat and match.
fn sentence() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(
        prop::sample::select(vec![
            "the",
            "heart",
            "is",
            "normal",
            "no",
            "effusion",
            "lungs",
            "clear",
            "mild",
            "opacities",
        ]),
        0..14,
    )
    .prop_map(|v| v.into_iter().map(String::from).collect())
}

fn in_unit(x: f64) -> bool {
    (0.0..=1.0 + 1e-12).contains(&x)
}

proptest! {
    #[test]
    fn bleu_is_bounded_and_one_on_identity(h in sentence(), r in sentence()) {
        for sm in [Smoothing::None, Smoothing::Epsilon(0.1), Smoothing::AddOne] {
            let b = sentence_bleu(std::slice::from_ref(&r), &h, 4, sm).unwrap();
            prop_assert!(b.iter().all(|&x| in_unit(x)), "{b:?}");
            // Sentence BLEU is corpus BLEU of one segment.
            let c = corpus_bleu(&[vec![r.clone()]], std::slice::from_ref(&h), 4, sm).unwrap();
            prop_assert_eq!(b, c);
        }
        if h.len() >= 4 {
            let b = sentence_bleu(std::slice::from_ref(&h), &h, 4, Smoothing::None).unwrap();
            prop_assert!(b.iter().all(|&x| (x - 1.0).abs() < 1e-12), "{b:?}");
        }
    }

    #[test]
    fn rouge_is_bounded_and_f_symmetric(h in sentence(), r in sentence()) {
        for n in 1..=2 {
            let a = rouge_n(&r, &h, n).unwrap();
            let b = rouge_n(&h, &r, n).unwrap();
            prop_assert!(in_unit(a.precision) && in_unit(a.recall) && in_unit(a.fmeasure));
            prop_assert_eq!(a.precision, b.recall);
            prop_assert!((a.fmeasure - b.fmeasure).abs() < 1e-15);
        }
        let a = rouge_l(&r, &h);
        let b = rouge_l(&h, &r);
        prop_assert!((a.fmeasure - b.fmeasure).abs() < 1e-15);
        if !h.is_empty() {
            let s = rouge(&h.join(" "), &h.join(" "), false);
            prop_assert_eq!(s.rouge1.fmeasure, 1.0);
            prop_assert_eq!(s.rouge_l.fmeasure, 1.0);
        }
    }

    #[test]
    fn meteor_is_bounded(h in sentence(), r in sentence()) {
        let cfg = MeteorConfig::default();
        let m = single_meteor(&r, &h, None, &cfg);
        prop_assert!(in_unit(m), "{m}");
        if !h.is_empty() {
            // Identity: one chunk, P = R = 1, so 1 - 0.5 / |h|^3.
            let id = single_meteor(&h, &h, None, &cfg);
            let want = 1.0 - 0.5 * (1.0 / h.len() as f64).powi(3);
            prop_assert!((id - want).abs() < 1e-12, "{id} vs {want}");
        }
    }

    #[test]
    fn chrf_is_bounded_and_100_on_identity(h in sentence(), r in sentence()) {
        let cfg = ChrfConfig::default();
        let (hs, rs) = (h.join(" "), r.join(" "));
        let s = sentence_chrf(&hs, &[rs.as_str()], &cfg).unwrap();
        prop_assert!((0.0..=100.0 + 1e-9).contains(&s), "{s}");
        let c = corpus_chrf(&[hs.as_str()], &[vec![rs.as_str()]], &cfg).unwrap();
        prop_assert_eq!(s, c);
        if !h.is_empty() {
            let id = sentence_chrf(&hs, &[hs.as_str()], &cfg).unwrap();
            prop_assert!((id - 100.0).abs() < 1e-9, "{id}");
        }
    }

    #[test]
    fn bertscore_is_bounded_and_one_on_identity(
        rows in prop::collection::vec(prop::collection::vec(-1.0f32..1.0, 4), 1..8),
        other in prop::collection::vec(prop::collection::vec(-1.0f32..1.0, 4), 1..8),
    ) {
        prop_assume!(rows.iter().chain(&other).all(|r| r.iter().any(|&v| v != 0.0)));
        let mk = |rows: &Vec<Vec<f32>>| TokenEmbeddings {
            token_ids: (0..rows.len() as u32).map(|i| i + 10).collect(),
            special: vec![false; rows.len()],
            dim: 4,
            data: rows.iter().flatten().copied().collect(),
        };
        let (a, b) = (mk(&rows), mk(&other));
        let s = bert_score_pair(&a, &b, None).unwrap();
        prop_assert!(s.precision.abs() <= 1.0 + 1e-12 && s.recall.abs() <= 1.0 + 1e-12);
        let t = bert_score_pair(&b, &a, None).unwrap();
        prop_assert!((s.precision - t.recall).abs() < 1e-12);
        let id = bert_score_pair(&a, &a, None).unwrap();
        prop_assert!((id.f1 - 1.0).abs() < 1e-9, "{id:?}");
    }
}
