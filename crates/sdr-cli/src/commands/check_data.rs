//! `sdr check-data`: a training set's references, checked before a run.
//!
//! A reference the reward cannot score stops or thins a run late: TRL and
//! verl raise at the first batch that holds it, and OpenRLHF 0.11 trains on
//! with reward `None` for the sample, logging the failure only at INFO level.
//! This command reads every row once, parses its reference as the reward does
//! (`sdr_reward::parse_reference`: both sections present, the template's
//! rules), prints a summary and the bad rows, and exits 1 when there is any,
//! so that a CI pipeline stops before the GPUs start.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{anyhow, bail, Result};
use sdr_core::SdrError;
use sdr_reward::{parse_reference, Reference, RewardError};
use serde::Serialize;
use serde_json::Value;

use crate::common::{log_line, print_stdout};
use crate::jsonl::{parse_json, Input, Output};

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Input: JSON Lines, one training row per line, the reference in --field (a dotted path \n\
into nested objects: verl's reward_model.ground_truth) or in --findings-field and --impression-field.\n\
A reference is a report (the template <think>F</think><answer>I</answer> or Findings: / Impression:\n\
text) or an object {\"findings\": ..., \"impression\": ...}. verl's parquet files: convert first,\n\
python -c \"import pandas as p; p.read_parquet('train.parquet').to_json('train.jsonl', orient='records', lines=True)\"\n\n\
Checks, as the reward parses references: each line is JSON in UTF-8 (`invalid_json`, `invalid_utf8`);\n\
the field is there and is text (`missing_field`, `not_text`); both sections have a\n\
sentence (`empty_findings`, `empty_impression`, `empty_both`); a tagged report follows the template\n\
(`broken_template`). Output: the summary on stdout ({\"rows\", \"ok\", \"bad\", \"problems\": {kind: n}}\n\
with --json), the first --show bad rows on stderr, every bad row with --bad-rows FILE (JSON Lines\n\
{\"line\", \"problem\", \"message\"}).\n\n\
Exit status: 0 every row scores; 1 some row does not, or the input cannot be read."
)]
pub struct Args {
    /// JSON Lines file of training rows; `-` or absent reads stdin.
    pub input: Option<PathBuf>,
    /// Field of the reference report, a dotted path into nested objects.
    #[arg(
        long,
        default_value = "solution",
        value_name = "PATH",
        conflicts_with = "findings_field"
    )]
    pub field: String,
    /// Field of the Findings text, with --impression-field: separate columns
    /// instead of --field.
    #[arg(long, value_name = "PATH", requires = "impression_field")]
    pub findings_field: Option<String>,
    /// Field of the Impression text, with --findings-field.
    #[arg(long, value_name = "PATH", requires = "findings_field")]
    pub impression_field: Option<String>,
    /// Bad rows printed on stderr (all of them go to --bad-rows).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub show: usize,
    /// Write every bad row here (JSON Lines, atomically).
    #[arg(long, value_name = "FILE")]
    pub bad_rows: Option<PathBuf>,
    /// Print the summary as one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// A row the reward cannot score.
#[derive(Serialize)]
struct BadRow {
    line: usize,
    problem: &'static str,
    message: String,
}

#[derive(Serialize)]
struct Summary<'a> {
    input: &'a str,
    rows: usize,
    ok: usize,
    bad: usize,
    problems: BTreeMap<&'static str, usize>,
}

/// The value at a dotted path of `row`.
fn at<'a>(row: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(row, |v, key| v.get(key))
}

fn text_at<'a>(row: &'a Value, path: &str) -> Result<&'a str, (&'static str, String)> {
    match at(row, path) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err((
            "not_text",
            format!("\"{path}\" is {}, not text", kind(other)),
        )),
        None => Err(("missing_field", format!("no \"{path}\""))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The problem of one row, if any: (kind, message).
fn check_row(args: &Args, row: &Value) -> Option<(&'static str, String)> {
    let sections = |f: &str, i: &str| -> Result<(String, String), (&'static str, String)> {
        Ok((text_at(row, f)?.to_string(), text_at(row, i)?.to_string()))
    };
    let (findings, impression);
    let reference = match (&args.findings_field, &args.impression_field) {
        (Some(f), Some(i)) => {
            (findings, impression) = match sections(f, i) {
                Ok(s) => s,
                Err(e) => return Some(e),
            };
            Reference::Sections {
                findings: &findings,
                impression: &impression,
            }
        }
        _ => match at(row, &args.field) {
            Some(Value::String(s)) => Reference::Report(s),
            // A {"findings", "impression"} object, as the reward takes it.
            Some(Value::Object(_)) => {
                (findings, impression) = match sections(
                    &format!("{}.findings", args.field),
                    &format!("{}.impression", args.field),
                ) {
                    Ok(s) => s,
                    Err(e) => return Some(e),
                };
                Reference::Sections {
                    findings: &findings,
                    impression: &impression,
                }
            }
            Some(other) => {
                return Some((
                    "not_text",
                    format!(
                        "\"{}\" is {}, not a report or a findings/impression object",
                        args.field,
                        kind(other)
                    ),
                ))
            }
            None => return Some(("missing_field", format!("no \"{}\"", args.field))),
        },
    };
    let (f, i, _) = reference.sentences();
    if f.is_empty() && i.is_empty() {
        return Some(("empty_both", "both sections are empty".into()));
    }
    match parse_reference(&reference, 0) {
        Ok(_) => None,
        Err(RewardError::Core(SdrError::EmptySection { section, .. })) => Some((
            if section == "findings" {
                "empty_findings"
            } else {
                "empty_impression"
            },
            format!("section `{section}` is empty"),
        )),
        Err(RewardError::BadReference { reason, .. }) => Some(("broken_template", reason)),
        Err(e) => Some(("unparsable", e.to_string())),
    }
}

pub fn run(args: Args) -> Result<()> {
    let mut input = Input::open(args.input.as_deref())?;
    let name = input.name.clone();
    let mut line_no = 0usize;
    let mut rows = 0usize;
    let mut bad: Vec<BadRow> = Vec::new();
    loop {
        let chunk = input.next_lines(4096, &mut line_no)?;
        if chunk.is_empty() {
            break;
        }
        for (line, text) in chunk {
            rows += 1;
            let Ok(text) = text else {
                bad.push(BadRow {
                    line,
                    problem: "invalid_utf8",
                    message: "not valid UTF-8".into(),
                });
                continue;
            };
            let row: Value = match parse_json(&text) {
                Ok(v) => v,
                Err(e) => {
                    bad.push(BadRow {
                        line,
                        problem: "invalid_json",
                        message: e.to_string(),
                    });
                    continue;
                }
            };
            if let Some((problem, message)) = check_row(&args, &row) {
                bad.push(BadRow {
                    line,
                    problem,
                    message,
                });
            }
        }
    }
    if rows == 0 {
        bail!("{name}: no rows");
    }
    let mut problems: BTreeMap<&'static str, usize> = BTreeMap::new();
    for b in &bad {
        *problems.entry(b.problem).or_default() += 1;
    }
    let summary = Summary {
        input: &name,
        rows,
        ok: rows - bad.len(),
        bad: bad.len(),
        problems,
    };
    if args.json {
        print_stdout(&format!("{}\n", serde_json::to_string(&summary)?))?;
    } else {
        let mut text = format!(
            "{name}: {rows} rows, {} ok, {} bad\n",
            summary.ok, summary.bad
        );
        for (problem, n) in &summary.problems {
            text.push_str(&format!("  {problem}: {n}\n"));
        }
        print_stdout(&text)?;
    }
    for b in bad.iter().take(args.show) {
        log_line(format_args!(
            "{name}:{}: {}: {}",
            b.line, b.problem, b.message
        ));
    }
    if bad.len() > args.show {
        log_line(format_args!(
            "... {} more bad rows (--bad-rows FILE lists them all)",
            bad.len() - args.show
        ));
    }
    if let Some(path) = &args.bad_rows {
        let mut out = Output::create(Some(path.as_path()))?;
        for b in &bad {
            serde_json::to_writer(out.writer(), b)?;
            out.writer().write_all(b"\n")?;
        }
        out.finish()?;
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(anyhow!(
            "{name}: {} of {rows} rows have a reference the reward cannot score",
            bad.len()
        ))
    }
}
