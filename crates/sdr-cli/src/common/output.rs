//! Output checks made before any work, stdout writes that fail in one line
//! instead of panicking (`corpus`, `eval`, `score`, `select`, `select-eval`),
//! and stderr lines that never panic (every command).

use std::io::Write;
use std::path::Path;

use anyhow::{anyhow, Context, Result};

/// Writes `text` to standard output and flushes it: a closed or full stdout
/// is the usual one-line error, where `print!` would panic.
pub fn print_stdout(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("cannot write output")
}

/// Writes `line` and a newline to standard error. A closed stderr (`sdr ...
/// 2>&1 | head -1` after `head` exits) is ignored, where `eprintln!` would
/// panic: a log line is never worth aborting a run, or turning its error
/// into a panic. Lines printed while a progress bar is drawn go through
/// [`super::Progress::println`] instead.
pub fn log_line(line: impl std::fmt::Display) {
    // One write for the whole line: stderr is unbuffered.
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}

/// Refuses, before any work is done, an output file `path` (given as
/// `flag`) that cannot be written: its folder is missing or not a folder,
/// or the path is a folder. Later write errors (permissions, a full disk)
/// are still caught when the file is written.
pub fn check_output_file(flag: &str, path: &Path) -> Result<()> {
    let at = || format!("{flag} {}", path.display());
    if path.is_dir() {
        return Err(anyhow!("{}: is a folder, not a file", at()));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(anyhow!("{}: {} is not a folder", at(), dir.display())),
        Err(_) => Err(anyhow!("{}: folder {} does not exist", at(), dir.display())),
    }
}

/// Refuses, before any work is done, an output folder `dir` (given as
/// `flag`) that cannot be created: it, or the nearest of its ancestors that
/// exists, is not a folder.
pub fn check_output_dir(flag: &str, dir: &Path) -> Result<()> {
    let existing = dir
        .ancestors()
        .filter(|a| !a.as_os_str().is_empty())
        .find(|a| a.exists())
        .unwrap_or(Path::new("."));
    if existing.is_dir() {
        Ok(())
    } else {
        Err(anyhow!(
            "{flag} {}: {} is not a folder",
            dir.display(),
            existing.display()
        ))
    }
}

/// Refuses an output `out` (given as `flag`) that is one of the `inputs`
/// (the same file by canonical path), which the write would replace.
pub fn check_not_an_input(flag: &str, out: &Path, inputs: &[&Path]) -> Result<()> {
    let Ok(o) = out.canonicalize() else {
        return Ok(()); // not there yet: no input can be it
    };
    for i in inputs {
        if i.canonicalize().is_ok_and(|c| c == o) {
            return Err(anyhow!(
                "{flag} {}: is also the input {}; write the output to another file",
                out.display(),
                i.display()
            ));
        }
    }
    Ok(())
}
