//! End to end: `sdr score` per section, `--whole`, and the errors that name a line.

use std::io::Write;
use std::process::{Command, Stdio};

fn score(args: &[&str], input: &str) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sdr"))
        .arg("score")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A run that fails before reading its input closes the pipe early.
    let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
    child.wait_with_output().unwrap()
}

fn lines(out: &std::process::Output) -> Vec<serde_json::Value> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn sections_are_scored_separately() {
    let input = concat!(
        r#"{"id": "a", "hyp": "<think>The lungs are clear. Mild cardiomegaly.</think><answer>No acute cardiopulmonary disease is seen.</answer>", "ref": "Findings: The lungs are clear. Mild cardiomegaly.\nImpression: No acute cardiopulmonary disease is seen."}"#,
        "\n",
        r#"{"id": 2, "hyp": "not a report", "ref": "<think>Small left pleural effusion.</think><answer>Effusion.</answer>"}"#,
        "\n",
        r#"{"hyp": "<think>Large right pleural effusion.</think><answer>Cardiomegaly.</answer>", "ref": "<think>Heart size is normal.</think><answer>Normal.</answer>"}"#,
        "\n"
    );
    let l = lines(&score(&["--no-bertscore"], input));
    assert_eq!(l.len(), 3);
    assert_eq!(l[0]["id"], "a");
    assert_eq!(l[1]["id"], 2);
    assert!(l[2].get("id").is_none());
    // Identical sections score 1 on the overlap metrics and the clinical F1.
    for sec in ["findings", "impression"] {
        for m in ["BLEU-4", "ROUGE-L", "METEOR", "CheXpert-rule F1"] {
            let v = l[0][sec][m].as_f64().unwrap();
            assert!(v > 0.99, "{sec} {m} = {v}");
        }
        // A malformed hypothesis has no sections: 0 everywhere.
        assert!(l[1][sec]["ROUGE-L"].as_f64().unwrap() == 0.0);
    }
    assert_eq!(l[0]["format_valid"], true);
    assert_eq!(l[1]["format_valid"], false);
    // Effusion and cardiomegaly where the reference has neither: clinical F1 0.
    assert_eq!(l[2]["findings"]["CheXpert-rule F1"].as_f64().unwrap(), 0.0);
    assert!(l[0]["findings"].get("BERTScore-F1").is_none());
}

#[test]
fn whole_texts_and_bad_lines() {
    let l = lines(&score(
        &["--no-bertscore", "--whole"],
        r#"{"hyp": "the lungs are clear", "ref": "the lungs are clear"}"#,
    ));
    assert!((l[0]["whole"]["ROUGE-L"].as_f64().unwrap() - 1.0).abs() < 1e-12);
    let out = score(
        &["--no-bertscore"],
        "{\"hyp\": \"x\", \"ref\": \"Findings: A.\"}\n",
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("<stdin>:1") && err.contains("no Impression section"),
        "{err}"
    );
    let out = score(
        &["--no-bertscore"],
        "{\"hyp\": \"x\", \"ref\": \"<think>A.</think><answer>B.</answer>\"}\n{oops\n",
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("<stdin>:2") && err.contains("invalid JSON"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn summary_file_holds_means_corpus_bleu_and_chexpert_rule_f1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("summary.json");
    let input = concat!(
        r#"{"hyp": "<think>Mild cardiomegaly.</think><answer>Cardiomegaly.</answer>", "ref": "Findings: Mild cardiomegaly.\nImpression: Cardiomegaly."}"#,
        "\n",
        r#"{"hyp": "junk", "ref": "Findings: Small left pleural effusion.\nImpression: Pleural effusion."}"#,
        "\n"
    );
    let out = score(
        &["--no-bertscore", "--summary", path.to_str().unwrap()],
        input,
    );
    let l = lines(&out);
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(
        (s["pairs"].as_u64(), s["well_formed"].as_u64()),
        (Some(2), Some(1))
    );
    for sec in ["findings", "impression"] {
        let mean = s[sec]["mean"]["ROUGE-L"].as_f64().unwrap();
        let by_hand =
            (l[0][sec]["ROUGE-L"].as_f64().unwrap() + l[1][sec]["ROUGE-L"].as_f64().unwrap()) / 2.0;
        assert_eq!(mean, by_hand);
        assert!(s[sec]["corpus_bleu"]["BLEU-1"].as_f64().unwrap() > 0.0);
        // Cardiomegaly found (TP), the effusion missed (FN).
        let micro = s[sec]["chexpert_rule"]["micro_14"].as_f64().unwrap();
        assert!(micro > 0.0 && micro < 1.0, "{micro}");
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("findings corpus BLEU: BLEU-1"), "{err}");
}

#[test]
fn empty_input_gives_null_means_never_negative_zero() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    let out = score(&["--no-bertscore", "--summary", path.to_str().unwrap()], "");
    assert!(lines(&out).is_empty());
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("-0.0"), "{text}");
    let s: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(s["pairs"], 0);
    for sec in ["findings", "impression"] {
        let mean = s[sec]["mean"].as_object().unwrap();
        assert!(
            !mean.is_empty() && mean.values().all(|v| v.is_null()),
            "{mean:?}"
        );
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("-0.0") && !err.contains("NaN"), "{err}");
}

#[test]
fn bad_output_paths_fail_first_and_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().join("sc2.jsonl");
    let input = "{\"hyp\": \"x\", \"ref\": \"Findings: A.\\nImpression: B.\"}\n";
    let bad = dir.path().join("nodir/s.json");
    let out = score(
        &[
            "--no-bertscore",
            "-o",
            o.to_str().unwrap(),
            "--summary",
            bad.to_str().unwrap(),
        ],
        input,
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--summary") && err.contains("nodir"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(!o.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // An output that is a folder is refused too.
    let out = score(
        &["--no-bertscore", "-o", dir.path().to_str().unwrap()],
        input,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("is a folder"),
        "{err}"
    );
}
