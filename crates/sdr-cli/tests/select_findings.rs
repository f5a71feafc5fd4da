//! `sdr select --findings-consistency` and `sdr check-impression` end to end
//! with the deterministic stand-in encoder, on Findings and Impressions of IU
//! X-ray (uid 267): the consistent Impression is chosen, Findings come from
//! the line or a file, bad input is one line naming the input and the study.

mod cli;

use cli::{json_lines, sdr, stderr};

/// IU X-ray uid 267.
const FINDINGS: &str = "Endotracheal tube and NG tube have been removed. Mild patchy bilateral \
    airspace disease. There are small bilateral pleural effusions. No pneumothorax. Heart and \
    mediastinum are stable with normal size heart. Degenerative changes in the spine.";
const REFERENCE: &str = "Small bilateral pleural effusions with a few scattered areas of patchy \
    bilateral airspace disease.";
const CONTRADICTING: &str = "No pleural effusion. Patchy bilateral airspace disease.";

fn select(extra: &[&str], input: &std::path::Path) -> std::process::Output {
    sdr()
        .args([
            "select",
            "--findings-consistency",
            "--encoder",
            "hash-16",
            "--quiet",
        ])
        .args(extra)
        .arg(input)
        .output()
        .unwrap()
}

#[test]
fn the_impression_consistent_with_its_findings_is_chosen() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let line = serde_json::json!({
        "id": 267,
        "candidates": [CONTRADICTING, "No acute cardiopulmonary abnormality.", REFERENCE, ""],
        "findings": FINDINGS,
    });
    std::fs::write(&input, format!("{line}\n")).unwrap();
    let out = json_lines(&select(&[], &input)).remove(0);
    assert_eq!(out["policy"], "findings-consistency");
    assert_eq!(out["id"], 267);
    assert_eq!(out["chosen"], 2, "{out}");
    assert_eq!(out["text"], REFERENCE);
    assert_eq!(
        out["well_formed"],
        serde_json::json!([true, true, true, false])
    );
    assert!(out["scores"][3].is_null());
    let b = &out["breakdown"];
    assert_eq!(
        b[0]["contradicted"],
        serde_json::json!(["Pleural Effusion (polarity)"])
    );
    assert!(b[1]["omitted"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("Pleural Effusion")));
    let score = |i: usize| out["scores"][i].as_f64().unwrap();
    assert!(score(0) > score(2) && score(1) > score(2), "{out}");
    assert_eq!(out["candidates_hash"].as_str().unwrap().len(), 16);

    // The Findings from a CSV in IU X-ray's layout, keyed by uid.
    let csv = dir.path().join("reports.csv");
    std::fs::write(
        &csv,
        format!("uid,findings,impression\n267,\"{FINDINGS}\",\"{REFERENCE}\"\n"),
    )
    .unwrap();
    let bare = dir.path().join("bare.jsonl");
    let line = serde_json::json!({"id": "267", "candidates": [CONTRADICTING, REFERENCE]});
    std::fs::write(&bare, format!("{line}\n")).unwrap();
    let csv_arg = csv.to_str().unwrap();
    let out = json_lines(&select(&["--findings", csv_arg], &bare)).remove(0);
    assert_eq!(out["chosen"], 1, "{out}");
    // A CSV with the Findings alone, its id column named `id`.
    let only = dir.path().join("findings.csv");
    std::fs::write(&only, format!("ID,Findings\n267,\"{FINDINGS}\"\n")).unwrap();
    let out = json_lines(&select(&["--findings", only.to_str().unwrap()], &bare)).remove(0);
    assert_eq!(out["chosen"], 1, "{out}");
    // ... or from JSON Lines.
    let jl = dir.path().join("findings.jsonl");
    let line = serde_json::json!({"id": "267", "findings": FINDINGS});
    std::fs::write(&jl, format!("{line}\n")).unwrap();
    let out = json_lines(&select(&["--findings", jl.to_str().unwrap()], &bare)).remove(0);
    assert_eq!(out["chosen"], 1, "{out}");
}

#[test]
fn bad_input_is_one_line_naming_the_input_and_the_study() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, line: serde_json::Value| {
        let p = dir.path().join(name);
        std::fs::write(&p, format!("{line}\n")).unwrap();
        p
    };
    let fails = |o: std::process::Output, want: &[&str]| {
        assert!(!o.status.success());
        let e = stderr(&o);
        assert_eq!(e.trim().lines().count(), 1, "{e}");
        assert!(!e.contains("panicked"), "{e}");
        for w in want {
            assert!(e.contains(w), "{w:?} not in {e}");
        }
    };
    let no_findings = write(
        "a.jsonl",
        serde_json::json!({"id": "s9", "candidates": ["A."]}),
    );
    fails(select(&[], &no_findings), &["a.jsonl:1", "s9", "findings"]);
    let csv = dir.path().join("r.csv");
    std::fs::write(&csv, "uid,findings,impression\n3,Heart normal.,Normal.\n").unwrap();
    fails(
        select(&["--findings", csv.to_str().unwrap()], &no_findings),
        &["a.jsonl:1", "s9", "no Findings for it", "r.csv"],
    );
    let no_id = dir.path().join("n.csv");
    std::fs::write(&no_id, "name,findings\nx,Heart normal.\n").unwrap();
    fails(
        select(&["--findings", no_id.to_str().unwrap()], &no_findings),
        &["n.csv", "id column"],
    );
    let empty = write(
        "b.jsonl",
        serde_json::json!({"id": "s2", "candidates": [], "findings": FINDINGS}),
    );
    fails(
        select(&[], &empty),
        &["b.jsonl:1", "s2", "`candidates` is empty"],
    );
    let blank = write(
        "c.jsonl",
        serde_json::json!({"id": "s3", "candidates": ["A."], "findings": " "}),
    );
    fails(select(&[], &blank), &["c.jsonl:1", "s3", "no sentence"]);
    // Corpus options do not mix with it.
    let o = sdr()
        .args([
            "select",
            "--findings-consistency",
            "--consensus",
            "--encoder",
            "hash-8",
        ])
        .arg(&blank)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
}

#[test]
fn check_impression_prints_the_sentences_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.txt");
    std::fs::write(
        &report,
        format!("FINDINGS: {FINDINGS}\n\nIMPRESSION: {CONTRADICTING}\n"),
    )
    .unwrap();
    let o = sdr().arg("check-impression").arg(&report).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("Contradictions (1):"), "{text}");
    assert!(text.contains("Pleural Effusion (polarity"), "{text}");
    assert!(text.contains("\"No pleural effusion.\""), "{text}");
    assert!(
        text.contains("\"There are small bilateral pleural effusions.\""),
        "{text}"
    );
    assert!(text.contains("Omitted from the Impression (1):"), "{text}");

    let jl = dir.path().join("reports.jsonl");
    let lines = [
        serde_json::json!({"id": 1, "findings": FINDINGS, "impression": REFERENCE}),
        serde_json::json!({"id": 2, "findings": FINDINGS, "impression": CONTRADICTING}),
    ];
    std::fs::write(
        &jl,
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
    let o = sdr()
        .args(["check-impression", "--json"])
        .arg(&jl)
        .output()
        .unwrap();
    let out = json_lines(&o);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0]["id"], 1);
    assert_eq!(out[0]["contradictions"], serde_json::json!([]));
    let c = &out[1]["contradictions"][0];
    assert_eq!(c["finding"], "Pleural Effusion");
    assert_eq!(c["kind"], "polarity");
    assert_eq!(c["impression"]["sentence"], 0);
    assert_eq!(c["findings"]["sentence"], 2);
    assert!(out[1]["score"].as_f64().unwrap() > out[0]["score"].as_f64().unwrap());

    let no_impression = dir.path().join("f.txt");
    std::fs::write(&no_impression, format!("FINDINGS: {FINDINGS}\n")).unwrap();
    let o = sdr()
        .arg("check-impression")
        .arg(&no_impression)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("no Impression section"),
        "{}",
        stderr(&o)
    );
}
