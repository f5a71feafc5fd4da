//! `sdr generate --backend openai` against a server that answers, but wrongly:
//! a failed candidate is an error on stderr and a non-zero exit, never an
//! empty report in the output, and `--resume` generates its study again. The
//! server is a thread on 127.0.0.1 that answers each request with canned bytes
//! (`fake_openai`).

mod fake_openai;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use fake_openai::{stop_after_first_record, Answer, Server};

/// A good stream of one report.
fn good(seed: u64) -> Answer {
    let chunk = |content: &str, finish: Option<&str>| {
        let c = serde_json::json!({"choices": [{"index": 0, "delta": {"content": content},
                                                "finish_reason": finish}]});
        format!("data: {c}\n\n")
    };
    let body = [
        chunk("Findings: Lungs clear.", None),
        chunk(&format!(" Impression: Normal {seed}."), Some("stop")),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    Answer::Body("text/event-stream", body)
}

fn sse(body: &str) -> Answer {
    Answer::Body("text/event-stream", body.into())
}

fn studies(dir: &Path, n: usize) -> PathBuf {
    let p = dir.join("studies.jsonl");
    let lines: String = (0..n).map(|i| format!("{{\"id\": \"s{i}\"}}\n")).collect();
    std::fs::write(&p, lines).unwrap();
    p
}

/// `sdr generate` of `studies` into `out`, K = 2, with progress and summary.
fn command(server: &Server, studies: &Path, out: &Path) -> Command {
    let mut c = server.sdr("generate");
    c.args(["-k", "2", "--retries", "0", "--timeout", "1"])
        .arg("--studies")
        .arg(studies)
        .arg("-o")
        .arg(out);
    c
}

fn generate(server: &Server, studies: &Path, out: &Path, extra: &[&str]) -> Output {
    command(server, studies, out)
        .arg("--quiet")
        .args(extra)
        .output()
        .unwrap()
}

/// A server on which study s1's candidate 1 breaks off mid-report until
/// `fixed` is set; the other candidates are fine.
fn s1_breaks_off(fixed: &Arc<AtomicBool>) -> Server {
    let is_fixed = Arc::clone(fixed);
    Server::start(move |seed| match seed {
        1001 if !is_fixed.load(Ordering::SeqCst) => sse(&format!(
            "data: {}\n\n",
            serde_json::json!({"choices": [{"index": 0, "delta": {"content": "Findings: Lungs"}}]})
        )),
        _ => good(seed),
    })
}

fn records(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_server_that_answers_wrongly_fails_the_run() {
    let html = "<html><body>Please log in</body></html>";
    type Case = (&'static str, fn() -> Answer, &'static str);
    let cases: [Case; 5] = [
        (
            "html",
            || {
                Answer::Body(
                    "text/html",
                    "<html><body>Please log in</body></html>".into(),
                )
            },
            "response is not an event stream (Content-Type text/html)",
        ),
        (
            "malformed",
            || sse("data: {not json\n\n"),
            "candidates 0, 1 failed: malformed chunk",
        ),
        (
            "no choices",
            || sse("data: {\"choices\": []}\n\ndata: [DONE]\n\n"),
            "none of its 1 chunks had a choice",
        ),
        (
            "no events",
            || sse(""),
            "stream closed without a single chunk",
        ),
        (
            "quiet",
            || Answer::Quiet,
            "candidates 0, 1 failed: idle timeout: no data for 1.0 s",
        ),
    ];
    for (what, answer, want) in cases {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::start(move |_| answer());
        let out = dir.path().join("g.jsonl");
        let o = generate(&server, &studies(dir.path(), 1), &out, &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{what}: {err}");
        assert!(err.contains(want), "{what}: {err}");
        assert!(err.contains("study s0"), "{what}: {err}");
        if what == "html" {
            // Refused before any text came: the run stops at once, on one line.
            assert!(err.contains(html), "{err}");
            assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        } else {
            let last = err.trim_end().lines().last().unwrap();
            assert!(
                last.contains("2 candidates failed in 1 study")
                    && last.contains("g.jsonl.partial keeps 0 complete studies")
                    && last.contains("--resume"),
                "{what}: {err}"
            );
            assert_eq!(err.trim_end().lines().count(), 2, "{what}: {err}");
        }
        // Nothing that looks like an answer: no FILE, and no record in FILE.partial.
        assert!(!out.exists(), "{what}");
        let partial = dir.path().join("g.jsonl.partial");
        assert_eq!(std::fs::read_to_string(&partial).unwrap(), "", "{what}");
    }
}

#[test]
fn resume_generates_the_studies_whose_candidates_failed() {
    let dir = tempfile::tempdir().unwrap();
    let studies = studies(dir.path(), 3);
    let out = dir.path().join("g.jsonl");
    let fixed = Arc::new(AtomicBool::new(false));
    let server = s1_breaks_off(&fixed);
    let o = generate(&server, &studies, &out, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("study s1: candidate 1 failed: stream closed before a finish_reason"),
        "{err}"
    );
    assert!(
        err.contains("1 candidate failed in 1 study") && err.contains("keeps 2 complete studies"),
        "{err}"
    );
    // The run went on past s1.
    assert_eq!(server.requests.load(Ordering::SeqCst), 6);
    assert!(!out.exists());
    let partial = dir.path().join("g.jsonl.partial");
    let ids: Vec<_> = records(&partial).iter().map(|r| r["id"].clone()).collect();
    assert_eq!(ids, ["s0", "s2"]);

    fixed.store(true, Ordering::SeqCst);
    let o = generate(&server, &studies, &out, &["--resume"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(server.requests.load(Ordering::SeqCst), 8, "only s1 again");
    // In the studies' order, as a run without the failure writes them.
    let recs = records(&out);
    let ids: Vec<_> = recs.iter().map(|r| r["id"].clone()).collect();
    assert_eq!(ids, ["s0", "s1", "s2"]);
    assert_eq!(
        recs[1]["candidates"][1],
        "Findings: Lungs clear. Impression: Normal 1001."
    );
    assert!(recs
        .iter()
        .all(|r| r["finish"] == serde_json::json!(["stop", "stop"])));
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "only the studies and the output: {names:?}");
}

#[test]
fn failure_lines_stand_in_order_among_the_progress_lines_of_a_log() {
    let dir = tempfile::tempdir().unwrap();
    let studies = studies(dir.path(), 3);
    let out = dir.path().join("g.jsonl");
    let server = s1_breaks_off(&Arc::new(AtomicBool::new(false)));
    // stderr is a pipe: progress comes as lines, here one per study.
    let o = command(&server, &studies, &out)
        .args(["--progress-every", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    let want = [
        "generating: 1/3 studies",
        "generate: study s1: candidate 1 failed: stream closed before a finish_reason",
        "generating: 2/3 studies",
        "generating: 3/3 studies",
        "generate: 2 studies x 2 candidates",
        "sdr: error: 1 candidate failed in 1 study",
    ];
    assert_eq!(lines.len(), want.len(), "{err}");
    for (line, want) in lines.iter().zip(want) {
        assert!(line.starts_with(want), "{line:?} is not {want:?}:\n{err}");
    }
}

/// `text` with its ANSI escape sequences (ESC [ ... final byte) taken out.
fn strip_ansi(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn failure_lines_on_a_terminal_do_not_land_on_the_progress_bar() {
    // A terminal for stderr: util-linux `script` runs the command on a
    // pseudo-terminal and copies what it shows to its stdout.
    let have_script = Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_script {
        eprintln!("skipped: no `script` (util-linux) for a pseudo-terminal");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let studies = studies(dir.path(), 3);
    let out = dir.path().join("g.jsonl");
    let server = s1_breaks_off(&Arc::new(AtomicBool::new(false)));
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let c = command(&server, &studies, &out);
    let line = std::iter::once(c.get_program())
        .chain(c.get_args())
        .map(|a| quote(a.to_str().unwrap()))
        .collect::<Vec<_>>()
        .join(" ");
    let o = Command::new("script")
        .args(["--quiet", "--return", "--command", &line, "/dev/null"])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{shown:?}");
    let failure = "generate: study s1: candidate 1 failed";
    let at = shown.find(failure).unwrap_or_else(|| panic!("{shown:?}"));
    // The bar was drawn (else this test shows nothing) ...
    assert!(shown[..at].contains("generating"), "{shown:?}");
    // ... and cleared before the line: nothing visible stands before it on
    // its line.
    let line_start = shown[..at].rfind(['\n', '\r']).map_or(0, |i| i + 1);
    let before = strip_ansi(&shown[line_start..at]);
    assert!(before.trim().is_empty(), "{before:?} in {shown:?}");
}

#[test]
fn a_closed_stderr_is_no_panic() {
    // `sdr generate ... 2>&1 | head -1` once `head` has exited: every write
    // to stderr fails (EPIPE).
    let dir = tempfile::tempdir().unwrap();
    let studies = studies(dir.path(), 3);
    let out = dir.path().join("g.jsonl");
    let server = s1_breaks_off(&Arc::new(AtomicBool::new(false)));
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let status = command(&server, &studies, &out)
        .args(["--progress-every", "1"])
        .stderr(writer)
        .status()
        .unwrap();
    // The run's own failure (exit 1), not a panic (101) on its first line.
    assert_eq!(status.code(), Some(1));
    let partial = dir.path().join("g.jsonl.partial");
    let ids: Vec<_> = records(&partial).iter().map(|r| r["id"].clone()).collect();
    assert_eq!(ids, ["s0", "s2"]);
    // An argument error, before any work.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let status = Command::new(env!("CARGO_BIN_EXE_sdr"))
        .args(["generate", "--resume"])
        .stderr(writer)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(1));
}

#[test]
fn three_studies_failing_in_every_candidate_stop_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(|_| sse("data: {not json\n\n"));
    let out = dir.path().join("g.jsonl");
    let o = generate(&server, &studies(dir.path(), 5), &out, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains(
            "6 candidates failed in 3 studies (named above); stopped after 3 studies in a row"
        ),
        "{err}"
    );
    assert!(!err.contains("study s3"), "{err}");
    assert_eq!(server.requests.load(Ordering::SeqCst), 6);
}

#[test]
fn a_whole_json_answer_is_a_candidate() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(|seed| {
        let answer = serde_json::json!({
            "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "stop", "message":
                {"role": "assistant", "content": format!("Findings: Lungs clear. Impression: Normal {seed}.")}}],
        });
        Answer::Body("application/json", answer.to_string())
    });
    let out = dir.path().join("g.jsonl");
    let o = generate(&server, &studies(dir.path(), 1), &out, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = &records(&out)[0];
    assert_eq!(
        r["candidates"],
        serde_json::json!([
            "Findings: Lungs clear. Impression: Normal 0.",
            "Findings: Lungs clear. Impression: Normal 1."
        ])
    );
    assert_eq!(r["finish"], serde_json::json!(["stop", "stop"]));
    // Pseudo-tokens: words and punctuation, each with its end offset.
    assert_eq!(r["tokens"][0], 10);
    assert_eq!(r["token_ends"][0].as_array().unwrap().len(), 10);
}

#[test]
fn resume_refuses_a_record_with_a_failed_candidate() {
    // Written by a version that stored failed candidates as empty reports.
    let dir = tempfile::tempdir().unwrap();
    let studies = studies(dir.path(), 2);
    let out = dir.path().join("g.jsonl");
    let server = Server::start(good);
    let rec = serde_json::json!({
        "id": "s0", "backend": format!("openai:default@{}", server.base), "prompt": "p2",
        "context": null, "seed": 0, "candidates": ["", ""], "tokens": [0, 0],
        "finish": [{"error": "stream closed before a finish_reason"}, "stop"],
        "token_ends": [[], []], "sentence_tokens": [[], []], "seconds": 0.0,
    });
    let partial = dir.path().join("g.jsonl.partial");
    std::fs::write(&partial, format!("{rec}\n")).unwrap();
    let o = generate(&server, &studies, &out, &["--resume"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("g.jsonl.partial:1: study s0 holds failed candidate 0"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert_eq!(server.requests.load(Ordering::SeqCst), 0);
}

#[test]
fn argument_and_output_errors_come_first_and_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let studies = studies(dir.path(), 1);
    let server = Server::start(good);
    let out = dir.path().join("g.jsonl");
    // As `generate`, without its -k.
    let run = |dest: &Path, args: &[&str]| {
        server
            .sdr("generate")
            .args(["--quiet", "--studies"])
            .arg(&studies)
            .arg("-o")
            .arg(dest)
            .args(args)
            .output()
            .unwrap()
    };
    for (args, want) in [
        (&["-k", "0"][..], "-k 0: must be at least 1"),
        (
            &["-k", "99999999"],
            "-k 99999999: at most 1024 candidates per study",
        ),
        (&["--temperature=-1"], "--temperature -1: must be finite"),
        (
            &["--temperature", "NaN"],
            "--temperature NaN: must be finite",
        ),
        (&["--top-p", "2"], "--top-p 2: must be in (0, 1]"),
        (&["--top-p", "0"], "--top-p 0: must be in (0, 1]"),
        (
            &["--repetition-penalty", "0"],
            "--repetition-penalty 0: must be",
        ),
        (&["--max-tokens", "0"], "--max-tokens 0: must be at least 1"),
    ] {
        let o = run(&out, args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    // No FILE.partial: the corrected run starts without --resume.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["studies.jsonl"]);
    // An output that cannot be written is refused before any study is generated.
    let folder = dir.path().join("adir");
    std::fs::create_dir(&folder).unwrap();
    for (dest, want) in [
        (folder.clone(), "adir: is a folder, not a file"),
        (dir.path().join("nope/g.jsonl"), "does not exist"),
        (studies.clone(), "is also the input"),
    ] {
        let o = run(&dest, &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("--output") && err.contains(want), "{err}");
    }
    assert_eq!(server.requests.load(Ordering::SeqCst), 0);
    assert!(!dir.path().join("adir.partial").exists());
    // A default --studies missing from the current folder is named as such.
    let o = server
        .sdr("generate")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err.trim_end(),
        "sdr: error: --studies (default data/iu-xray/indiana_reports.csv, relative to the \
         current folder): not found; pass --studies FILE"
    );
}

#[test]
fn a_signal_during_a_run_keeps_the_finished_studies_for_resume() {
    // Study s0 answers; study s1's candidates wait 10 s for a first token.
    let server = Server::start(|seed| {
        if seed < 1000 {
            good(seed)
        } else {
            Answer::Quiet
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("g.jsonl");
    let child = server
        .sdr("generate")
        .args(["-k", "2", "--retries", "0", "--timeout", "60", "--quiet"])
        .arg("--studies")
        .arg(studies(dir.path(), 2))
        .arg("-o")
        .arg(&out)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let partial = dir.path().join("g.jsonl.partial");
    let o = stop_after_first_record(child, &partial, "INT");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    let lines: Vec<&str> = err.trim_end().lines().collect();
    assert_eq!(lines[0], "sdr: stopped by SIGINT", "{err}");
    assert!(
        lines[1].ends_with(
            "g.jsonl.partial keeps the records written so far: rerun with --resume to go on"
        ),
        "{err}"
    );
    assert_eq!(records(&partial).len(), 1);
    assert!(!out.exists());
}

/// A studies file that `select` and `eval` would refuse later is refused
/// before any request: a repeated study, an id that is neither string nor
/// number.
#[test]
fn repeated_or_odd_study_ids_are_refused_before_generating() {
    let server = Server::start(good);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("g.jsonl");
    let cases = [
        (
            "{\"id\": \"a\"}\n{\"id\": \"b\"}\n{\"id\": \"a\"}\n",
            "studies.jsonl: study a occurs more than once",
        ),
        (
            "{\"id\": \"a\"}\n{\"id\": [1]}\n",
            "studies.jsonl:2: \"id\" must be a string or a number, got [1]",
        ),
    ];
    for (text, want) in cases {
        let studies = dir.path().join("studies.jsonl");
        std::fs::write(&studies, text).unwrap();
        let o = generate(&server, &studies, &out, &[]);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.trim_end().ends_with(want), "{err}");
        assert!(!out.exists());
    }
    assert_eq!(server.requests.load(Ordering::SeqCst), 0);
}
