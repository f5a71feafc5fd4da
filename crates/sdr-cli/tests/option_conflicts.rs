//! Options that a combination would ignore are refused: clap's usage error
//! (exit 2) naming both, or a one-line error, never a silent run.

mod cli;

use std::process::Output;

use cli::{sdr, stderr};

/// A usage error of clap that names `a` as unusable with `b`.
fn refused(o: &Output, a: &str, b: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cannot be used with") && err.contains(a) && err.contains(b),
        "{err}"
    );
}

#[test]
fn ignored_options_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().display().to_string();
    let run = |args: &[&str]| sdr().args(args).output().unwrap();

    refused(
        &run(&["embed", "--no-cache", "--cache-dir", &d]),
        "--no-cache",
        "--cache-dir",
    );
    // --findings needs --findings-consistency, which --corpus rules out.
    refused(
        &run(&[
            "select",
            "--corpus",
            "c.safetensors",
            "--findings",
            "/nonexistent",
            "x.jsonl",
        ]),
        "--corpus",
        "--findings",
    );
    refused(
        &run(&[
            "select",
            "--metric",
            "ot",
            "--findings",
            "/nonexistent",
            "x.jsonl",
        ]),
        "--metric",
        "--findings",
    );
    for extra in [
        &["--idf"][..],
        &["--bertscore-model", &d],
        &["--model", &d],
        &["--bertscore-model", &d, "--bertscore-layer", "3"],
    ] {
        for cmd in ["score", "eval", "select-eval"] {
            let mut args = vec![cmd, "--no-bertscore"];
            args.extend(extra);
            refused(&run(&args), "--no-bertscore", extra[0]);
        }
    }
    refused(
        &run(&["serve", "--exact", "--metric", "ot", "--port", "0"]),
        "--exact",
        "--metric",
    );
    refused(
        &run(&["serve", "--exact", "--cost", "clinical", "--port", "0"]),
        "--exact",
        "--cost",
    );
}

#[test]
fn the_judge_labeler_refuses_rules() {
    let o = sdr()
        .args([
            "label",
            "--labeler",
            "judge",
            "--rules",
            "data/clinical/chexpert_rules.json",
        ])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(
        err.trim_end(),
        "sdr: error: --rules data/clinical/chexpert_rules.json: only with --labeler rules \
         (the judge uses no phrase rules)"
    );
}

#[test]
fn each_generation_backend_refuses_the_others_option() {
    for (args, line) in [
        (
            &["--backend", "openai", "--gguf", "x.gguf"][..],
            "sdr: error: --gguf x.gguf: only with --backend local (the openai back-end runs \
             the server's model)",
        ),
        (
            &["--backend", "local", "--base-url", "http://x"],
            "sdr: error: --base-url http://x: only with --backend openai",
        ),
        (
            &["--base-url", "http://x"],
            "sdr: error: --base-url http://x: only with --backend openai",
        ),
    ] {
        for cmd in [&["generate"][..], &["prune", "--corpus", "c.safetensors"]] {
            let o = sdr().args(cmd).args(args).output().unwrap();
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(1), "{cmd:?} {args:?}: {err}");
            assert_eq!(err.trim_end(), line, "{cmd:?} {args:?}");
        }
    }
}

#[test]
fn a_progress_line_every_0_studies_is_refused() {
    let o = sdr()
        .args(["generate", "--progress-every", "0", "--limit", "1"])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--progress-every") && err.contains("0"),
        "{err}"
    );
}
