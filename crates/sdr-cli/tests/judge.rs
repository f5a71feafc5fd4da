//! The judge (SPEC §8a) through the command line: `sdr label --labeler judge` and the judge-F1
//! columns of `sdr score`, `sdr eval` and `sdr select-eval` (`--judge-f1`). Needs
//! all-MiniLM-L6-v2 (scripts/fetch-minilm.sh, which scripts/test.sh runs).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn sdr() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sdr"))
}

fn ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn with_stdin(mut c: Command, input: &str) -> Output {
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn label_with_the_judge() {
    let mut c = sdr();
    c.args(["label", "--labeler", "judge"]);
    let out = ok(with_stdin(
        c,
        concat!(
            r#"{"id": "a", "text": "Findings: There is a large right pleural effusion. No pneumothorax.\nImpression: Right pleural effusion."}"#,
            "\n",
            r#"{"id": "b", "text": "No pneumothorax. The heart is normal in size. The lungs are clear."}"#,
            "\n",
            r#"{"text": ""}"#,
            "\n"
        ),
    ));
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["id"], "a");
    assert_eq!(lines[0]["labels"]["Pleural Effusion"], 1);
    assert_eq!(lines[0]["labels"]["Pneumothorax"], 0);
    assert!(lines[0]["labels"]["No Finding"].is_null());
    assert_eq!(lines[1]["labels"]["No Finding"], 1);
    assert_eq!(lines[1]["labels"]["Pneumothorax"], 0);
    // No sentence, no label.
    assert!(lines[2]["labels"]
        .as_object()
        .unwrap()
        .values()
        .all(|v| v.is_null()));

    // A bad line is named; judge options need --labeler judge.
    let mut c = sdr();
    c.args(["label", "--labeler", "judge"]);
    let out = with_stdin(c, "{\"text\": \"ok.\"}\n{\"id\": 1}\n");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("<stdin>:2") && err.contains("missing \"text\""),
        "{err}"
    );
    let out = sdr()
        .args(["label", "--judge-base", "/nowhere"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--labeler judge"));
    let dir = tempfile::tempdir().unwrap();
    let mut c = sdr();
    c.args(["label", "--labeler", "judge", "--judge-base"])
        .arg(dir.path());
    let out = with_stdin(c, "{\"text\": \"No effusion.\"}\n");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("config.json missing"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

const CSV: &str = "uid,Problems,findings,impression\n\
1,normal,The heart is normal in size. The lungs are clear.,No acute disease.\n\
2,Cardiomegaly,The heart is enlarged. The lungs are clear.,Cardiomegaly.\n\
3,Pleural Effusion;Opacity,Small left pleural effusion. Heart size normal.,Left pleural effusion.\n";

const GOOD: [&str; 3] = [
    "Findings: The heart is normal in size. The lungs are clear.\nImpression: No acute disease.",
    "Findings: The heart is enlarged. The lungs are clear.\nImpression: Cardiomegaly.",
    "Findings: Small left pleural effusion. Heart size normal.\nImpression: Left pleural effusion.",
];
const BAD: &str = "Findings: Pneumothorax on the right.\nImpression: Large right pneumothorax.";

fn inputs(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let csv = dir.join("refs.csv");
    std::fs::write(&csv, CSV).unwrap();
    let (cands, sels, run) = (
        dir.join("cands.jsonl"),
        dir.join("sels.jsonl"),
        dir.join("run.jsonl"),
    );
    let (mut c, mut s, mut r) = (String::new(), String::new(), String::new());
    for (i, good) in GOOD.iter().enumerate() {
        let id = i + 1;
        c.push_str(&format!(
            "{}\n",
            serde_json::json!({"id": id, "candidates": [good, BAD], "tokens": [10, 20]})
        ));
        s.push_str(&format!(
            "{}\n",
            serde_json::json!({"id": id, "well_formed": [true, true], "all_malformed": false,
                "policies": {"good@min": {"chosen": 0}, "bad@min": {"chosen": 1}}})
        ));
        r.push_str(&format!(
            "{}\n",
            serde_json::json!({"id": id, "text": good})
        ));
    }
    std::fs::write(&cands, c).unwrap();
    std::fs::write(&sels, s).unwrap();
    std::fs::write(&run, r).unwrap();
    (csv, cands, sels)
}

fn column(csv: &str, row: &str, col: &str) -> String {
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let k = header
        .iter()
        .position(|h| *h == col)
        .unwrap_or_else(|| panic!("no {col}: {csv}"));
    csv.lines()
        .find(|l| l.starts_with(row))
        .unwrap()
        .split(',')
        .nth(k)
        .unwrap()
        .to_string()
}

#[test]
fn judge_columns_in_select_eval_and_eval() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, cands, sels) = inputs(dir.path());
    let out = dir.path().join("out");
    ok(sdr()
        .args([
            "select-eval",
            "--no-bertscore",
            "--seeds",
            "20",
            "--judge-f1",
            "--references",
        ])
        .arg(&csv)
        .arg("--candidates")
        .arg(&cands)
        .arg("--selections")
        .arg(&sels)
        .arg("--out-dir")
        .arg(&out)
        .output()
        .unwrap());
    let values = std::fs::read_to_string(out.join("findings_values.csv")).unwrap();
    // The good policy picks the reference's own text: the judge agrees with itself.
    assert_eq!(column(&values, "good@min,", "judge F1 micro-14"), "1");
    assert_eq!(
        column(&values, "good@min,", "CheXpert-rule F1 micro-14"),
        "1"
    );
    let md = std::fs::read_to_string(out.join("findings_vs_random_wf.md")).unwrap();
    assert!(
        md.contains("judge F1 macro-14") && md.contains("IU X-ray's human MeSH coding"),
        "{md}"
    );
    // Without --judge-f1 the tables are as before.
    let plain = dir.path().join("plain");
    ok(sdr()
        .args([
            "select-eval",
            "--no-bertscore",
            "--seeds",
            "20",
            "--references",
        ])
        .arg(&csv)
        .arg("--candidates")
        .arg(&cands)
        .arg("--selections")
        .arg(&sels)
        .arg("--out-dir")
        .arg(&plain)
        .output()
        .unwrap());
    assert!(!std::fs::read_to_string(plain.join("findings_values.csv"))
        .unwrap()
        .contains("judge"));

    let out = ok(sdr()
        .args([
            "eval",
            "--no-bertscore",
            "--seeds",
            "20",
            "--judge-f1",
            "--references",
        ])
        .arg(&csv)
        .arg("--candidates")
        .arg(&cands)
        .arg("--run")
        .arg(format!("good={}", dir.path().join("run.jsonl").display()))
        .arg("--run")
        .arg(format!("same={}", dir.path().join("run.jsonl").display()))
        .arg("--compare")
        .arg("good=same")
        .output()
        .unwrap());
    let md = String::from_utf8(out.stdout).unwrap();
    let row = md.lines().find(|l| l.starts_with("| good |")).unwrap();
    assert!(md.contains("| judge F1 micro-5 |"), "{md}");
    assert!(row.trim_end().ends_with("| 1.0000 |"), "{row}");
    let cmp = md
        .lines()
        .find(|l| l.starts_with("| good vs same |"))
        .unwrap();
    assert!(cmp.matches("0.00 [+0.0, +0.0]").count() >= 8, "{cmp}");
}

#[test]
fn judge_f1_in_score() {
    let mut c = sdr();
    c.args(["score", "--no-bertscore", "--judge-f1"]);
    let out = ok(with_stdin(
        c,
        concat!(
            r#"{"hyp": "Findings: The heart is enlarged.\nImpression: Cardiomegaly.", "ref": "Findings: Cardiomegaly.\nImpression: Enlarged heart."}"#,
            "\n"
        ),
    ));
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(line["findings"]["judge F1"], 1.0, "{line}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("findings judge F1 (corpus)"));
}
