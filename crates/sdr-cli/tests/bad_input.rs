//! Bad input across commands, with the hash stand-in encoders (no model): an
//! output that would replace an input or another output, conflicting or
//! meaningless options, a corpus of another dimension or a folder, a byte-order
//! mark, repeated studies. Each is one line on stderr (or one warning line),
//! and nothing is lost.

mod cli;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use cli::{build_corpus, sdr, stderr, tiny_study};

/// The one-line error of a command that must fail with exit 1.
fn one_line_error(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(1), "{}", stderr(o));
    let e = stderr(o).trim_end().to_string();
    assert_eq!(e.lines().count(), 1, "{e}");
    e
}

fn run(c: &mut Command) -> Output {
    c.stdin(Stdio::null()).output().unwrap()
}

/// `name` in `dir` with `text`.
fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A hash-8 corpus of `tiny_study`'s two reports, and its candidates file.
fn corpus(dir: &Path) -> (PathBuf, PathBuf) {
    let (csv, cands) = tiny_study(dir);
    let corpus = dir.join("c.safetensors");
    build_corpus(&csv, &corpus, &["--encoder", "hash-8"]);
    (corpus, cands)
}

#[test]
fn an_output_that_is_an_input_is_refused_and_the_input_kept() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (corpus, cands) = corpus(d);
    let pairs = write(d, "pairs.jsonl", "{\"a\": [[1, 0]], \"b\": [[1, 1]]}\n");
    let link = d.join("link.jsonl");
    std::fs::hard_link(&pairs, &link).unwrap();
    let texts = write(d, "texts.jsonl", "{\"text\": \"Findings: Edema.\"}\n");
    let explain = write(
        d,
        "explain.jsonl",
        "{\"candidate\": \"Findings: A. Impression: B.\", \"reference\": \"Findings: A. Impression: B.\"}\n",
    );
    let scores = write(d, "score.jsonl", "{\"hyp\": \"a\", \"ref\": \"a\"}\n");
    let sentences = write(d, "sentences.txt", "The lungs are clear.\n");
    let refs = write(d, "refs.csv", "uid,findings,impression\na,F.,I.\n");
    let hash = ["--encoder", "hash-8", "--quiet"];
    let cases: Vec<(Vec<&Path>, Command)> = {
        let mut v = Vec::new();
        let mut c = sdr();
        c.arg("distances").arg(&pairs).arg("-o").arg(&pairs);
        v.push((vec![pairs.as_path()], c));
        // A hard link is the same file under another name.
        let mut c = sdr();
        c.arg("distances").arg(&pairs).arg("-o").arg(&link);
        v.push((vec![pairs.as_path()], c));
        let mut c = sdr();
        c.arg("parse").arg(&texts).arg("-o").arg(&texts);
        v.push((vec![texts.as_path()], c));
        let mut c = sdr();
        c.arg("label").arg(&texts).arg("-o").arg(&texts);
        v.push((vec![texts.as_path()], c));
        let mut c = sdr();
        c.arg("embed").arg(&sentences).arg("-o").arg(&sentences);
        v.push((vec![sentences.as_path()], c));
        let mut c = sdr();
        c.arg("select").args(hash).arg("--corpus").arg(&corpus);
        c.arg(&cands).arg("-o").arg(&cands);
        v.push((vec![cands.as_path()], c));
        let mut c = sdr();
        c.arg("select").args(hash).arg("--corpus").arg(&corpus);
        c.arg(&cands).arg("-o").arg(&corpus);
        v.push((vec![corpus.as_path()], c));
        let mut c = sdr();
        c.args(["prune", "--encoder", "hash-8", "--quiet", "--corpus"])
            .arg(&corpus)
            .arg("--replay")
            .arg(&cands)
            .arg("-o")
            .arg(&cands);
        v.push((vec![cands.as_path()], c));
        let mut c = sdr();
        c.args(["explain", "--encoder", "hash-8"])
            .arg(&explain)
            .arg("-o")
            .arg(&explain);
        v.push((vec![explain.as_path()], c));
        let mut c = sdr();
        c.args(["score", "--no-bertscore"])
            .arg(&scores)
            .arg("--summary")
            .arg(&scores);
        v.push((vec![scores.as_path()], c));
        // The table's full-precision CSV goes beside it: refs.md -> refs.csv.
        let mut c = sdr();
        c.args(["eval", "--no-bertscore", "--references"])
            .arg(&refs)
            .arg("--candidates")
            .arg(&cands)
            .arg("-o")
            .arg(d.join("refs.md"));
        v.push((vec![refs.as_path()], c));
        v
    };
    for (inputs, mut c) in cases {
        let before: Vec<Vec<u8>> = inputs.iter().map(|p| std::fs::read(p).unwrap()).collect();
        let e = one_line_error(&run(&mut c));
        assert!(
            e.contains(": is also the input ") && e.contains("write the output to another file"),
            "{c:?}: {e}"
        );
        for (p, b) in inputs.iter().zip(before) {
            assert_eq!(
                std::fs::read(p).unwrap(),
                b,
                "{c:?} changed {}",
                p.display()
            );
        }
    }
    // Standard input redirected from the output file.
    let e = one_line_error(
        &sdr()
            .arg("distances")
            .arg("-o")
            .arg(&pairs)
            .stdin(std::fs::File::open(&pairs).unwrap())
            .output()
            .unwrap(),
    );
    assert!(e.contains("is also the input <stdin>"), "{e}");
}

#[test]
fn two_outputs_of_one_command_must_differ() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let explain = write(
        d,
        "explain.jsonl",
        "{\"candidate\": \"Findings: A. Impression: B.\", \"reference\": \"Findings: A. Impression: B.\"}\n",
    );
    let out = d.join("same");
    let e = one_line_error(&run(sdr()
        .args(["explain", "--encoder", "hash-8"])
        .arg(&explain)
        .arg("--html")
        .arg(&out)
        .arg("-o")
        .arg(&out)));
    assert!(
        e.contains("--html")
            && e.ends_with("is also the --output file; write each output to its own file"),
        "{e}"
    );
    let scores = write(d, "score.jsonl", "{\"hyp\": \"a\", \"ref\": \"a\"}\n");
    let e = one_line_error(&run(sdr()
        .args(["score", "--no-bertscore"])
        .arg(&scores)
        .arg("-o")
        .arg(&out)
        .arg("--summary")
        .arg(d.join(".").join("same"))));
    assert!(
        e.contains("--summary") && e.contains("is also the --output file"),
        "{e}"
    );
    assert!(!out.exists());
}

#[test]
fn select_refuses_a_repeated_study_and_ignored_options() {
    let dir = tempfile::tempdir().unwrap();
    let (corpus, cands) = corpus(dir.path());
    let text = std::fs::read_to_string(&cands).unwrap();
    let twice = write(dir.path(), "twice.jsonl", &format!("{text}\n{text}"));
    let select = || {
        let mut c = sdr();
        c.args(["select", "--encoder", "hash-8", "--quiet", "--corpus"])
            .arg(&corpus);
        c
    };
    let e = one_line_error(&run(select().arg(&twice)));
    assert!(
        e.contains("twice.jsonl:3: study a again (first at ") && e.ends_with("twice.jsonl:1)"),
        "{e}"
    );
    // Options that the mode ignores are clap's usage errors (exit 2).
    for extra in [
        &["--all-policies", "-m", "ot"][..],
        &["--all-policies", "--agg", "avg"],
        &["--consensus", "--agg", "knn:k=3"],
    ] {
        let o = run(select().args(extra).arg(&cands));
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
    }
    // A knn over more reports than the corpus has: a warning, and the run goes on;
    // --quiet drops it.
    let o = run(select().args(["--agg", "knn:k=1000"]).arg(&cands));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o), "", "--quiet");
    let mut loud = sdr();
    loud.args(["select", "--encoder", "hash-8", "--corpus"])
        .arg(&corpus);
    let o = run(loud.args(["--agg", "knn:k=1000"]).arg(&cands));
    assert!(o.status.success(), "{}", stderr(&o));
    let warning: Vec<_> = stderr(&o)
        .lines()
        .filter(|l| l.contains("knn:k=1000"))
        .map(String::from)
        .collect();
    assert_eq!(warning.len(), 1, "{}", stderr(&o));
    assert!(
        warning[0].starts_with("sdr select: warning: ")
            && warning[0].contains("2 reports with findings"),
        "{}",
        warning[0]
    );
    // --cache-dir that is not a folder, with a stand-in encoder too.
    let e = one_line_error(&run(select().arg("--cache-dir").arg(&cands).arg(&cands)));
    assert!(
        e.contains("--cache-dir") && e.contains("not a folder"),
        "{e}"
    );
}

#[test]
fn a_corpus_of_another_dimension_or_a_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (corpus, cands) = corpus(dir.path());
    // The header says hash-9, with its metadata checksum made to match (same
    // lengths, so the file stays valid); the vectors are 8-d.
    let bytes = std::fs::read(&corpus).unwrap();
    let replace = |bytes: &mut Vec<u8>, old: &[u8], new: &[u8]| {
        let at = bytes.windows(old.len()).position(|w| w == old).unwrap();
        bytes[at..at + old.len()].copy_from_slice(new);
    };
    let mut edited = bytes.clone();
    replace(&mut edited, b"sdr-hash-bow-8", b"sdr-hash-bow-9");
    let header_len = u64::from_le_bytes(edited[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&edited[8..8 + header_len]).unwrap();
    let meta: std::collections::HashMap<String, String> =
        serde_json::from_value(header["__metadata__"].clone()).unwrap();
    let old_sum = meta[sdr_corpus::store::META_SHA256].clone();
    let new_sum = sdr_corpus::store::meta_hash(&meta);
    replace(&mut edited, old_sum.as_bytes(), new_sum.as_bytes());
    let lying = dir.path().join("lying.safetensors");
    std::fs::write(&lying, edited).unwrap();
    let e = one_line_error(&run(sdr()
        .args(["select", "--encoder", "hash-9", "--quiet", "--corpus"])
        .arg(&lying)
        .arg(&cands)));
    assert!(
        e.contains("lying.safetensors")
            && e.contains("8-dimensional")
            && e.contains("9-dimensional"),
        "{e}"
    );
    let e = one_line_error(&run(sdr().args(["corpus", "info"]).arg(dir.path())));
    assert!(e.contains("a folder, not a corpus file"), "{e}");
    let e = one_line_error(&run(sdr()
        .args(["select", "--encoder", "hash-8", "--corpus"])
        .arg(dir.path())
        .arg(&cands)));
    assert!(e.contains("a folder, not a corpus file"), "{e}");
}

#[test]
fn a_byte_order_mark_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let pairs = write(
        dir.path(),
        "bom.jsonl",
        "\u{feff}{\"a\": [[1, 0]], \"b\": [[1, 0]]}\n",
    );
    let o = run(sdr().args(["distances", "-m", "chamfer"]).arg(&pairs));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "{\"chamfer\": 0.0}\n");
    // A file read whole (a replay) too.
    let (corpus, cands) = corpus(dir.path());
    let text = std::fs::read_to_string(&cands).unwrap();
    let bom = write(dir.path(), "bom_cands.jsonl", &format!("\u{feff}{text}"));
    let o = run(sdr()
        .args(["prune", "--encoder", "hash-8", "--quiet", "--corpus"])
        .arg(&corpus)
        .arg("--replay")
        .arg(&bom));
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn unclear_messages_name_the_option() {
    let dir = tempfile::tempdir().unwrap();
    let (corpus, cands) = corpus(dir.path());
    let file = dir.path().join("c.safetensors");
    // --model that is a file, before anything is read.
    for cmd in [&["embed"][..], &["select", "--corpus"]] {
        let e = one_line_error(&run(sdr().args(cmd).arg(&corpus).arg("--model").arg(&file)));
        assert!(
            e.contains(&format!(
                "--model {}: is a file, not a model folder",
                file.display()
            )),
            "{cmd:?}: {e}"
        );
    }
    // Each pruning setting names its own option.
    for (flag, value) in [("-p", "2"), ("--warmup", "0"), ("--survivors", "0")] {
        let e = one_line_error(&run(sdr()
            .args(["prune", "--encoder", "hash-8", "--corpus"])
            .arg(&corpus)
            .arg("--replay")
            .arg(&cands)
            .args([flag, value])));
        let name = if flag == "-p" { "--fraction" } else { flag };
        assert!(
            e.starts_with(&format!("sdr: error: {name} {value}: must be")),
            "{e}"
        );
    }
}

#[test]
fn score_whole_refuses_an_empty_reference() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(
        dir.path(),
        "s.jsonl",
        "{\"hyp\": \"x\", \"ref\": \"y\"}\n{\"hyp\": \"\", \"ref\": \" \\n\"}\n",
    );
    let e = one_line_error(&run(sdr()
        .args(["score", "--whole", "--no-bertscore"])
        .arg(&input)));
    assert!(
        e.ends_with("s.jsonl:2: the reference (\"ref\") is empty"),
        "{e}"
    );
}

#[test]
fn a_sample_larger_than_the_reports_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, _) = tiny_study(dir.path());
    let out = dir.path().join("c.safetensors");
    let err = build_corpus(&csv, &out, &["--encoder", "hash-8", "--sample", "1000"]);
    let warning: Vec<&str> = err.lines().filter(|l| l.contains("--sample")).collect();
    assert_eq!(warning.len(), 1, "{err}");
    assert!(
        warning[0].contains("warning: --sample 1000: only 2 reports"),
        "{err}"
    );
}

#[test]
fn negative_numbers_reach_the_range_checks() {
    // clap would take `-0.1` for an unknown flag; the options' own checks say
    // what the range is.
    let line = r#"{"id":"x","candidate":"<think>A.</think><answer>B.</answer>","reference":"Findings: A.\nImpression: B."}"#;
    let mut explain = sdr();
    explain.args(["explain", "--threshold", "-0.1", "--encoder", "hash-16"]);
    let out = explain
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(line.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    let e = one_line_error(&out);
    assert!(e.contains("threshold -0.1 is outside [0, 1]"), "{e}");
    let e = one_line_error(&run(sdr().args([
        "serve",
        "--exact",
        "--format-weight",
        "-1",
    ])));
    assert!(
        e.contains("--format-weight -1: must be a finite number >= 0"),
        "{e}"
    );
}
