//! `sdr check-data`: every reference of a training set checked before a run.

use std::process::Command;

fn sdr() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sdr"))
}

const GOOD: &str = "<think>Heart normal. Lungs clear.</think><answer>No acute disease.</answer>";

#[test]
fn a_clean_set_exits_0_with_its_summary() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("train.jsonl");
    let rows = [
        serde_json::json!({"prompt": "p", "solution": GOOD}),
        serde_json::json!({"prompt": "p", "solution": "Findings: Clear lungs.\nImpression: Normal."}),
        serde_json::json!({"prompt": "p", "solution": {"findings": "Clear.", "impression": "Normal."}}),
    ];
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&path, text).unwrap();
    let out = sdr().arg("check-data").arg(&path).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.ends_with(": 3 rows, 3 ok, 0 bad\n"), "{stdout}");
}

#[test]
fn bad_rows_are_listed_counted_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("train.jsonl");
    let rows = [
        format!(
            "{}",
            serde_json::json!({"reward_model": {"ground_truth": GOOD}})
        ),
        format!(
            "{}",
            serde_json::json!({"reward_model": {"ground_truth": "<think>A.</think><answer></answer>"}})
        ),
        format!(
            "{}",
            serde_json::json!({"reward_model": {"ground_truth": "<think></think><answer>B.</answer>"}})
        ),
        format!(
            "{}",
            serde_json::json!({"reward_model": {"ground_truth": "x <think>A.</think><answer>B.</answer>"}})
        ),
        format!(
            "{}",
            serde_json::json!({"reward_model": {"ground_truth": 5}})
        ),
        format!("{}", serde_json::json!({"other": 1})),
        "{not json".to_string(),
        format!(
            "{}",
            serde_json::json!({"reward_model": {"ground_truth": "<think> </think><answer></answer>"}})
        ),
    ];
    // A line that is not UTF-8 is one more bad row, and the rows after it are read.
    let mut bytes = (rows.join("\n") + "\n").into_bytes();
    bytes.extend(
        b"{\"reward_model\": {\"ground_truth\": \"Findings: \xff A.\\nImpression: B.\"}}\n",
    );
    bytes.extend(
        format!(
            "{}\n",
            serde_json::json!({"reward_model": {"ground_truth": GOOD}})
        )
        .bytes(),
    );
    std::fs::write(&path, bytes).unwrap();
    let bad = dir.path().join("bad.jsonl");
    let out = sdr()
        .args([
            "check-data",
            "--field",
            "reward_model.ground_truth",
            "--json",
            "--bad-rows",
        ])
        .arg(&bad)
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["rows"], 10);
    assert_eq!(summary["ok"], 2);
    assert_eq!(
        summary["problems"],
        serde_json::json!({"broken_template": 1, "empty_both": 1, "empty_findings": 1,
                           "empty_impression": 1, "invalid_json": 1, "invalid_utf8": 1, "missing_field": 1,
                           "not_text": 1})
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("train.jsonl:2: empty_impression: section `impression` is empty"),
        "{stderr}"
    );
    assert!(
        stderr.contains("8 of 10 rows have a reference the reward cannot score"),
        "{stderr}"
    );
    let listed: Vec<serde_json::Value> = std::fs::read_to_string(&bad)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(listed.len(), 8);
    assert_eq!(listed[0]["line"], 2);
    assert_eq!(listed[7]["line"], 9);
    assert_eq!(listed[7]["problem"], "invalid_utf8");

    // Separate section columns.
    let cols = dir.path().join("cols.jsonl");
    std::fs::write(
        &cols,
        "{\"f\": \"A.\", \"i\": \"\"}\n{\"f\": \"A.\", \"i\": \"B.\"}\n",
    )
    .unwrap();
    let out = sdr()
        .args([
            "check-data",
            "--findings-field",
            "f",
            "--impression-field",
            "i",
        ])
        .arg(&cols)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("2 rows, 1 ok, 1 bad"));
}

#[test]
fn an_unwritable_output_is_one_line_and_ambiguous_fields_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("train.jsonl");
    std::fs::write(&path, "{\"solution\": \"x\"}\n".repeat(20)).unwrap();
    // stdout, then stderr, on a full device: exit 1 with one line, never a panic.
    for (stdout, stderr_full) in [(true, false), (false, true)] {
        let full = || {
            std::fs::File::options()
                .write(true)
                .open("/dev/full")
                .unwrap()
        };
        let mut cmd = sdr();
        cmd.arg("check-data").arg(&path).env("RUST_BACKTRACE", "1");
        if stdout {
            cmd.stdout(full());
        }
        if stderr_full {
            cmd.stderr(full());
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        if stdout {
            assert!(err.contains("cannot write output"), "{err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
    }
    // --field is for one column, --findings-field / --impression-field for two.
    let out = sdr()
        .args([
            "check-data",
            "--field",
            "a",
            "--findings-field",
            "f",
            "--impression-field",
            "i",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with"));
}
