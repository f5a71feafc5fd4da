//! Helpers of the tests that run the `sdr` binary on a tiny corpus with the real
//! encoder: the binary, its stderr, whether the model is here, and a two-report
//! corpus with two candidates for one study.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn sdr() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sdr"))
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The JSON Lines that a successful run printed; a failed run fails the test
/// with its stderr.
pub fn json_lines(o: &Output) -> Vec<serde_json::Value> {
    assert!(o.status.success(), "{}", stderr(o));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Whether the model folder is there (`bash scripts/fetch-model.sh`, which the test
/// script runs); says the test is skipped when it is not.
pub fn have_model() -> bool {
    let here = sdr_embed::resolve_model_dir(None).is_ok();
    if !here {
        eprintln!("skipped: no model folder (bash scripts/fetch-model.sh)");
    }
    here
}

/// `r.csv` (two reports, the layout of `sdr corpus build --format csv`) and
/// `cands.jsonl` (two candidates for study `a`) in `dir`.
pub fn tiny_study(dir: &Path) -> (PathBuf, PathBuf) {
    let csv = dir.join("r.csv");
    std::fs::write(
        &csv,
        "uid,Problems,findings,impression\n\
         2,normal,\"Heart size normal. Lungs are clear.\",No acute disease.\n\
         3,effusion,\"Large left pleural effusion. Heart size normal.\",Left effusion.\n",
    )
    .unwrap();
    let cands = dir.join("cands.jsonl");
    std::fs::write(
        &cands,
        r#"{"id":"a","candidates":["Findings: Heart size normal. Lungs are clear. Impression: No acute disease.","Findings: Small effusion. Impression: Effusion."]}
"#,
    )
    .unwrap();
    (csv, cands)
}

/// `sdr corpus build` of `csv` into `out` with `extra` arguments; its stderr. Fails
/// the test when the build fails.
pub fn build_corpus(csv: &Path, out: &Path, extra: &[&str]) -> String {
    let o = sdr()
        .args(["corpus", "build", "--format", "csv", "--quiet", "--input"])
        .arg(csv)
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    stderr(&o)
}
