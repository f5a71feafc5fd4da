//! `--precision f32|bf16` of the commands that embed for a corpus or a reward: every
//! one takes it, a bad value is clap's usage error, bf16 scores stay within 1e-3 of
//! f32, and a corpus built at one precision refuses queries embedded at the other.

mod cli;

use std::path::Path;
use std::process::Output;

use cli::{build_corpus, have_model, sdr, stderr, tiny_study};

#[test]
fn a_bad_precision_is_a_usage_error_on_every_command() {
    for cmd in [
        &["select", "--corpus", "c.safetensors", "x.jsonl"][..],
        &[
            "corpus", "build", "--format", "csv", "--input", "r.csv", "--out", "c",
        ][..],
        &["prune", "--corpus", "c.safetensors"][..],
        &["explain", "x.jsonl"][..],
        &["serve"][..],
    ] {
        let out = sdr()
            .args(cmd)
            .args(["--precision", "fp8"])
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{cmd:?}: {err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: invalid value 'fp8' for '--precision"),
            "{cmd:?}: {err}"
        );
        assert!(
            err.contains("[possible values: f32, bf16]"),
            "{cmd:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{cmd:?}: {err}");
    }
    // `sdr embed`'s other precisions stay there.
    let out = sdr()
        .args(["select", "--corpus", "c", "--precision", "f16", "x.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

fn build(dir: &Path, csv: &Path, precision: &str) -> (std::path::PathBuf, String) {
    let corpus = dir.join(format!("c-{precision}.safetensors"));
    let log = build_corpus(csv, &corpus, &["--precision", precision]);
    (corpus, log)
}

fn select(corpus: &Path, cands: &Path, precision: &str) -> Output {
    sdr()
        .args(["select", "--metric", "chamfer", "--corpus"])
        .arg(corpus)
        .arg(cands)
        .args(["--precision", precision])
        .output()
        .unwrap()
}

fn scores(o: &Output) -> Vec<f64> {
    assert!(o.status.success(), "{}", stderr(o));
    let line: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    line["scores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_f64().unwrap())
        .collect()
}

/// Needs the model (`bash scripts/fetch-model.sh`, which the test script runs).
#[test]
fn bf16_scores_are_within_1e_3_of_f32_and_corpora_keep_their_precision() {
    if !have_model() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (csv, cands) = tiny_study(dir.path());
    let (f32_corpus, f32_log) = build(dir.path(), &csv, "f32");
    let (bf16_corpus, bf16_log) = build(dir.path(), &csv, "bf16");
    assert!(
        f32_log.contains("encoder all-mpnet-base-v2 ->"),
        "{f32_log}"
    );
    let f32_scores = scores(&select(&f32_corpus, &cands, "f32"));
    let bf16_run = select(&bf16_corpus, &cands, "bf16");
    let bf16_scores = scores(&bf16_run);
    assert_eq!(f32_scores.len(), 2);
    for (a, b) in f32_scores.iter().zip(&bf16_scores) {
        assert!(
            (a - b).abs() < 1e-3,
            "f32 {f32_scores:?} vs bf16 {bf16_scores:?}"
        );
    }
    // Without bf16 support the CPU runs f32 and says so once; the corpus is then f32.
    if !bf16_log.contains("+bf16") {
        assert_eq!(stderr(&bf16_run).matches("sdr: ").count(), 1, "{bf16_log}");
        assert_eq!(f32_scores, bf16_scores);
        return;
    }
    assert!(
        bf16_log.contains("encoder all-mpnet-base-v2+bf16 ->"),
        "{bf16_log}"
    );
    assert_ne!(f32_scores, bf16_scores, "--precision bf16 changed nothing");
    // f32 queries against the bf16 corpus (and the reverse): one line saying what to pass.
    for (corpus, queries, want) in [(&bf16_corpus, "f32", "bf16"), (&f32_corpus, "bf16", "f32")] {
        let o = select(corpus, &cands, queries);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(&format!("--precision {want}")), "{err}");
        assert!(
            err.contains(&corpus.display().to_string()),
            "file not named: {err}"
        );
    }
}
