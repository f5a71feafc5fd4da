//! `sdr label`: CheXpert-14 labels of reports by the rule-based labeler or the judge.

use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use rayon::prelude::*;
use sdr_clinical::{Labeler, Labels};
use sdr_eval::judge::Judge;
use serde::Serialize;
use serde_json::Value;

use crate::common::{check_outputs, or_stdin};
use crate::jsonl::{parse_json, Input, Output};

#[derive(clap::Args)]
#[command(
    after_help = "Each of the 14 CheXpert observations is 1 (positive), 0 (negative), -1 (uncertain) or null\n\
(not mentioned). Reports with template tags or Findings:/Impression: headers are labelled on those\n\
two sections; bare text is labelled whole. No Finding is 1 when no observation but Support Devices\n\
is positive or uncertain. The bundled rules are data/clinical/chexpert_rules.json (docs/SPEC.md\n\
section 8); --rules takes an edited copy, which must give every observation but No Finding at least\n\
one mention or anatomy phrase.\n\n\
Input line:  {\"id\": 7, \"text\": \"Findings: Mild cardiomegaly. No effusion.\\nImpression: Cardiomegaly.\"}\n\
Output line: {\"id\": 7, \"labels\": {\"No Finding\": null, \"Enlarged Cardiomediastinum\": null, \"Cardiomegaly\": 1, ..., \"Pleural Effusion\": 0, ...}}\n\n\
\"id\" is optional and copied through as given. The labels object always holds all 14 observations\n\
in CheXpert's order: No Finding, Enlarged Cardiomediastinum, Cardiomegaly, Lung Lesion, Lung Opacity,\n\
Edema, Consolidation, Pneumonia, Atelectasis, Pneumothorax, Pleural Effusion, Pleural Other, Fracture,\n\
Support Devices.\n\n\
--labeler judge labels with the independent judge instead (all-MiniLM-L6-v2 fine-tuned on IU X-ray's\n\
human MeSH coding; docs/SPEC.md section 8a): each observation is 1 (present) or 0 (not present), No\n\
Finding by the same rule; it needs all-MiniLM-L6-v2 (scripts/fetch-minilm.sh; --judge-base DIR or\n\
$SDR_JUDGE_BASE to point elsewhere)."
)]
pub struct Args {
    /// JSON Lines file with one {"text": "..."} object per line (optional "id"); `-` or absent reads stdin.
    pub input: Option<PathBuf>,
    /// Which labeler: `rules` (phrase rules, no weights; the default) or `judge` (the
    /// classifier trained on IU X-ray's human labels).
    #[arg(long, value_enum, default_value_t = Which::Rules)]
    pub labeler: Which,
    /// Rules file to use instead of the bundled rules (same JSON format as data/clinical/chexpert_rules.json).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["judge_base", "judge"])]
    pub rules: Option<PathBuf>,
    /// The judge's base model folder (all-MiniLM-L6-v2; default $SDR_JUDGE_BASE, then
    /// ~/.cache/sdr/models/all-MiniLM-L6-v2). Only with --labeler judge.
    #[arg(long, value_name = "DIR")]
    pub judge_base: Option<PathBuf>,
    /// A judge adapter file to use instead of the bundled one (as written by
    /// recipes/train_judge.py). Only with --labeler judge.
    #[arg(long, value_name = "FILE")]
    pub judge: Option<PathBuf>,
    /// Write to this file (atomically) instead of stdout.
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
}

/// The two labelers of `--labeler`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Which {
    /// The phrase rules (SPEC section 8).
    Rules,
    /// The judge trained on IU X-ray's human labels (SPEC section 8a).
    Judge,
}

#[derive(Serialize)]
struct OutLine {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<Value>,
    labels: Labels,
}

const CHUNK: usize = 4096;

/// One input line's `id` and `text`.
fn parse_line(line: &str) -> Result<(Option<Value>, String)> {
    let v: Value = parse_json(line)?;
    let Value::Object(mut obj) = v else {
        return Err(anyhow!("expected a JSON object with a \"text\" string"));
    };
    let text = match obj.remove("text") {
        Some(Value::String(s)) => s,
        Some(_) => return Err(anyhow!("\"text\" must be a string")),
        None => return Err(anyhow!("missing \"text\"")),
    };
    Ok((obj.remove("id"), text))
}

/// Label one input line (`{"text": ..., "id"?: ...}`) with the rules.
#[cfg(test)]
fn label_line(labeler: &Labeler, line: &str) -> Result<OutLine> {
    let (id, text) = parse_line(line)?;
    Ok(OutLine {
        id,
        labels: labeler.label(&text),
    })
}

pub fn run(args: Args) -> Result<()> {
    check_outputs(
        &[("--output", args.output.as_deref())],
        &[or_stdin(args.input.as_deref()), args.rules.as_deref()],
    )?;
    if args.labeler == Which::Rules && (args.judge.is_some() || args.judge_base.is_some()) {
        return Err(anyhow!("--judge and --judge-base need --labeler judge"));
    }
    if let (Which::Judge, Some(rules)) = (args.labeler, &args.rules) {
        // The judge is a trained classifier: it reads no phrase rules.
        return Err(anyhow!(
            "--rules {}: only with --labeler rules (the judge uses no phrase rules)",
            rules.display()
        ));
    }
    let rules = match &args.rules {
        Some(path) => {
            Labeler::from_rules_path(path).with_context(|| format!("--rules {}", path.display()))?
        }
        None => Labeler::default(),
    };
    let judge = match args.labeler {
        Which::Rules => None,
        Which::Judge => Some(
            Judge::load(args.judge_base.as_deref(), args.judge.as_deref())
                .context("--labeler judge")?,
        ),
    };
    let mut input = Input::open(args.input.as_deref())?;
    let mut output = Output::create(args.output.as_deref())?;
    let mut line_no = 0;
    loop {
        let chunk = input.next_chunk(CHUNK, &mut line_no)?;
        if chunk.is_empty() {
            break;
        }
        let lines: Vec<(Option<Value>, String)> = chunk
            .par_iter()
            .map(|(no, text)| parse_line(text).map_err(|e| anyhow!("{}:{}: {e}", input.name, no)))
            .collect::<Result<_>>()?;
        let labels: Vec<Labels> = match &judge {
            None => lines.par_iter().map(|(_, t)| rules.label(t)).collect(),
            Some(j) => {
                let texts: Vec<&str> = lines.iter().map(|(_, t)| t.as_str()).collect();
                j.label_many(&texts)
                    .with_context(|| format!("{}: the judge", input.name))?
            }
        };
        let w = output.writer();
        for ((id, _), labels) in lines.into_iter().zip(labels) {
            serde_json::to_writer(&mut *w, &OutLine { id, labels })?;
            w.write_all(b"\n")?;
        }
    }
    output.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_errors() {
        let l = Labeler::default();
        let out = label_line(&l, r#"{"id": "a", "text": "Pneumothorax is not seen."}"#).unwrap();
        let json = serde_json::to_value(&out).unwrap();
        assert_eq!(json["id"], "a");
        assert_eq!(json["labels"]["Pneumothorax"], 0);
        assert_eq!(json["labels"]["No Finding"], 1);
        let no_id = serde_json::to_string(&label_line(&l, r#"{"text": ""}"#).unwrap()).unwrap();
        assert!(
            no_id.starts_with(r#"{"labels":{"No Finding":null,"#),
            "{no_id}"
        );
        for (bad, msg) in [
            (r#"{"id": 1}"#, "missing \"text\""),
            (r#"{"text": 3}"#, "must be a string"),
            ("[1]", "expected a JSON object"),
            ("{", "invalid JSON"),
        ] {
            let e = label_line(&l, bad).err().unwrap().to_string();
            assert!(e.contains(msg), "{bad}: {e}");
        }
    }
}
