//! End to end: `sdr corpus build` / `info` / `select` on a tiny CSV with the
//! deterministic stand-in encoder (no model needed), and the one-line refusal
//! of a corrupt corpus.

mod cli;

use cli::sdr;

#[test]
fn build_info_select_and_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("r.csv");
    std::fs::write(
        &csv,
        "uid,Problems,findings,impression\n\
         2,normal,\"Heart size normal. Lungs are clear.\",No acute disease.\n\
         3,effusion,\"Large left pleural effusion. Heart size normal.\",Left effusion.\n\
         4,normal,Lungs are clear.,No acute disease.\n\
         10,normal,Test study.,Test.\n",
    )
    .unwrap();
    let corpus = dir.path().join("c.safetensors");
    let out = sdr()
        .args([
            "corpus",
            "build",
            "--format",
            "csv",
            "--split",
            "train",
            "--encoder",
            "hash-32",
            "--quiet",
            "--input",
        ])
        .arg(&csv)
        .arg("--out")
        .arg(&corpus)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info = sdr()
        .args(["corpus", "info", "--json"])
        .arg(&corpus)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(v["n_reports"], 3);
    assert_eq!(v["meta"]["split"], "train");

    let cands = dir.path().join("cands.jsonl");
    std::fs::write(
        &cands,
        concat!(
            r#"{"id": "10", "candidates": ["Findings: Large left pleural effusion.\nImpression: Left effusion.", "Impression: only", "<think>Heart size normal. Lungs are clear.</think><answer>No acute disease.</answer>"]}"#,
            "\n",
            r#"{"id": 20, "candidates": ["nothing here", "Findings: x"]}"#,
            "\n"
        ),
    )
    .unwrap();
    let out = sdr()
        .args([
            "select",
            "--encoder",
            "hash-32",
            "--metric",
            "chamfer",
            "--agg",
            "min",
            "--quiet",
            "--corpus",
        ])
        .arg(&corpus)
        .arg(&cands)
        .output()
        .unwrap();
    let lines = cli::json_lines(&out);
    assert_eq!(lines.len(), 2);
    // Candidate 2 repeats a corpus report exactly: distance 0, chosen.
    assert_eq!(lines[0]["chosen"], 2);
    assert_eq!(lines[0]["scores"][1], serde_json::Value::Null);
    assert!(lines[0]["scores"][2].as_f64().unwrap().abs() < 1e-6);
    assert_eq!(
        lines[0]["well_formed"],
        serde_json::json!([true, false, true])
    );
    assert_eq!(lines[1]["chosen"], 0);
    assert_eq!(lines[1]["all_malformed"], true);

    let all = sdr()
        .args([
            "select",
            "--encoder",
            "hash-32",
            "--all-policies",
            "--consensus",
            "--quiet",
            "--corpus",
        ])
        .arg(&corpus)
        .arg(&cands)
        .output()
        .unwrap();
    assert!(
        all.status.success(),
        "{}",
        String::from_utf8_lossy(&all.stderr)
    );
    let first: serde_json::Value = serde_json::from_str(
        String::from_utf8(all.stdout)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(first["policies"].as_object().unwrap().len(), 60);
    assert_eq!(first["policies"]["ot@knn:k=5"]["chosen"], 2);

    // Another encoder is refused, naming the file.
    let out = sdr()
        .args(["select", "--encoder", "hash-16", "--quiet", "--corpus"])
        .arg(&corpus)
        .arg(&cands)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("c.safetensors") && err.contains("encoder"),
        "{err}"
    );

    // A truncated corpus is refused in one line naming the file.
    let bytes = std::fs::read(&corpus).unwrap();
    std::fs::write(&corpus, &bytes[..bytes.len() - 7]).unwrap();
    let out = sdr()
        .args(["corpus", "info"])
        .arg(&corpus)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("c.safetensors") && err.contains("truncated"),
        "{err}"
    );
}
