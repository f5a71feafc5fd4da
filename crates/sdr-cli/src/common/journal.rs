//! Output that survives a stop: JSON Lines written to `FILE.partial` one
//! record at a time (flushed and synced), moved to `FILE` when the run
//! completes (put back in input order first if a resumed run appended
//! records out of it), and picked up again by `--resume`.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};

use super::interrupt::Note;
use super::log_line;

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
        /// Said if a signal stops the run.
        _note: Note,
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
            let mut source = [&partial, &dest].into_iter().find(|f| f.is_file());
            if let Some(f) = source {
                (kept, valid_len, cut) = read_records(f)?;
            }
            // A partial file with no complete record (a run that failed
            // before its first) holds nothing to continue: a finished FILE
            // beside it is what --resume continues.
            if kept.is_empty() && source == Some(&partial) && dest.is_file() {
                log_line(format_args!(
                    "resume: {p} holds no complete record; continuing {d}"
                ));
                (kept, valid_len, cut) = read_records(&dest)?;
                source = Some(&dest);
            }
            checked_from = source.cloned();
        } else if partial.exists() && read_records(&partial).map_or(true, |r| !r.0.is_empty()) {
            // (An empty one a plain run may write over.)
            return Err(anyhow!(
                "{p} is left from a stopped run: pass --resume to continue it, or delete it"
            ));
        }
        let checked = check(&kept)?;
        if let Some(at) = cut {
            log_line(format_args!(
                "resume: {at}: dropping a record cut off by the stop"
            ));
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
        let _note = Note::new(format!(
            "{p} keeps the records written so far: rerun with --resume to go on"
        ));
        let sink = Sink::File {
            file,
            partial,
            dest,
            _note,
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
        self.finish_with(None)
    }

    /// [`Journal::finish`] with the records in the order of `ranks`, the
    /// rank of each record in file order (blank lines aside): a resumed run
    /// appends the studies an earlier run left out after the others. Where
    /// they are out of order, `FILE.partial` is first replaced, atomically,
    /// by its records in order, so that a stop at any point loses none.
    /// Standard output is written as it comes.
    pub fn finish_in_order(self, ranks: &[usize]) -> Result<()> {
        self.finish_with(Some(ranks))
    }

    fn finish_with(self, ranks: Option<&[usize]>) -> Result<()> {
        match self.sink {
            Sink::Stdout(mut w) => w.flush().context("cannot write output"),
            Sink::File {
                file,
                partial,
                dest,
                ..
            } => {
                file.sync_all()
                    .with_context(|| format!("cannot write {}", partial.display()))?;
                drop(file);
                if let Some(ranks) = ranks.filter(|r| !r.is_sorted()) {
                    reorder(&partial, ranks)?;
                }
                std::fs::rename(&partial, &dest).with_context(|| {
                    format!("cannot move {} to {}", partial.display(), dest.display())
                })
            }
        }
    }
}

/// The complete records of a journal file (non-blank lines ending in a
/// newline, each with its `file:line`), the length in bytes up to the last of
/// them, and the `file:line` of a last line cut off by a stop, if any.
fn read_records(source: &Path) -> Result<(Vec<Kept>, u64, Option<String>)> {
    let text = std::fs::read_to_string(source)
        .with_context(|| format!("cannot read {}", source.display()))?;
    let (mut kept, mut valid_len, mut cut) = (Vec::new(), 0u64, None);
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
    Ok((kept, valid_len, cut))
}

/// Rewrites the records (non-blank lines) of `path` sorted by `ranks`,
/// atomically: the file holds the old order or the new one, never a part.
fn reorder(path: &Path, ranks: &[usize]) -> Result<()> {
    let at = path.display();
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {at}"))?;
    let records: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if records.len() != ranks.len() {
        return Err(anyhow!(
            "{at}: {} records where {} were written; the file changed during the run",
            records.len(),
            ranks.len()
        ));
    }
    let mut ranked: Vec<(usize, &str)> = ranks.iter().copied().zip(records).collect();
    ranked.sort_by_key(|&(rank, _)| rank);
    sdr_io::write_atomic(path, |f| {
        ranked.iter().try_for_each(|(_, line)| {
            f.write_all(line.as_bytes())
                .and_then(|()| f.write_all(b"\n"))
        })
    })
    .with_context(|| format!("cannot write {at}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_partial_file_does_not_hide_a_finished_one() {
        // A finished FILE, then a run that failed before its first record
        // and left an empty FILE.partial: --resume continues FILE (and its
        // check sees FILE's records), and a plain run may start afresh.
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("gen.jsonl");
        std::fs::write(&dest, "{\"id\": \"1\"}\n{\"id\": \"2\"}\n").unwrap();
        let partial = partial_path(&dest);
        for leftover in ["", "\n", "{\"id\": \"1\", \"cut"] {
            std::fs::write(&partial, leftover).unwrap();
            let refuse =
                |k: &[Kept]| -> Result<()> { Err(anyhow!("{} records, other settings", k.len())) };
            let e = Journal::open(Some(&dest), true, refuse)
                .err()
                .unwrap()
                .to_string();
            assert_eq!(e, "2 records, other settings", "{leftover:?}");
            assert_eq!(std::fs::read_to_string(&dest).unwrap().lines().count(), 2);
            let (j, kept) = Journal::open(Some(&dest), true, |k: &[Kept]| Ok(k.len())).unwrap();
            assert_eq!(kept, 2, "{leftover:?}");
            drop(j);
            std::fs::write(&partial, leftover).unwrap();
            let (mut j, _) = Journal::open(Some(&dest), false, |_: &[Kept]| Ok(())).unwrap();
            j.append("{\"id\": \"9\"}").unwrap();
            j.finish().unwrap();
            assert_eq!(std::fs::read_to_string(&dest).unwrap(), "{\"id\": \"9\"}\n");
            std::fs::write(&dest, "{\"id\": \"1\"}\n{\"id\": \"2\"}\n").unwrap();
        }
    }

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

    #[test]
    fn finish_in_order_puts_records_out_of_order_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("gen.jsonl");
        let keep = |k: &[Kept]| -> Result<usize> { Ok(k.len()) };
        // A stopped run kept studies 0 and 2 (a blank line between them).
        let partial = partial_path(&dest);
        std::fs::write(&partial, "{\"id\": \"0\"}\n\n{\"id\": \"2\"}\n").unwrap();
        let (mut j, kept) = Journal::open(Some(&dest), true, keep).unwrap();
        assert_eq!(kept, 2);
        j.append("{\"id\": \"1\"}").unwrap();
        j.finish_in_order(&[0, 2, 1]).unwrap();
        assert!(!partial.exists());
        let text = std::fs::read_to_string(&dest).unwrap();
        assert_eq!(text, "{\"id\": \"0\"}\n{\"id\": \"1\"}\n{\"id\": \"2\"}\n");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no file left over"
        );
        // Records already in order are moved as they are.
        let (mut j, _) = Journal::open(Some(&dest), true, keep).unwrap();
        j.append("{\"id\": \"3\"}").unwrap();
        j.finish_in_order(&[0, 1, 2, 3]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&dest).unwrap(),
            format!("{text}{{\"id\": \"3\"}}\n")
        );
        // A count that does not match the file is an error, with the
        // partial file kept as it was.
        let (j, _) = Journal::open(Some(&dest), true, keep).unwrap();
        let before = std::fs::read(&partial).unwrap();
        let e = j.finish_in_order(&[1, 0]).unwrap_err().to_string();
        assert!(e.contains("4 records where 2 were written"), "{e}");
        assert_eq!(std::fs::read(&partial).unwrap(), before);
    }
}
