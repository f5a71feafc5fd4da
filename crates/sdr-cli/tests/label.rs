//! End to end: `sdr label` on JSON Lines from a file and from stdin, user
//! rules with `--rules`, and the one-line error naming a bad input line.

use std::io::Write;
use std::process::{Command, Stdio};

fn sdr() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sdr"))
}

#[test]
fn labels_file_and_stdin_and_names_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(
        &input,
        concat!(
            r#"{"id": "s1", "text": "<think>Heart size normal. No pneumothorax, pleural effusion, or focal consolidation.</think><answer>No acute disease.</answer>"}"#,
            "\n\n",
            r#"{"text": "FINDINGS: Cardiomegaly is not present. Left basilar opacity may represent atelectasis.\nIMPRESSION: Right PICC line in place."}"#,
            "\n",
            r#"{"id": 3, "text": "There are no XXXX of a pleural effusion."}"#,
            "\n"
        ),
    )
    .unwrap();
    let out = sdr().arg("label").arg(&input).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["id"], "s1");
    let l0 = &lines[0]["labels"];
    assert_eq!(l0.as_object().unwrap().len(), 14);
    // All 14 names, in CheXpert's order, on every line.
    let order = [
        "No Finding",
        "Enlarged Cardiomediastinum",
        "Cardiomegaly",
        "Lung Lesion",
        "Lung Opacity",
        "Edema",
        "Consolidation",
        "Pneumonia",
        "Atelectasis",
        "Pneumothorax",
        "Pleural Effusion",
        "Pleural Other",
        "Fracture",
        "Support Devices",
    ];
    for line in text.lines() {
        let at: Vec<usize> = order
            .iter()
            .map(|n| line.find(&format!("\"{n}\":")).expect(n))
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{line}");
    }
    assert_eq!(l0["No Finding"], 1);
    assert_eq!(l0["Cardiomegaly"], 0);
    assert_eq!(l0["Consolidation"], 0);
    assert_eq!(l0["Fracture"], serde_json::Value::Null);
    assert!(lines[1].get("id").is_none());
    let l1 = &lines[1]["labels"];
    assert_eq!(l1["Cardiomegaly"], 0);
    assert_eq!(l1["Lung Opacity"], 1);
    assert_eq!(l1["Atelectasis"], -1);
    assert_eq!(l1["Support Devices"], 1);
    assert_eq!(l1["No Finding"], serde_json::Value::Null);
    assert_eq!(lines[2]["id"], 3);
    assert_eq!(lines[2]["labels"]["Pleural Effusion"], 0);

    // stdin, and a line without "text": one line naming <stdin>:2.
    let mut child = sdr()
        .arg("label")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"text\": \"No edema.\"}\n{\"id\": 2}\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("sdr: error: <stdin>:2: missing \"text\""),
        "{err}"
    );

    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"text\": \"ok\"}\nnot json\n").unwrap();
    let out = sdr().arg("label").arg(&bad).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("bad.jsonl:2: invalid JSON"), "{err}");
}

#[test]
fn user_rules_replace_the_bundled_ones() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.json");
    // Every observation needs a phrase; those of the others match nothing here.
    let others: Vec<String> = sdr_clinical::Observation::ALL[1..]
        .iter()
        .filter(|o| o.name() != "Pleural Other")
        .map(|o| format!(r#""{}": {{"mentions": ["zzz{}"]}}"#, o.name(), o.index()))
        .collect();
    std::fs::write(
        &rules,
        format!(
            r#"{{"version": 1,
            "observations": {{"Pleural Other": {{"mentions": ["pleural mouse"]}}, {}}},
            "cues": {{"negation_before": ["no"]}}}}"#,
            others.join(", ")
        ),
    )
    .unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(
        &input,
        "{\"text\": \"A pleural mouse. Cardiomegaly.\"}\n{\"text\": \"No pleural mouse.\"}\n",
    )
    .unwrap();
    let out = sdr()
        .arg("label")
        .arg("--rules")
        .arg(&rules)
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let v: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(v[0]["labels"]["Pleural Other"], 1);
    // Only the user's phrases apply.
    assert_eq!(v[0]["labels"]["Cardiomegaly"], serde_json::Value::Null);
    assert_eq!(v[1]["labels"]["Pleural Other"], 0);

    std::fs::write(
        &rules,
        r#"{"version": 1, "observations": {"Effusion": {}}, "cues": {}}"#,
    )
    .unwrap();
    let out = sdr()
        .arg("label")
        .arg("--rules")
        .arg(&rules)
        .arg(&input)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("--rules") && err.contains("unknown observation `Effusion`"),
        "{err}"
    );

    // Observations left without rules would be null in every report.
    std::fs::write(
        &rules,
        r#"{"version": 1, "observations": {"Pleural Other": {"mentions": ["pleural mouse"]}},
            "cues": {}}"#,
    )
    .unwrap();
    let out = sdr()
        .arg("label")
        .arg("--rules")
        .arg(&rules)
        .arg(&input)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("rules.json")
            && err.contains("for 12 of the 13 observations")
            && err.contains("Enlarged Cardiomediastinum, Cardiomegaly,")
            && err.contains("Support Devices"),
        "{err}"
    );
}
