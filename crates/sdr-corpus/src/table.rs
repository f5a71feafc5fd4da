//! A CSV file of reports read whole: the one CSV reader behind
//! [`crate::read_source`] and the CLI's reference and study tables (IU X-ray
//! `indiana_reports.csv` and ReXGradient-style files).

use std::path::Path;

use sha2::{Digest, Sha256};

use crate::error::{CorpusError, Result};
use crate::store::hex;

/// The header row (trimmed, byte-order mark removed), every record, and the
/// sha256 of the file's bytes.
#[derive(Debug, Clone)]
pub struct CsvTable {
    /// The path as given, for messages.
    pub name: String,
    pub sha256: String,
    pub headers: Vec<String>,
    records: Vec<csv::StringRecord>,
}

impl CsvTable {
    /// Reads `path`; every record must have as many fields as the header.
    ///
    /// # Errors
    /// [`CorpusError::Io`] when the file cannot be read,
    /// [`CorpusError::BadRecord`] naming the 1-based file line where the
    /// record that is not valid CSV starts.
    pub fn read(path: &Path) -> Result<CsvTable> {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| CorpusError::io(path, e))?;
        let sha256 = hex(&Sha256::digest(&bytes));
        let mut rdr = csv::ReaderBuilder::new()
            .flexible(false)
            .from_reader(bytes.as_slice());
        let headers = rdr
            .headers()
            .map_err(|e| csv_error(&name, &e, 1))?
            .iter()
            .map(|h| h.trim_start_matches('\u{feff}').trim().to_string())
            .collect();
        let records = rdr
            .records()
            .enumerate()
            .map(|(rec, row)| row.map_err(|e| csv_error(&name, &e, rec + 2)))
            .collect::<Result<Vec<_>>>()?;
        Ok(CsvTable {
            name,
            sha256,
            headers,
            records,
        })
    }

    /// The column named `wanted`: an exact match, else a case-insensitive one
    /// (the first, when several match: [`CsvTable::column`] refuses that).
    pub fn find(&self, wanted: &str) -> Option<usize> {
        self.matches(wanted).first().copied()
    }

    /// Every column [`CsvTable::find`] could mean: the exact matches, or,
    /// without one, the case-insensitive ones.
    fn matches(&self, wanted: &str) -> Vec<usize> {
        let h = &self.headers;
        let exact: Vec<usize> = (0..h.len()).filter(|&i| h[i] == wanted).collect();
        if !exact.is_empty() {
            return exact;
        }
        (0..h.len())
            .filter(|&i| h[i].eq_ignore_ascii_case(wanted))
            .collect()
    }

    /// As [`CsvTable::find`], or [`CorpusError::MissingColumn`] listing the
    /// columns there are, or [`CorpusError::AmbiguousColumn`] when several
    /// header cells match equally well (`findings,findings`, or
    /// `Findings,FINDINGS` asked for `findings`).
    pub fn column(&self, wanted: &str) -> Result<usize> {
        match self.matches(wanted).as_slice() {
            [] => Err(CorpusError::MissingColumn {
                source_name: self.name.clone(),
                column: wanted.to_string(),
                available: self.headers.join(", "),
            }),
            [one] => Ok(*one),
            many => Err(CorpusError::AmbiguousColumn {
                source_name: self.name.clone(),
                column: wanted.to_string(),
                count: many.len(),
                positions: many
                    .iter()
                    .map(|i| (i + 1).to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// [`CsvTable::column`] for the two sections, which must be two columns.
    pub fn section_columns(&self, findings: &str, impression: &str) -> Result<(usize, usize)> {
        let (f, i) = (self.column(findings)?, self.column(impression)?);
        if f == i {
            return Err(CorpusError::SameColumn {
                source_name: self.name.clone(),
                column: self.headers[f].clone(),
            });
        }
        Ok((f, i))
    }

    /// The 1-based file line where record `record` (0-based) starts; a quoted
    /// field holding newlines makes it differ from `record + 2`.
    pub fn line(&self, record: usize) -> usize {
        self.records[record]
            .position()
            .map_or(record + 2, |p| p.line() as usize)
    }

    /// Number of records (the header excluded).
    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Field `column` of record `record` (0-based), trimmed; `""` when absent.
    pub fn field(&self, record: usize, column: usize) -> &str {
        self.raw(record, column).trim()
    }

    /// As [`CsvTable::field`], untrimmed (report text goes to the segmenter
    /// as written).
    pub fn raw(&self, record: usize, column: usize) -> &str {
        self.records[record].get(column).unwrap_or("")
    }
}

/// A csv error as [`CorpusError::BadRecord`] at the file line it names
/// (`fallback` when it names none), without the crate's own
/// "(line: L, byte: B)" text, so the line appears once.
fn csv_error(name: &str, e: &csv::Error, fallback: usize) -> CorpusError {
    let line = e.position().map_or(fallback, |p| p.line() as usize);
    let message = match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("the record has {len} fields, but the header has {expected_len}"),
        csv::ErrorKind::Utf8 { err, .. } => {
            format!("field {} is not valid UTF-8", err.field() + 1)
        }
        csv::ErrorKind::Io(io) => format!("cannot read: {io}"),
        _ => e.to_string(),
    };
    CorpusError::BadRecord {
        source_name: name.to_string(),
        record: line,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_trims_and_finds_columns() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.csv");
        std::fs::write(
            &p,
            "\u{feff}uid, Findings ,impression\n7, Clear. ,Normal.\n",
        )
        .unwrap();
        let t = CsvTable::read(&p).unwrap();
        assert_eq!(t.headers, ["uid", "Findings", "impression"]);
        assert_eq!(t.find("findings"), Some(1));
        assert_eq!((t.len(), t.field(0, 1), t.field(0, 9)), (1, "Clear.", ""));
        let e = t.column("problems").unwrap_err().to_string();
        assert!(e.contains("no column `problems`"), "{e}");
        std::fs::write(&p, "a,b\n1\n").unwrap();
        let e = CsvTable::read(&p).unwrap_err().to_string();
        assert!(
            e.ends_with("r.csv:2: the record has 1 fields, but the header has 2"),
            "{e}"
        );
    }

    #[test]
    fn repeated_headers_and_one_column_for_both_sections_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.csv");
        for (header, positions) in [
            ("uid,findings,findings,impression", "2, 3"),
            ("uid,Findings,FINDINGS,impression", "2, 3"),
        ] {
            std::fs::write(&p, format!("{header}\n1,a,b,c\n")).unwrap();
            let e = CsvTable::read(&p)
                .unwrap()
                .column("findings")
                .unwrap_err()
                .to_string();
            assert!(
                e.ends_with(&format!(
                    "d.csv: the header names column `findings` 2 times (columns {positions}); \
                     rename all but one"
                )),
                "{e}"
            );
        }
        // An exact match is not ambiguous beside a case-insensitive one.
        std::fs::write(&p, "uid,Findings,findings,impression\n1,a,b,c\n").unwrap();
        let t = CsvTable::read(&p).unwrap();
        assert_eq!(t.column("findings").unwrap(), 2);
        let e = t
            .section_columns("impression", "IMPRESSION")
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with(
                "findings and impression both read column `impression`; give each its own column"
            ),
            "{e}"
        );
    }

    #[test]
    fn errors_name_the_file_line_once() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("q.csv");
        // An unclosed quote: the record starting on line 2 runs to the end.
        std::fs::write(&p, "uid,findings,impression\n1,\"a\n").unwrap();
        let e = CsvTable::read(&p).unwrap_err().to_string();
        assert!(
            e.ends_with("q.csv:2: the record has 2 fields, but the header has 3"),
            "{e}"
        );
        assert!(!e.contains("line:"), "{e}");
        // A quoted newline: the bad record starts on line 4, not record 2 + 1.
        std::fs::write(&p, "a,b\n1,\"x\ny\"\n2\n").unwrap();
        let e = CsvTable::read(&p).unwrap_err().to_string();
        assert!(e.contains("q.csv:4: "), "{e}");
        std::fs::write(&p, "a,b\n1,\"x\ny\"\n2,z\n").unwrap();
        let t = CsvTable::read(&p).unwrap();
        assert_eq!((t.line(0), t.line(1)), (2, 4));
    }
}
