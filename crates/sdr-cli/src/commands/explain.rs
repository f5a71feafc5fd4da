//! `sdr explain`: why a candidate report got its reward. Per section, the
//! distance and its reward term, each sentence's partner under the metric
//! with its cost, the reference sentences the candidate misses and the
//! candidate sentences nothing in the reference supports (SPEC §9), as JSON
//! Lines and optionally as one self-contained HTML page (`page.rs`).
//!
//! The explanation itself is `sdr_reward::Explainer` (shared with Python's
//! `sdr_rewards.explain`); this file parses and writes.

mod page;

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use sdr_core::cost::CostKind;
use sdr_core::explain::{ExplainOptions, ReportExplanation};
use sdr_core::{parse_report, Metric};
use sdr_embed::{EmbedControl, SectionEmbedder};
use sdr_reward::{parse_reference, Explainer, Reference, ReferenceSections};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::common::{check_outputs, log_line, or_stdin, EncoderArgs};
use crate::jsonl::{id_text, parse_json, Input, Output};

#[derive(clap::Args)]
#[command(
    after_help = "Input line:  {\"id\": \"s1\", \"candidate\": \"<think>F</think><answer>I</answer> or Findings:/Impression: text\", \"reference\": \"Findings: ... Impression: ...\"}\n\
Output line: {\"id\": \"s1\", \"metric\": \"chamfer\", \"threshold\": 0.2, \"format_valid\": true, \"reward\": 2.71,\n\
              \"sections\": {\"findings\": {\"distance\", \"converged\", \"reward\", \"candidate\": [{\"sentence\", \"match\", \"cost\", \"nearest\", \"nearest_cost\", \"conflict\"}],\n\
                                          \"reference\": [...], \"missing\": [reference indices], \"unsupported\": [candidate indices]},\n\
                           \"impression\": {...}}}\n\n\
`match` is the partner under the metric (an index into the other list, or null): the nearest\n\
sentence for chamfer/hausdorff, the optimal assignment for hung-*, the sentence receiving most of\n\
the mass for plan-based metrics (ot, sinkhorn, uot, pot, gw; with its `mass`, out of a total of 1).\n\
`cost` is the cosine cost (1 - cos) / 2 of the pair. A reference sentence is missing, and a\n\
candidate sentence unsupported, when its nearest sentence on the other side costs more than the\n\
threshold (docs/SPEC.md section 9). A candidate that does not parse into both sections gets\n\
format_valid false, reward 0 and sections null; a reference without both sections is an error.\n\n\
With --html FILE, one self-contained page (no network) shows every study side by side; the JSON\n\
Lines then go only to --output, when given."
)]
pub struct Args {
    /// JSON Lines with {"candidate", "reference"} (optional "id", copied through); `-` or absent reads stdin.
    pub input: Option<PathBuf>,
    /// Metric spec (chamfer, hausdorff, ot, sinkhorn:eps=0.1, uot, gw, hung-nn, hung-pen, pot, ...).
    #[arg(long, short = 'm', default_value = "chamfer")]
    pub metric: String,
    /// Nearest-neighbour cost above which a sentence is missing / unsupported, in [0, 1]
    /// (default: the value derived on IU X-ray, docs/SPEC.md section 9).
    #[arg(allow_negative_numbers = true, long, value_name = "TAU")]
    pub threshold: Option<f64>,
    /// The sentence cost: `cosine` (the paper's) or `clinical` (`clinical:lambda=L`;
    /// SPEC §10). With `clinical` the distances and rewards are the clinical cost's, each
    /// pair's `cost` and the missing/unsupported lists stay cosine, and a sentence that a
    /// finding of the other section contradicts or lacks gets a `conflict` naming it
    /// ("side: present Atelectasis (left) vs present Atelectasis (right) in sentence 0").
    #[arg(long, default_value = "cosine", value_name = "COST",
          value_parser = crate::common::parse_cost)]
    pub cost: CostKind,
    #[command(flatten)]
    pub encoder: EncoderArgs,
    /// Write the JSON Lines here (atomically) instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also write an HTML page of every study here (atomically).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

#[derive(Deserialize)]
struct Line {
    #[serde(default)]
    id: Option<Value>,
    candidate: String,
    reference: String,
}

/// One study, parsed: what the page shows next to the explanation.
pub(crate) struct Study {
    pub id: Option<Value>,
    pub candidate: String,
    pub reference: ReferenceSections,
    pub explanation: ReportExplanation,
}

/// Lines read, embedded (one encoder call) and explained per step.
const CHUNK: usize = 512;

pub fn run(args: Args) -> Result<()> {
    let metric: Metric = args.metric.parse().map_err(|e| anyhow!("--metric: {e}"))?;
    let options =
        ExplainOptions::new(metric, args.threshold).map_err(|e| anyhow!("--threshold: {e}"))?;
    check_outputs(
        &[
            ("--output", args.output.as_deref()),
            ("--html", args.html.as_deref()),
        ],
        &[or_stdin(args.input.as_deref())],
    )?;
    let explainer = Explainer::new(options, &args.cost).map_err(|e| anyhow!("--cost: {e}"))?;
    let encoder = args.encoder.load()?;
    let mut input = Input::open(args.input.as_deref())?;
    let json_out = if args.html.is_some() && args.output.is_none() {
        None
    } else {
        Some(Output::create(args.output.as_deref())?)
    };
    let mut json_out = json_out;
    let mut studies: Vec<Study> = Vec::new();
    let (mut count, mut malformed, mut missing, mut unsupported) = (0usize, 0usize, 0usize, 0usize);
    let mut line_no = 0;
    loop {
        let chunk = input.next_chunk(CHUNK, &mut line_no)?;
        if chunk.is_empty() {
            break;
        }
        let parsed = chunk
            .iter()
            .map(|(no, text)| {
                let at = format!("{}:{}", input.name, no);
                let l: Line = parse_json(text).map_err(|e| anyhow!("{at}: {e}"))?;
                let reference = parse_reference(&Reference::Report(&l.reference), *no)
                    .map_err(|e| anyhow!("{at}: {e}"))?;
                Ok((at, l, reference))
            })
            .collect::<Result<Vec<_>>>()?;
        let explained = explain_chunk(&parsed, &explainer, &encoder)?;
        for ((_, line, reference), explanation) in parsed.into_iter().zip(explained) {
            count += 1;
            match &explanation.sections {
                None => malformed += 1,
                Some(s) => {
                    missing += s.findings.missing.len() + s.impression.missing.len();
                    unsupported += s.findings.unsupported.len() + s.impression.unsupported.len();
                }
            }
            if let Some(out) = json_out.as_mut() {
                let w = out.writer();
                let out_line = OutLine {
                    id: line.id.as_ref(),
                    explanation: &explanation,
                };
                serde_json::to_writer(&mut *w, &out_line)?;
                w.write_all(b"\n")?;
            }
            if args.html.is_some() {
                studies.push(Study {
                    id: line.id,
                    candidate: line.candidate,
                    reference,
                    explanation,
                });
            }
        }
    }
    if let Some(out) = json_out {
        out.finish()?;
    }
    if let Some(path) = &args.html {
        let mut out = Output::create(Some(path.as_path()))?;
        out.writer()
            .write_all(page::render(&studies, &options, &encoder.encoder().name()).as_bytes())?;
        out.finish()?;
    }
    log_line(format_args!(
        "sdr explain: {count} {} ({malformed} malformed), {missing} missing and {unsupported} \
         unsupported sentences at threshold {}{}",
        if count == 1 { "study" } else { "studies" },
        options.threshold,
        if args.threshold.is_none() {
            " (default)"
        } else {
            ""
        }
    ));
    Ok(())
}

/// One output line: `{"id"?, ...explanation}`, the id first as the other
/// commands write it.
#[derive(Serialize)]
struct OutLine<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a Value>,
    #[serde(flatten)]
    explanation: &'a ReportExplanation,
}

/// Explain a chunk: its new sentences embedded in one encoder call, then
/// every study in parallel.
fn explain_chunk(
    parsed: &[(String, Line, ReferenceSections)],
    explainer: &Explainer,
    embedder: &SectionEmbedder<'_>,
) -> Result<Vec<ReportExplanation>> {
    let candidates: Vec<_> = parsed
        .iter()
        .map(|(_, l, _)| parse_report(&l.candidate))
        .collect();
    let studies: Vec<_> = candidates
        .iter()
        .zip(parsed)
        .map(|(c, (_, _, r))| (c, r))
        .collect();
    let explained = explainer
        .explain(&studies, embedder, &EmbedControl::default())
        .map_err(|e| {
            anyhow!(
                "{}..{}: embedding failed: {e}",
                parsed[0].0,
                parsed[parsed.len() - 1].0
            )
        })?;
    explained
        .into_iter()
        .zip(parsed)
        .map(|(e, (at, _, _))| e.map_err(|e| anyhow!("{at}: {e}")))
        .collect()
}

/// The id as the page shows it.
pub(crate) fn id_label(id: Option<&Value>, index: usize) -> String {
    id.map(id_text).unwrap_or_else(|| format!("#{}", index + 1))
}
