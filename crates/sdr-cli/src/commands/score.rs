//! `sdr score`: every text metric of (hypothesis, reference) pairs, per line,
//! without the selection pipeline: BLEU-1..4, ROUGE-1/2/L, METEOR, chrF++ and
//! BERTScore on the Findings and on the Impression section (SPEC §7), or on
//! the whole texts with `--whole`.

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use rayon::prelude::*;
use sdr_clinical::{chexpert_f1, example_f1, Labeler, Labels, UncertainPolicy};
use sdr_core::report::parse_report;
use sdr_eval::scores::{TextScorer, TEXT_METRICS};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::jsonl::{parse_json, Input, Output};
use crate::textscore::{bertscore_pairs, load_bertscore_encoder, load_wordnet};

#[derive(clap::Args)]
#[command(
    after_help = "Input line:  {\"id\": 7, \"hyp\": \"<think>...</think><answer>...</answer>\", \"ref\": \"Findings: ... Impression: ...\"}\n\
Output line: {\"id\": 7, \"format_valid\": true, \"findings\": {\"BLEU-1\": ..., ..., \"BERTScore-F1\": ...}, \"impression\": {...}}\n\n\
Both texts are parsed as reports (the <think>/<answer> template or Findings:/Impression: headers);\n\
a hypothesis section that is missing scores 0 on every metric; a reference without both sections\n\
is an error naming its line. `--whole` scores the raw texts instead (output key \"whole\").\n\n\
Metrics (sdr-eval): tokens are lower-cased [a-z0-9]+ runs; BLEU-n is nltk's sentence BLEU with\n\
method1 smoothing (epsilon 0.1), uniform weights up to n; ROUGE F1 without stemming; METEOR as\n\
nltk (with WordNet synonyms when a database is found); chrF++ is sacrebleu's CHRF(word_order=2)\n\
on a 0-100 scale; BERTScore P/R/F1 uses all-mpnet-base-v2's last-layer token embeddings (no idf,\n\
no baseline rescaling). A summary of the means is printed on stderr."
)]
pub struct Args {
    /// JSON Lines with {"hyp", "ref"} (optional "id", copied through); `-` or absent reads stdin.
    pub input: Option<PathBuf>,
    /// Score the whole texts, without splitting them into sections.
    #[arg(long)]
    pub whole: bool,
    /// Skip BERTScore (no model needed).
    #[arg(long)]
    pub no_bertscore: bool,
    /// Sentence-transformers model folder for BERTScore (default: $SDR_MODEL,
    /// then ~/.cache/sdr/models/all-mpnet-base-v2).
    #[arg(long, value_name = "DIR")]
    pub model: Option<PathBuf>,
    /// WordNet database folder for METEOR's synonyms (default: $SDR_WORDNET_DIR,
    /// then /usr/share/wordnet; without one METEOR matches exact words and stems only).
    #[arg(long, value_name = "DIR")]
    pub wordnet: Option<PathBuf>,
    /// Count uncertain CheXpert-rule labels as absent (default: as present).
    #[arg(long)]
    pub uncertain_negative: bool,
    /// Write the JSON Lines here (atomically) instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Deserialize)]
struct Line {
    #[serde(default)]
    id: Option<Value>,
    hyp: String,
    #[serde(rename = "ref")]
    reference: String,
}

/// One scored unit: a section (or the whole text) of one line.
struct Unit {
    hyp: String,
    reference: String,
}

const BERT_KEYS: [&str; 3] = ["BERTScore-P", "BERTScore-R", "BERTScore-F1"];

pub fn run(args: Args) -> Result<()> {
    let mut input = Input::open(args.input.as_deref())?;
    let mut lines: Vec<(Option<Value>, bool)> = Vec::new();
    let mut units: Vec<Unit> = Vec::new();
    let mut line_no = 0;
    loop {
        let chunk = input.next_chunk(4096, &mut line_no)?;
        if chunk.is_empty() {
            break;
        }
        for (no, text) in chunk {
            let at = format!("{}:{}", input.name, no);
            let l: Line = parse_json(&text).map_err(|e| anyhow!("{at}: {e}"))?;
            if args.whole {
                lines.push((l.id, true));
                units.push(Unit {
                    hyp: l.hyp,
                    reference: l.reference,
                });
                continue;
            }
            let r = parse_report(&l.reference);
            if r.findings.is_empty() || r.impression.is_empty() {
                let missing = if r.findings.is_empty() {
                    "Findings"
                } else {
                    "Impression"
                };
                return Err(anyhow!(
                    "{at}: the reference has no {missing} section (template or `{missing}:` header)"
                ));
            }
            let h = parse_report(&l.hyp);
            lines.push((l.id, h.format_valid));
            units.push(Unit {
                hyp: h.findings.join(" "),
                reference: r.findings.join(" "),
            });
            units.push(Unit {
                hyp: h.impression.join(" "),
                reference: r.impression.join(" "),
            });
        }
    }
    let wordnet = load_wordnet(args.wordnet.as_deref())?;
    let scorer = TextScorer::new(Default::default(), wordnet.as_ref());
    let text: Vec<Option<[f64; 9]>> = units
        .par_iter()
        .map(|u| {
            if u.hyp.trim().is_empty() {
                return Ok(None);
            }
            Ok(Some(scorer.score(&u.hyp, &u.reference)?.values()))
        })
        .collect::<Result<_>>()?;
    let bert = match load_bertscore_encoder(args.model.as_deref(), args.no_bertscore)? {
        Some(enc) => {
            let pairs: Vec<(&str, &str)> = units
                .iter()
                .map(|u| (u.hyp.as_str(), u.reference.as_str()))
                .collect();
            Some(bertscore_pairs(&pairs, &enc)?)
        }
        None => None,
    };
    let policy = if args.uncertain_negative {
        UncertainPolicy::Negative
    } else {
        UncertainPolicy::Positive
    };
    let labeler = Labeler::default();
    let labels: Vec<(Labels, Labels)> = units
        .par_iter()
        .map(|u| (labeler.label(&u.hyp), labeler.label(&u.reference)))
        .collect();
    let metric_names: Vec<&str> = TEXT_METRICS
        .iter()
        .copied()
        .chain(bert.iter().flat_map(|_| BERT_KEYS))
        .chain(["CheXpert-rule F1"])
        .collect();
    let unit_values = |j: usize| -> Vec<f64> {
        let mut v: Vec<f64> = text[j].map(|t| t.to_vec()).unwrap_or_else(|| vec![0.0; 9]);
        if let Some(b) = &bert {
            v.extend([b[j].precision, b[j].recall, b[j].f1]);
        }
        v.push(example_f1(&labels[j].0, &labels[j].1, policy));
        v
    };
    let sections: &[&str] = if args.whole {
        &["whole"]
    } else {
        &["findings", "impression"]
    };
    let mut sums = vec![vec![0.0; metric_names.len()]; sections.len()];
    let mut valid = 0usize;
    let mut output = Output::create(args.output.as_deref())?;
    for (n, (id, format_valid)) in lines.iter().enumerate() {
        let mut obj = Map::new();
        if let Some(id) = id {
            obj.insert("id".into(), id.clone());
        }
        if !args.whole {
            obj.insert("format_valid".into(), Value::Bool(*format_valid));
        }
        valid += usize::from(*format_valid);
        for (s, name) in sections.iter().enumerate() {
            let vals = unit_values(n * sections.len() + s);
            let mut m = Map::new();
            for (k, (key, v)) in metric_names.iter().zip(&vals).enumerate() {
                sums[s][k] += v;
                m.insert(key.to_string(), Value::from(*v));
            }
            obj.insert(name.to_string(), Value::Object(m));
        }
        let w = output.writer();
        serde_json::to_writer(&mut *w, &Value::Object(obj))?;
        w.write_all(b"\n")?;
    }
    output.finish()?;
    let count = lines.len().max(1) as f64;
    eprintln!(
        "sdr score: {} pairs{}; METEOR {} WordNet",
        lines.len(),
        if args.whole {
            String::new()
        } else {
            format!(", {valid} well-formed hypotheses")
        },
        if wordnet.is_some() { "with" } else { "without" }
    );
    for (s, name) in sections.iter().enumerate() {
        let cells: Vec<String> = metric_names
            .iter()
            .zip(&sums[s])
            .map(|(k, v)| format!("{k} {:.4}", v / count))
            .collect();
        eprintln!("  mean {name}: {}", cells.join(", "));
        let (h, r): (Vec<Labels>, Vec<Labels>) = labels
            .iter()
            .skip(s)
            .step_by(sections.len())
            .cloned()
            .unzip();
        let rep = chexpert_f1(&h, &r, policy).map_err(|e| anyhow!("{e}"))?;
        eprintln!(
            "  {name} CheXpert-rule F1 (corpus, uncertain as {}): macro-14 {:.4}, micro-14 {:.4}, macro-5 {:.4}, micro-5 {:.4}",
            if args.uncertain_negative { "absent" } else { "present" },
            rep.macro_14.f1,
            rep.micro_14.f1,
            rep.macro_5.f1,
            rep.micro_5.f1
        );
    }
    Ok(())
}
