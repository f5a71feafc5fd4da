//! `sdr check-impression`: one report's Impression checked against its own
//! Findings (SPEC §10a): contradictions, unsupported statements, omitted
//! abnormal findings, with the sentences.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use sdr_clinical::{Consistency, ConsistencyReport, Issue};
use sdr_core::report::{parse_report, split_sentences};
use serde::Deserialize;

use crate::common::{check_outputs, or_stdin};
use crate::jsonl::{parse_json, Input, Output};

#[derive(clap::Args)]
#[command(
    after_help = "Input: one report as text with Findings:/Impression: headers (or the template\n\
<think>FINDINGS</think><answer>IMPRESSION</answer>), or JSON Lines with one\n\
{\"id\": ..., \"findings\": \"...\", \"impression\": \"...\"} object per line (\"id\" optional).\n\n\
Each finding the Impression names or the Findings state (CheXpert's 13 and the other frequent\n\
findings of data/clinical/sentence_facts.json) is checked once (docs/SPEC.md section 10a):\n\
  contradiction  the Impression states it otherwise than the Findings (present vs absent,\n\
                 hedged, left vs right, bilateral vs one side, size), weight 1 (1/2 for hedge,\n\
                 bilateral and one grade apart);\n\
  unsupported    the Impression states it present (1) or hedged (1/2) and the Findings never\n\
                 name it or a related finding (CheXpert's hierarchy: an opacity supports\n\
                 pneumonia);\n\
  omitted        the Findings state it present (hedged: half) and the Impression never names it\n\
                 or a related finding, weighed by how often radiologists' Impressions name it\n\
                 (data/clinical/impression_expectation.json: a pleural effusion 0.82, a device\n\
                 0.14); the Findings' normal statements (\"No pneumothorax.\") are not expected.\n\
score = 1 x contradictions + 0.5 x unsupported + 0.5 x omissions; 0 is consistent. The facts\n\
are phrase rules, not a reading: a finding the rules do not know is not checked.\n\n\
--json writes one line per report: {\"id\", \"score\", \"contradiction\", \"unsupported\", \"omission\",\n\
\"contradictions\": [{\"finding\", \"kind\", \"weight\", \"impression\": {\"sentence\", \"text\", \"fact\"},\n\
\"findings\": {...}}], \"unsupported_findings\": [...], \"omissions\": [...], \"impression_sentences\",\n\
\"findings_sentences\"} (sentence indices are 0-based in their section)."
)]
pub struct Args {
    /// The report (text or JSON Lines); `-` or absent reads stdin.
    pub input: Option<PathBuf>,
    /// One JSON line per report instead of the text.
    #[arg(long)]
    pub json: bool,
    /// Write to this file (atomically) instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Deserialize)]
struct Line {
    #[serde(default)]
    id: Option<serde_json::Value>,
    findings: String,
    impression: String,
}

/// (id, Impression sentences, Findings sentences) of each report of `text`.
type Report = (Option<serde_json::Value>, Vec<String>, Vec<String>);

fn reports(name: &str, text: &str) -> Result<Vec<Report>> {
    if !text.trim_start().starts_with('{') {
        let p = parse_report(text);
        if p.findings.is_empty() {
            return Err(anyhow!(
                "{name}: no Findings section (expected Findings:/Impression: headers, the \
                 <think>F</think><answer>I</answer> template, or JSON Lines)"
            ));
        }
        if p.impression.is_empty() {
            return Err(anyhow!("{name}: no Impression section"));
        }
        return Ok(vec![(None, p.impression, p.findings)]);
    }
    let mut out = Vec::new();
    for (no, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = format!("{name}:{}", no + 1);
        let l: Line = parse_json(line).map_err(|e| anyhow!("{at}: {e}"))?;
        let (i, f) = (split_sentences(&l.impression), split_sentences(&l.findings));
        let who =
            l.id.as_ref()
                .map(|id| format!(" study {}", crate::jsonl::id_text(id)))
                .unwrap_or_default();
        if f.is_empty() {
            return Err(anyhow!("{at}:{who} the Findings have no sentence"));
        }
        if i.is_empty() {
            return Err(anyhow!("{at}:{who} the Impression has no sentence"));
        }
        out.push((l.id, i, f));
    }
    Ok(out)
}

fn issue_lines(out: &mut String, title: &str, issues: &[Issue]) {
    let _ = writeln!(out, "{title} ({}):", issues.len());
    if issues.is_empty() {
        let _ = writeln!(out, "  none");
    }
    for x in issues {
        let _ = writeln!(out, "  {} ({}, weight {:.2})", x.finding, x.kind, x.weight);
        for (side, s) in [("Impression", &x.impression), ("Findings", &x.findings)] {
            if let Some(s) = s {
                let _ = writeln!(
                    out,
                    "    {side:<10} [{}] {:?}: {}",
                    s.sentence, s.text, s.fact
                );
            }
        }
    }
}

/// The human-readable check of one report.
fn text(id: Option<&serde_json::Value>, r: &ConsistencyReport) -> String {
    let mut out = String::new();
    if let Some(id) = id {
        let _ = writeln!(out, "study {}", crate::jsonl::id_text(id));
    }
    let _ = writeln!(
        out,
        "Impression ({} sentences) against its own Findings ({} sentences): score {:.2}{}",
        r.impression_sentences,
        r.findings_sentences,
        r.score,
        if r.is_consistent() {
            ", consistent"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "  contradictions {:.2}, unsupported {:.2}, omissions {:.2}",
        r.contradiction, r.unsupported, r.omission
    );
    issue_lines(&mut out, "Contradictions", &r.contradictions);
    issue_lines(
        &mut out,
        "Unsupported by the Findings",
        &r.unsupported_findings,
    );
    issue_lines(&mut out, "Omitted from the Impression", &r.omissions);
    out
}

pub fn run(args: Args) -> Result<()> {
    check_outputs(
        &[("--output", args.output.as_deref())],
        &[or_stdin(args.input.as_deref())],
    )?;
    let input = Input::open(args.input.as_deref())?;
    let name = input.name.clone();
    let all = input.read_to_string()?;
    let reports = reports(&name, &all)?;
    if reports.is_empty() {
        return Err(anyhow!("{name}: no report"));
    }
    let check = Consistency::default();
    let mut output = Output::create(args.output.as_deref())?;
    for (n, (id, i, f)) in reports.iter().enumerate() {
        let is: Vec<&str> = i.iter().map(String::as_str).collect();
        let fs: Vec<&str> = f.iter().map(String::as_str).collect();
        let r = check.check_sentences(&is, &fs);
        let w = output.writer();
        if args.json {
            let mut v = serde_json::to_value(&r).context("cannot encode the check")?;
            if let (Some(id), Some(obj)) = (id, v.as_object_mut()) {
                obj.insert("id".into(), id.clone());
            }
            serde_json::to_writer(&mut *w, &v)
                .map_err(std::io::Error::from)
                .and_then(|()| w.write_all(b"\n"))
                .context("cannot write output")?;
        } else {
            if n > 0 {
                w.write_all(b"\n").context("cannot write output")?;
            }
            w.write_all(text(id.as_ref(), &r).as_bytes())
                .context("cannot write output")?;
        }
    }
    output.finish()?;
    Ok(())
}
