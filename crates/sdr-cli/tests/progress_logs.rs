//! Where stderr is a log (not a terminal), long commands say what they do
//! and how far they are, in lines; `--quiet` silences them. (The periodic
//! lines come after a second, beyond what a test should take.)

mod cli;

use cli::{sdr, stderr};

#[test]
fn corpus_build_logs_before_during_and_after() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("r.csv");
    let mut text = String::from("uid,findings,impression\n");
    for i in 0..20 {
        text += &format!("{i},Heart size normal. Lungs clear {i}.,No acute disease {i}.\n");
    }
    std::fs::write(&csv, text).unwrap();
    let build = |extra: &[&str]| {
        sdr()
            .args(["corpus", "build", "--format", "csv", "--encoder", "hash-64"])
            .arg("--input")
            .arg(&csv)
            .arg("--out")
            .arg(tmp.path().join("c.safetensors"))
            .args(extra)
            .output()
            .unwrap()
    };
    let o = build(&[]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    // A short run: the line before and the summary (progress lines come after a second).
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert_eq!(
        lines[0],
        format!("sdr corpus: 20 reports from {}", csv.display())
    );
    assert!(
        lines[1].starts_with("sdr corpus: 20 reports (20 with findings"),
        "{err}"
    );
    // --quiet: the summary alone.
    let o = build(&["--quiet"]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}
