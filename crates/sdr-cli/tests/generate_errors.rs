//! `sdr generate --backend openai` against a server that answers, but wrongly:
//! a failed candidate is an error on stderr and a non-zero exit, never an
//! empty report in the output, and `--resume` generates its study again. The
//! server is a thread on 127.0.0.1 that answers each request with canned bytes.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the server does with one request.
enum Answer {
    /// These bytes after `HTTP/1.1 200 OK` headers with this Content-Type.
    Body(&'static str, String),
    /// Event-stream headers, then nothing for 10 s.
    Quiet,
}

/// A server on 127.0.0.1; `answer(seed)` decides each request (the seed
/// names study and candidate: `1000 * study + candidate`). Its thread ends
/// with the test process.
struct Server {
    base: String,
    requests: Arc<AtomicUsize>,
}

impl Server {
    fn start(answer: impl Fn(u64) -> Answer + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        let requests = Arc::new(AtomicUsize::new(0));
        let (answer, count) = (Arc::new(answer), Arc::clone(&requests));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let (answer, count) = (Arc::clone(&answer), Arc::clone(&count));
                std::thread::spawn(move || serve(conn, &*answer, &count));
            }
        });
        Server { base, requests }
    }
}

/// Reads one request and answers it, then closes the connection.
fn serve(mut conn: TcpStream, answer: &dyn Fn(u64) -> Answer, count: &AtomicUsize) {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    let (head_end, len) = loop {
        let Ok(n) = conn.read(&mut buf) else { return };
        if n == 0 {
            return;
        }
        data.extend_from_slice(&buf[..n]);
        if let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..at]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            break (at + 4, len);
        }
    };
    while data.len() < head_end + len {
        let Ok(n) = conn.read(&mut buf) else { return };
        if n == 0 {
            return;
        }
        data.extend_from_slice(&buf[..n]);
    }
    let body: serde_json::Value = serde_json::from_slice(&data[head_end..]).unwrap();
    count.fetch_add(1, Ordering::SeqCst);
    match answer(body["seed"].as_u64().unwrap()) {
        Answer::Body(content_type, body) => {
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
        }
        Answer::Quiet => {
            let _ = conn.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n",
            );
            std::thread::sleep(Duration::from_secs(10));
        }
    }
}

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

fn generate(server: &Server, studies: &Path, out: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sdr"))
        .args([
            "generate",
            "--backend",
            "openai",
            "--base-url",
            &server.base,
        ])
        .args(["-k", "2", "--retries", "0", "--timeout", "1", "--quiet"])
        .arg("--studies")
        .arg(studies)
        .arg("-o")
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
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
    // Study s1's candidate 1 breaks off mid-report until the server is
    // fixed; the others are fine.
    let fixed = Arc::new(AtomicBool::new(false));
    let is_fixed = Arc::clone(&fixed);
    let server = Server::start(move |seed| match seed {
        1001 if !is_fixed.load(Ordering::SeqCst) => sse(&format!(
            "data: {}\n\n",
            serde_json::json!({"choices": [{"index": 0, "delta": {"content": "Findings: Lungs"}}]})
        )),
        _ => good(seed),
    });
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
    let recs = records(&out);
    let ids: Vec<_> = recs.iter().map(|r| r["id"].clone()).collect();
    assert_eq!(ids, ["s0", "s2", "s1"]);
    assert_eq!(
        recs[2]["candidates"][1],
        "Findings: Lungs clear. Impression: Normal 1001."
    );
    assert!(recs
        .iter()
        .all(|r| r["finish"] == serde_json::json!(["stop", "stop"])));
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
