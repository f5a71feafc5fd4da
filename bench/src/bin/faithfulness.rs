//! The faithfulness benchmark's scorer (docs/results/faithfulness.md): every
//! reward configuration and metric of the project on perturbed copies of IU
//! X-ray reports (`bench/faithfulness/cases.jsonl`, written by
//! `bench/faithfulness/make_cases.py`).
//!
//! ```text
//! faithfulness CASES.jsonl OUT.jsonl [--model DIR] [--lambda L[,L2,...]] [--unmatched U[,U2,...]] [--omitted O[,O2,...]] [--metrics M[,M2,...]] [--bertscore-model DIR] [--limit N] [--no-bertscore]
//! faithfulness lambda REPORTS.csv [--model DIR] [--limit N]
//! ```
//!
//! `lambda` derives the clinical cost's default strength (SPEC §10): every IU
//! X-ray train report (uid % 10 not 0 or 1, both sections) is paired with
//! another train report drawn at random (seeded), and the Chamfer distance
//! (cosine cost) between their Findings is computed; it prints the quantiles
//! and `λ = 2 x median`, so that one contradicted finding (which adds at
//! least `λ/2` to Chamfer) costs what an unrelated report costs.
//!
//! Per case it scores the candidate against the reference and the reference
//! against itself (so a drop is `self - candidate` also for the regularised
//! metrics, which do not give exactly 0 for identical sets), and writes one
//! JSON line `{"id", "uid", "kind", "self": {...}, "candidate": {...}}` whose
//! maps hold, per configuration:
//! - `cosine/<metric>`: the paper's reward `R = R_fmt + R_sem^F + R_sem^I`
//!   with the cosine cost, for each of the 15 metrics;
//! - `clinical/<metric>`: the same with the clinical cost (SPEC §10);
//! - `cosine+term/<metric>`: the cosine reward plus the report-level term
//!   (`clinical_weight = 1`: example-level CheXpert-rule F1, SPEC §4);
//! - `BLEU-4`, `ROUGE-L`, `METEOR`, `BERTScore-F1`: the mean of the Findings
//!   and Impression values (SPEC §7, `sdr score`'s implementation), and
//!   `CheXpert-rule F1`, the report's example-level F1.
//!
//! `bench/faithfulness/summarize.py` turns the lines into the tables.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use rayon::prelude::*;
use sdr_clinical::{Labeler, UncertainPolicy};
use sdr_core::cost::clinical::{ClinicalWeights, Fact};
use sdr_core::cost::PairCost;
use sdr_core::report::parse_report;
use sdr_core::reward::{section_term, RewardBreakdown, RewardConfig};
use sdr_core::{Metric, SetView};
use sdr_embed::{Encoder, EncoderOptions, SentenceEncoder};
use sdr_eval::bertscore::BertScorer;
use sdr_eval::report::{score_pairs, Scope, CHEXPERT_RULE_F1};
use sdr_eval::scores::TextScorer;
use serde_json::{json, Map, Value};

struct Case {
    id: String,
    uid: Value,
    kind: String,
    reference: String,
    candidate: String,
}

struct Args {
    cases: PathBuf,
    out: PathBuf,
    model: Option<PathBuf>,
    /// λ values: the first writes `clinical/<metric>`, every other one
    /// `clinical@λ/<metric>` (a sweep in one pass over the embeddings).
    lambdas: Vec<f64>,
    /// Weights of an unmatched finding (`ClinicalWeights::unmatched`, its
    /// hedged weight half of it), crossed with every λ: the grid's entries
    /// other than the first write `clinical@λ,unmatched=U/<metric>`.
    unmatched: Vec<f64>,
    /// Weights of a reference finding the candidate omits, crossed with the
    /// rest (`--unmatched` then weighs only a finding the candidate adds);
    /// both as `--unmatched` without: `clinical@λ,added=U,omitted=O/<metric>`
    /// where they differ.
    omitted: Vec<f64>,
    /// Only these metrics (specs as `Metric` parses them); all 15 without.
    metrics: Vec<Metric>,
    /// BERTScore judge (a RoBERTa/BERT folder: all-MiniLM-L6-v2 for a judge
    /// independent of the reward); the reward's own encoder without it.
    bertscore_model: Option<PathBuf>,
    limit: Option<usize>,
    /// Skip BERTScore (token embeddings of every section text: the slow part).
    no_bertscore: bool,
}

fn args() -> Result<Args> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let usage =
        "faithfulness CASES.jsonl OUT.jsonl [--model DIR] [--lambda L[,L2,...]] [--unmatched U[,U2,...]] [--omitted O[,O2,...]] [--metrics M[,M2,...]] [--bertscore-model DIR] [--limit N] [--no-bertscore]";
    let mut pos = Vec::new();
    let (mut model, mut lambdas, mut limit, mut no_bertscore) = (None, Vec::new(), None, false);
    let mut bertscore_model = None;
    let (mut unmatched, mut omitted, mut metrics) = (Vec::new(), Vec::new(), Vec::new());
    let mut it = a.into_iter();
    while let Some(x) = it.next() {
        let mut val = |name: &str| {
            it.next()
                .ok_or_else(|| anyhow!("{name} needs a value; {usage}"))
        };
        match x.as_str() {
            "--model" => model = Some(PathBuf::from(val("--model")?)),
            "--lambda" => lambdas.extend(numbers("--lambda", &val("--lambda")?)?),
            "--unmatched" => unmatched.extend(numbers("--unmatched", &val("--unmatched")?)?),
            "--omitted" => omitted.extend(numbers("--omitted", &val("--omitted")?)?),
            "--metrics" => {
                let v = val("--metrics")?;
                for x in v.split(',') {
                    metrics.push(
                        x.trim()
                            .parse::<Metric>()
                            .map_err(|e| anyhow!("--metrics: `{x}`: {e}"))?,
                    );
                }
            }
            "--bertscore-model" => bertscore_model = Some(PathBuf::from(val("--bertscore-model")?)),
            "--limit" => {
                let v = val("--limit")?;
                limit = Some(
                    v.parse()
                        .map_err(|_| anyhow!("--limit: `{v}` is not a count"))?,
                )
            }
            "--no-bertscore" => no_bertscore = true,
            "-h" | "--help" => {
                println!("{usage}\n(see the doc comment of bench/src/bin/faithfulness.rs)");
                std::process::exit(0);
            }
            _ if x.starts_with("--") => bail!("unknown option {x}; {usage}"),
            _ => pos.push(PathBuf::from(x)),
        }
    }
    let [cases, out]: [PathBuf; 2] = pos
        .try_into()
        .map_err(|_| anyhow!("two paths expected; {usage}"))?;
    Ok(Args {
        cases,
        out,
        model,
        lambdas,
        unmatched,
        omitted,
        metrics,
        bertscore_model,
        limit,
        no_bertscore,
    })
}

/// A comma-separated list of numbers given to `option`.
fn numbers(option: &str, list: &str) -> Result<Vec<f64>> {
    list.split(',')
        .map(|x| {
            x.trim()
                .parse()
                .map_err(|_| anyhow!("{option}: `{x}` is not a number"))
        })
        .collect()
}

fn read_cases(path: &PathBuf, limit: Option<usize>) -> Result<Vec<Case>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut cases = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line)
            .with_context(|| format!("{}:{}: not JSON", path.display(), n + 1))?;
        let s = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| anyhow!("{}:{}: no string `{k}`", path.display(), n + 1))
        };
        cases.push(Case {
            id: s("id")?,
            uid: v.get("uid").cloned().unwrap_or(Value::Null),
            kind: s("kind")?,
            reference: s("reference")?,
            candidate: s("candidate")?,
        });
        if limit.is_some_and(|l| cases.len() >= l) {
            break;
        }
    }
    Ok(cases)
}

/// Sentence rows and facts of every distinct sentence.
struct Table {
    dim: usize,
    index: HashMap<String, usize>,
    rows: Vec<f32>,
    facts: Vec<Vec<Fact>>,
}

impl Table {
    fn set(&self, sentences: &[String]) -> (Vec<f32>, Vec<Vec<Fact>>) {
        let mut rows = Vec::with_capacity(sentences.len() * self.dim);
        let mut facts = Vec::with_capacity(sentences.len());
        for s in sentences {
            let i = self.index[s];
            rows.extend_from_slice(&self.rows[i * self.dim..(i + 1) * self.dim]);
            facts.push(self.facts[i].clone());
        }
        (rows, facts)
    }
}

/// The three reward families of one (candidate, reference) pair, per metric.
fn rewards(
    table: &Table,
    weights: &[ClinicalWeights],
    metrics: &[Metric],
    cand: &str,
    reference: &str,
    f1: f64,
    out: &mut Map<String, Value>,
) -> Result<()> {
    let (c, r) = (parse_report(cand), parse_report(reference));
    if !c.format_valid || !r.format_valid {
        bail!("a case without both sections");
    }
    // Per section: the cosine terms, then one list per λ.
    let mut per_section: Vec<(Vec<f64>, Vec<Vec<f64>>)> = Vec::new();
    for (cs, rs) in [(&c.findings, &r.findings), (&c.impression, &r.impression)] {
        let (ca, fa) = table.set(cs);
        let (ra, fb) = table.set(rs);
        let (va, vb) = (SetView::new(&ca, table.dim), SetView::new(&ra, table.dim));
        let cos = PairCost::between(&va, &vb, true)?;
        let eval = |pc: &PairCost<'_>| -> Result<Vec<f64>> {
            metrics
                .iter()
                .map(|m| Ok(section_term(&m.evaluate(pc)?)))
                .collect()
        };
        let clin = weights
            .iter()
            .map(|w| eval(&cos.clone().clinical(&fa, &fb, w)?.0))
            .collect::<Result<Vec<_>>>()?;
        per_section.push((eval(&cos)?, clin));
    }
    // The paper's reward of a well-formed pair, composed by sdr-core with its
    // weights (`lambda_fmt = lambda_sem = 1`; `combine` reads only the weights).
    let config = RewardConfig::default();
    let reward = |findings: f64, impression: f64| RewardBreakdown {
        format: 1.0,
        findings,
        impression,
        reward: config.combine(1.0, findings, impression),
        ..RewardBreakdown::default()
    };
    let default_unmatched = ClinicalWeights::default().unmatched;
    for (k, m) in metrics.iter().enumerate() {
        let cosine = reward(per_section[0].0[k], per_section[1].0[k]);
        out.insert(format!("cosine/{m}"), json!(cosine.reward));
        for (l, w) in weights.iter().enumerate() {
            let clinical = reward(per_section[0].1[l][k], per_section[1].1[l][k]).reward;
            let key = if l == 0 {
                format!("clinical/{m}")
            } else if w.unmatched != w.omitted {
                format!(
                    "clinical@{},added={},omitted={}/{m}",
                    w.lambda, w.unmatched, w.omitted
                )
            } else if w.unmatched == default_unmatched {
                format!("clinical@{}/{m}", w.lambda)
            } else {
                format!("clinical@{},unmatched={}/{m}", w.lambda, w.unmatched)
            };
            out.insert(key, json!(clinical));
        }
        let mut term = cosine;
        term.add_clinical(CLINICAL_WEIGHT, f1);
        out.insert(format!("cosine+term/{m}"), json!(term.reward));
    }
    Ok(())
}

/// Weight of the report-level term in `cosine+term/<metric>` (`clinical_weight`).
const CLINICAL_WEIGHT: f64 = 1.0;

/// The reward's encoder, `mpnet` from `model` (else `$SDR_MODEL`, else the
/// default cache folder), loaded by the one loader with the default options.
fn load_encoder(model: Option<&Path>) -> Result<Arc<Encoder>> {
    let loaded = sdr_embed::open_encoder("mpnet", model, EncoderOptions::default())
        .map_err(|e| anyhow!("{e}"))?;
    if let Some(notice) = &loaded.notice {
        eprintln!("{notice}");
    }
    loaded
        .model
        .ok_or_else(|| anyhow!("the mpnet encoder loaded without its model"))
}

/// Embeds `sentences` (distinct) in chunks.
fn embed_all(enc: &Encoder, sentences: &[&str]) -> Result<Vec<f32>> {
    let mut rows = Vec::with_capacity(sentences.len() * enc.dim());
    for chunk in sentences.chunks(256) {
        rows.extend(SentenceEncoder::embed(enc, chunk).map_err(|e| anyhow!("{e}"))?);
    }
    Ok(rows)
}

/// `faithfulness lambda`: see the module docs.
fn derive_lambda(rest: &[String]) -> Result<()> {
    let usage = "faithfulness lambda REPORTS.csv [--model DIR] [--limit N]";
    let (mut csv_path, mut model, mut limit) = (None, None, None);
    let mut it = rest.iter();
    while let Some(x) = it.next() {
        match x.as_str() {
            "--model" => model = Some(PathBuf::from(it.next().ok_or_else(|| anyhow!("{usage}"))?)),
            "--limit" => {
                let v = it.next().ok_or_else(|| anyhow!("{usage}"))?;
                limit = Some(
                    v.parse::<usize>()
                        .map_err(|_| anyhow!("--limit: `{v}` is not a count"))?,
                )
            }
            _ if csv_path.is_none() && !x.starts_with("--") => csv_path = Some(PathBuf::from(x)),
            _ => bail!("unexpected argument {x}; {usage}"),
        }
    }
    let csv_path = csv_path.ok_or_else(|| anyhow!("{usage}"))?;
    let mut reader = csv::Reader::from_path(&csv_path)
        .with_context(|| format!("reading {}", csv_path.display()))?;
    let headers = reader.headers()?.clone();
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| anyhow!("{}: no `{name}` column", csv_path.display()))
    };
    let (cu, cf, ci) = (col("uid")?, col("findings")?, col("impression")?);
    let mut reports: Vec<Vec<String>> = Vec::new();
    for row in reader.records() {
        let row = row?;
        let uid: u64 = row[cu]
            .trim()
            .parse()
            .with_context(|| format!("uid `{}`", &row[cu]))?;
        let (f, i) = (row[cf].trim(), row[ci].trim());
        if uid % 10 <= 1 || f.is_empty() || i.is_empty() {
            continue;
        }
        let p = parse_report(&format!("Findings: {f}\nImpression: {i}"));
        if p.format_valid {
            reports.push(p.findings);
        }
        if limit.is_some_and(|l| reports.len() >= l) {
            break;
        }
    }
    let model = load_encoder(model.as_deref())?;
    let enc: &Encoder = &model;
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut distinct: Vec<&str> = Vec::new();
    for s in reports.iter().flatten() {
        if !index.contains_key(s.as_str()) {
            index.insert(s, distinct.len());
            distinct.push(s);
        }
    }
    eprintln!(
        "{} train reports, {} distinct Findings sentences",
        reports.len(),
        distinct.len()
    );
    let rows = embed_all(enc, &distinct)?;
    let dim = enc.dim();
    let set = |r: &[String]| -> Vec<f32> {
        r.iter()
            .flat_map(|s| {
                let i = index[s.as_str()];
                rows[i * dim..(i + 1) * dim].iter().copied()
            })
            .collect()
    };
    // A fixed LCG (Knuth's MMIX constants), seed 0: each report's partner.
    let mut state: u64 = 0;
    let mut next = |n: usize| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) as usize) % n
    };
    let mut d = Vec::with_capacity(reports.len());
    for (k, r) in reports.iter().enumerate() {
        let mut j = next(reports.len() - 1);
        if j >= k {
            j += 1;
        }
        let (a, b) = (set(r), set(&reports[j]));
        let e = Metric::Chamfer.evaluate(&PairCost::between(
            &SetView::new(&a, dim),
            &SetView::new(&b, dim),
            false,
        )?)?;
        d.push(e.value);
    }
    d.sort_by(f64::total_cmp);
    let q = |p: f64| d[((d.len() - 1) as f64 * p).round() as usize];
    println!(
        "{}",
        json!({
            "pairs": d.len(),
            "encoder": SentenceEncoder::name(enc),
            "chamfer_quantiles": {"10": q(0.1), "25": q(0.25), "50": q(0.5), "75": q(0.75), "90": q(0.9)},
            "lambda": 2.0 * q(0.5),
        })
    );
    Ok(())
}

fn main() -> Result<()> {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    if raw.first().map(String::as_str) == Some("lambda") {
        return derive_lambda(&raw[1..]);
    }
    let a = args()?;
    let cases = read_cases(&a.cases, a.limit)?;
    let model = load_encoder(a.model.as_deref())?;
    let enc: &Encoder = &model;
    let labeler = Labeler::default();
    let lambdas = if a.lambdas.is_empty() {
        vec![ClinicalWeights::default().lambda]
    } else {
        a.lambdas.clone()
    };
    let unmatched = if a.unmatched.is_empty() {
        vec![ClinicalWeights::default().unmatched]
    } else {
        a.unmatched.clone()
    };
    let weights: Vec<ClinicalWeights> = lambdas
        .iter()
        .flat_map(|&lambda| unmatched.iter().map(move |&u| (lambda, u)))
        .flat_map(|(lambda, u)| {
            let omitted = if a.omitted.is_empty() {
                vec![u]
            } else {
                a.omitted.clone()
            };
            omitted.into_iter().map(move |o| (lambda, u, o))
        })
        .map(|(lambda, u, o)| {
            let w = ClinicalWeights {
                lambda,
                unmatched: u,
                unmatched_hedged: 0.5 * u,
                omitted: o,
                omitted_hedged: 0.5 * o,
                ..Default::default()
            };
            w.check()
                .map(|_| w)
                .map_err(|e| anyhow!("--lambda / --unmatched / --omitted: {e}"))
        })
        .collect::<Result<_>>()?;
    let metrics = if a.metrics.is_empty() {
        Metric::all()
    } else {
        a.metrics.clone()
    };

    // Every distinct sentence, embedded and annotated once.
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut distinct: Vec<String> = Vec::new();
    for c in &cases {
        for text in [&c.reference, &c.candidate] {
            let p = parse_report(text);
            for s in p.findings.into_iter().chain(p.impression) {
                if !index.contains_key(&s) {
                    index.insert(s.clone(), distinct.len());
                    distinct.push(s);
                }
            }
        }
    }
    eprintln!(
        "{} cases, {} distinct sentences",
        cases.len(),
        distinct.len()
    );
    let refs: Vec<&str> = distinct.iter().map(String::as_str).collect();
    let rows = embed_all(enc, &refs)?;
    let table = Table {
        dim: enc.dim(),
        facts: labeler.facts_of(refs.iter().copied()),
        index,
        rows,
    };

    // Text metrics, per section, for candidate and self pairs.
    let mut pairs: Vec<(&str, &str)> = Vec::with_capacity(cases.len() * 2);
    for c in &cases {
        pairs.push((c.candidate.as_str(), c.reference.as_str()));
        pairs.push((c.reference.as_str(), c.reference.as_str()));
    }
    let scorer = TextScorer::new(Default::default(), None);
    let minilm = match &a.bertscore_model {
        Some(dir) => Some(
            sdr_embed::RobertaEncoder::load(dir, None)
                .map_err(|e| anyhow!("--bertscore-model {}: {e}", dir.display()))?,
        ),
        None => None,
    };
    let judge = match &minilm {
        Some(m) => BertScorer::new(m),
        None => BertScorer::new(enc),
    };
    let bert = if a.no_bertscore { None } else { Some(&judge) };
    let scores = score_pairs(
        &pairs,
        Scope::Sections,
        &scorer,
        bert,
        UncertainPolicy::Positive,
    )?;
    // The report-level CheXpert-rule F1 (labels of the whole texts) of every
    // pair: the same table scoring the texts whole (its text metrics unused).
    let whole = score_pairs(
        &pairs,
        Scope::Whole,
        &scorer,
        None,
        UncertainPolicy::Positive,
    )?;
    let f1_col = whole
        .metrics
        .iter()
        .position(|m| *m == CHEXPERT_RULE_F1)
        .expect("metric column");
    let wanted: Vec<&str> = ["BLEU-4", "ROUGE-L", "METEOR", "BERTScore-F1"]
        .into_iter()
        .filter(|m| scores.metrics.contains(m))
        .collect();
    let cols: Vec<usize> = wanted
        .iter()
        .map(|n| {
            scores
                .metrics
                .iter()
                .position(|m| m == n)
                .expect("metric column")
        })
        .collect();

    let lines: Vec<String> = cases
        .par_iter()
        .enumerate()
        .map(|(n, c)| -> Result<String> {
            let mut maps = Vec::new();
            for (p, cand) in [(2 * n, &c.candidate), (2 * n + 1, &c.reference)] {
                let mut m = Map::new();
                for (name, &k) in wanted.iter().zip(&cols) {
                    let v = (scores.values[2 * p][k] + scores.values[2 * p + 1][k]) / 2.0;
                    m.insert(name.to_string(), json!(v));
                }
                let f1 = whole.values[p][f1_col];
                m.insert(CHEXPERT_RULE_F1.into(), json!(f1));
                rewards(&table, &weights, &metrics, cand, &c.reference, f1, &mut m)
                    .with_context(|| format!("case {}", c.id))?;
                maps.push(Value::Object(m));
            }
            let self_ = maps.pop().expect("two maps");
            let cand = maps.pop().expect("two maps");
            Ok(
                json!({"id": c.id, "uid": c.uid, "kind": c.kind, "candidate": cand, "self": self_})
                    .to_string(),
            )
        })
        .collect::<Result<_>>()?;
    sdr_io::write_atomic(&a.out, |f| {
        use std::io::Write;
        for l in &lines {
            writeln!(f, "{l}")?;
        }
        Ok(())
    })
    .with_context(|| format!("writing {}", a.out.display()))?;
    eprintln!(
        "wrote {} ({} cases; encoder {}, lambda {:?}, BERTScore judge {})",
        a.out.display(),
        lines.len(),
        SentenceEncoder::name(enc),
        lambdas,
        if a.no_bertscore {
            "none".to_string()
        } else {
            judge.label()
        }
    );
    Ok(())
}
