//! End to end: `sdr score --whole --bertscore-model DIR --bertscore-layer N
//! [--idf] [--rescale-baseline FILE]` against the `bert-score` package on a
//! small random RoBERTa (fixture: `tools/fixtures/bertscore_roberta.py`),
//! and the options' errors.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../sdr-eval/tests/fixtures/bertscore")
}

fn score(args: &[String], input: &str) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sdr"))
        .arg("score")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
    child.wait_with_output().unwrap()
}

fn fixture() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixtures().join("bertscore.json")).unwrap())
        .unwrap()
}

/// The pairs that have a reference (`--whole` refuses an empty one), as input lines.
fn input(f: &Value, keep: &[usize]) -> String {
    keep.iter()
        .map(|&i| {
            serde_json::json!({"id": i, "hyp": f["hyps"][i], "ref": f["refs"][i]}).to_string()
                + "\n"
        })
        .collect()
}

fn check(out: &std::process::Output, want: &Value, at: &[usize], what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), at.len());
    for (line, &k) in lines.iter().zip(at) {
        for (key, col) in [
            ("P", "BERTScore-P"),
            ("R", "BERTScore-R"),
            ("F", "BERTScore-F1"),
        ] {
            let got = line["whole"][col].as_f64().unwrap();
            let exp = want[key][k].as_f64().unwrap();
            assert!(
                (got - exp).abs() < 1e-5,
                "{what}: line {k} {col}: sdr {got}, bert-score {exp}"
            );
        }
    }
}

#[test]
fn sdr_score_matches_bert_score_on_a_random_roberta() {
    let f = fixture();
    let refs = f["refs"].as_array().unwrap();
    let keep: Vec<usize> = (0..refs.len())
        .filter(|&i| !refs[i].as_str().unwrap().trim().is_empty())
        .collect();
    let folder = fixtures().join("roberta-tiny");
    let base = fixtures().join("roberta-tiny-baseline.tsv");
    // Without idf (which would depend on the pairs left out): every layer, with and
    // without rescaling, from the library fixture's cases.
    for case in f["models"]["roberta-tiny"]["cases"].as_array().unwrap() {
        if case["idf"].as_bool().unwrap() {
            continue;
        }
        let layer = case["layer"].as_u64().unwrap().to_string();
        let mut args = vec![
            "--whole".to_string(),
            "--bertscore-model".into(),
            folder.display().to_string(),
            "--bertscore-layer".into(),
            layer.clone(),
        ];
        if case["rescale"].as_bool().unwrap() {
            args.extend(["--rescale-baseline".into(), base.display().to_string()]);
        }
        let out = score(&args, &input(&f, &keep));
        check(&out, case, &keep, &format!("layer {layer} {case:?}"));
        let summary = String::from_utf8_lossy(&out.stderr);
        assert!(summary.contains("sdr score:"), "{summary}");
    }
    // idf over the references scored, and rescaling: bert-score on the same pairs.
    let cli = &f["cli"];
    let kept: Vec<usize> = cli["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect();
    assert_eq!(kept, keep);
    let args: Vec<String> = [
        "--whole",
        "--bertscore-model",
        &folder.display().to_string(),
        "--bertscore-layer",
        "3",
        "--idf",
        "--rescale-baseline",
        &base.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let positions: Vec<usize> = (0..keep.len()).collect();
    check(
        &score(&args, &input(&f, &keep)),
        cli,
        &positions,
        "idf + rescale",
    );
}

#[test]
fn summary_names_the_judge_and_bad_options_fail_in_one_line() {
    let folder = fixtures().join("roberta-tiny");
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("s.json");
    let line = "{\"hyp\": \"no effusion\", \"ref\": \"no pleural effusion\"}\n";
    let args: Vec<String> = vec![
        "--whole".into(),
        "--bertscore-model".into(),
        folder.display().to_string(),
        "--summary".into(),
        summary.display().to_string(),
    ];
    let out = score(&args, line);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(
        s["bertscore_model"],
        "roberta-tiny L4 (no idf, not rescaled)"
    );
    let bad = [
        (
            vec![
                "--bertscore-model".to_string(),
                folder.display().to_string(),
                "--bertscore-layer".into(),
                "9".into(),
            ],
            "layer",
        ),
        (
            vec![
                "--bertscore-model".to_string(),
                dir.path().join("none").display().to_string(),
            ],
            "none",
        ),
        (
            vec![
                "--bertscore-model".to_string(),
                folder.display().to_string(),
                "--rescale-baseline".into(),
                dir.path().join("none.tsv").display().to_string(),
            ],
            "--rescale-baseline",
        ),
        (
            vec!["--bertscore-layer".to_string(), "3".into()],
            "--bertscore-model",
        ),
    ];
    for (args, needle) in bad {
        let mut a = vec!["--whole".to_string()];
        a.extend(args);
        let out = score(&a, line);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{a:?}");
        assert!(err.contains(needle), "{a:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
