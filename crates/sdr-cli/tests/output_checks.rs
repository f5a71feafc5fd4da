//! Outputs that cannot be written are refused before the work, in one line
//! naming the user's path (never the hidden temporary file), with no file
//! left behind; a reader that closes the pipe ends a command quietly.

mod cli;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Instant;

use cli::{sdr, stderr};

/// A folder where no file can be made: a read-only one in `tmp` for a normal
/// user, /sys for root (whom permissions do not stop); `None` when neither is
/// (the test is then skipped).
fn unwritable_dir(tmp: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let ro = tmp.join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    for dir in [ro, PathBuf::from("/sys")] {
        let probe = dir.join("sdr-test-probe");
        if std::fs::write(&probe, b"x").is_err() {
            return Some(dir);
        }
        let _ = std::fs::remove_file(&probe);
    }
    eprintln!("skipped: every folder tried is writable here");
    None
}

/// `sdr`'s stderr is exactly one `sdr: error:` line, exit status 1.
fn one_error_line(o: &Output) -> String {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "not one line: {err}");
    assert!(lines[0].starts_with("sdr: error: "), "{err}");
    assert!(
        !lines[0].contains(".tmp") && !lines[0].contains("at path"),
        "the temporary file is named: {err}"
    );
    lines[0].to_string()
}

/// `r.csv`: 30 reports, the layout of `sdr corpus build --format csv`.
fn reports(dir: &Path) -> PathBuf {
    let mut csv = String::from("uid,findings,impression\n");
    for i in 0..30 {
        csv += &format!("{i},Heart size normal. Lungs clear {i}.,No acute disease {i}.\n");
    }
    let p = dir.join("r.csv");
    std::fs::write(&p, csv).unwrap();
    p
}

fn build(input: &Path, out: &Path, extra: &[&str]) -> Output {
    sdr()
        .args(["corpus", "build", "--format", "csv", "--encoder", "hash-64"])
        .arg("--input")
        .arg(input)
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn an_unwritable_output_folder_is_refused_before_the_work() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(ro) = unwritable_dir(tmp.path()) else {
        return;
    };
    let csv = reports(tmp.path());
    let out = ro.join("c.safetensors");
    let o = build(&csv, &out, &[]);
    let e = one_error_line(&o);
    assert!(
        e.starts_with(&format!(
            "sdr: error: --out {}: cannot write in folder {}: ",
            out.display(),
            ro.display()
        )),
        "{e}"
    );

    // The other commands that write after long work: eval, select-eval, synth.
    let corpus = tmp.path().join("c.safetensors");
    assert!(build(&csv, &corpus, &["--quiet"]).status.success());
    let e = one_error_line(
        &sdr()
            .args(["corpus", "synth", "--n", "3", "--from"])
            .arg(&corpus)
            .arg("--out")
            .arg(ro.join("s.safetensors"))
            .output()
            .unwrap(),
    );
    assert!(e.contains("/s.safetensors: cannot write in folder"), "{e}");
    let cands = tmp.path().join("cands.jsonl");
    std::fs::write(
        &cands,
        "{\"id\": 1, \"candidates\": [\"Findings: Heart size normal. Impression: No acute disease.\"]}\n",
    )
    .unwrap();
    let e = one_error_line(
        &sdr()
            .args(["eval", "--no-bertscore", "--seeds", "2", "--references"])
            .arg(&csv)
            .arg("--candidates")
            .arg(&cands)
            .arg("-o")
            .arg(ro.join("t.md"))
            .output()
            .unwrap(),
    );
    assert!(e.contains("/t.md: cannot write in folder"), "{e}");
    let e = one_error_line(
        &sdr()
            .args([
                "select-eval",
                "--no-bertscore",
                "--seeds",
                "2",
                "--references",
            ])
            .arg(&csv)
            .arg("--candidates")
            .arg(&cands)
            .arg("--selections")
            .arg(&cands)
            .arg("--out-dir")
            .arg(ro.join("ev"))
            .output()
            .unwrap(),
    );
    assert!(
        e.contains(&format!("--out-dir {}", ro.join("ev").display()))
            && e.contains("cannot write in folder"),
        "{e}"
    );
}

#[test]
fn an_output_under_proc_is_refused_before_the_work() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = reports(tmp.path());
    let t0 = Instant::now();
    let e = one_error_line(&build(&csv, Path::new("/proc/c.safetensors"), &[]));
    assert!(
        e.starts_with("sdr: error: --out /proc/c.safetensors: cannot write in folder /proc"),
        "{e}"
    );
    assert!(t0.elapsed().as_secs() < 30);
}

#[test]
fn the_probe_leaves_no_file_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = reports(tmp.path());
    let outdir = tmp.path().join("out");
    std::fs::create_dir(&outdir).unwrap();
    let o = build(&csv, &outdir.join("c.safetensors"), &["--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let names: Vec<String> = std::fs::read_dir(&outdir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["c.safetensors"]);
    // A refused run (the output is an input) leaves nothing either.
    let o = build(&csv, &csv, &["--quiet"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 2);
}

#[test]
fn a_write_error_names_the_output_once() {
    let full = Path::new("/dev/full");
    if !full.exists() {
        eprintln!("skipped: no /dev/full");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let csv = reports(tmp.path());
    let e = one_error_line(&build(&csv, full, &["--quiet"]));
    assert_eq!(e.matches("/dev/full").count(), 1, "{e}");
    assert!(e.starts_with("sdr: error: cannot write /dev/full: "), "{e}");
}

#[test]
fn a_reader_that_closes_the_pipe_ends_the_command_quietly() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("big.jsonl");
    // Far more output than a pipe holds: the writes go on after the reader left.
    let line = "{\"text\": \"Findings: Heart size normal. Lungs clear.\\nImpression: No acute disease.\"}\n";
    std::fs::write(&input, line.repeat(100_000)).unwrap();
    for cmd in ["parse", "label"] {
        let mut child = sdr()
            .arg(cmd)
            .arg(&input)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(!first.is_empty());
        // The reader is dropped here: the pipe is closed.
        let o = child.wait_with_output().unwrap();
        let err = stderr(&o);
        assert!(err.is_empty(), "{cmd}: {err}");
        assert!(
            matches!(o.status.code(), Some(0 | 141)),
            "{cmd}: {:?}",
            o.status
        );
    }
}

#[test]
fn an_unwritable_cache_is_refused_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(ro) = unwritable_dir(tmp.path()) else {
        return;
    };
    // Before the model loads: no model is needed to see it.
    let e = one_error_line(
        &sdr()
            .arg("embed")
            .arg("--cache-dir")
            .arg(&ro)
            .arg(tmp.path().join("none.txt"))
            .output()
            .unwrap(),
    );
    assert!(
        e.starts_with(&format!(
            "sdr: error: --cache-dir {}: cannot write in the folder: ",
            ro.display()
        )),
        "{e}"
    );
    // sdr serve: at start-up, not at the first save; a missing subfolder too.
    for cache in [ro.join("x.sdrc"), ro.join("sub/x.sdrc")] {
        let e = one_error_line(
            &sdr()
                .args(["serve", "--port", "0", "--cache"])
                .arg(&cache)
                .output()
                .unwrap(),
        );
        assert!(
            e.starts_with(&format!(
                "sdr: error: --cache {}: cannot write in folder {}: ",
                cache.display(),
                ro.display()
            )),
            "{e}"
        );
    }
}
