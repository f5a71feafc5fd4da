//! `sdr parse`: split reports into Findings / Impression sentence lists.

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use rayon::prelude::*;
use sdr_core::report::{parse_plain, parse_report, parse_template, ParsedReport};
use serde::{Deserialize, Serialize};

use crate::common::{check_outputs, or_stdin};
use crate::jsonl::{parse_json, Input, Output};

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Layout {
    /// Template rules when any of the four template tags occurs, plain headers otherwise.
    Auto,
    /// `<think>Findings</think><answer>Impression</answer>` (the training template).
    Template,
    /// `Findings:` / `Impression:` headers (also MIMIC-style `FINDINGS:`), other sections ignored.
    Plain,
}

#[derive(clap::Args)]
#[command(
    after_help = "Input line:  {\"text\": \"<think>No effusion.</think><answer>Normal.</answer>\"}\n\
Output line: {\"format_valid\": true, \"findings\": [\"No effusion.\"], \"impression\": [\"Normal.\"]}\n\n\
\"id\" is optional and copied through as given (first in the output line).\n\
Template output is valid when each tag occurs once, in order, with at least one sentence inside\n\
each pair and only whitespace outside. Plain text is valid when both sections are present with at\n\
least one sentence each."
)]
pub struct Args {
    /// JSON Lines file with one {"text": "..."} object per line (optional "id"); `-` or absent reads stdin.
    pub input: Option<PathBuf>,
    /// Which layout rules to apply.
    #[arg(long, value_enum, default_value_t = Layout::Auto)]
    pub layout: Layout,
    /// Write to this file (atomically) instead of stdout.
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
}

#[derive(Deserialize)]
struct Line {
    text: String,
    /// Copied through, as `sdr label`, `score` and `explain` do.
    #[serde(default)]
    id: Option<serde_json::Value>,
}

/// One output line: the input's `id` (when it had one) and the parse.
#[derive(Serialize)]
pub struct OutLine {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<serde_json::Value>,
    #[serde(flatten)]
    pub report: ParsedReport,
}

const CHUNK: usize = 4096;

/// Parse one input line (`{"text": ..., "id"?: ...}`) under `layout`.
pub fn parse_line(text: &str, layout: Layout) -> Result<OutLine> {
    let line: Line = parse_json(text)?;
    let report = match layout {
        Layout::Auto => parse_report(&line.text),
        Layout::Template => parse_template(&line.text),
        Layout::Plain => parse_plain(&line.text),
    };
    Ok(OutLine {
        id: line.id,
        report,
    })
}

pub fn run(args: Args) -> Result<()> {
    check_outputs(
        &[("--output", args.output.as_deref())],
        &[or_stdin(args.input.as_deref())],
    )?;
    let mut input = Input::open(args.input.as_deref())?;
    let mut output = Output::create(args.output.as_deref())?;
    let mut line_no = 0;
    loop {
        let chunk = input.next_chunk(CHUNK, &mut line_no)?;
        if chunk.is_empty() {
            break;
        }
        let results: Vec<Result<OutLine>> = chunk
            .par_iter()
            .map(|(no, text)| {
                parse_line(text, args.layout).map_err(|e| anyhow!("{}:{}: {e}", input.name, no))
            })
            .collect();
        let w = output.writer();
        for r in results {
            serde_json::to_writer(&mut *w, &r?)?;
            w.write_all(b"\n")?;
        }
    }
    output.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_copied_through_first() {
        let line = r#"{"text": "<think>No effusion.</think><answer>Normal.</answer>", "id": "s7"}"#;
        let out = serde_json::to_string(&parse_line(line, Layout::Auto).unwrap()).unwrap();
        assert!(
            out.starts_with(r#"{"id":"s7","format_valid":true,"#),
            "{out}"
        );
        let bare = r#"{"text": "Findings: Clear.\nImpression: Normal."}"#;
        let out = serde_json::to_string(&parse_line(bare, Layout::Plain).unwrap()).unwrap();
        assert!(out.starts_with(r#"{"format_valid":true,"#), "{out}");
        let numeric = r#"{"id": 3, "text": "x"}"#;
        let out = serde_json::to_string(&parse_line(numeric, Layout::Auto).unwrap()).unwrap();
        assert!(out.starts_with(r#"{"id":3,"format_valid":false"#), "{out}");
    }
}
