//! Bad input to `sdr embed` (and the error line every command prints): one line
//! naming the input, a non-zero exit, no output file, and no file of the user's
//! overwritten.

mod cli;

use std::path::{Path, PathBuf};
use std::process::Command;

use cli::{have_model, stderr};

/// `sdr`, with its packed-weights cache under `dir` (the test's temporary folder):
/// the throwaway model folders here would each leave a file in the user's cache.
fn sdr(dir: &Path) -> Command {
    let mut c = cli::sdr();
    c.env(sdr_embed::PACKED_CACHE_ENV, dir.join("packed"));
    c
}

/// `sdr`'s stderr is exactly one `sdr: error:` line.
fn one_error_line(o: &std::process::Output) -> String {
    let err = stderr(o);
    assert!(!o.status.success(), "succeeded: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "not one line: {err}");
    assert!(lines[0].starts_with("sdr: error: "), "{err}");
    lines[0].to_string()
}

/// Two sentences to embed, in `dir`.
fn sentences(dir: &Path) -> PathBuf {
    let p = dir.join("in.txt");
    std::fs::write(&p, "Heart size is normal.\nThe lungs are clear.\n").unwrap();
    p
}

/// A copy of the model folder in `dir/name` (links to its files) without the
/// entries in `skip`, for folders that differ from it in one file.
fn model_copy(dir: &Path, name: &str, skip: &[&str]) -> PathBuf {
    let real = sdr_embed::resolve_model_dir(None).unwrap();
    let copy = dir.join(name);
    std::fs::create_dir(&copy).unwrap();
    for entry in std::fs::read_dir(&real).unwrap() {
        let entry = entry.unwrap();
        let file = entry.file_name();
        if skip.iter().any(|s| file == *s) {
            continue;
        }
        std::os::unix::fs::symlink(entry.path(), copy.join(&file)).unwrap();
    }
    copy
}

#[test]
fn a_cache_dir_that_is_a_file_fails_first_and_writes_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let input = sentences(dir.path());
    let notadir = dir.path().join("notadir");
    std::fs::write(&notadir, "a file").unwrap();
    let out = dir.path().join("out.jsonl");
    let o = sdr(dir.path())
        .arg("embed")
        .arg("--cache-dir")
        .arg(&notadir)
        .arg("-o")
        .arg(&out)
        .arg(&input)
        .output()
        .unwrap();
    let line = one_error_line(&o);
    assert!(
        line.contains("--cache-dir") && line.contains("not a folder"),
        "{line}"
    );
    assert!(!out.exists(), "output written: {line}");
    assert_eq!(std::fs::read(&notadir).unwrap(), b"a file");
}

#[test]
fn a_file_in_the_cache_dir_that_is_no_cache_is_refused_and_kept() {
    if !have_model() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let input = sentences(dir.path());
    let real = sdr_embed::resolve_model_dir(None).unwrap();
    let hash = sdr_embed::weights_sha256(&real).unwrap();
    let name = real.file_name().unwrap().to_string_lossy().into_owned();
    let cache = dir.path().join("cache");
    std::fs::create_dir(&cache).unwrap();
    let file = cache.join(format!("{name}-{}-F32.sdrc", &hash[..16]));
    let precious = b"\x10\x00\x00\x00\x00\x00\x00\x00{\"__metadata__\":{}}not a cache";
    std::fs::write(&file, precious).unwrap();
    let out = dir.path().join("out.jsonl");
    let o = sdr(dir.path())
        .arg("embed")
        .arg("--cache-dir")
        .arg(&cache)
        .arg("-o")
        .arg(&out)
        .arg(&input)
        .output()
        .unwrap();
    let line = one_error_line(&o);
    assert!(
        line.contains("not an SDR sentence-cache file") && line.contains(".sdrc"),
        "{line}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), precious, "overwritten");
    assert!(!out.exists());
}

#[test]
fn a_config_unlike_the_weights_is_one_line_even_with_backtraces_on() {
    if !have_model() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let input = sentences(dir.path());
    let real = sdr_embed::resolve_model_dir(None).unwrap();
    let model = model_copy(dir.path(), "model", &["config.json"]);
    let config = std::fs::read_to_string(real.join("config.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&config).unwrap();
    v["hidden_size"] = 384.into();
    std::fs::write(model.join("config.json"), v.to_string()).unwrap();
    for backtrace in ["1", "0"] {
        let o = sdr(dir.path())
            .env("RUST_BACKTRACE", backtrace)
            .arg("embed")
            .arg("--model")
            .arg(&model)
            .arg(&input)
            .output()
            .unwrap();
        let line = one_error_line(&o);
        assert!(line.contains("expected [384, 384]"), "{line}");
        assert_eq!(line.matches("expected [384, 384]").count(), 1, "{line}");
        assert!(o.stdout.is_empty());
    }
}

#[test]
fn a_pooling_config_other_than_mean_is_refused_naming_the_file() {
    if !have_model() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let input = sentences(dir.path());
    for (name, config, says) in [
        (
            "cls",
            r#"{"word_embedding_dimension": 768, "pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}"#,
            "pooling_mode_cls_token",
        ),
        (
            "max",
            r#"{"word_embedding_dimension": 768, "pooling_mode_max_tokens": true, "pooling_mode_mean_tokens": false}"#,
            "pooling_mode_max_tokens",
        ),
        (
            "dim",
            r#"{"word_embedding_dimension": 384, "pooling_mode_mean_tokens": true}"#,
            "word_embedding_dimension 384",
        ),
    ] {
        let model = model_copy(dir.path(), name, &["1_Pooling"]);
        std::fs::create_dir(model.join("1_Pooling")).unwrap();
        std::fs::write(model.join("1_Pooling/config.json"), config).unwrap();
        let o = sdr(dir.path())
            .arg("embed")
            .arg("--model")
            .arg(&model)
            .arg(&input)
            .output()
            .unwrap();
        let line = one_error_line(&o);
        assert!(line.contains("1_Pooling/config.json"), "{line}");
        assert!(line.contains(says), "{name}: {line}");
    }
    // No pooling folder: mean pooling, the same vectors as the real folder's.
    let plain = model_copy(dir.path(), "plain", &["1_Pooling"]);
    let embed = |model: &Path| {
        let o = sdr(dir.path())
            .arg("embed")
            .arg("--model")
            .arg(model)
            .arg(&input)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        o.stdout
    };
    let real = sdr_embed::resolve_model_dir(None).unwrap();
    assert_eq!(embed(&plain), embed(&real));
}

#[test]
fn a_model_folder_without_model_files_names_the_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = sentences(dir.path());
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = sdr(dir.path())
        .arg("embed")
        .arg("--model")
        .arg(&empty)
        .arg(&input)
        .output()
        .unwrap();
    let line = one_error_line(&o);
    assert!(line.contains("has no config.json"), "{line}");
    assert!(!line.contains("not found"), "{line}");
}

#[test]
fn an_error_that_includes_its_cause_prints_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.safetensors");
    let o = sdr(dir.path())
        .args(["corpus", "info"])
        .arg(&missing)
        .output()
        .unwrap();
    let line = one_error_line(&o);
    assert!(line.contains("missing.safetensors"), "{line}");
    assert_eq!(line.matches("(os error 2)").count(), 1, "{line}");
}
