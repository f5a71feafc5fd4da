//! A stop by signal (Ctrl-C, a scheduler's SIGTERM) removes the temporary
//! file of an unfinished output, keeps the old output, says so on stderr and
//! exits with 128 + the signal.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_signal_removes_the_unfinished_output_and_keeps_the_old_one() {
    for (signal, code) in [("TERM", 143), ("INT", 130)] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.jsonl");
        std::fs::write(&out, "old\n").unwrap();
        // `parse` creates its output, then waits for standard input.
        let mut child = Command::new(env!("CARGO_BIN_EXE_sdr"))
            .args(["parse", "-o"])
            .arg(&out)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        writeln!(
            stdin,
            r#"{{"text": "Findings: Lungs clear. Impression: Normal."}}"#
        )
        .unwrap();
        let t0 = Instant::now();
        while names(dir.path()).len() < 2 {
            assert!(t0.elapsed() < Duration::from_secs(30), "no temporary file");
            std::thread::sleep(Duration::from_millis(20));
        }
        let tmp = names(dir.path());
        assert!(
            tmp[0].starts_with(".out.jsonl.") && tmp[0].ends_with(".tmp.jsonl"),
            "{tmp:?}"
        );
        let killed = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(killed.success());
        let o = child.wait_with_output().unwrap();
        drop(stdin);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "SIG{signal}: {err}");
        assert_eq!(
            err.trim_end(),
            format!(
                "sdr: stopped by SIG{signal}; removed 1 unfinished output file(s), earlier contents kept"
            )
        );
        assert_eq!(names(dir.path()), ["out.jsonl"], "SIG{signal}");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "old\n");
    }
}
