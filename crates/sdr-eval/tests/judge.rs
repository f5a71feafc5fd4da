//! The judge (SPEC §8a): parity with the PyTorch model that trained it, its labels on plain
//! sentences, the faithfulness benchmark's reversed findings, and bad adapter files.
//!
//! Needs all-MiniLM-L6-v2 in the cache (`scripts/fetch-minilm.sh`, which `scripts/test.sh` runs).

use std::path::{Path, PathBuf};

use sdr_clinical::{Labeler, Observation};
use sdr_eval::judge::{Judge, CLASSES};
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

fn judge() -> Judge {
    Judge::load(None, None).unwrap_or_else(|e| panic!("{e} (run scripts/fetch-minilm.sh)"))
}

#[test]
fn logits_match_the_training_model() {
    let text =
        std::fs::read_to_string(root().join("crates/sdr-eval/tests/fixtures/judge_logits.json"))
            .unwrap();
    let fx: Value = serde_json::from_str(&text).unwrap();
    let names: Vec<&str> = fx["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(names, CLASSES.map(|o| o.name()).to_vec());
    let sentences: Vec<&str> = fx["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let got = judge().sentence_logits(&sentences).unwrap();
    let mut worst = 0f64;
    for (s, (row, want)) in sentences
        .iter()
        .zip(got.iter().zip(fx["logits"].as_array().unwrap()))
    {
        for (k, w) in want.as_array().unwrap().iter().enumerate() {
            let d = (f64::from(row[k]) - w.as_f64().unwrap()).abs();
            worst = worst.max(d);
            assert!(d < 2e-3, "{s:?} {}: {} vs {}", CLASSES[k].name(), row[k], w);
        }
    }
    eprintln!("largest logit difference to PyTorch: {worst:.2e}");
}

#[test]
fn labels_sentences_sections_and_reports_alike() {
    let j = judge();
    let l = j.label("There is a large right pleural effusion.").unwrap();
    assert!(l.is_positive(Observation::PleuralEffusion, false));
    assert!(!l.is_positive(Observation::NoFinding, false));
    let l = j
        .label("No pneumothorax. No pleural effusion. The heart is normal in size.")
        .unwrap();
    for o in [
        Observation::Pneumothorax,
        Observation::PleuralEffusion,
        Observation::Cardiomegaly,
    ] {
        assert!(!l.is_positive(o, false), "{}", o.name());
    }
    assert!(l.is_positive(Observation::NoFinding, false));
    // A report is the union of its sections' sentences.
    let f = "Findings: The heart is enlarged. The lungs are clear.";
    let i = "Impression: Cardiomegaly without acute disease.";
    let whole = j.label(&format!("{f}\n{i}")).unwrap();
    assert!(whole.is_positive(Observation::Cardiomegaly, false));
    assert!(j
        .label(f)
        .unwrap()
        .is_positive(Observation::Cardiomegaly, false));
    assert!(j
        .label(i)
        .unwrap()
        .is_positive(Observation::Cardiomegaly, false));
    // No sentence: nothing said, as with the rules.
    let empty = j.label("").unwrap();
    assert!(Observation::ALL.iter().all(|&o| empty[o].is_none()));
    assert_eq!(empty, Labeler::default().label(""));
}

/// The benchmark's reversed findings (`bench/faithfulness/cases.jsonl`): where the edit flips
/// one of the 13 observations (the edited sentence before and after, as the rules read its
/// topic), the judge's label of that observation on the edited sentence must change too.
#[test]
fn reversed_findings_change_the_edited_label() {
    let j = judge();
    let rules = Labeler::default();
    let text = std::fs::read_to_string(root().join("bench/faithfulness/cases.jsonl")).unwrap();
    let (mut n, mut changed) = (0, 0);
    for line in text.lines() {
        let c: Value = serde_json::from_str(line).unwrap();
        if !matches!(
            c["kind"].as_str(),
            Some("absent_to_present" | "present_to_absent")
        ) {
            continue;
        }
        let (before, after) = (c["before"].as_str().unwrap(), c["after"].as_str().unwrap());
        let Some((_, seen)) = j.reversal(&rules, before, after).unwrap() else {
            continue;
        };
        n += 1;
        changed += usize::from(seen);
    }
    let share = changed as f64 / n as f64;
    eprintln!("reversed findings: {changed} of {n} change the edited label ({share:.3})");
    assert!(
        n >= 100,
        "only {n} reversed findings name one of the 13 observations"
    );
    assert!(
        share >= 0.80,
        "{changed} of {n} reversed findings change the edited label"
    );
}

#[test]
fn bad_adapters_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.safetensors");
    std::fs::write(&junk, b"not a safetensors file").unwrap();
    let e = Judge::load(None, Some(&junk)).unwrap_err().to_string();
    assert!(
        e.contains("junk.safetensors") && e.contains("not a safetensors file"),
        "{e}"
    );
    let missing = dir.path().join("missing.safetensors");
    let e = Judge::load(None, Some(&missing)).unwrap_err().to_string();
    assert!(e.contains("missing.safetensors"), "{e}");
    let e = Judge::load(Some(dir.path()), None).unwrap_err().to_string();
    assert!(e.contains("config.json missing"), "{e}");
}
