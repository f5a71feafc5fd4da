//! Output that survives a stop: JSON Lines written to `FILE.partial` one
//! record at a time (flushed and synced), moved to `FILE` when the run
//! completes, and picked up again by `--resume`.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};

/// Where records go: a journal file, or standard output (no resume).
pub struct Journal {
    sink: Sink,
}

enum Sink {
    Stdout(io::StdoutLock<'static>),
    File {
        file: File,
        partial: PathBuf,
        dest: PathBuf,
    },
}

/// A record kept from an earlier run: its `file:line` and its text.
pub struct Kept {
    pub at: String,
    pub line: String,
}

/// `FILE.partial`, next to `FILE`.
pub fn partial_path(dest: &Path) -> PathBuf {
    let mut name = dest.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

impl Journal {
    /// Opens the output. With `resume`, the records of a stopped run
    /// (`FILE.partial`, else a finished `FILE`) are handed to `check` and,
    /// if it accepts them, kept; a last line cut off by the stop is dropped.
    /// Nothing on disk changes before `check` has accepted. Without
    /// `resume`, a `FILE.partial` left by a stopped run is an error rather
    /// than overwritten.
    pub fn open<T>(
        dest: Option<&Path>,
        resume: bool,
        check: impl FnOnce(&[Kept]) -> Result<T>,
    ) -> Result<(Journal, T)> {
        let dest = match dest {
            Some(p) if p != Path::new("-") => p.to_path_buf(),
            _ => {
                if resume {
                    return Err(anyhow!("--resume needs an output file (-o FILE)"));
                }
                let checked = check(&[])?;
                let sink = Sink::Stdout(io::stdout().lock());
                return Ok((Journal { sink }, checked));
            }
        };
        let partial = partial_path(&dest);
        let (p, d) = (partial.display(), dest.display());
        let mut kept = Vec::new();
        let mut valid_len = 0u64;
        let mut checked_from: Option<PathBuf> = None;
        let mut cut: Option<String> = None;
        if resume {
            let source = [&partial, &dest].into_iter().find(|f| f.is_file());
            if let Some(source) = source {
                let text = std::fs::read_to_string(source)
                    .with_context(|| format!("cannot read {}", source.display()))?;
                let mut offset = 0usize;
                for (no, line) in text.split_inclusive('\n').enumerate() {
                    offset += line.len();
                    let Some(line) = line.strip_suffix('\n') else {
                        cut = Some(format!("{}:{}", source.display(), no + 1));
                        break;
                    };
                    valid_len = offset as u64;
                    if !line.trim().is_empty() {
                        kept.push(Kept {
                            at: format!("{}:{}", source.display(), no + 1),
                            line: line.to_string(),
                        });
                    }
                }
            }
            checked_from = source.cloned();
        } else if partial.exists() {
            return Err(anyhow!(
                "{p} is left from a stopped run: pass --resume to continue it, or delete it"
            ));
        }
        let checked = check(&kept)?;
        if let Some(at) = cut {
            eprintln!("resume: {at}: dropping a record cut off by the stop");
        }
        if checked_from.as_ref() == Some(&dest) {
            std::fs::copy(&dest, &partial).with_context(|| format!("cannot copy {d} to {p}"))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(!resume)
            .open(&partial)
            .with_context(|| format!("cannot create {p}"))?;
        if resume {
            // Cut a record the stop left half-written, then append after it.
            file.set_len(valid_len)
                .with_context(|| format!("cannot truncate {p}"))?;
        }
        let mut file = file;
        use std::io::Seek;
        file.seek(io::SeekFrom::End(0))
            .with_context(|| format!("cannot write {p}"))?;
        let sink = Sink::File {
            file,
            partial,
            dest,
        };
        Ok((Journal { sink }, checked))
    }

    /// Writes one record and makes it durable before the next study starts.
    pub fn append(&mut self, line: &str) -> Result<()> {
        match &mut self.sink {
            Sink::Stdout(w) => {
                writeln!(w, "{line}")?;
                w.flush().context("cannot write output")
            }
            Sink::File { file, partial, .. } => {
                let mut buf = Vec::with_capacity(line.len() + 1);
                buf.extend_from_slice(line.as_bytes());
                buf.push(b'\n');
                file.write_all(&buf)
                    .and_then(|()| file.sync_data())
                    .with_context(|| format!("cannot write {}", partial.display()))
            }
        }
    }

    /// Moves the complete journal to its name.
    pub fn finish(self) -> Result<()> {
        match self.sink {
            Sink::Stdout(mut w) => w.flush().context("cannot write output"),
            Sink::File {
                file,
                partial,
                dest,
            } => {
                file.sync_all()
                    .with_context(|| format!("cannot write {}", partial.display()))?;
                drop(file);
                std::fs::rename(&partial, &dest).with_context(|| {
                    format!("cannot move {} to {}", partial.display(), dest.display())
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resume_keeps_whole_records_and_drops_a_cut_one() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("gen.jsonl");
        let keep = |k: &[Kept]| -> Result<Vec<(String, String)>> {
            Ok(k.iter().map(|k| (k.at.clone(), k.line.clone())).collect())
        };
        let (mut j, kept) = Journal::open(Some(&dest), false, keep).unwrap();
        assert!(kept.is_empty());
        j.append("{\"id\": \"1\"}").unwrap();
        j.append("{\"id\": \"2\"}").unwrap();
        drop(j); // stopped before finish
        let partial = partial_path(&dest);
        let mut f = OpenOptions::new().append(true).open(&partial).unwrap();
        f.write_all(b"{\"id\": \"3\", \"cand").unwrap();
        drop(f);
        assert!(!dest.exists());
        // Without --resume the partial file is not overwritten.
        let e = Journal::open(Some(&dest), false, keep)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("--resume"), "{e}");
        // A check that refuses leaves the files as they were.
        let before = std::fs::read(&partial).unwrap();
        let refuse = |_: &[Kept]| -> Result<()> { Err(anyhow!("other settings")) };
        assert!(Journal::open(Some(&dest), true, refuse).is_err());
        assert_eq!(std::fs::read(&partial).unwrap(), before);
        let (mut j, kept) = Journal::open(Some(&dest), true, keep).unwrap();
        let lines: Vec<&str> = kept.iter().map(|k| k.1.as_str()).collect();
        assert_eq!(lines, ["{\"id\": \"1\"}", "{\"id\": \"2\"}"]);
        assert!(kept[1].0.ends_with("gen.jsonl.partial:2"), "{}", kept[1].0);
        j.append("{\"id\": \"3\"}").unwrap();
        j.finish().unwrap();
        assert!(!partial.exists());
        let text = std::fs::read_to_string(&dest).unwrap();
        assert_eq!(text, "{\"id\": \"1\"}\n{\"id\": \"2\"}\n{\"id\": \"3\"}\n");
        // Resuming a finished file keeps all of it.
        let (j, kept) = Journal::open(Some(&dest), true, keep).unwrap();
        assert_eq!(kept.len(), 3);
        j.finish().unwrap();
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), text);
        assert!(Journal::open(None, true, keep).is_err());
    }
}
