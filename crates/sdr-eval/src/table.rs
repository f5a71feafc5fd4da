//! Result tables (policy rows × metric columns) as Markdown and CSV.
//!
//! A table that holds a BERTScore column must name the encoder that produced
//! it (only roberta-large at layer 17, rescaled, is on the scale of published
//! BERTScore values): the encoder is appended to every BERTScore column header
//! in both formats, and [`Table::validate`] refuses a BERTScore column without
//! an encoder.
//!
//! A cell may carry a bootstrap interval ([`Table::set_intervals`]): Markdown
//! prints it beside the value as `[low, high]`, with `*` when it excludes 0;
//! CSV adds a `<column> 95% low` and `<column> 95% high` column per column.

use std::path::Path;

use crate::bootstrap::{format_interval, Interval};
use crate::error::{EvalError, Result};

/// One row: a label and one optional value per column (`None` prints as
/// `-` in Markdown and as an empty field in CSV).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TableRow {
    pub label: String,
    pub cells: Vec<Option<f64>>,
}

/// A result table.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Table {
    pub title: String,
    pub row_header: String,
    pub columns: Vec<String>,
    pub rows: Vec<TableRow>,
    /// Encoder used for BERTScore columns (required when one exists).
    pub bertscore_encoder: Option<String>,
    /// Free-text notes printed under the Markdown table.
    pub notes: Vec<String>,
    /// Decimals printed in Markdown (CSV keeps full precision).
    pub decimals: usize,
    /// Indices of columns that hold counts: printed without decimals in
    /// both formats, and [`Table::validate`] refuses a non-integer value.
    pub integer_columns: Vec<usize>,
    /// Per row, per column, a 95 % interval of the cell (empty: none).
    pub intervals: Vec<Vec<Option<Interval>>>,
}

fn is_bertscore(column: &str) -> bool {
    column.to_ascii_lowercase().starts_with("bertscore")
}

impl Table {
    /// An empty table with 4 decimals.
    pub fn new(
        title: impl Into<String>,
        row_header: impl Into<String>,
        columns: Vec<String>,
    ) -> Self {
        Table {
            title: title.into(),
            row_header: row_header.into(),
            columns,
            rows: Vec::new(),
            bertscore_encoder: None,
            notes: Vec::new(),
            decimals: 4,
            integer_columns: Vec::new(),
            intervals: Vec::new(),
        }
    }

    /// Marks the column `name` as a count (see [`Table::integer_columns`]).
    ///
    /// # Errors
    /// [`EvalError::BadParameter`] when there is no such column.
    ///
    /// ```
    /// use sdr_eval::table::Table;
    /// let mut t = Table::new("", "run", vec!["tokens".into(), "ROUGE-L".into()]);
    /// t.set_integer_column("tokens").unwrap();
    /// t.push_row("pruning", vec![Some(56292.0), Some(0.25)]).unwrap();
    /// assert!(t.to_markdown().unwrap().contains("| pruning | 56292 | 0.2500 |"));
    /// ```
    pub fn set_integer_column(&mut self, name: &str) -> Result<()> {
        let i =
            self.columns
                .iter()
                .position(|c| c == name)
                .ok_or_else(|| EvalError::BadParameter {
                    name: "integer column",
                    value: name.to_string(),
                    message: "no such column",
                })?;
        if !self.integer_columns.contains(&i) {
            self.integer_columns.push(i);
        }
        Ok(())
    }

    fn is_integer(&self, column: usize) -> bool {
        self.integer_columns.contains(&column)
    }

    /// Appends a row.
    ///
    /// # Errors
    /// [`EvalError::LengthMismatch`] when `cells` does not match the columns.
    pub fn push_row(&mut self, label: impl Into<String>, cells: Vec<Option<f64>>) -> Result<()> {
        if cells.len() != self.columns.len() {
            return Err(EvalError::LengthMismatch {
                what: "table row cells",
                expected: self.columns.len(),
                got: cells.len(),
            });
        }
        self.rows.push(TableRow {
            label: label.into(),
            cells,
        });
        Ok(())
    }

    /// Checks row lengths and that BERTScore columns name their encoder.
    ///
    /// # Errors
    /// [`EvalError::LengthMismatch`] or [`EvalError::BadParameter`].
    /// Attaches one interval per column to row `row` (see [`Table::intervals`]).
    ///
    /// # Errors
    /// [`EvalError::LengthMismatch`] for no such row or the wrong number of
    /// intervals.
    pub fn set_intervals(&mut self, row: usize, intervals: Vec<Option<Interval>>) -> Result<()> {
        if row >= self.rows.len() {
            return Err(EvalError::LengthMismatch {
                what: "table rows (for intervals)",
                expected: row + 1,
                got: self.rows.len(),
            });
        }
        if intervals.len() != self.columns.len() {
            return Err(EvalError::LengthMismatch {
                what: "table row intervals",
                expected: self.columns.len(),
                got: intervals.len(),
            });
        }
        if self.intervals.len() < self.rows.len() {
            self.intervals.resize(self.rows.len(), Vec::new());
        }
        self.intervals[row] = intervals;
        Ok(())
    }

    fn interval(&self, row: usize, column: usize) -> Option<Interval> {
        self.intervals
            .get(row)
            .and_then(|r| r.get(column))
            .copied()
            .flatten()
    }

    fn has_intervals(&self) -> bool {
        self.intervals.iter().flatten().any(Option::is_some)
    }

    pub fn validate(&self) -> Result<()> {
        for r in &self.rows {
            if r.cells.len() != self.columns.len() {
                return Err(EvalError::LengthMismatch {
                    what: "table row cells",
                    expected: self.columns.len(),
                    got: r.cells.len(),
                });
            }
        }
        for &c in &self.integer_columns {
            if c >= self.columns.len() {
                return Err(EvalError::BadParameter {
                    name: "integer column",
                    value: c.to_string(),
                    message: "index past the last column",
                });
            }
            for r in &self.rows {
                if let Some(v) = r.cells[c] {
                    if !v.is_finite() || v.fract() != 0.0 {
                        return Err(EvalError::NonFinite {
                            what: "integer column value (a count)",
                            index: c,
                            value: v,
                        });
                    }
                }
            }
        }
        if self.columns.iter().any(|c| is_bertscore(c))
            && self
                .bertscore_encoder
                .as_deref()
                .is_none_or(|e| e.trim().is_empty())
        {
            return Err(EvalError::BadParameter {
                name: "bertscore_encoder",
                value: "none".into(),
                message: "a table with a BERTScore column must name the encoder",
            });
        }
        Ok(())
    }

    fn header(&self, column: &str) -> String {
        match (&self.bertscore_encoder, is_bertscore(column)) {
            (Some(e), true) => format!("{column} [{e}]"),
            _ => column.to_string(),
        }
    }

    /// GitHub-flavoured Markdown.
    ///
    /// # Errors
    /// As [`Table::validate`].
    ///
    /// ```
    /// use sdr_eval::table::Table;
    /// let mut t = Table::new("Findings", "policy", vec!["BLEU-4".into()]);
    /// t.push_row("chamfer / min", vec![Some(0.123456)]).unwrap();
    /// assert!(t.to_markdown().unwrap().contains("| chamfer / min | 0.1235 |"));
    /// ```
    pub fn to_markdown(&self) -> Result<String> {
        self.validate()?;
        let esc = |s: &str| s.replace('|', "\\|").replace('\n', " ");
        let mut out = String::new();
        if !self.title.is_empty() {
            out.push_str(&format!("### {}\n\n", esc(&self.title)));
        }
        out.push_str(&format!("| {} |", esc(&self.row_header)));
        for c in &self.columns {
            out.push_str(&format!(" {} |", esc(&self.header(c))));
        }
        out.push_str("\n|---|");
        out.push_str(&"---:|".repeat(self.columns.len()));
        out.push('\n');
        for (i, r) in self.rows.iter().enumerate() {
            out.push_str(&format!("| {} |", esc(&r.label)));
            for (j, c) in r.cells.iter().enumerate() {
                let d = if self.is_integer(j) { 0 } else { self.decimals };
                match (c, self.interval(i, j)) {
                    (Some(v), Some(ci)) => {
                        out.push_str(&format!(" {v:.d$} {} |", format_interval(&ci, d.min(1))))
                    }
                    (Some(v), None) => out.push_str(&format!(" {v:.d$} |")),
                    (None, _) => out.push_str(" - |"),
                }
            }
            out.push('\n');
        }
        if let Some(e) = &self.bertscore_encoder {
            if self.columns.iter().any(|c| is_bertscore(c)) {
                let scale = if e.starts_with("roberta-large L17") && e.contains("rescaled") {
                    "the literature's BERTScore"
                } else {
                    "not roberta-large; not comparable to published BERTScore values"
                };
                out.push_str(&format!("\nBERTScore encoder: {} ({scale}).\n", esc(e)));
            }
        }
        if self.has_intervals() {
            out.push_str(&format!(
                "\n[low, high]: {:.0} % paired bootstrap interval over studies ({} resamples, seed {}); * where it excludes 0.\n",
                100.0 * crate::bootstrap::LEVEL,
                crate::bootstrap::RESAMPLES,
                crate::bootstrap::SEED
            ));
        }
        for n in &self.notes {
            out.push_str(&format!("\n{}\n", esc(n)));
        }
        Ok(out)
    }

    /// RFC 4180 CSV with a header line; values at full precision.
    ///
    /// # Errors
    /// As [`Table::validate`].
    pub fn to_csv(&self) -> Result<String> {
        self.validate()?;
        // Quoted only where needed, CRLF records (RFC 4180).
        let mut w = csv::WriterBuilder::new()
            .terminator(csv::Terminator::CRLF)
            .from_writer(Vec::new());
        let csv_err = |e: csv::Error| EvalError::Csv {
            what: self.title.clone(),
            source: e,
        };
        let with_ci = self.has_intervals();
        let ci_headers: Vec<String> = if with_ci {
            self.columns
                .iter()
                .flat_map(|c| {
                    let h = self.header(c);
                    [format!("{h} 95% low"), format!("{h} 95% high")]
                })
                .collect()
        } else {
            Vec::new()
        };
        let header = std::iter::once(self.row_header.clone())
            .chain(self.columns.iter().map(|c| self.header(c)))
            .chain(ci_headers);
        w.write_record(header).map_err(csv_err)?;
        for (i, r) in self.rows.iter().enumerate() {
            let cells = r.cells.iter().enumerate().map(|(j, c)| match c {
                Some(v) if self.is_integer(j) => format!("{v:.0}"),
                Some(v) => format!("{v}"),
                None => String::new(),
            });
            let cis: Vec<String> = if with_ci {
                (0..self.columns.len())
                    .flat_map(|j| match self.interval(i, j) {
                        Some(ci) => [format!("{}", ci.low), format!("{}", ci.high)],
                        None => [String::new(), String::new()],
                    })
                    .collect()
            } else {
                Vec::new()
            };
            w.write_record(std::iter::once(r.label.clone()).chain(cells).chain(cis))
                .map_err(csv_err)?;
        }
        let bytes = w
            .into_inner()
            .map_err(|e| csv_err(csv::Error::from(e.into_error())))?;
        Ok(String::from_utf8(bytes).expect("CSV of UTF-8 strings is UTF-8"))
    }

    /// Writes [`Table::to_markdown`] to `path` atomically.
    ///
    /// # Errors
    /// As [`Table::validate`], and [`EvalError::Io`] naming the path.
    pub fn write_markdown(&self, path: &Path) -> Result<()> {
        write_file(path, self.to_markdown()?.as_bytes())
    }

    /// Writes [`Table::to_csv`] to `path` atomically.
    ///
    /// # Errors
    /// As [`Table::validate`], and [`EvalError::Io`] naming the path.
    pub fn write_csv(&self, path: &Path) -> Result<()> {
        write_file(path, self.to_csv()?.as_bytes())
    }
}

/// `bytes` to `path`, atomically ([`sdr_io::write_atomic`]).
fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    sdr_io::write_atomic(path, |f| f.write_all(bytes)).map_err(|source| EvalError::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let mut t = Table::new("T", "policy", vec!["ROUGE-L".into(), "BERTScore-F1".into()]);
        t.push_row("a, \"b\"", vec![Some(0.5), None]).unwrap();
        t
    }

    #[test]
    fn bertscore_needs_encoder() {
        let mut t = table();
        assert!(t.to_markdown().is_err());
        assert!(t.to_csv().is_err());
        t.bertscore_encoder = Some("all-mpnet-base-v2".into());
        let md = t.to_markdown().unwrap();
        assert!(md.contains("BERTScore-F1 [all-mpnet-base-v2]"));
        assert!(md.contains("| a, \"b\" | 0.5000 | - |"));
        let csv = t.to_csv().unwrap();
        assert_eq!(
            csv,
            "policy,ROUGE-L,BERTScore-F1 [all-mpnet-base-v2]\r\n\"a, \"\"b\"\"\",0.5,\r\n"
        );
    }

    #[test]
    fn intervals_print_beside_their_cells_and_as_csv_columns() {
        let mut t = Table::new("T", "policy", vec!["ROUGE-L".into(), "METEOR".into()]);
        t.decimals = 2;
        t.push_row("p", vec![Some(12.345), Some(-1.0)]).unwrap();
        t.push_row("q", vec![Some(1.0), None]).unwrap();
        let ci = |low, high| Some(Interval { low, high });
        assert!(t.set_intervals(2, vec![None, None]).is_err());
        assert!(t.set_intervals(0, vec![None]).is_err());
        t.set_intervals(0, vec![ci(3.0, 20.0), ci(-4.0, 2.0)])
            .unwrap();
        let md = t.to_markdown().unwrap();
        assert!(
            md.contains("| p | 12.35 [+3.0, +20.0]* | -1.00 [-4.0, +2.0] |"),
            "{md}"
        );
        assert!(md.contains("| q | 1.00 | - |"), "{md}");
        assert!(md.contains("paired bootstrap interval over studies (1000 resamples"));
        let csv = t.to_csv().unwrap();
        assert!(csv.starts_with("policy,ROUGE-L,METEOR,ROUGE-L 95% low,ROUGE-L 95% high,METEOR 95% low,METEOR 95% high\r\n"), "{csv}");
        assert!(csv.contains("p,12.345,-1,3,20,-4,2\r\n"), "{csv}");
        assert!(csv.contains("q,1,,,,,\r\n"), "{csv}");
    }

    #[test]
    fn integer_columns_print_without_decimals() {
        let mut t = Table::new("", "run", vec!["tokens".into(), "saved %".into()]);
        t.set_integer_column("tokens").unwrap();
        assert!(t.set_integer_column("nope").is_err());
        t.push_row("random", vec![None, None]).unwrap();
        t.push_row("pruning", vec![Some(56292.0), Some(12.5)])
            .unwrap();
        let md = t.to_markdown().unwrap();
        assert!(md.contains("| pruning | 56292 | 12.5000 |"), "{md}");
        assert!(!md.contains("56292.0"), "{md}");
        assert!(md.contains("| random | - | - |"), "{md}");
        let csv = t.to_csv().unwrap();
        assert!(csv.contains("pruning,56292,12.5\r\n"), "{csv}");
        // A fraction in a count column is a caller bug, not something to round.
        t.push_row("bad", vec![Some(1.5), None]).unwrap();
        assert!(t.to_markdown().is_err());
        assert!(t.to_csv().is_err());
    }

    #[test]
    fn row_length_is_checked() {
        let mut t = table();
        assert!(t.push_row("x", vec![Some(1.0)]).is_err());
    }
}
