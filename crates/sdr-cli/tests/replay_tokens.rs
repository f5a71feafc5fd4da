//! `sdr prune --replay` checks each record's `token_ends` against the
//! candidate texts and against `tokens` (the checks of `sdr eval`), so that
//! a record that disagrees is a one-line error, never a wrong token saving;
//! every replay input the project ships still loads.

mod cli;

use std::path::{Path, PathBuf};

use cli::{build_corpus, sdr, stderr, tiny_study};
use serde_json::{json, Value};

fn shipped(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../data/candidates")
        .join(name)
}

/// A hash-8 corpus in `dir`.
fn corpus(dir: &Path) -> PathBuf {
    let (csv, _) = tiny_study(dir);
    let corpus = dir.join("c.safetensors");
    build_corpus(&csv, &corpus, &["--encoder", "hash-8"]);
    corpus
}

fn replay(corpus: &Path, input: &Path) -> std::process::Output {
    sdr()
        .args(["prune", "--encoder", "hash-8", "--quiet", "--corpus"])
        .arg(corpus)
        .arg("--replay")
        .arg(input)
        .output()
        .unwrap()
}

/// The one stderr line of a failed run.
fn one_line_error(o: &std::process::Output) -> String {
    let e = stderr(o);
    assert!(!o.status.success(), "succeeded: {e}");
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    assert!(!e.contains("panicked"), "{e}");
    e
}

/// The first study of a shipped `sdr generate` output (local back-end,
/// 8 candidates of 160 tokens each, 1280 in all).
fn generated() -> Value {
    let text = std::fs::read_to_string(shipped("iu-test-smollm2-k8-p2.jsonl")).unwrap();
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}

#[test]
fn replay_refuses_token_ends_that_disagree_with_the_text_or_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = corpus(dir.path());
    let bad = dir.path().join("bad.jsonl");
    let g = generated();
    let text_len = |i: usize| g["candidates"][i].as_str().unwrap().len();
    let ends0: Vec<u64> = g["token_ends"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();

    // The record as written replays with its own counts.
    std::fs::write(&bad, format!("{g}\n")).unwrap();
    let o = replay(&corpus, &bad);
    let lines = cli::json_lines(&o);
    assert_eq!(lines[0]["tokens_full"], 1280);
    assert_eq!(lines[0]["estimated_tokens"], false);

    let with = |edit: &dyn Fn(&mut Value)| {
        let mut v = g.clone();
        edit(&mut v);
        v
    };
    let cases: Vec<(Value, String)> = vec![
        // The reported case: 3 ends per candidate instead of 160.
        (
            with(&|v| v["token_ends"] = json!(vec![vec![1, 2, 3]; 8])),
            "bad.jsonl:1: candidate 0: token_ends has 3 offsets, but \"tokens\" says 160".into(),
        ),
        // The same without tokens: the ends stop short of the text.
        (
            with(&|v| {
                v["token_ends"] = json!(vec![vec![1, 2, 3]; 8]);
                v.as_object_mut().unwrap().remove("tokens");
            }),
            format!(
                "bad.jsonl:1: candidate 0: token_ends ends at byte 3, but the text has {} bytes",
                text_len(0)
            ),
        ),
        // Counts that agree, ends that do not reach the end of the text.
        (
            with(&|v| {
                v["token_ends"][0] = json!(ends0[..ends0.len() - 1]);
                v["tokens"][0] = json!(ends0.len() - 1);
            }),
            format!(
                "bad.jsonl:1: candidate 0: token_ends ends at byte {}, but the text has {} bytes",
                ends0[ends0.len() - 2],
                text_len(0)
            ),
        ),
        (
            with(&|v| {
                let mut r = ends0.clone();
                r.reverse();
                v["token_ends"][0] = json!(r);
            }),
            "bad.jsonl:1: candidate 0: token_ends decreases at index".into(),
        ),
        (
            with(&|v| {
                v["token_ends"][2] = json!([text_len(2) + 1]);
                v["tokens"][2] = json!(1);
            }),
            format!(
                "bad.jsonl:1: candidate 2: token_ends offset {} is past the end of the text",
                text_len(2) + 1
            ),
        ),
        (
            with(&|v| v["tokens"][1] = json!(-1)),
            "bad.jsonl:1: \"tokens[1]\" must be a non-negative integer, got -1".into(),
        ),
        (
            with(&|v| v["tokens"][1] = json!(159.5)),
            "bad.jsonl:1: \"tokens[1]\" must be a non-negative integer, got 159.5".into(),
        ),
        (
            with(&|v| v["tokens"][0] = json!(1e30)),
            "bad.jsonl:1: \"tokens[0]\" must be a non-negative integer, got 1e+30".into(),
        ),
        (
            with(&|v| v["tokens"][0] = json!("160")),
            "bad.jsonl:1: \"tokens[0]\" must be a non-negative integer".into(),
        ),
        (
            with(&|v| v["tokens"] = json!(vec![160; 7])),
            "bad.jsonl:1: \"tokens\" has 7 counts for 8 candidates".into(),
        ),
        (
            with(&|v| v["tokens"] = json!(vec![160; 9])),
            "bad.jsonl:1: \"tokens\" has 9 counts for 8 candidates".into(),
        ),
        (
            json!({"id": "x", "candidates": ["é"], "token_ends": [[1, 2]], "tokens": [2]}),
            "bad.jsonl:1: candidate 0: token_ends offset 1 splits a UTF-8 character".into(),
        ),
        (
            json!({"id": "x", "candidates": ["ab"], "token_ends": [[]], "tokens": [0]}),
            "bad.jsonl:1: candidate 0: token_ends is empty, but the text has 2 bytes".into(),
        ),
        // A server's stream: fewer ends than tokens is fine (next test), more is not.
        (
            json!({"id": "x", "backend": "openai:m@http://127.0.0.1:1/v1",
                   "candidates": ["ab"], "token_ends": [[1, 2, 2]], "tokens": [2]}),
            "bad.jsonl:1: candidate 0: token_ends has 3 offsets, more than its 2 tokens".into(),
        ),
    ];
    for (record, want) in cases {
        std::fs::write(&bad, format!("{record}\n")).unwrap();
        let e = one_line_error(&replay(&corpus, &bad));
        assert!(e.contains(&want), "want {want:?}, got {e}");
    }
}

#[test]
fn replay_loads_what_generate_writes() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = corpus(dir.path());
    let input = dir.path().join("gen.jsonl");
    // A stop token and the first bytes of a split character add no text
    // (repeated ends); an empty candidate may end with a stop token.
    let local = json!({"id": "1", "backend": "local:m.gguf",
        "candidates": ["Findings: é.", ""], "token_ends": [[9, 10, 10, 12, 13, 13], [0]],
        "tokens": [6, 1]});
    // An OpenAI-compatible server counts more tokens than its stream had chunks;
    // the last piece carries the difference.
    let openai = json!({"id": "2", "backend": "openai:m@http://127.0.0.1:1/v1",
        "candidates": ["Findings: a."], "token_ends": [[9, 12, 12]], "tokens": [7]});
    std::fs::write(&input, format!("{local}\n{openai}\n")).unwrap();
    let lines = cli::json_lines(&replay(&corpus, &input));
    assert_eq!(lines[0]["tokens_full"], 7);
    assert_eq!(lines.len(), 2);
    // Every replay input the project ships.
    for name in [
        "iu-test-smollm2-k8-p2.jsonl",
        "iu-test-smollm2-k8-p2-prefill-rp1.2.jsonl",
        "iu-test-gemma3-270m-k8-p2-prefill-rp1.2.jsonl",
        "iu-test-k5.jsonl",
    ] {
        let o = replay(&corpus, &shipped(name));
        assert!(o.status.success(), "{name}: {}", stderr(&o));
    }
}
