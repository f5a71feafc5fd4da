//! `sdr select --cost clinical` end to end on a tiny corpus with the
//! deterministic stand-in encoder: the clinical keys, a choice that the
//! side of a finding decides, and the refusal of a bad cost.

mod cli;

use cli::sdr;

fn ok(o: &std::process::Output) {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn select_under_the_clinical_cost() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("r.csv");
    std::fs::write(
        &csv,
        "uid,findings,impression\n\
         2,\"There is a small right pleural effusion. The heart is normal in size.\",Small right pleural effusion.\n\
         3,\"There is a small right pleural effusion. Heart size is normal.\",Small right pleural effusion.\n",
    )
    .unwrap();
    let corpus = dir.path().join("c.safetensors");
    ok(&sdr()
        .args(["corpus", "build", "--format", "csv", "--split", "train"])
        .args(["--encoder", "hash-16", "--quiet", "--input"])
        .arg(&csv)
        .arg("--out")
        .arg(&corpus)
        .output()
        .unwrap());
    // Candidate 0 differs from the corpus by its side only; candidate 1 words
    // the same finding differently.
    let cands = dir.path().join("cands.jsonl");
    std::fs::write(
        &cands,
        concat!(
            r#"{"id": "s1", "candidates": ["Findings: There is a small left pleural effusion. The heart is normal in size.\nImpression: Small left pleural effusion.", "Findings: Right pleural effusion, small. Heart size normal.\nImpression: Right effusion, small."]}"#,
            "\n"
        ),
    )
    .unwrap();
    let select = |cost: &str| {
        let out = sdr()
            .args(["select", "--encoder", "hash-16", "--quiet", "--cost", cost])
            .args(["--metric", "chamfer", "--agg", "min", "--corpus"])
            .arg(&corpus)
            .arg(&cands)
            .output()
            .unwrap();
        ok(&out);
        cli::json_lines(&out).remove(0)
    };
    let cosine = select("cosine");
    assert_eq!(cosine["policy"], "chamfer@min");
    assert_eq!(cosine["chosen"], 0, "{cosine}");
    let clinical = select("clinical");
    assert_eq!(clinical["policy"], "clinical/chamfer@min");
    assert_eq!(clinical["chosen"], 1, "{clinical}");
    let s = |v: &serde_json::Value, i: usize| v["scores"][i].as_f64().unwrap();
    assert!(
        s(&clinical, 0) > s(&cosine, 0) + 0.2,
        "{clinical} vs {cosine}"
    );
    let other = select("clinical:lambda=0.8");
    assert_eq!(other["policy"], "clinical:lambda=0.8/chamfer@min");

    // Every policy and consensus key carries the prefix.
    let all = sdr()
        .args([
            "select",
            "--encoder",
            "hash-16",
            "--quiet",
            "--cost",
            "clinical",
        ])
        .args(["--all-policies", "--consensus", "--corpus"])
        .arg(&corpus)
        .arg(&cands)
        .output()
        .unwrap();
    ok(&all);
    let line = cli::json_lines(&all).remove(0);
    let keys: Vec<&String> = line["policies"].as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 60);
    assert!(keys.iter().all(|k| k.starts_with("clinical/")), "{keys:?}");
    assert!(keys.iter().any(|k| *k == "clinical/ot@consensus"));

    // A bad cost is one line naming it.
    let bad = sdr()
        .args([
            "select",
            "--encoder",
            "hash-16",
            "--quiet",
            "--cost",
            "clinical:lambda=-1",
        ])
        .arg("--corpus")
        .arg(&corpus)
        .arg(&cands)
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("clinical:lambda=-1"), "{err}");
}
