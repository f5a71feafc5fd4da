//! Live `sdr prune -o FILE` keeps each finished study in `FILE.partial`, so
//! that a run stopped by a signal continues with `--resume` to the output and
//! the summary of an uninterrupted run. The back-end is a thread on
//! 127.0.0.1 that speaks the OpenAI streaming API, the corpus is built with
//! the hash stand-in encoder: no model is needed.

mod cli;
mod fake_openai;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use cli::build_corpus;
use fake_openai::{stop_after_first_record, word_stream, Answer, Server};

const K: u64 = 4;

/// Candidate texts; candidate `i` of study `s` streams `TEXTS[(i + s) % 4]`.
const TEXTS: [&str; 4] = [
    "Findings: Heart size normal. Lungs are clear. Impression: No acute disease.",
    "Findings: Large left pleural effusion. Heart size normal. Impression: Left effusion.",
    "Findings: Right lower lobe opacity. Impression: Pneumonia.",
    "Findings: Lungs are clear. No pneumothorax. Impression: No acute disease.",
];

/// A server on 127.0.0.1 that streams `TEXTS` a word per chunk, except for
/// study s1 while the flag is set: its candidates get event-stream headers,
/// then nothing for 10 s.
fn start_server() -> (Server, Arc<AtomicBool>) {
    let hang = Arc::new(AtomicBool::new(false));
    let hangs = Arc::clone(&hang);
    let server = Server::start(move |seed| {
        let (study, candidate) = (seed / 1000, seed % 1000);
        if study == 1 && hangs.load(Ordering::SeqCst) {
            Answer::Quiet
        } else {
            word_stream(TEXTS[((candidate + study) % K) as usize])
        }
    });
    (server, hang)
}

const CSV: &str = "uid,indication,findings,impression\n\
2,Cough.,\"Heart size normal. Lungs are clear.\",No acute disease.\n\
3,Dyspnea.,\"Large left pleural effusion. Heart size normal.\",Left effusion.\n\
4,Pain.,Lungs are clear. No pneumothorax.,No acute disease.\n\
20,Fever.,Right lower lobe opacity.,Pneumonia.\n";

fn sdr() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sdr"))
}

fn ok(o: Output) -> Output {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o
}

/// A test's files: three studies, a hash-32 corpus, and the full candidates
/// of the studies (`sdr generate`, for `--full`).
struct Setup {
    dir: tempfile::TempDir,
    server: Server,
    /// Makes study s1 hang on the server while set.
    hang: Arc<AtomicBool>,
    studies: PathBuf,
    corpus: PathBuf,
    gen: PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("r.csv");
    std::fs::write(&csv, CSV).unwrap();
    let corpus = dir.path().join("c.safetensors");
    build_corpus(&csv, &corpus, &["--split", "all", "--encoder", "hash-32"]);
    let studies = dir.path().join("studies.jsonl");
    std::fs::write(
        &studies,
        "{\"id\": \"s0\"}\n{\"id\": \"s1\"}\n{\"id\": \"s2\"}\n",
    )
    .unwrap();
    let (server, hang) = start_server();
    let gen = dir.path().join("gen.jsonl");
    ok(server
        .sdr("generate")
        .args([
            "-k",
            &K.to_string(),
            "--retries",
            "0",
            "--quiet",
            "--studies",
        ])
        .arg(&studies)
        .arg("-o")
        .arg(&gen)
        .output()
        .unwrap());
    Setup {
        dir,
        server,
        hang,
        studies,
        corpus,
        gen,
    }
}

impl Setup {
    /// Live `sdr prune` of the studies into `out`, with progress and summary.
    fn prune(&self, out: &Path) -> Command {
        self.prune_over(out, &self.corpus, "hash-32")
    }

    /// [`Setup::prune`] over another corpus, built with `encoder`.
    fn prune_over(&self, out: &Path, corpus: &Path, encoder: &str) -> Command {
        let mut c = self.server.sdr("prune");
        c.args(["-k", &K.to_string(), "--retries", "0", "--timeout", "60"])
            .args(["--encoder", encoder, "--corpus"])
            .arg(corpus)
            .arg("--full")
            .arg(&self.gen)
            .arg("--studies")
            .arg(&self.studies)
            .arg("-o")
            .arg(out);
        c
    }

    /// A run into `out` stopped by SIGTERM once study s0 is in
    /// `out.partial` (s1 hangs on the server); the path of `out.partial`.
    fn stopped_run(&self, out: &Path) -> PathBuf {
        self.hang.store(true, Ordering::SeqCst);
        let child = self
            .prune(out)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let partial = PathBuf::from(format!("{}.partial", out.display()));
        let o = stop_after_first_record(child, &partial, "TERM");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(143), "{err}");
        assert!(err.contains("sdr: stopped by SIGTERM"), "{err}");
        assert!(
            err.contains(".partial keeps the records written so far: rerun with --resume to go on"),
            "{err}"
        );
        self.hang.store(false, Ordering::SeqCst);
        partial
    }
}

/// The records of a file, without what depends on time: `seconds`, and
/// `tokens_produced` (what a server streamed before a cancellation landed).
fn records(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            let m = v.as_object_mut().unwrap();
            m.remove("seconds").expect("seconds");
            m.remove("tokens_produced").expect("tokens_produced");
            v
        })
        .collect()
}

/// The summary line of a run's stderr, its seconds left out.
fn summary(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr);
    let line = err
        .lines()
        .find(|l| l.starts_with("prune: "))
        .unwrap_or_else(|| panic!("no summary line in {err}"));
    let (head, tail) = line.rsplit_once(" (").unwrap();
    let (_, policy) = tail.split_once(" s, ").unwrap();
    format!("{head} ({policy}")
}

#[test]
fn a_stopped_live_prune_resumes_to_the_output_and_summary_of_an_uninterrupted_run() {
    let t = setup();
    let out = t.dir.path().join("prune.jsonl");
    let before = t.server.requests.load(Ordering::SeqCst);
    let partial = t.stopped_run(&out);
    assert!(!out.exists());
    let kept = records(&partial);
    assert_eq!(kept.len(), 1, "s0 is kept");
    assert_eq!(kept[0]["id"], "s0");

    // Resumed against a server that answers: s1 and s2 only.
    let stopped = t.server.requests.load(Ordering::SeqCst);
    assert_eq!(stopped - before, 2 * K as usize, "s0, then s1 hanging");
    let resumed = ok(t.prune(&out).arg("--resume").output().unwrap());
    let err = String::from_utf8_lossy(&resumed.stderr);
    assert!(
        err.contains("resume: 1 of 3 studies already pruned"),
        "{err}"
    );
    assert_eq!(
        t.server.requests.load(Ordering::SeqCst) - stopped,
        2 * K as usize,
        "s0 is not generated again"
    );
    assert!(!partial.exists());

    let whole = t.dir.path().join("whole.jsonl");
    let uninterrupted = ok(t.prune(&whole).output().unwrap());
    let want = records(&whole);
    let ids: Vec<_> = want.iter().map(|r| r["id"].clone()).collect();
    assert_eq!(ids, ["s0", "s1", "s2"]);
    assert!(
        want.iter().all(|r| r["tokens_full"].as_u64().unwrap() > 0),
        "--full gives the saving"
    );
    assert_eq!(records(&out), want);
    assert_eq!(summary(&resumed), summary(&uninterrupted));
    assert!(
        summary(&uninterrupted).starts_with("prune: 3 studies, "),
        "{}",
        summary(&uninterrupted)
    );
    assert!(summary(&uninterrupted).contains("% saved"));
}

#[test]
fn resume_with_another_setting_is_refused_naming_it() {
    let t = setup();
    let out = t.dir.path().join("prune.jsonl");
    let partial = t.stopped_run(&out);
    let before = std::fs::read(&partial).unwrap();
    let requests = t.server.requests.load(Ordering::SeqCst);
    for (extra, want) in [
        (
            &["--warmup", "2"][..],
            "prune.jsonl.partial:1: study s0 was pruned with --warmup 1, this run has 2; \
             resume with the same settings",
        ),
        (
            &["--fraction", "0.25"],
            "with --fraction 0.5, this run has 0.25",
        ),
        (
            &["--agg", "avg"],
            "with --metric/--agg chamfer@min, this run has chamfer@avg",
        ),
        (
            &["--temperature", "0.2"],
            "with --temperature 0.7, this run has 0.2",
        ),
        (&["--seed", "5"], "with seed 0, this run has 5"),
    ] {
        let o = t.prune(&out).arg("--resume").args(extra).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{extra:?}: {err}");
        assert!(err.contains(want), "{extra:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    // Another corpus: the same reports, another encoder dimension.
    let other = t.dir.path().join("other.safetensors");
    build_corpus(
        &t.dir.path().join("r.csv"),
        &other,
        &["--split", "all", "--encoder", "hash-16"],
    );
    let o = t
        .prune_over(&out, &other, "hash-16")
        .arg("--resume")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("study s0 was pruned with --corpus (sha256) "),
        "{err}"
    );
    // Nothing was generated, and the kept records are as they were.
    assert_eq!(t.server.requests.load(Ordering::SeqCst), requests);
    assert_eq!(std::fs::read(&partial).unwrap(), before);
    assert!(!out.exists());
}

#[test]
fn a_left_over_partial_file_is_refused_without_resume() {
    let t = setup();
    let out = t.dir.path().join("prune.jsonl");
    let partial = t.dir.path().join("prune.jsonl.partial");
    let kept = "{\"id\": \"s0\"}\n";
    std::fs::write(&partial, kept).unwrap();
    let requests = t.server.requests.load(Ordering::SeqCst);
    let o = t.prune(&out).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("prune.jsonl.partial is left from a stopped run: pass --resume"),
        "{err}"
    );
    assert_eq!(t.server.requests.load(Ordering::SeqCst), requests);
    assert_eq!(std::fs::read_to_string(&partial).unwrap(), kept);
    assert!(!out.exists());
    // Replay writes its output at once and has nothing to resume.
    let o = sdr()
        .args(["prune", "--encoder", "hash-32", "--quiet", "--corpus"])
        .arg(&t.corpus)
        .arg("--replay")
        .arg(&t.gen)
        .arg("-o")
        .arg(&out)
        .arg("--resume")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("--resume continues a live run"), "{err}");
    // Nor does it read the live run's options: given, they are refused
    // rather than silently unused.
    for live in [
        &["-k", "4"][..],
        &["--limit", "3"],
        &["--temperature", "0.7"],
        &["--full"],
    ] {
        let mut cmd = sdr();
        cmd.args(["prune", "--encoder", "hash-32", "--quiet", "--corpus"])
            .arg(&t.corpus)
            .arg("--replay")
            .arg(&t.gen)
            .args(live);
        if live[0] == "--full" {
            cmd.arg(&t.gen);
        }
        let o = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{live:?}: {err}");
        assert!(err.contains("cannot be used with"), "{live:?}: {err}");
    }
}
