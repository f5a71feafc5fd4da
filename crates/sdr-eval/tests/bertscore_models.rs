//! BERTScore on real encoder code paths against the `bert-score` package: a
//! small randomly initialised RoBERTa and BERT (same architectures as
//! roberta-large and all-MiniLM-L6-v2), at two layers each, with and without
//! idf and baseline rescaling, on the fixture written by
//! `tools/fixtures/bertscore_roberta.py` (real IU X-ray sections plus edge
//! cases: empty sides, a text truncated at the position table, accents).
//!
//! Tolerance 1e-5 absolute: bert-score runs f32 in padded batches (its own
//! results move by up to 4e-6 with the batch size), SDR f32 one sentence at a
//! time; rescaling divides by `1 - b` (about 0.3).

use std::path::PathBuf;

use sdr_embed::RobertaEncoder;
use sdr_eval::bertscore::{Baseline, BertScorer};
use serde_json::Value;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bertscore")
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn roberta_and_bert_match_bert_score_with_and_without_idf_and_rescaling() {
    let text = std::fs::read_to_string(dir().join("bertscore.json")).expect("fixture present");
    let f: Value = serde_json::from_str(&text).unwrap();
    let (hyps, refs) = (strs(&f["hyps"]), strs(&f["refs"]));
    let pairs: Vec<(&str, &str)> = hyps
        .iter()
        .zip(&refs)
        .map(|(h, r)| (h.as_str(), r.as_str()))
        .collect();
    let mut checked = 0;
    for (name, m) in f["models"].as_object().unwrap() {
        let folder = dir().join(m["folder"].as_str().unwrap());
        for case in m["cases"].as_array().unwrap() {
            let layer = case["layer"].as_u64().unwrap() as usize;
            let enc = RobertaEncoder::load(&folder, Some(layer)).unwrap();
            let baseline = case["rescale"].as_bool().unwrap().then(|| {
                Baseline::from_file(&dir().join(m["baseline"].as_str().unwrap()), layer).unwrap()
            });
            let judge = BertScorer {
                encoder: &enc,
                idf: case["idf"].as_bool().unwrap(),
                baseline,
            };
            let got = judge.score_pairs(&pairs).unwrap();
            let mut worst = 0.0f64;
            for (k, key) in ["P", "R", "F"].iter().enumerate() {
                for (i, want) in case[*key].as_array().unwrap().iter().enumerate() {
                    let want = want.as_f64().unwrap();
                    let g = [got[i].precision, got[i].recall, got[i].f1][k];
                    let d = (g - want).abs();
                    worst = worst.max(d);
                    assert!(
                        d < 1e-5,
                        "{name} {case}: pair {i} {key}: sdr {g}, bert-score {want}",
                        case = serde_json::json!({"layer": layer, "idf": case["idf"], "rescale": case["rescale"]})
                    );
                }
            }
            println!(
                "{name} layer {layer} idf {} rescale {}: max |sdr - bert-score| = {worst:.2e}",
                case["idf"], case["rescale"]
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 16, "every case of the fixture");
}

#[test]
fn layer_and_folder_errors_are_one_line() {
    let folder = dir().join("roberta-tiny");
    let e = RobertaEncoder::load(&folder, Some(9))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("layer = 9") && !e.contains('\n'), "{e}");
    let enc = RobertaEncoder::load(&folder, None).unwrap();
    assert_eq!(enc.layer(), 4, "unknown names default to the last layer");
    assert_eq!(enc.special_ids(), &[0, 2]);
    let e = RobertaEncoder::load(&dir().join("nowhere"), None)
        .err()
        .unwrap();
    assert!(e.to_string().contains("nowhere"), "{e}");
    let e = Baseline::from_file(&dir().join("roberta-tiny-baseline.tsv"), 7).unwrap_err();
    assert!(e.to_string().contains("no row for layer 7"), "{e}");
}
