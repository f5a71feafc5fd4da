//! Every ```console block of the workspace README is run here with the built
//! `sdr`, so the examples cannot drift from what the binary prints.
//!
//! In a block, a line starting with `$ ` is a command (a trailing `\`
//! continues it); the lines up to the next command are its expected output
//! (stdout, then stderr). `...` in an expected line matches any text (elided
//! digits, long JSON), and a line that is only `...` matches any number of
//! lines. A block preceded by `<!-- readme-test: needs-model -->` runs only
//! when the all-mpnet-base-v2 folder is installed.

use std::path::{Path, PathBuf};
use std::process::Command;

struct Example {
    command: String,
    expected: Vec<String>,
    needs_model: bool,
    line: usize,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn examples(readme: &str) -> Vec<Example> {
    let mut out: Vec<Example> = Vec::new();
    let mut in_block = false;
    let mut needs_model = false;
    let mut continuing = false;
    for (no, line) in readme.lines().enumerate() {
        if !in_block {
            if line.trim() == "<!-- readme-test: needs-model -->" {
                needs_model = true;
            } else if line.trim_start() == "```console" {
                in_block = true;
            } else if !line.trim().is_empty() {
                needs_model = false;
            }
            continue;
        }
        if line.trim_start() == "```" {
            in_block = false;
            needs_model = false;
            continuing = false;
            continue;
        }
        if continuing {
            let ex = out.last_mut().expect("a command is being continued");
            continuing = line.ends_with('\\');
            ex.command.push('\n');
            ex.command.push_str(line);
        } else if let Some(cmd) = line.strip_prefix("$ ") {
            continuing = cmd.ends_with('\\');
            out.push(Example {
                command: cmd.to_string(),
                expected: Vec::new(),
                needs_model,
                line: no + 1,
            });
        } else if let Some(ex) = out.last_mut() {
            ex.expected.push(line.to_string());
        }
    }
    out
}

/// `line` matches `pattern` with `...` standing for any text.
fn line_matches(pattern: &str, line: &str) -> bool {
    let parts: Vec<&str> = pattern.split("...").collect();
    if parts.len() == 1 {
        return pattern == line;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if line.len() < first.len() + last.len() || !line.starts_with(first) || !line.ends_with(last) {
        return false;
    }
    let mut rest = &line[first.len()..line.len() - last.len()];
    for p in &parts[1..parts.len() - 1] {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    true
}

fn lines_match(expected: &[String], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((e, rest)) if e == "..." => {
            (0..=actual.len()).any(|k| lines_match(rest, &actual[k..]))
        }
        Some((e, rest)) => {
            !actual.is_empty() && line_matches(e, actual[0]) && lines_match(rest, &actual[1..])
        }
    }
}

fn model_installed() -> bool {
    sdr_embed::resolve_model_dir(None).is_ok()
}

#[test]
fn readme_console_examples_print_what_they_show() {
    let root = workspace_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let examples = examples(&readme);
    assert!(examples.len() >= 5, "found {} examples", examples.len());
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_sdr")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let have_model = model_installed();
    let mut failures = Vec::new();
    for ex in &examples {
        if ex.needs_model && !have_model {
            eprintln!("README.md:{}: skipped (no model folder)", ex.line);
            continue;
        }
        let out = Command::new("bash")
            .arg("-c")
            .arg(&ex.command)
            .current_dir(&root)
            .env("PATH", &path)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let actual: Vec<&str> = text.lines().collect();
        if !lines_match(&ex.expected, &actual) {
            failures.push(format!(
                "README.md:{}: `{}`\nexpected:\n{}\ngot:\n{}",
                ex.line,
                ex.command,
                ex.expected.join("\n"),
                text
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn wildcards() {
    assert!(line_matches(
        "{\"a\": 0.11..., \"b\": ...}",
        "{\"a\": 0.1144, \"b\": 7}"
    ));
    assert!(!line_matches("{\"a\": 0.24...}", "{\"a\": 0.1144}"));
    assert!(line_matches("abc", "abc") && !line_matches("abc", "abcd"));
    let e = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(lines_match(&e(&["a", "...", "z"]), &["a", "b", "c", "z"]));
    assert!(lines_match(&e(&["..."]), &[]));
    assert!(!lines_match(&e(&["a"]), &["a", "b"]));
}
