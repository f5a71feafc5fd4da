//! End to end: `sdr generate` (local GGUF back-end), `sdr prune --replay` and
//! live, and `sdr eval`, with the stand-in hash encoder for the corpus (the
//! GGUF comes from scripts/fetch-smollm2.sh, as in the test set-up).

use std::path::{Path, PathBuf};
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

fn gguf() -> PathBuf {
    let p = sdr_default_gguf();
    assert!(
        p.exists(),
        "{} is missing: run `bash scripts/fetch-smollm2.sh`",
        p.display()
    );
    p
}

fn sdr_default_gguf() -> PathBuf {
    std::env::var_os("SDR_GGUF")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(&std::env::var_os("HOME").unwrap())
                .join(".cache/sdr/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
        })
}

const CSV: &str = "uid,indication,findings,impression\n\
2,Cough.,\"Heart size normal. Lungs are clear.\",No acute disease.\n\
3,Dyspnea.,\"Large left pleural effusion. Heart size normal.\",Left effusion.\n\
4,Pain.,Lungs are clear. No pneumothorax.,No acute disease.\n\
10,Cough.,Heart size normal. No effusion.,Normal chest.\n\
20,Fever.,Right lower lobe opacity.,Pneumonia.\n";

fn corpus(dir: &Path) -> (PathBuf, PathBuf) {
    let csv = dir.join("r.csv");
    std::fs::write(&csv, CSV).unwrap();
    let corpus = dir.join("c.safetensors");
    ok(sdr()
        .args(["corpus", "build", "--format", "csv", "--split", "train"])
        .args(["--encoder", "hash-32", "--quiet", "--input"])
        .arg(&csv)
        .arg("--out")
        .arg(&corpus)
        .output()
        .unwrap());
    (csv, corpus)
}

#[test]
fn generate_then_prune_live_equals_replay_and_eval() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, corpus) = corpus(dir.path());
    let gen = dir.path().join("gen.jsonl");
    let common = |c: &mut Command| {
        c.arg("--studies")
            .arg(&csv)
            .args([
                "--split",
                "test",
                "-k",
                "4",
                "--max-tokens",
                "48",
                "--seed",
                "7",
            ])
            .args([
                "--prompt",
                "p2",
                "--context",
                "indication",
                "--quiet",
                "--gguf",
            ])
            .arg(gguf());
    };
    let mut g = sdr();
    g.arg("generate");
    common(&mut g);
    ok(g.arg("-o").arg(&gen).output().unwrap());
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&gen)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "studies 10 and 20 are the test split");
    for l in &lines {
        assert_eq!(l["candidates"].as_array().unwrap().len(), 4);
        for (i, t) in l["tokens"].as_array().unwrap().iter().enumerate() {
            let t = t.as_u64().unwrap();
            assert!((1..=48).contains(&t));
            assert_eq!(l["token_ends"][i].as_array().unwrap().len() as u64, t);
        }
        assert!(l["context"].as_str().unwrap().starts_with("Indication: "));
    }

    let replay = dir.path().join("replay.jsonl");
    ok(sdr()
        .args(["prune", "--encoder", "hash-32", "--quiet", "--corpus"])
        .arg(&corpus)
        .arg("--replay")
        .arg(&gen)
        .arg("-o")
        .arg(&replay)
        .output()
        .unwrap());
    let live = dir.path().join("live.jsonl");
    let mut p = sdr();
    p.args(["prune", "--encoder", "hash-32", "--corpus"])
        .arg(&corpus)
        .arg("--full")
        .arg(&gen);
    common(&mut p);
    ok(p.arg("-o").arg(&live).output().unwrap());
    let read = |p: &Path| -> Vec<serde_json::Value> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    // The local back-end is seeded per candidate and rows are independent of
    // the batch, so live pruning decodes exactly the prefixes the replay streams.
    for (r, l) in read(&replay).iter().zip(read(&live)) {
        assert_eq!(r["mode"], "replay");
        assert_eq!(l["mode"], "live");
        for key in [
            "chosen",
            "text",
            "tokens_used",
            "tokens_full",
            "candidate_tokens",
            "rounds",
        ] {
            assert_eq!(r[key], l[key], "{key}");
        }
        assert_eq!(r["estimated_tokens"], false);
        let used = r["tokens_used"].as_u64().unwrap();
        assert!(used <= r["tokens_full"].as_u64().unwrap());
    }

    let out = ok(sdr()
        .args(["eval", "--no-bertscore", "--references"])
        .arg(&csv)
        .arg("--candidates")
        .arg(&gen)
        .arg("--run")
        .arg(format!("standard={}#standard_text", replay.display()))
        .arg("--run")
        .arg(format!("pruning={}", replay.display()))
        .output()
        .unwrap());
    let md = String::from_utf8(out.stdout).unwrap();
    assert!(md.contains("| random |"), "{md}");
    assert!(
        md.contains("| standard |") && md.contains("| pruning |"),
        "{md}"
    );
}

#[test]
fn generate_resumes_a_stopped_run_and_logs_progress() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("r.csv");
    std::fs::write(&csv, CSV).unwrap();
    let run = |out: &Path, extra: &[&str]| {
        sdr()
            .arg("generate")
            .arg("--studies")
            .arg(&csv)
            .args([
                "--split",
                "all",
                "-k",
                "2",
                "--max-tokens",
                "6",
                "--seed",
                "3",
            ])
            .args(["--progress-every", "2", "--gguf"])
            .arg(gguf())
            .arg("-o")
            .arg(out)
            .args(extra)
            .output()
            .unwrap()
    };
    let full = dir.path().join("full.jsonl");
    let o = ok(run(&full, &[]));
    // stderr is a pipe here: progress comes as lines, every 2 studies and at the end.
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(log.contains("generating: 2/5 studies"), "{log}");
    assert!(log.contains("generating: 5/5 studies"), "{log}");
    let whole = std::fs::read_to_string(&full).unwrap();
    let records: Vec<&str> = whole.lines().collect();
    assert_eq!(records.len(), 5);

    // A run stopped after two studies, in the middle of writing the third.
    let out = dir.path().join("gen.jsonl");
    let partial = dir.path().join("gen.jsonl.partial");
    std::fs::write(
        &partial,
        format!("{}\n{}\n{}", records[0], records[1], &records[2][..40]),
    )
    .unwrap();
    let e = run(&out, &[]);
    assert!(!e.status.success());
    assert!(String::from_utf8_lossy(&e.stderr).contains("--resume"));
    // Other settings than the stopped run's are refused.
    let e = run(&out, &["--resume", "--prompt", "p1"]);
    let msg = String::from_utf8_lossy(&e.stderr);
    assert!(
        !e.status.success() && msg.contains("prompt p2, this run has p1"),
        "{msg}"
    );
    // So are other sampling settings and another context: one file, one configuration.
    for (extra, want) in [
        (
            &["--temperature", "1.5"][..],
            "--temperature 0.7, this run has 1.5",
        ),
        (&["--top-p", "0.5"][..], "--top-p 0.95, this run has 0.5"),
        (
            &["--repetition-penalty", "1.2"][..],
            "--repetition-penalty 1.0, this run has 1.2",
        ),
        (
            &["--prefill", "Findings:"][..],
            "--prefill none, this run has Findings:",
        ),
        (
            &["--context", "indication"][..],
            "context none, this run has Indication: Cough.",
        ),
    ] {
        let e = run(&out, &[&["--resume"][..], extra].concat());
        let msg = String::from_utf8_lossy(&e.stderr);
        assert!(
            !e.status.success() && msg.contains(want),
            "{extra:?}: {msg}"
        );
    }
    // A record written before the sampling settings were recorded: only K is checked.
    let old = |r: &str| {
        let mut v: serde_json::Value = serde_json::from_str(r).unwrap();
        assert!(v.as_object_mut().unwrap().remove("sampling").is_some());
        v.to_string()
    };
    let old_partial = dir.path().join("old.jsonl.partial");
    std::fs::write(&old_partial, format!("{}\n", old(records[0]))).unwrap();
    let o = ok(run(
        &dir.path().join("old.jsonl"),
        &["--resume", "--temperature", "1.5"],
    ));
    assert!(String::from_utf8_lossy(&o.stderr).contains("resume: 1 of 5"));

    let o = ok(run(&out, &["--resume"]));
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(
        log.contains("resume: 2 of 5 studies already generated"),
        "{log}"
    );
    assert!(log.contains("cut off by the stop"), "{log}");
    assert!(!partial.exists());
    // Same seeds, same studies: the resumed file has the bits of the full run,
    // timings aside.
    let strip = |t: &str| -> Vec<serde_json::Value> {
        t.lines()
            .map(|l| {
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                v.as_object_mut().unwrap().remove("seconds");
                v
            })
            .collect()
    };
    assert_eq!(
        strip(&std::fs::read_to_string(&out).unwrap()),
        strip(&whole)
    );
}

#[test]
fn bad_inputs_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, corpus) = corpus(dir.path());
    let bad = dir.path().join("bad.jsonl");
    for (content, want) in [
        (
            "{\"id\": 1, \"candidates\": [\"a\"]\n",
            "bad.jsonl:1: invalid JSON",
        ),
        (
            "{\"id\": 1, \"candidates\": [\"a\"], \"token_ends\": [[1], [2]]}\n",
            "bad.jsonl:1: 2 token_ends lists for 1 candidates",
        ),
        (
            "{\"id\": 1, \"candidates\": [\"ab\"], \"token_ends\": [[5]]}\n",
            "bad.jsonl:1: candidate 0: token_ends",
        ),
    ] {
        std::fs::write(&bad, content).unwrap();
        let out = sdr()
            .args(["prune", "--encoder", "hash-32", "--quiet", "--corpus"])
            .arg(&corpus)
            .arg("--replay")
            .arg(&bad)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    let out = sdr()
        .args([
            "generate",
            "--limit",
            "1",
            "--gguf",
            "/nonexistent/m.gguf",
            "--studies",
        ])
        .arg(&csv)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("/nonexistent/m.gguf") && err.contains("fetch-smollm2"),
        "{err}"
    );
    let out = sdr()
        .args([
            "generate",
            "--backend",
            "openai",
            "--base-url",
            "http://127.0.0.1:9/v1",
        ])
        .args([
            "--limit",
            "1",
            "-k",
            "2",
            "--retries",
            "0",
            "--quiet",
            "--studies",
        ])
        .arg(&csv)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("127.0.0.1:9"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}
