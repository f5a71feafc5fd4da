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

    // --consensus alone with a corpus: refused, not silently ignored (even a
    // missing file would have passed).
    let out = sdr()
        .args([
            "select",
            "--encoder",
            "hash-32",
            "--consensus",
            "--quiet",
            "--corpus",
            "missing.safetensors",
        ])
        .arg(&cands)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--corpus missing.safetensors: --consensus alone uses no corpus"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");

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

/// The one-line error of a command that must fail.
fn one_line_error(o: &std::process::Output) -> String {
    assert!(!o.status.success(), "succeeded: {}", cli::stderr(o));
    assert_eq!(o.status.code(), Some(1), "{}", cli::stderr(o));
    let e = cli::stderr(o).trim_end().to_string();
    assert_eq!(e.lines().count(), 1, "{e}");
    e
}

fn build_args(
    input: &std::path::Path,
    format: &str,
    out: &std::path::Path,
) -> std::process::Command {
    let mut c = sdr();
    c.args(["corpus", "build", "--quiet", "--format", format, "--input"])
        .arg(input)
        .arg("--out")
        .arg(out);
    c
}

#[cfg(target_os = "linux")]
#[test]
fn corpus_info_on_a_full_stdout_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, _) = cli::tiny_study(dir.path());
    let corpus = dir.path().join("c.safetensors");
    cli::build_corpus(&csv, &corpus, &["--encoder", "hash-8"]);
    for json in [false, true] {
        let full = std::fs::File::create("/dev/full").unwrap();
        let mut c = sdr();
        c.args(["corpus", "info"]).arg(&corpus).stdout(full);
        if json {
            c.arg("--json");
        }
        let e = one_line_error(&c.output().unwrap());
        assert!(e.starts_with("sdr: error: cannot write output: "), "{e}");
    }
}

#[test]
fn huge_hash_dimension_and_synth_size_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, _) = cli::tiny_study(dir.path());
    let out = dir.path().join("x.safetensors");
    let e = one_line_error(
        &build_args(&csv, "csv", &out)
            .args(["--encoder", "hash-99999999999"])
            .output()
            .unwrap(),
    );
    assert!(e.contains("hash-99999999999") && e.contains("65536"), "{e}");
    let corpus = dir.path().join("c.safetensors");
    cli::build_corpus(&csv, &corpus, &["--encoder", "hash-8"]);
    let synth = |n: &str| {
        sdr()
            .args(["corpus", "synth", "--n", n, "--from"])
            .arg(&corpus)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap()
    };
    let e = one_line_error(&synth("99999999999999"));
    assert!(
        e.contains("`n` = `99999999999999`") && e.contains("GiB"),
        "{e}"
    );
    assert!(!out.exists());
    let o = synth("30");
    assert!(o.status.success(), "{}", cli::stderr(&o));
}

#[test]
fn jsonl_keys_match_like_csv_columns() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("r.jsonl");
    std::fs::write(
        &src,
        concat!(
            r#"{"id": 2, "Findings": "Heart size normal. Lungs are clear.", "Impression": "No acute disease."}"#,
            "\n",
            r#"{"id": 3, "Findings": "Left effusion.", "Impression": null}"#,
            "\n"
        ),
    )
    .unwrap();
    let out = dir.path().join("j.safetensors");
    let o = build_args(&src, "jsonl", &out)
        .args(["--encoder", "hash-8"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", cli::stderr(&o));
    let info = sdr()
        .args(["corpus", "info", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(
        (v["with_findings"].as_u64(), v["with_impression"].as_u64()),
        (Some(2), Some(1))
    );
    // A key no record has is a typo, as a missing CSV column is.
    let e = one_line_error(
        &build_args(&src, "jsonl", &dir.path().join("n.safetensors"))
            .args(["--encoder", "hash-8", "--findings-col", "Nope"])
            .output()
            .unwrap(),
    );
    assert!(e.contains("r.jsonl") && e.contains("`Nope`"), "{e}");
}

#[test]
fn select_names_the_corpus_that_lacks_a_section() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("imp.csv");
    std::fs::write(
        &csv,
        "uid,findings,impression\n2,,No acute disease.\n3,,Left effusion.\n",
    )
    .unwrap();
    let corpus = dir.path().join("c_imp.safetensors");
    cli::build_corpus(&csv, &corpus, &["--encoder", "hash-8"]);
    let (_, cands) = cli::tiny_study(dir.path());
    let e = one_line_error(
        &sdr()
            .args(["select", "--encoder", "hash-8", "--quiet", "--corpus"])
            .arg(&corpus)
            .arg(&cands)
            .output()
            .unwrap(),
    );
    assert!(
        e.contains("c_imp.safetensors: no report in the corpus has the findings section"),
        "{e}"
    );
    assert!(!e.contains("build a corpus from"), "{e}");
    // Pruning reads the corpus the same way.
    let e = one_line_error(
        &sdr()
            .args(["prune", "--encoder", "hash-8", "--quiet", "--replay"])
            .arg(&cands)
            .arg("--corpus")
            .arg(&corpus)
            .arg("-o")
            .arg(dir.path().join("pruned.jsonl"))
            .output()
            .unwrap(),
    );
    assert!(
        e.contains("c_imp.safetensors: no report in the corpus has the findings section"),
        "{e}"
    );
}

#[test]
fn csv_errors_name_the_line_once() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("badquote.csv");
    std::fs::write(&csv, "uid,findings,impression\n1,\"a\n").unwrap();
    let e = one_line_error(
        &build_args(&csv, "csv", &dir.path().join("x.safetensors"))
            .args(["--encoder", "hash-8"])
            .output()
            .unwrap(),
    );
    assert!(
        e.ends_with("badquote.csv:2: the record has 2 fields, but the header has 3"),
        "{e}"
    );
}

#[test]
fn build_refuses_a_bad_out_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, _) = cli::tiny_study(dir.path());
    let e = one_line_error(
        &build_args(&csv, "csv", &dir.path().join("nodir/x.safetensors"))
            .args(["--encoder", "hash-8"])
            .output()
            .unwrap(),
    );
    assert!(e.contains("--out") && e.contains("nodir"), "{e}");
    let e = one_line_error(
        &build_args(&csv, "csv", &csv)
            .args(["--encoder", "hash-8"])
            .output()
            .unwrap(),
    );
    assert!(e.contains("is also the input"), "{e}");
}
