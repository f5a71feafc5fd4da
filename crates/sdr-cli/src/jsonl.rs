//! JSON Lines input and output shared by the subcommands.
//!
//! Errors always name the input (file name or `<stdin>`) and the 1-based line.
//! A UTF-8 byte-order mark at the start of an input is skipped, as the CSV
//! reader does: editors on Windows write one.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;

use anyhow::{Context, Result};
use sdr_io::AtomicFile;

/// Where JSON Lines come from: a file or standard input.
pub struct Input {
    pub name: String,
    reader: Box<dyn BufRead>,
}

impl Input {
    /// Open `path`, or standard input when it is `None` or `-`.
    pub fn open(path: Option<&Path>) -> Result<Input> {
        match path {
            None => Ok(Self::stdin()),
            Some(p) if p == Path::new("-") => Ok(Self::stdin()),
            Some(p) => {
                let file = File::open(p).with_context(|| format!("cannot open {}", p.display()))?;
                Ok(Input {
                    name: p.display().to_string(),
                    reader: Box::new(BufReader::with_capacity(1 << 20, file)),
                })
            }
        }
    }

    fn stdin() -> Input {
        Input {
            name: "<stdin>".to_string(),
            reader: Box::new(BufReader::with_capacity(1 << 20, io::stdin())),
        }
    }

    /// Read up to `max` non-blank lines as `(line_number, text)`. An empty
    /// result means end of input. Invalid UTF-8 is an error naming the line.
    pub fn next_chunk(&mut self, max: usize, line_no: &mut usize) -> Result<Vec<(usize, String)>> {
        self.next_lines(max, line_no)?
            .into_iter()
            .map(|(line, text)| {
                text.map(|t| (line, t))
                    .map_err(|_| anyhow::anyhow!("{}:{line}: not valid UTF-8", self.name))
            })
            .collect()
    }

    /// As [`Input::next_chunk`], with a line that is not UTF-8 returned as its bytes
    /// (for `check-data`, which lists such a row and reads on).
    pub fn next_lines(&mut self, max: usize, line_no: &mut usize) -> Result<Vec<(usize, Line)>> {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        while out.len() < max {
            buf.clear();
            let n = self
                .reader
                .read_until(b'\n', &mut buf)
                .with_context(|| format!("{}: read failed", self.name))?;
            if n == 0 {
                break;
            }
            *line_no += 1;
            if *line_no == 1 && buf.starts_with(BOM.as_bytes()) {
                buf.drain(..BOM.len());
            }
            let text = String::from_utf8(std::mem::take(&mut buf)).map_err(|e| e.into_bytes());
            if text.as_ref().is_ok_and(|t| t.trim().is_empty()) {
                continue;
            }
            out.push((*line_no, text));
        }
        Ok(out)
    }

    /// The whole input as text (for line-oriented, non-JSON inputs).
    #[allow(dead_code)]
    pub fn read_to_string(mut self) -> Result<String> {
        let mut s = String::new();
        self.reader
            .read_to_string(&mut s)
            .with_context(|| format!("{}: read failed or not UTF-8", self.name))?;
        Ok(s)
    }
}

/// A line of input: its text, or its bytes when they are not UTF-8.
pub type Line = std::result::Result<String, Vec<u8>>;

/// The UTF-8 byte-order mark.
const BOM: &str = "\u{feff}";

/// The whole file at `path` as text, without a byte-order mark.
pub fn read_text(path: &Path) -> Result<String> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(match text.strip_prefix(BOM) {
        Some(rest) => rest.to_string(),
        None => text,
    })
}

/// Parse one JSON line into `T`. The error says where in the line it failed
/// (the caller adds the input name and line number).
pub fn parse_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T> {
    serde_json::from_str(text.trim_end()).map_err(|e| {
        let msg = e.to_string();
        // serde_json appends " at line L column C"; within one line only C matters.
        let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
        anyhow::anyhow!("invalid JSON at column {}: {msg}", e.column())
    })
}

/// A JSON id as text: strings as they are, numbers and others as JSON.
pub fn id_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Every non-blank line of a JSON Lines file, parsed, with its `file:line`
/// for error messages.
pub fn read_jsonl_file<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<(String, T)>> {
    read_jsonl_lines(path, |at, l| {
        parse_json(l).map_err(|e| anyhow::anyhow!("{at}: {e}"))
    })
}

/// Every non-blank line of a file through `parse(file:line, line)`, for
/// readers whose errors say more than the JSON error.
pub fn read_jsonl_lines<T>(
    path: &Path,
    parse: impl Fn(&str, &str) -> Result<T>,
) -> Result<Vec<(String, T)>> {
    let name = path.display().to_string();
    let text = read_text(path)?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(no, l)| {
            let at = format!("{name}:{}", no + 1);
            let v = parse(&at, l)?;
            Ok((at, v))
        })
        .collect()
}

/// Buffered output to a file (written atomically by
/// [`sdr_io::AtomicFile`] on [`Output::finish`]) or to standard output.
pub struct Output {
    sink: Sink,
}

enum Sink {
    Stdout(BufWriter<io::StdoutLock<'static>>),
    File(AtomicFile),
}

impl Output {
    pub fn create(path: Option<&Path>) -> Result<Output> {
        let sink = match path {
            Some(p) if p != Path::new("-") => Sink::File(
                AtomicFile::create(p).with_context(|| format!("cannot create {}", p.display()))?,
            ),
            _ => Sink::Stdout(BufWriter::with_capacity(1 << 20, io::stdout().lock())),
        };
        Ok(Output { sink })
    }

    pub fn writer(&mut self) -> &mut dyn Write {
        match &mut self.sink {
            Sink::Stdout(w) => w,
            Sink::File(f) => f,
        }
    }

    /// Flush, and move a file output into place.
    pub fn finish(self) -> Result<()> {
        match self.sink {
            Sink::Stdout(mut w) => w.flush().context("cannot write output"),
            Sink::File(f) => {
                let dest = f.dest().to_path_buf();
                f.commit()
                    .with_context(|| format!("cannot write {}", dest.display()))
            }
        }
    }
}
