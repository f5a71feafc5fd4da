//! Reading reference reports: CSV (IU X-ray / Kaggle layout, ReXGradient-style
//! columns by option), JSON Lines, or a folder of MIMIC-CXR free-text `.txt`
//! reports; the IU split rule; seeded sampling.
//!
//! Every report becomes `(id, findings sentences, impression sentences)`,
//! segmented by `sdr_core::report` (SPEC §1). A report missing one section is
//! kept (it is left out of that section's aggregation, SPEC §5); one with
//! neither section carries nothing and is dropped (counted in
//! [`Source::dropped_empty`]).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use sdr_core::report::{parse_plain, split_sentences};
use sha2::{Digest, Sha256};

use crate::error::{CorpusError, Result};
use crate::rng::sample_indices;
use crate::store::hex;
use crate::table::CsvTable;

/// Input layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceFormat {
    Csv,
    Jsonl,
    MimicDir,
}

impl SourceFormat {
    pub fn name(self) -> &'static str {
        match self {
            SourceFormat::Csv => "csv",
            SourceFormat::Jsonl => "jsonl",
            SourceFormat::MimicDir => "mimic-dir",
        }
    }
}

impl FromStr for SourceFormat {
    type Err = CorpusError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "csv" => Ok(SourceFormat::Csv),
            "jsonl" => Ok(SourceFormat::Jsonl),
            "mimic-dir" => Ok(SourceFormat::MimicDir),
            _ => Err(CorpusError::InvalidOption {
                name: "format",
                value: s.to_string(),
                reason: "expected csv, jsonl or mimic-dir".into(),
            }),
        }
    }
}

/// The project's deterministic IU X-ray split by numeric id: test
/// `uid % 10 == 0`, validation `uid % 10 == 1`, train the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    All,
    Train,
    Validation,
    Test,
}

impl Split {
    pub fn name(self) -> &'static str {
        match self {
            Split::All => "all",
            Split::Train => "train",
            Split::Validation => "validation",
            Split::Test => "test",
        }
    }

    /// Split of a numeric id.
    pub fn of_uid(uid: u64) -> Split {
        match uid % 10 {
            0 => Split::Test,
            1 => Split::Validation,
            _ => Split::Train,
        }
    }

    pub fn contains(self, uid: u64) -> bool {
        self == Split::All || Split::of_uid(uid) == self
    }
}

impl FromStr for Split {
    type Err = CorpusError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "all" => Ok(Split::All),
            "train" => Ok(Split::Train),
            "validation" | "val" => Ok(Split::Validation),
            "test" => Ok(Split::Test),
            _ => Err(CorpusError::InvalidOption {
                name: "split",
                value: s.to_string(),
                reason: "expected train, validation, test or all".into(),
            }),
        }
    }
}

/// Where the columns (CSV) or keys (JSON Lines) are.
#[derive(Debug, Clone)]
pub struct Columns {
    /// Report id; `None` tries `uid`, `id`, `study_id` in turn and falls back
    /// to the 1-based record number.
    pub id: Option<String>,
    pub findings: String,
    pub impression: String,
}

impl Default for Columns {
    fn default() -> Self {
        Columns {
            id: None,
            findings: "findings".into(),
            impression: "impression".into(),
        }
    }
}

/// Options of [`read_source`].
#[derive(Debug, Clone)]
pub struct SourceOptions {
    pub format: SourceFormat,
    pub columns: Columns,
    pub split: Split,
    /// Keep a uniform sample of this many reports (after the split filter).
    pub sample: Option<usize>,
    pub seed: u64,
}

impl Default for SourceOptions {
    fn default() -> Self {
        SourceOptions {
            format: SourceFormat::Csv,
            columns: Columns::default(),
            split: Split::All,
            sample: None,
            seed: 0,
        }
    }
}

/// One reference report, segmented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceReport {
    pub id: String,
    pub findings: Vec<String>,
    pub impression: Vec<String>,
}

/// Reports read from a source, with its hash.
#[derive(Debug, Clone)]
pub struct Source {
    pub name: String,
    /// sha256 of the input bytes (for a folder: of every `.txt` file's
    /// relative path and bytes, in path order).
    pub sha256: String,
    pub reports: Vec<SourceReport>,
    /// Records read before the split filter and sampling.
    pub records: usize,
    /// Records with neither section (dropped).
    pub dropped_empty: usize,
}

struct Raw {
    /// Where the record starts (file line; the file's rank for a folder).
    line: usize,
    id: String,
    findings: Vec<String>,
    impression: Vec<String>,
}

/// Reads, segments, filters by split and samples the reports of `path`.
pub fn read_source(path: &Path, opts: &SourceOptions) -> Result<Source> {
    let name = path.display().to_string();
    let (sha256, raws) = match opts.format {
        SourceFormat::Csv => read_csv(path, &opts.columns)?,
        SourceFormat::Jsonl => read_jsonl(path, &opts.columns)?,
        SourceFormat::MimicDir => read_mimic_dir(path)?,
    };
    let records = raws.len();
    let mut kept = Vec::new();
    let mut dropped_empty = 0;
    for r in raws {
        if opts.split != Split::All {
            let uid: u64 = r.id.trim().parse().map_err(|_| CorpusError::BadRecord {
                source_name: name.clone(),
                record: r.line,
                message: format!(
                    "id `{}` is not a non-negative integer, which `--split {}` needs (uid % 10)",
                    r.id,
                    opts.split.name()
                ),
            })?;
            if !opts.split.contains(uid) {
                continue;
            }
        }
        if r.findings.is_empty() && r.impression.is_empty() {
            dropped_empty += 1;
            continue;
        }
        kept.push(SourceReport {
            id: r.id,
            findings: r.findings,
            impression: r.impression,
        });
    }
    if let Some(n) = opts.sample {
        if n == 0 {
            return Err(CorpusError::InvalidOption {
                name: "sample",
                value: "0".into(),
                reason: "must be at least 1".into(),
            });
        }
        let idx = sample_indices(kept.len(), n, opts.seed);
        kept = idx.into_iter().map(|i| kept[i].clone()).collect();
    }
    if kept.is_empty() {
        return Err(CorpusError::EmptyCorpus {
            source_name: name,
            reason: format!(
                "{records} records, {dropped_empty} without either section, split `{}`",
                opts.split.name()
            ),
        });
    }
    Ok(Source {
        name,
        sha256,
        reports: kept,
        records,
        dropped_empty,
    })
}

fn read_all(path: &Path) -> Result<Vec<u8>> {
    let mut f = std::fs::File::open(path).map_err(|e| CorpusError::io(path, e))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)
        .map_err(|e| CorpusError::io(path, e))?;
    Ok(buf)
}

/// The text of a source file `name`, refused whole when it is not UTF-8.
fn utf8<'a>(bytes: &'a [u8], name: &str) -> Result<&'a str> {
    std::str::from_utf8(bytes).map_err(|e| CorpusError::BadRecord {
        source_name: name.to_string(),
        record: 0,
        message: format!("not UTF-8 ({e})"),
    })
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn read_csv(path: &Path, cols: &Columns) -> Result<(String, Vec<Raw>)> {
    let t = CsvTable::read(path)?;
    let (fi, ii) = t.section_columns(&cols.findings, &cols.impression)?;
    let idi = match &cols.id {
        Some(c) => Some(t.column(c)?),
        None => ["uid", "id", "study_id"].iter().find_map(|c| t.find(c)),
    };
    let out = (0..t.len())
        .map(|rec| Raw {
            line: t.line(rec),
            id: match idi {
                Some(i) => t.field(rec, i).to_string(),
                None => (rec + 1).to_string(),
            },
            findings: split_sentences(t.raw(rec, fi)),
            impression: split_sentences(t.raw(rec, ii)),
        })
        .collect();
    Ok((t.sha256, out))
}

/// A section in JSON: a string (segmented), a list of sentences, or null/absent.
fn json_section(v: Option<&serde_json::Value>) -> std::result::Result<Vec<String>, String> {
    match v {
        None | Some(serde_json::Value::Null) => Ok(Vec::new()),
        Some(serde_json::Value::String(s)) => Ok(split_sentences(s)),
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .map(|x| match x {
                serde_json::Value::String(s) => Ok(s.trim().to_string()),
                other => Err(format!("sentence list holds a non-string: {other}")),
            })
            .filter(|r| !matches!(r, Ok(s) if s.is_empty()))
            .collect(),
        Some(other) => Err(format!(
            "expected a string or a list of strings, got {other}"
        )),
    }
}

/// The value of key `wanted`: an exact match, else a case-insensitive one
/// (as [`CsvTable::find`] matches columns).
fn find_key<'a>(
    obj: &'a serde_json::Map<String, serde_json::Value>,
    wanted: &str,
) -> Option<&'a serde_json::Value> {
    obj.get(wanted).or_else(|| {
        obj.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(wanted))
            .map(|(_, v)| v)
    })
}

fn read_jsonl(path: &Path, cols: &Columns) -> Result<(String, Vec<Raw>)> {
    let name = path.display().to_string();
    if cols.findings.eq_ignore_ascii_case(&cols.impression) {
        return Err(CorpusError::SameColumn {
            source_name: name,
            column: cols.findings.clone(),
        });
    }
    let bytes = read_all(path)?;
    let sha = sha256_hex(&bytes);
    let text = utf8(&bytes, &name)?;
    let mut out = Vec::new();
    // A section key that no record has is a typo (or another layout), not a
    // corpus without that section: refused as CSV refuses a missing column.
    let mut keys_seen = std::collections::BTreeSet::new();
    let (mut has_findings, mut has_impression) = (false, false);
    for (no, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |message: String| CorpusError::BadRecord {
            source_name: name.clone(),
            record: no + 1,
            message,
        };
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| bad(format!("invalid JSON: {e}")))?;
        let obj = v
            .as_object()
            .ok_or_else(|| bad("expected a JSON object".into()))?;
        keys_seen.extend(obj.keys().cloned());
        let id_value = match &cols.id {
            Some(k) => Some(
                find_key(obj, k).ok_or_else(|| bad(format!("no key `{k}` (set by --id-col)")))?,
            ),
            None => ["uid", "id", "study_id"]
                .iter()
                .find_map(|k| find_key(obj, k)),
        };
        let id = match id_value {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Number(n)) => n.to_string(),
            Some(other) => return Err(bad(format!("id must be a string or number, got {other}"))),
            None => (no + 1).to_string(),
        };
        let (f, i) = (
            find_key(obj, &cols.findings),
            find_key(obj, &cols.impression),
        );
        has_findings |= f.is_some();
        has_impression |= i.is_some();
        let findings = json_section(f).map_err(|m| bad(format!("`{}`: {m}", cols.findings)))?;
        let impression = json_section(i).map_err(|m| bad(format!("`{}`: {m}", cols.impression)))?;
        out.push(Raw {
            line: no + 1,
            id,
            findings,
            impression,
        });
    }
    for (key, found) in [
        (&cols.findings, has_findings),
        (&cols.impression, has_impression),
    ] {
        if !out.is_empty() && !found {
            return Err(CorpusError::MissingKey {
                source_name: name,
                key: key.clone(),
                available: keys_seen.into_iter().collect::<Vec<_>>().join(", "),
            });
        }
    }
    Ok((sha, out))
}

fn collect_txt(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| CorpusError::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| CorpusError::io(dir, e))?;
        let p = entry.path();
        let ft = entry.file_type().map_err(|e| CorpusError::io(&p, e))?;
        if ft.is_dir() {
            collect_txt(&p, out)?;
        } else if p.extension().is_some_and(|e| e == "txt") {
            out.push(p);
        }
    }
    Ok(())
}

/// MIMIC-CXR free text: `files/p10/p10000032/s50414267.txt`, headed sections
/// (`FINDINGS:`, `IMPRESSION:`, others ignored). The id is the path relative
/// to the folder without `.txt`.
fn read_mimic_dir(dir: &Path) -> Result<(String, Vec<Raw>)> {
    if !dir.is_dir() {
        return Err(CorpusError::io(
            dir,
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "not a folder (--format mimic-dir)",
            ),
        ));
    }
    let mut files = Vec::new();
    collect_txt(dir, &mut files)?;
    files.sort();
    let mut h = Sha256::new();
    let mut out = Vec::new();
    for (rank, p) in files.iter().enumerate() {
        let rel = p.strip_prefix(dir).unwrap_or(p);
        let rel_s = rel.to_string_lossy().replace('\\', "/");
        let bytes = read_all(p)?;
        h.update(rel_s.as_bytes());
        h.update([0]);
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
        // As CSV and JSON Lines refuse bytes that are not UTF-8: replacing them
        // would put U+FFFD into sentences, and a binary file would pass as a
        // report without sections.
        let text = utf8(&bytes, &p.display().to_string())?;
        let parsed = parse_plain(text);
        out.push(Raw {
            line: rank + 1,
            id: rel_s.trim_end_matches(".txt").to_string(),
            findings: parsed.findings,
            impression: parsed.impression,
        });
    }
    Ok((hex(&h.finalize()), out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iu_split_rule() {
        assert_eq!(Split::of_uid(10), Split::Test);
        assert_eq!(Split::of_uid(21), Split::Validation);
        assert_eq!(Split::of_uid(3), Split::Train);
        assert!(Split::All.contains(5));
        assert!(!Split::Train.contains(30));
    }

    #[test]
    fn json_sections_accept_text_lists_and_null() {
        let v: serde_json::Value = serde_json::from_str(
            r#"{"a": "Heart normal. Lungs clear.", "b": ["One.", " ", "Two."], "c": null, "d": 3}"#,
        )
        .unwrap();
        assert_eq!(
            json_section(v.get("a")).unwrap(),
            ["Heart normal.", "Lungs clear."]
        );
        assert_eq!(json_section(v.get("b")).unwrap(), ["One.", "Two."]);
        assert!(json_section(v.get("c")).unwrap().is_empty());
        assert!(json_section(v.get("zz")).unwrap().is_empty());
        assert!(json_section(v.get("d")).is_err());
    }

    fn jsonl_opts(findings: &str) -> SourceOptions {
        SourceOptions {
            format: SourceFormat::Jsonl,
            columns: Columns {
                findings: findings.into(),
                ..Columns::default()
            },
            ..SourceOptions::default()
        }
    }

    #[test]
    fn jsonl_keys_match_exact_then_case_insensitive() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.jsonl");
        std::fs::write(
            &p,
            concat!(
                r#"{"UID": 12, "Findings": "Lungs clear.", "IMPRESSION": "Normal."}"#,
                "\n",
                r#"{"uid": 13, "findings": "Heart big.", "Findings": "ignored", "impression": null}"#,
                "\n"
            ),
        )
        .unwrap();
        let s = read_source(&p, &jsonl_opts("findings")).unwrap();
        assert_eq!(s.reports.len(), 2);
        assert_eq!(s.reports[0].id, "12");
        assert_eq!(s.reports[0].findings, ["Lungs clear."]);
        assert_eq!(s.reports[0].impression, ["Normal."]);
        // The exact key wins over a case-insensitive one.
        assert_eq!(s.reports[1].findings, ["Heart big."]);
    }

    #[test]
    fn jsonl_key_in_no_record_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.jsonl");
        std::fs::write(
            &p,
            "{\"id\": 1, \"findings\": \"A.\", \"impression\": \"B.\"}\n",
        )
        .unwrap();
        let e = read_source(&p, &jsonl_opts("Nope"))
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("r.jsonl: no record has the key `Nope` (exact or case-insensitive; keys seen: findings, id, impression)"),
            "{e}"
        );
    }

    #[test]
    fn split_errors_name_the_file_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.jsonl");
        std::fs::write(
            &p,
            "{\"id\": 1, \"findings\": \"A.\"}\n\n{\"id\": \"x\", \"findings\": \"A.\", \"impression\": \"B.\"}\n",
        )
        .unwrap();
        let opts = SourceOptions {
            split: Split::Train,
            ..jsonl_opts("findings")
        };
        let e = read_source(&p, &opts).unwrap_err().to_string();
        assert!(e.contains("r.jsonl:3: id `x`"), "{e}");
    }
}
