//! Input and output-path checks made before any work, stdout writes that
//! fail in one line instead of panicking (`corpus`, `eval`, `score`,
//! `select`, `select-eval`), and stderr lines that never panic (every command).

use std::io::Write;
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use sdr_io::AtomicFile;

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
/// `flag`) that cannot be written: its folder is missing, not a folder or
/// not writable (permissions, a read-only file system, `/proc`), or the path
/// is a folder. A full disk is still found only when the file is written.
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
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(anyhow!("{}: {} is not a folder", at(), dir.display())),
        Err(_) => return Err(anyhow!("{}: folder {} does not exist", at(), dir.display())),
    }
    // A device, FIFO or terminal is written in place: opening it now could
    // block (a FIFO) or end a reader's input (closing it), so it is not probed.
    let stream = std::fs::metadata(path).is_ok_and(|m| !m.is_file())
        || (path.exists() && (path.starts_with("/dev") || path.starts_with("/proc")));
    if stream {
        return Ok(());
    }
    // The temporary file the write will make (beside a link's target), removed at once.
    AtomicFile::create(path)
        .map(drop)
        .map_err(|e| anyhow!("{}: cannot write in {}: {e}", at(), folder_name(dir)))
}

/// Whether a file can be made in `dir`: the temporary file an atomic write
/// would make, removed at once (and by the signal handler, as any other).
fn probe_folder(dir: &Path) -> std::io::Result<()> {
    AtomicFile::create(&dir.join("sdr-write-probe")).map(drop)
}

/// `folder D`, or `the current folder` for `.`, for messages.
fn folder_name(dir: &Path) -> String {
    if dir == Path::new(".") {
        "the current folder".to_string()
    } else {
        format!("folder {}", dir.display())
    }
}

/// Refuses, before any work is done, an output folder `dir` (given as
/// `flag`) that cannot be created or written: it, or the nearest of its
/// ancestors that exists, is not a folder or not writable.
pub fn check_output_dir(flag: &str, dir: &Path) -> Result<()> {
    check_creatable(flag, dir, dir)
}

/// Refuses, before any work is done, a file `path` (given as `flag`) that a
/// later save could not write, its missing folders made on the way (a cache
/// saved as the work goes on): the nearest folder of it that exists is not a
/// folder or not writable.
pub fn check_file_creatable(flag: &str, path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    check_creatable(flag, path, dir)
}

/// [`check_output_dir`] of `dir`, whose errors name `shown`.
fn check_creatable(flag: &str, shown: &Path, dir: &Path) -> Result<()> {
    let existing = dir
        .ancestors()
        .filter(|a| !a.as_os_str().is_empty())
        .find(|a| a.exists())
        .unwrap_or(Path::new("."));
    if !existing.is_dir() {
        return Err(anyhow!(
            "{flag} {}: {} is not a folder",
            shown.display(),
            existing.display()
        ));
    }
    probe_folder(existing).map_err(|e| {
        anyhow!(
            "{flag} {}: cannot write in {}: {e}",
            shown.display(),
            folder_name(existing)
        )
    })
}

/// Refuses an output `out` (given as `flag`) that is one of the `inputs`
/// (the same file: same device and inode, so a hard or symbolic link counts),
/// which the write would replace. `-` in `inputs` is standard input, which
/// counts when it is redirected from a file.
pub fn check_not_an_input(flag: &str, out: &Path, inputs: &[&Path]) -> Result<()> {
    if std::fs::metadata(out).is_err() {
        return Ok(()); // not there yet: no input can be it
    }
    for i in inputs {
        let (path, name) = if *i == Path::new("-") {
            (Path::new("/dev/stdin"), "<stdin>".to_string())
        } else {
            (*i, i.display().to_string())
        };
        if same_file(out, path) {
            return Err(anyhow!(
                "{flag} {}: is also the input {name}; write the output to another file",
                out.display()
            ));
        }
    }
    Ok(())
}

/// Refuses, before any work is done, the outputs `(flag, path)` of a command
/// that reads `inputs`: each must pass [`check_output_file`] and
/// [`check_not_an_input`], and no two may be the same file (the last
/// written would replace the other). Among `outputs`, `None` and `-` are
/// standard output (skipped); among `inputs`, `None` is an optional input
/// not given, `-` standard input (see [`or_stdin`]).
pub fn check_outputs(outputs: &[(&str, Option<&Path>)], inputs: &[Option<&Path>]) -> Result<()> {
    let inputs: Vec<&Path> = inputs.iter().flatten().copied().collect();
    let files: Vec<(&str, &Path)> = outputs
        .iter()
        .filter_map(|(flag, p)| p.filter(|p| *p != Path::new("-")).map(|p| (*flag, p)))
        .collect();
    for (n, (flag, path)) in files.iter().enumerate() {
        check_output_file(flag, path)?;
        check_not_an_input(flag, path, &inputs)?;
        if let Some((other, _)) = files[..n].iter().find(|(_, o)| same_file(path, o)) {
            return Err(anyhow!(
                "{flag} {}: is also the {other} file; write each output to its own file",
                path.display()
            ));
        }
    }
    Ok(())
}

/// An input path that is standard input when absent, for [`check_outputs`].
pub fn or_stdin(input: Option<&Path>) -> Option<&Path> {
    Some(input.unwrap_or(Path::new("-")))
}

/// Whether `a` and `b` name one file: the same device and inode when both
/// exist, else the same path once their folders are resolved.
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        #[cfg(unix)]
        (Ok(ma), Ok(mb)) => {
            use std::os::unix::fs::MetadataExt;
            // Only a regular file is lost (`-o /dev/null < /dev/null` is fine).
            (ma.dev(), ma.ino()) == (mb.dev(), mb.ino()) && ma.is_file()
        }
        #[cfg(not(unix))]
        (Ok(_), Ok(_)) => a.canonicalize().ok() == b.canonicalize().ok(),
        (Err(_), Err(_)) => resolved(a) == resolved(b),
        _ => false,
    }
}

/// `path` with its folder made canonical (the file itself may not exist yet).
fn resolved(path: &Path) -> std::path::PathBuf {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match (dir.canonicalize(), path.file_name()) {
        (Ok(d), Some(name)) => d.join(name),
        _ => path.to_path_buf(),
    }
}

/// Refuses, before any work is done, an input file `path` (given as `flag`)
/// that is not there, saying when it is the option's `default`: a path
/// relative to the current folder, which is easy to miss.
pub fn check_input(flag: &str, path: &Path, default: &str) -> Result<()> {
    if path.exists() {
        return Ok(());
    }
    if path == Path::new(default) {
        return Err(anyhow!(
            "{flag} (default {default}, relative to the current folder): not found; pass {flag} FILE"
        ));
    }
    Err(anyhow!("{flag} {}: not found", path.display()))
}
