//! End to end: `sdr explain` on an IU X-ray report with the real encoder
//! (all-mpnet-base-v2, as `sdr serve`'s tests): a copy of the reference is all
//! matched, a dropped finding is exactly the missing one, an added unrelated
//! finding exactly the unsupported one, plan-based metrics pair by their plan;
//! the HTML page; and one-line errors naming the input line.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn sdr() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sdr"))
}

/// IU X-ray uid 2 (train split), findings and impression.
const FINDINGS: [&str; 5] = [
    "Borderline cardiomegaly.",
    "Midline sternotomy XXXX.",
    "Enlarged pulmonary arteries.",
    "Clear lungs.",
    "Inferior XXXX XXXX XXXX.",
];
const IMPRESSION: &str = "No acute pulmonary findings.";

fn reference() -> String {
    format!("Findings: {}\nImpression: {IMPRESSION}", FINDINGS.join(" "))
}

fn template(findings: &[&str], impression: &str) -> String {
    format!(
        "<think>{}</think><answer>{impression}</answer>",
        findings.join(" ")
    )
}

fn run(args: &[&str], stdin: &str) -> Output {
    let mut child = sdr()
        .arg("explain")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Explanations of `(candidate, reference)` lines.
fn explain(args: &[&str], pairs: &[(String, String)]) -> Vec<Value> {
    let input: String = pairs
        .iter()
        .enumerate()
        .map(|(k, (c, r))| {
            serde_json::json!({"id": k, "candidate": c, "reference": r}).to_string() + "\n"
        })
        .collect();
    let out = run(args, &input);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn indices(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

#[test]
fn copy_dropped_and_added_findings() {
    let dropped: Vec<&str> = FINDINGS
        .iter()
        .enumerate()
        .filter(|(k, _)| *k != 1)
        .map(|(_, s)| *s)
        .collect();
    let mut added = FINDINGS.to_vec();
    added.insert(3, "There is a large left pleural effusion.");
    let pairs = vec![
        (template(&FINDINGS, IMPRESSION), reference()),
        (template(&dropped, IMPRESSION), reference()),
        (template(&added, IMPRESSION), reference()),
        (reference(), reference()), // plain-header candidates parse too
    ];
    for metric in [
        "chamfer",
        "hausdorff",
        "ot",
        "hung-pen",
        "sinkhorn:eps=0.1",
        "pot",
    ] {
        let lines = explain(&["--metric", metric], &pairs);
        assert_eq!(lines.len(), 4);
        for (k, line) in lines.iter().enumerate() {
            assert_eq!(line["id"], k, "{metric}");
            assert_eq!(line["format_valid"], true, "{metric}");
            assert_eq!(line["threshold"], 0.2);
        }
        let canonical: sdr_core::Metric = metric.parse().unwrap();
        assert_eq!(lines[0]["metric"], canonical.to_string());

        // A copy: every sentence paired with itself at cost ~0, nothing flagged.
        for copy in [&lines[0], &lines[3]] {
            for section in ["findings", "impression"] {
                let s = &copy["sections"][section];
                assert_eq!(indices(&s["missing"]), Vec::<u64>::new(), "{metric}");
                assert_eq!(indices(&s["unsupported"]), Vec::<u64>::new(), "{metric}");
                for side in ["candidate", "reference"] {
                    for (i, x) in s[side].as_array().unwrap().iter().enumerate() {
                        assert_eq!(x["match"], i, "{metric} {section} {side} {i}");
                        assert!(x["cost"].as_f64().unwrap() < 1e-6, "{metric}");
                    }
                }
            }
        }
        if !metric.starts_with("sinkhorn") {
            assert!((lines[0]["reward"].as_f64().unwrap() - 3.0).abs() < 1e-6);
        }

        // The dropped finding is exactly the missing one.
        let f = &lines[1]["sections"]["findings"];
        assert_eq!(indices(&f["missing"]), [1], "{metric}");
        assert_eq!(indices(&f["unsupported"]), Vec::<u64>::new(), "{metric}");
        assert!(f["reference"][1]["nearest_cost"].as_f64().unwrap() > 0.2);

        // The added unrelated finding is exactly the unsupported one.
        let f = &lines[2]["sections"]["findings"];
        assert_eq!(indices(&f["unsupported"]), [3], "{metric}");
        assert_eq!(indices(&f["missing"]), Vec::<u64>::new(), "{metric}");
        assert_eq!(
            f["candidate"][3]["sentence"],
            "There is a large left pleural effusion."
        );
    }
}

#[test]
fn plan_based_metrics_pair_by_their_plan() {
    let pairs = vec![(template(&FINDINGS, IMPRESSION), reference())];
    let ot = &explain(&["--metric", "ot"], &pairs)[0]["sections"]["findings"];
    // The identity plan: each sentence sends its whole mass 1/5 to itself.
    let masses: Vec<f64> = ot["candidate"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["mass"].as_f64().unwrap())
        .collect();
    assert!(masses.iter().all(|m| (m - 0.2).abs() < 1e-12), "{masses:?}");
    // Closed-form metrics carry no mass.
    let ch = &explain(&["--metric", "chamfer"], &pairs)[0]["sections"]["findings"];
    assert!(ch["candidate"][0].get("mass").is_none());
    // Hung-Pen leaves a surplus sentence unpaired (match and cost null), yet
    // it is not unsupported when it repeats a reference sentence.
    let mut repeated = FINDINGS.to_vec();
    repeated.push("Clear lungs.");
    let pen = &explain(
        &["--metric", "hung-pen"],
        &[(template(&repeated, IMPRESSION), reference())],
    )[0]["sections"]["findings"];
    let unpaired: Vec<&Value> = pen["candidate"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["match"].is_null())
        .collect();
    assert_eq!(unpaired.len(), 1);
    assert!(unpaired[0]["cost"].is_null());
    assert_eq!(unpaired[0]["sentence"], "Clear lungs.");
    assert_eq!(indices(&pen["unsupported"]), Vec::<u64>::new());
}

#[test]
fn malformed_candidates_score_zero_without_sections() {
    let pairs = vec![
        ("Heart size is normal.".to_string(), reference()),
        (
            "<think>Clear lungs.</think><answer></answer>".to_string(),
            reference(),
        ),
    ];
    for line in explain(&["--encoder", "hash-16"], &pairs) {
        assert_eq!(line["format_valid"], false);
        assert_eq!(line["reward"], 0.0);
        assert!(line["sections"].is_null());
    }
}

#[test]
fn html_page_and_json_output_files() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(
        &input,
        [
            serde_json::json!({"id": "s<1>", "candidate": template(&FINDINGS, IMPRESSION), "reference": reference()}),
            serde_json::json!({"id": "bad", "candidate": "junk", "reference": reference()}),
        ]
        .iter()
        .map(|v| v.to_string() + "\n")
        .collect::<String>(),
    )
    .unwrap();
    let html = dir.path().join("page.html");
    let out = sdr()
        .args(["explain", "--encoder", "hash-16", "--html"])
        .arg(&html)
        .arg(&input)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(out.stdout.is_empty(), "--html without -o writes no JSON");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("Study s&lt;1&gt;") && page.contains("Study bad"));
    assert!(page.contains("Midline sternotomy XXXX."));
    assert!(!page.contains("<script") && !page.contains("<link") && !page.contains("src="));

    let json = dir.path().join("out.jsonl");
    let out = sdr()
        .args(["explain", "--encoder", "hash-16", "--html"])
        .arg(&html)
        .arg("-o")
        .arg(&json)
        .arg(&input)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = std::fs::read_to_string(&json).unwrap();
    assert_eq!(text.lines().count(), 2);
    assert!(text.starts_with(
        r#"{"id":"s<1>","metric":"chamfer","threshold":0.2,"format_valid":true,"reward":"#
    ));
    // No temporary file is left beside the outputs.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
}

/// The one stderr line of a failed run.
fn error_line(args: &[&str], stdin: &str) -> String {
    let out = run(args, stdin);
    assert!(!out.status.success(), "expected failure for {args:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    err.trim_end().to_string()
}

#[test]
fn bad_input_is_one_line_naming_the_line() {
    let good = serde_json::json!({"candidate": "x", "reference": reference()}).to_string();
    let hash = ["--encoder", "hash-16"];
    let e = error_line(&hash, &format!("{good}\n{{\"candidate\": \n"));
    assert!(e.starts_with("sdr: error: <stdin>:2: invalid JSON"), "{e}");
    let e = error_line(&hash, &format!("{good}\n\n{{\"candidate\": \"x\"}}\n"));
    assert!(
        e.starts_with("sdr: error: <stdin>:3: ") && e.contains("reference"),
        "{e}"
    );
    let no_impression =
        serde_json::json!({"candidate": "x", "reference": "Findings: Clear lungs."});
    let e = error_line(&hash, &format!("{no_impression}\n"));
    assert_eq!(
        e,
        "sdr: error: <stdin>:1: reference 1: section `impression` is empty"
    );
    let e = error_line(&["--encoder", "hash-16", "--threshold", "1.5"], "");
    assert!(e.contains("--threshold") && e.contains("1.5"), "{e}");
    let e = error_line(&["--encoder", "hash-16", "--metric", "chamfre"], "");
    assert!(e.contains("unknown metric `chamfre`"), "{e}");
}
