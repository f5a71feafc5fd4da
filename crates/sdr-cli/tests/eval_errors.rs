//! `sdr eval` refuses silently wrong input in one line naming the file, the
//! line and the field: repeated studies, `tokens` that do not match the
//! candidates, invalid token counts, an empty candidates file; and a full
//! stdout or a bad `-o` is an error, not a panic or a half-written pair.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::json;

const CSV: &str = "uid,findings,impression\n\
1,The heart is normal in size. The lungs are clear.,No acute disease.\n\
2,The heart is enlarged. The lungs are clear.,Cardiomegaly.\n";
const GOOD: [&str; 2] = [
    "Findings: The heart is normal in size. The lungs are clear.\nImpression: No acute disease.",
    "Findings: The heart is enlarged. The lungs are clear.\nImpression: Cardiomegaly.",
];
const BAD: &str = "Findings: Pneumothorax.\nImpression: Pneumothorax.";

fn write_lines(path: &Path, lines: &[serde_json::Value]) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).unwrap();
}

/// refs.csv, cands.jsonl (good and bad candidate per study) in `dir`.
fn inputs(dir: &Path) -> (PathBuf, PathBuf) {
    let csv = dir.join("refs.csv");
    std::fs::write(&csv, CSV).unwrap();
    let cands = dir.join("cands.jsonl");
    let lines: Vec<_> = GOOD
        .iter()
        .enumerate()
        .map(|(i, g)| json!({"id": i + 1, "candidates": [g, BAD], "tokens": [10, 20]}))
        .collect();
    write_lines(&cands, &lines);
    (csv, cands)
}

fn eval(csv: &Path, cands: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sdr"))
        .args(["eval", "--no-bertscore", "--seeds", "5", "--references"])
        .arg(csv)
        .arg("--candidates")
        .arg(cands)
        .args(extra)
        .output()
        .unwrap()
}

/// The one-line error of a failed run.
fn err(o: &Output) -> String {
    let e = String::from_utf8_lossy(&o.stderr).trim_end().to_string();
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    e
}

fn run_line(id: usize, text: &str, used: serde_json::Value) -> serde_json::Value {
    json!({"id": id, "text": text, "tokens_used": used})
}

#[test]
fn a_repeated_study_is_refused_not_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, cands) = inputs(dir.path());
    let run = dir.path().join("run.jsonl");
    write_lines(
        &run,
        &[
            run_line(1, GOOD[0], json!(5)),
            run_line(2, GOOD[1], json!(5)),
            run_line(2, BAD, json!(5)),
        ],
    );
    let spec = format!("a={}", run.display());
    let e = err(&eval(&csv, &cands, &["--run", &spec]));
    assert!(
        e.contains("run.jsonl:3: study 2 again (first at") && e.contains("run.jsonl:2"),
        "{e}"
    );
    let text = std::fs::read_to_string(&cands).unwrap();
    std::fs::write(&cands, format!("{text}{}", text.lines().next().unwrap())).unwrap();
    let e = err(&eval(&csv, &cands, &[]));
    assert!(e.contains("cands.jsonl:3: study 1 again"), "{e}");
}

#[test]
fn tokens_must_match_the_candidates_and_be_counts() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, cands) = inputs(dir.path());
    write_lines(
        &cands,
        &[json!({"id": 1, "candidates": [GOOD[0], BAD], "tokens": [10, 20, 30]})],
    );
    let e = err(&eval(&csv, &cands, &[]));
    assert!(
        e.contains("cands.jsonl:1: \"tokens\" has 3 counts for 2 candidates"),
        "{e}"
    );
    write_lines(
        &cands,
        &[json!({"id": 1, "candidates": [GOOD[0], BAD], "tokens": [10, -1]})],
    );
    let e = err(&eval(&csv, &cands, &[]));
    assert!(
        e.contains("cands.jsonl:1: \"tokens[1]\" must be a non-negative integer"),
        "{e}"
    );
    write_lines(
        &cands,
        &[json!({"id": 1, "candidates": [GOOD[0], BAD], "tokens": [u64::MAX, 1]})],
    );
    let e = err(&eval(&csv, &cands, &[]));
    assert!(
        e.contains("cands.jsonl:1: \"tokens\": token counts add up"),
        "{e}"
    );
}

#[test]
fn invalid_tokens_used_is_an_error_naming_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, cands) = inputs(dir.path());
    let run = dir.path().join("run.jsonl");
    let spec = format!("a={}", run.display());
    for bad in [json!(-5), json!("abc"), json!(1e30), json!(2.5)] {
        write_lines(
            &run,
            &[
                run_line(1, GOOD[0], json!(5)),
                run_line(2, GOOD[1], bad.clone()),
            ],
        );
        let e = err(&eval(&csv, &cands, &["--run", &spec]));
        assert!(
            e.contains("run.jsonl:2: \"tokens_used\" must be a non-negative integer"),
            "{bad}: {e}"
        );
    }
    // Null still means unknown: the full candidates' tokens count.
    write_lines(
        &run,
        &[
            run_line(1, GOOD[0], json!(5)),
            run_line(2, GOOD[1], json!(null)),
        ],
    );
    let o = eval(&csv, &cands, &["--run", &spec]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("| a | 35 |"));
}

#[test]
fn an_empty_candidates_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, cands) = inputs(dir.path());
    std::fs::write(&cands, "\n").unwrap();
    let e = err(&eval(&csv, &cands, &[]));
    assert!(
        e.contains("cands.jsonl: no studies (the candidates file is empty)"),
        "{e}"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_stdout_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, cands) = inputs(dir.path());
    let o = Command::new(env!("CARGO_BIN_EXE_sdr"))
        .args(["eval", "--no-bertscore", "--seeds", "5", "--references"])
        .arg(&csv)
        .arg("--candidates")
        .arg(&cands)
        .stdout(std::fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap();
    let e = err(&o);
    assert!(e.starts_with("sdr: error: cannot write output: "), "{e}");
}

#[test]
fn bad_output_paths_fail_first_and_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, cands) = inputs(dir.path());
    let md = dir.path().join("nodir/t.md");
    let e = err(&eval(&csv, &cands, &["-o", md.to_str().unwrap()]));
    assert!(e.contains("--output") && e.contains("nodir"), "{e}");
    // The CSV beside the table must not be the table itself.
    let same = dir.path().join("t.csv");
    let e = err(&eval(&csv, &cands, &["-o", same.to_str().unwrap()]));
    assert!(e.contains("t.csv"), "{e}");
    // A blocked CSV path: the table is not written either.
    std::fs::create_dir(dir.path().join("u.csv")).unwrap();
    let md = dir.path().join("u.md");
    let e = err(&eval(&csv, &cands, &["-o", md.to_str().unwrap()]));
    assert!(e.contains("u.csv") && e.contains("folder"), "{e}");
    assert!(!md.exists());
}

/// A candidate that failed in generation (`finish: {"error": ...}`, as files
/// written before `sdr generate` left such studies out hold them) is refused by
/// every command that would score its cut text as a report.
#[test]
fn candidates_that_failed_in_generation_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, _) = inputs(dir.path());
    let cands = dir.path().join("failed.jsonl");
    write_lines(
        &cands,
        &[
            json!({"id": 1, "candidates": [GOOD[0], ""], "finish": ["stop", {"error": "idle timeout"}]}),
            json!({"id": 2, "candidates": [GOOD[1], BAD], "finish": ["stop", "length"]}),
        ],
    );
    let e = err(&eval(
        &csv,
        &cands,
        &["--run", &format!("x={}", cands.display())],
    ));
    assert!(
        e.contains("failed.jsonl:1")
            && e.contains("candidate 1 failed")
            && e.contains("idle timeout"),
        "{e}"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_sdr"))
        .args(["select", "--consensus", "--encoder", "hash-64"])
        .arg(&cands)
        .output()
        .unwrap();
    let e = err(&o);
    assert!(
        e.contains("failed.jsonl:1") && e.contains("candidate 1 failed"),
        "{e}"
    );
}

#[test]
fn arguments_are_checked_first_and_a_missing_default_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, cands) = inputs(dir.path());
    let spec = |name: &str| format!("{name}={}", cands.display());
    // Run names must tell the rows apart.
    let e = err(&eval(&csv, &cands, &["--run", &spec("")]));
    assert!(e.contains("expected NAME=FILE[#FIELD]"), "{e}");
    let e = err(&eval(
        &csv,
        &cands,
        &["--run", &spec("std"), "--run", &spec("std")],
    ));
    assert!(e.contains("the name std is given twice"), "{e}");
    let e = err(&eval(&csv, &cands, &["--run", &spec("random")]));
    assert!(
        e.contains("the name random is the table's random baseline row"),
        "{e}"
    );
    // From a folder without the default references: the option and its
    // default are named, after the arguments are checked.
    let sdr = || {
        let mut c = Command::new(env!("CARGO_BIN_EXE_sdr"));
        c.current_dir(dir.path())
            .args(["eval", "--no-bertscore", "--candidates"])
            .arg(&cands);
        c
    };
    let e = err(&sdr().arg("--run").arg("foo").output().unwrap());
    assert!(e.contains("--run foo: expected NAME=FILE"), "{e}");
    let e = err(&sdr().args(["--seeds", "0"]).output().unwrap());
    assert!(e.ends_with("--seeds 0: must be at least 1"), "{e}");
    let e = err(&sdr()
        .args(["--seeds", "18446744073709551615"])
        .output()
        .unwrap());
    assert!(
        e.ends_with("--seeds 18446744073709551615: at most 100000"),
        "{e}"
    );
    let e = err(&sdr().arg("--run").arg(spec("a")).output().unwrap());
    assert_eq!(
        e,
        "sdr: error: --references (default data/iu-xray/indiana_reports.csv, relative to the \
         current folder): not found; pass --references FILE"
    );
}

#[test]
fn token_totals_beyond_exact_f64_are_refused_not_rounded() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, cands) = inputs(dir.path());
    let run = dir.path().join("run.jsonl");
    let spec = format!("a={}", run.display());
    // 2^53 + 1 prints as 2^53 through an f64 cell.
    write_lines(
        &run,
        &[
            run_line(1, GOOD[0], json!(9_007_199_254_740_993u64)),
            run_line(2, GOOD[1], json!(0)),
        ],
    );
    let e = err(&eval(&csv, &cands, &["--run", &spec]));
    assert!(
        e.contains("--run a: 9007199254740993 tokens in all, more than the table shows exactly"),
        "{e}"
    );
    write_lines(
        &run,
        &[
            run_line(1, GOOD[0], json!(9_007_199_254_740_992u64)),
            run_line(2, GOOD[1], json!(0)),
        ],
    );
    let o = eval(&csv, &cands, &["--run", &spec]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("| a | 9007199254740992 |"));
}

#[test]
fn no_bertscore_leaves_every_bertscore_cell_empty_even_for_empty_sections() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, _) = inputs(dir.path());
    // Every candidate malformed: its sections are empty and score 0 elsewhere.
    let cands = dir.path().join("malformed.jsonl");
    write_lines(
        &cands,
        &[
            json!({"id": 1, "candidates": ["x", "y"]}),
            json!({"id": 2, "candidates": ["x", "y"]}),
        ],
    );
    let run = dir.path().join("run.jsonl");
    write_lines(
        &run,
        &[run_line(1, "x", json!(5)), run_line(2, "y", json!(5))],
    );
    let spec = format!("a={}", run.display());
    let o = eval(&csv, &cands, &["--run", &spec]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let header: Vec<&str> = out
        .lines()
        .find(|l| l.starts_with("| policy"))
        .unwrap()
        .split('|')
        .map(str::trim)
        .collect();
    let bert: Vec<usize> = (0..header.len())
        .filter(|&i| header[i].contains("BERTScore"))
        .collect();
    assert_eq!(bert.len(), 2, "{out}");
    for row in ["random", "a"] {
        let cells: Vec<&str> = out
            .lines()
            .find(|l| l.starts_with(&format!("| {row} ")))
            .unwrap()
            .split('|')
            .map(str::trim)
            .collect();
        for &i in &bert {
            assert_eq!(cells[i], "-", "{row}: {out}");
        }
    }
}

#[test]
fn a_run_with_studies_not_in_the_candidates_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, cands) = inputs(dir.path());
    let run = dir.path().join("run.jsonl");
    write_lines(
        &run,
        &[
            run_line(1, GOOD[0], json!(5)),
            run_line(7, GOOD[0], json!(5)),
            run_line(2, GOOD[1], json!(5)),
            run_line(8, GOOD[1], json!(5)),
        ],
    );
    let spec = format!("a={}", run.display());
    let o = eval(&csv, &cands, &["--run", &spec]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{e}");
    assert!(
        e.contains("sdr eval: warning: --run a: 2 studies of ")
            && e.contains("run.jsonl not in --candidates (the first: 7) left out"),
        "{e}"
    );
}
