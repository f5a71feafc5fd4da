//! `sdr select-eval` and `sdr eval` on tiny hand-written inputs (no model:
//! --no-bertscore): CheXpert-rule F1 columns, normal / abnormal tables, and
//! counts printed as integers.

use std::path::Path;
use std::process::{Command, Output};

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

/// Writes the CSV, candidates (good, bad, malformed per study) and a
/// selections file with policies "good@min" (picks 0) and "bad@min" (1).
fn inputs(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let csv = dir.join("refs.csv");
    std::fs::write(&csv, CSV).unwrap();
    let cands = dir.join("cands.jsonl");
    let sels = dir.join("sels.jsonl");
    let mut c = String::new();
    let mut s = String::new();
    for (i, good) in GOOD.iter().enumerate() {
        let id = i + 1;
        c.push_str(&format!(
            "{}\n",
            serde_json::json!({"id": id, "candidates": [good, BAD, "no sections"], "tokens": [10, 20, 30]})
        ));
        s.push_str(&format!(
            "{}\n",
            serde_json::json!({"id": id, "well_formed": [true, true, false], "all_malformed": false,
                "policies": {"good@min": {"chosen": 0}, "bad@min": {"chosen": 1}}})
        ));
    }
    std::fs::write(&cands, c).unwrap();
    std::fs::write(&sels, s).unwrap();
    (csv, cands, sels)
}

fn select_eval(csv: &Path, cands: &Path, sels: &Path, out: &Path) -> Command {
    let mut c = sdr();
    c.args([
        "select-eval",
        "--no-bertscore",
        "--seeds",
        "50",
        "--references",
    ])
    .arg(csv)
    .arg("--candidates")
    .arg(cands)
    .arg("--selections")
    .arg(sels)
    .arg("--out-dir")
    .arg(out);
    c
}

#[test]
fn select_eval_writes_chexpert_columns_and_strata() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, cands, sels) = inputs(dir.path());
    let out = dir.path().join("out");
    ok(select_eval(&csv, &cands, &sels, &out).output().unwrap());
    let read = |name: &str| std::fs::read_to_string(out.join(name)).unwrap();
    let values = read("findings_values.md");
    for col in [
        "CheXpert-rule F1 macro-14",
        "CheXpert-rule F1 micro-14",
        "CheXpert-rule F1 macro-5",
        "CheXpert-rule F1 micro-5",
    ] {
        assert!(values.contains(col), "{values}");
    }
    assert!(!values.contains("CheXbert "), "{values}");
    assert!(
        values.contains("uncertain labels count as present"),
        "{values}"
    );
    assert!(values.contains("corpus-level F1"), "{values}");
    // The good policy reproduces the references' labels exactly.
    let csv_values = read("impression_values.csv");
    let good: Vec<&str> = csv_values
        .lines()
        .find(|l| l.starts_with("good@min,"))
        .unwrap()
        .split(',')
        .collect();
    let header: Vec<&str> = csv_values.lines().next().unwrap().split(',').collect();
    let micro = header
        .iter()
        .position(|h| *h == "CheXpert-rule F1 micro-14")
        .unwrap();
    assert_eq!(good[micro], "1");
    // Strata: one normal and two abnormal studies; of those, one with a single
    // finding and one with two (SPEC 7).
    assert!(read("findings_values_normal.md").contains("1 normal test studies"));
    assert!(read("findings_values_abnormal.md").contains("2 abnormal test studies"));
    assert!(read("findings_values_single_finding.md").contains("1 single finding test studies"));
    assert!(
        read("impression_values_multiple_findings.md").contains("1 multiple findings test studies")
    );
    for name in [
        "findings_vs_random_wf_normal.csv",
        "impression_vs_random_all_abnormal.md",
        "impression_vs_random_wf_single_finding.csv",
        "heatmap_findings_vs_random_wf.png",
    ] {
        assert!(out.join(name).exists(), "{name}");
    }
    let strata = read("impression_strata.md");
    assert!(strata.contains("best policy: good@min"), "{strata}");
    assert!(
        strata.contains("no finding: CheXpert-rule F1 macro-14")
            && strata.contains("multiple findings: CheXpert-rule F1 macro-14"),
        "{strata}"
    );
    assert!(
        strata
            .contains("all n = 3, no finding n = 1, single finding n = 1, multiple findings n = 1"),
        "{strata}"
    );
    assert!(!strata.contains("abnormal"), "{strata}");

    // Uncertain as absent is an option, and the note says so.
    let out2 = dir.path().join("out2");
    ok(select_eval(&csv, &cands, &sels, &out2)
        .arg("--uncertain-negative")
        .output()
        .unwrap());
    let v = std::fs::read_to_string(out2.join("findings_values.md")).unwrap();
    assert!(v.contains("uncertain labels count as absent"), "{v}");

    // Into the same folder with references that have no Problems column: the strata
    // tables of the first run go, so that the folder holds one run; a file of the
    // user's stays.
    std::fs::write(out.join("notes.md"), "mine").unwrap();
    let plain = dir.path().join("plain.csv");
    let no_problems: String = CSV
        .lines()
        .map(|l| {
            let mut f: Vec<&str> = l.splitn(3, ',').collect();
            f.remove(1);
            f.join(",") + "\n"
        })
        .collect();
    std::fs::write(&plain, no_problems).unwrap();
    let o = ok(select_eval(&plain, &cands, &sels, &out).output().unwrap());
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(log.contains("sdr select-eval: removed "), "{log}");
    assert!(out.join("findings_values.md").exists());
    assert!(!out.join("findings_values_normal.md").exists());
    assert!(!out
        .join("impression_vs_random_wf_single_finding.csv")
        .exists());
    assert!(out.join("notes.md").exists());
}

#[test]
fn select_eval_bad_problems_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, cands, sels) = inputs(dir.path());
    std::fs::write(&csv, CSV.replace("2,Cardiomegaly,", "2, ; ,")).unwrap();
    let out = select_eval(&csv, &cands, &sels, &dir.path().join("o"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refs.csv:3:"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn eval_prints_integer_tokens_and_chexpert_columns() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, cands, _) = inputs(dir.path());
    let run = dir.path().join("run.jsonl");
    let lines: Vec<String> = GOOD
        .iter()
        .enumerate()
        .map(|(i, g)| serde_json::json!({"id": i + 1, "text": g, "tokens_used": 7}).to_string())
        .collect();
    std::fs::write(&run, lines.join("\n") + "\n").unwrap();
    let md_path = dir.path().join("t.md");
    let out = ok(sdr()
        .args(["eval", "--no-bertscore", "--seeds", "20", "--references"])
        .arg(&csv)
        .arg("--candidates")
        .arg(&cands)
        .arg("--run")
        .arg(format!("best={}", run.display()))
        .arg("-o")
        .arg(&md_path)
        .output()
        .unwrap());
    let md = String::from_utf8(out.stdout).unwrap();
    assert!(md.contains("CheXpert-rule F1 macro-14"), "{md}");
    // 3 studies x 7 tokens, against 3 x 60 for the full candidates.
    assert!(md.contains("| best | 21 | 88.33"), "{md}");
    assert!(!md.contains("21.0000"), "{md}");
    let csv_out = std::fs::read_to_string(dir.path().join("t.csv")).unwrap();
    assert!(csv_out.contains("\r\nbest,21,"), "{csv_out}");
}

/// The one-line error of a failed run.
fn one_line_error(out: &Output) -> String {
    let e = String::from_utf8_lossy(&out.stderr).trim_end().to_string();
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    e
}

#[cfg(target_os = "linux")]
#[test]
fn select_eval_full_stdout_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, cands, sels) = inputs(dir.path());
    let out = select_eval(&csv, &cands, &sels, &dir.path().join("o"))
        .stdout(std::fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap();
    let e = one_line_error(&out);
    assert!(e.starts_with("sdr: error: cannot write output: "), "{e}");
}

#[test]
fn failed_select_eval_leaves_no_folder_and_no_table() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, cands, sels) = inputs(dir.path());
    // Bad input: no output folder is made.
    let out = dir.path().join("a/b");
    let missing = dir.path().join("missing.jsonl");
    one_line_error(&select_eval(&csv, &cands, &missing, &out).output().unwrap());
    assert!(!dir.path().join("a").exists());
    // A file where the folder would go fails before the scoring.
    let e = one_line_error(
        &select_eval(&csv, &cands, &sels, &csv.join("x"))
            .output()
            .unwrap(),
    );
    assert!(e.contains("--out-dir") && e.contains("not a folder"), "{e}");
    // One blocked table path: none of the others is written.
    let out = dir.path().join("o");
    std::fs::create_dir_all(out.join("impression_strata.md")).unwrap();
    let e = one_line_error(&select_eval(&csv, &cands, &sels, &out).output().unwrap());
    assert!(e.contains("impression_strata.md"), "{e}");
    let left: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["impression_strata.md"]);
}

#[test]
fn select_eval_refuses_bad_selections_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, cands, sels) = inputs(dir.path());
    let text = std::fs::read_to_string(&sels).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let bad = dir.path().join("bad.jsonl");
    let run = |content: String| {
        std::fs::write(&bad, content).unwrap();
        one_line_error(
            &select_eval(&csv, &cands, &bad, &dir.path().join("o"))
                .output()
                .unwrap(),
        )
    };
    // A repeated study would count twice in every mean.
    let e = run(format!("{text}{}\n", lines[0]));
    assert!(
        e.contains("bad.jsonl:4: study 1 again (first at ") && e.ends_with("bad.jsonl:1)"),
        "{e}"
    );
    // A policy missing on one line, named.
    let e = run(format!(
        "{}\n{}\n",
        lines[0],
        lines[1].replace(r#""bad@min":{"chosen":1},"#, "")
    ));
    assert!(
        e.ends_with("bad.jsonl:2: study 2: policy bad@min is missing (the first line has it)"),
        "{e}"
    );
    // Selections cut short: the study left out would drop out of every
    // table unnoticed.
    let e = run(format!("{}\n{}\n", lines[0], lines[1]));
    assert!(
        e.contains("cands.jsonl:3: study 3 has no line in ")
            && e.contains("bad.jsonl (2 of 3 studies selected)"),
        "{e}"
    );
    // A choice out of range.
    let e = run(format!(
        "{}\n",
        lines[0].replace(r#""chosen":1"#, r#""chosen":7"#)
    ));
    assert!(
        e.ends_with("bad.jsonl:1: study 1: policy bad@min chose 7 of 3 candidates"),
        "{e}"
    );
    // One policy's `sdr select` output.
    let e = run(
        "{\"id\": 1, \"policy\": \"chamfer@min\", \"chosen\": 0, \"well_formed\": [true, true, false]}\n"
            .into(),
    );
    assert!(
        e.ends_with("bad.jsonl:1: no \"policies\": select-eval needs the output of `sdr select --all-policies`"),
        "{e}"
    );
    // A repeated study among the candidates.
    let ctext = std::fs::read_to_string(&cands).unwrap();
    std::fs::write(&cands, format!("{ctext}{}", ctext.lines().next().unwrap())).unwrap();
    let e = one_line_error(
        &select_eval(&csv, &cands, &sels, &dir.path().join("o"))
            .output()
            .unwrap(),
    );
    assert!(e.contains("cands.jsonl:4: study 1 again (first at"), "{e}");
    // --seeds out of range, before anything is read (the candidates file
    // named is missing).
    let seeds = |n: &str| {
        one_line_error(
            &sdr()
                .args(["select-eval", "--seeds", n, "--references"])
                .arg(&csv)
                .arg("--candidates")
                .arg(dir.path().join("missing"))
                .arg("--selections")
                .arg(&sels)
                .arg("--out-dir")
                .arg(dir.path().join("o"))
                .output()
                .unwrap(),
        )
    };
    let e = seeds("0");
    assert!(e.ends_with("--seeds 0: must be at least 1"), "{e}");
    // A count that would run for ever with no output.
    let e = seeds("18446744073709551615");
    assert!(
        e.ends_with("--seeds 18446744073709551615: at most 100000"),
        "{e}"
    );
    assert!(!dir.path().join("o").exists());
}

/// `sdr select --all-policies` of `cands` (hash encoder, a corpus of the
/// reference CSV) into `out`.
fn select_all(dir: &Path, csv: &Path, cands: &Path, out: &Path) {
    let corpus = dir.join("c.safetensors");
    ok(sdr()
        .args(["corpus", "build", "--format", "csv", "--encoder", "hash-8"])
        .args(["--quiet", "--input"])
        .arg(csv)
        .arg("--out")
        .arg(&corpus)
        .output()
        .unwrap());
    ok(sdr()
        .args(["select", "--encoder", "hash-8", "--all-policies", "--quiet"])
        .arg("--corpus")
        .arg(&corpus)
        .arg(cands)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap());
}

#[test]
fn select_eval_refuses_selections_made_on_other_candidates() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, cands, old_sels) = inputs(dir.path());
    let sels = dir.path().join("sel.jsonl");
    select_all(dir.path(), &csv, &cands, &sels);
    for l in std::fs::read_to_string(&sels).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        let h = v["candidates_hash"].as_str().unwrap();
        assert!(
            h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()),
            "{h}"
        );
    }
    ok(select_eval(&csv, &cands, &sels, &dir.path().join("o"))
        .output()
        .unwrap());
    // The same studies and counts, other texts: the candidates reversed, or
    // one candidate of study 2 edited.
    let text = std::fs::read_to_string(&cands).unwrap();
    let edit = |f: &dyn Fn(usize, &mut Vec<String>)| -> String {
        text.lines()
            .enumerate()
            .map(|(i, l)| {
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                let mut c: Vec<String> = serde_json::from_value(v["candidates"].clone()).unwrap();
                f(i, &mut c);
                v["candidates"] = serde_json::json!(c);
                format!("{v}\n")
            })
            .collect()
    };
    let other = dir.path().join("other.jsonl");
    for (content, line, id) in [
        (edit(&|_, c| c.reverse()), 1, 1),
        (
            edit(&|i, c| {
                if i == 1 {
                    c[1].push_str(" No effusion.");
                }
            }),
            2,
            2,
        ),
    ] {
        std::fs::write(&other, content).unwrap();
        let e = one_line_error(
            &select_eval(&csv, &other, &sels, &dir.path().join("o2"))
                .output()
                .unwrap(),
        );
        let want = format!(
            "{}:{line}: study {id} was selected from other candidates than {} holds (",
            sels.display(),
            other.display()
        );
        assert!(e.contains(&want), "want {want:?}, got {e}");
        assert!(!dir.path().join("o2").exists());
    }
    // Selections written before the hash existed load unchecked.
    std::fs::write(&other, edit(&|_, c| c.reverse())).unwrap();
    ok(select_eval(&csv, &other, &old_sels, &dir.path().join("o3"))
        .output()
        .unwrap());
}
