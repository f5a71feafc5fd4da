//! `sdr prune`: distance-guided pruning (paper Alg. 1, SPEC §6), live against
//! a generation back-end or replayed over already generated candidates.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use sdr_core::report::SEGMENTER_VERSION;
use sdr_core::Metric;
use sdr_corpus::{
    argmin, embed_candidates, Aggregation, CandidateEmbedding, Corpus, CorpusIndex, Policy,
    ScoreOptions, SentenceEncoder,
};
use sdr_gen::replay::{Replay, Stored};
use sdr_gen::{
    prune, GenError, LockStep, Partial, PartialScorer, PruneConfig, PruneOutcome, Round,
};
use serde::{Deserialize, Serialize};

use super::corpus::EncoderArgs;
use super::generate::{progress_bar, BackendArgs, GenRecord, StudyArgs};
use crate::jsonl::{id_text, parse_json, Output};

#[derive(clap::Args)]
#[command(
    after_help = "Live: every study's K candidates are generated in lock-step, one sentence at a time;\n\
after the warm-up each round scores the active candidates' complete sentences against the\n\
corpus (mean of the aggregated Findings / Impression distances over the sections present;\n\
+inf when neither is) and cancels the ceil(p * active) worst; the survivor is decoded to its end.\n\
Replay (--replay FILE): the same over the full candidates of `sdr generate` (or any\n\
{\"id\", \"candidates\"} file; without token_ends, tokens are estimated as words and\n\
punctuation marks and the output says so), with standard best-of-K selection under the same\n\
policy alongside.\n\n\
Output line per study:\n  \
{\"id\": \"10\", \"mode\": \"replay\", \"policy\": \"chamfer@min\", \"chosen\": 3, \"text\": \"...\",\n   \
\"tokens_used\": 412, \"tokens_full\": 903, \"saving\": 0.544, \"tokens_produced\": 412,\n   \
\"standard_chosen\": 3, \"standard_text\": \"...\", \"estimated_tokens\": false, \"rounds\": [...]}\n\n\
Examples:\n  \
sdr prune --replay gen.jsonl --corpus iu-train.safetensors -o prune.jsonl\n  \
sdr prune --corpus iu-train.safetensors --limit 50 -k 8 --prompt p2 -o prune-live.jsonl"
)]
pub struct Args {
    /// Replay the full candidates in this file instead of generating.
    #[arg(long, value_name = "JSONL")]
    pub replay: Option<PathBuf>,
    /// Corpus file built by `sdr corpus build`.
    #[arg(long, value_name = "FILE")]
    pub corpus: PathBuf,
    /// Set distance (as in `sdr distances`).
    #[arg(long, short = 'm', default_value = "chamfer", value_name = "SPEC")]
    pub metric: String,
    /// Aggregation over the corpus: min, avg, or knn:k=K.
    #[arg(long, default_value = "min", value_name = "AGG")]
    pub agg: String,
    /// Sentences every candidate decodes before the first round (the paper's wu).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub warmup: usize,
    /// Fraction of the active candidates dropped per round.
    #[arg(long, short = 'p', default_value_t = 0.5, value_name = "P")]
    pub fraction: f64,
    /// Live only: the `sdr generate` output of the same studies and seeds,
    /// whose full token counts give the saving.
    #[arg(long, value_name = "JSONL")]
    pub full: Option<PathBuf>,
    #[command(flatten)]
    pub studies: StudyArgs,
    #[command(flatten)]
    pub backend: BackendArgs,
    #[command(flatten)]
    pub encoder: EncoderArgs,
    /// Write to this file (atomically) instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// No progress bar and no summary line on stderr.
    #[arg(long)]
    pub quiet: bool,
}

/// Scores partial outputs against the corpus under one policy.
struct CorpusScorer<'a> {
    index: &'a CorpusIndex<'a>,
    encoder: &'a dyn SentenceEncoder,
    policy: Policy,
}

impl PartialScorer for CorpusScorer<'_> {
    fn score(&mut self, parts: &[Partial]) -> Result<Vec<f64>, GenError> {
        let dim = self.encoder.dim();
        let mut sentences: Vec<&str> = Vec::new();
        for p in parts {
            sentences.extend(p.findings.iter().map(String::as_str));
            sentences.extend(p.impression.iter().map(String::as_str));
        }
        let emb = if sentences.is_empty() {
            Vec::new()
        } else {
            self.encoder
                .embed(&sentences)
                .map_err(|e| GenError::Score(e.to_string()))?
        };
        // The corpus scorer wants both sections; a missing one borrows the
        // other's rows and its distance is ignored below.
        let mut pos = 0;
        let mut cands = Vec::with_capacity(parts.len());
        for p in parts {
            let (nf, ni) = (p.findings.len(), p.impression.len());
            let f = emb[pos * dim..(pos + nf) * dim].to_vec();
            let i = emb[(pos + nf) * dim..(pos + nf + ni) * dim].to_vec();
            pos += nf + ni;
            cands.push(match (nf > 0, ni > 0) {
                (false, false) => None,
                (true, true) => Some(CandidateEmbedding {
                    findings: f,
                    impression: i,
                }),
                (true, false) => Some(CandidateEmbedding {
                    impression: f.clone(),
                    findings: f,
                }),
                (false, true) => Some(CandidateEmbedding {
                    findings: i.clone(),
                    impression: i,
                }),
            });
        }
        let scores = self
            .index
            .score(
                &cands,
                std::slice::from_ref(&self.policy),
                ScoreOptions::default(),
            )
            .map_err(|e| GenError::Score(e.to_string()))?;
        Ok(parts
            .iter()
            .zip(&scores.sections[0])
            .map(
                |(p, [df, di])| match (p.findings.is_empty(), p.impression.is_empty()) {
                    (true, true) => f64::INFINITY,
                    (false, true) => *df,
                    (true, false) => *di,
                    (false, false) => (df + di) / 2.0,
                },
            )
            .collect())
    }
}

#[derive(Deserialize)]
struct ReplayLine {
    id: serde_json::Value,
    candidates: Vec<String>,
    #[serde(default)]
    token_ends: Option<Vec<Vec<usize>>>,
}

#[derive(Serialize)]
struct PruneRecord<'a> {
    id: String,
    mode: &'static str,
    policy: String,
    warmup: usize,
    fraction: f64,
    chosen: usize,
    text: &'a str,
    tokens_used: usize,
    tokens_produced: usize,
    tokens_full: Option<usize>,
    saving: Option<f64>,
    estimated_tokens: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    standard_chosen: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    standard_text: Option<&'a str>,
    rounds: &'a [Round],
    candidate_tokens: Vec<usize>,
    seconds: f64,
}

struct Totals {
    studies: usize,
    used: usize,
    full: usize,
    agree: usize,
    compared: usize,
}

pub fn run(args: Args) -> Result<()> {
    let metric: Metric = args
        .metric
        .parse()
        .map_err(|e| anyhow!("--metric {}: {e}", args.metric))?;
    let agg: Aggregation = args.agg.parse().map_err(|e| anyhow!("--agg: {e}"))?;
    let policy = Policy { metric, agg };
    let config = PruneConfig {
        warmup: args.warmup,
        fraction: args.fraction,
    };
    config
        .validate()
        .map_err(|e| anyhow!("--warmup/--fraction: {e}"))?;
    let encoder = args.encoder.load()?;
    let corpus = Corpus::open(&args.corpus)?;
    corpus.check_compatible(
        &encoder.name(),
        &encoder.weights_sha256()?,
        SEGMENTER_VERSION,
    )?;
    let index = CorpusIndex::new(corpus.view())?;
    let mut scorer = CorpusScorer {
        index: &index,
        encoder: encoder.as_ref(),
        policy,
    };
    let mut out = Output::create(args.output.as_deref())?;
    let mut totals = Totals {
        studies: 0,
        used: 0,
        full: 0,
        agree: 0,
        compared: 0,
    };
    let t0 = Instant::now();
    let mut emit = |out: &mut Output,
                    id: String,
                    mode: &'static str,
                    outcome: PruneOutcome,
                    full: Option<usize>,
                    estimated: bool,
                    standard: Option<(usize, &str)>,
                    seconds: f64|
     -> Result<()> {
        let chosen = outcome.chosen;
        totals.studies += 1;
        totals.used += outcome.tokens_used;
        if let Some(f) = full {
            totals.full += f;
        }
        if let Some((s, _)) = standard {
            totals.compared += 1;
            totals.agree += usize::from(s == chosen);
        }
        let rec = PruneRecord {
            id,
            mode,
            policy: policy.to_string(),
            warmup: config.warmup,
            fraction: config.fraction,
            chosen,
            text: &outcome.candidates[chosen].text,
            tokens_used: outcome.tokens_used,
            tokens_produced: outcome.tokens_produced,
            tokens_full: full,
            saving: full.map(|f| 1.0 - outcome.tokens_used as f64 / f as f64),
            estimated_tokens: estimated,
            standard_chosen: standard.map(|s| s.0),
            standard_text: standard.map(|s| s.1),
            rounds: &outcome.rounds,
            candidate_tokens: outcome.candidates.iter().map(|c| c.tokens).collect(),
            seconds,
        };
        serde_json::to_writer(out.writer(), &rec)?;
        out.writer().write_all(b"\n")?;
        Ok(())
    };

    if let Some(path) = &args.replay {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {name}"))?;
        let lines: Vec<(usize, &str)> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .collect();
        let pb = progress_bar(lines.len(), args.quiet, "pruning (replay)");
        for (no, line) in lines {
            let where_ = format!("{name}:{}", no + 1);
            let l: ReplayLine = parse_json(line).map_err(|e| anyhow!("{where_}: {e}"))?;
            let t = Instant::now();
            let k = l.candidates.len();
            if let Some(te) = &l.token_ends {
                if te.len() != k {
                    return Err(anyhow!(
                        "{where_}: {} token_ends lists for {k} candidates",
                        te.len()
                    ));
                }
            }
            let stored: Vec<Stored> = l
                .candidates
                .iter()
                .enumerate()
                .map(|(i, c)| Stored {
                    text: c.clone(),
                    token_ends: l.token_ends.as_ref().map(|te| te[i].clone()),
                })
                .collect();
            let replay = Replay::new(stored, &where_)?;
            let estimated = replay.estimated();
            let full: usize = (0..k).map(|i| replay.full_tokens(i)).sum();
            // Standard best-of-K on the full candidates, same policy.
            let texts: Vec<&str> = l.candidates.iter().map(String::as_str).collect();
            let emb = embed_candidates(&texts, encoder.as_ref())?;
            let s = index.score(&emb, std::slice::from_ref(&policy), ScoreOptions::default())?;
            let std_choice = argmin(&s.total[0]).index;
            let outcome = prune(LockStep::new(Box::new(replay)), &mut scorer, config, |_| {})
                .map_err(|e| anyhow!("{where_}: {e}"))?;
            emit(
                &mut out,
                id_text(&l.id),
                "replay",
                outcome,
                Some(full),
                estimated,
                Some((std_choice, &l.candidates[std_choice])),
                t.elapsed().as_secs_f64(),
            )?;
            pb.inc(1);
        }
        pb.finish_and_clear();
    } else {
        let fulls: HashMap<String, usize> = match &args.full {
            None => HashMap::new(),
            Some(p) => {
                let name = p.display().to_string();
                let text =
                    std::fs::read_to_string(p).with_context(|| format!("cannot read {name}"))?;
                let mut m = HashMap::new();
                for (no, line) in text
                    .lines()
                    .enumerate()
                    .filter(|(_, l)| !l.trim().is_empty())
                {
                    let r: GenRecord =
                        parse_json(line).map_err(|e| anyhow!("{name}:{}: {e}", no + 1))?;
                    m.insert(r.id.clone(), r.tokens.iter().sum());
                }
                m
            }
        };
        let studies = args.studies.load()?;
        let template = args.studies.template();
        let mut backend = args.backend.load()?;
        let pb = progress_bar(studies.len(), args.quiet, "pruning (live)");
        for (si, study) in studies.iter().enumerate() {
            let req = args.backend.request(study, si, &template)?;
            let t = Instant::now();
            let batch = backend
                .start(&req)
                .map_err(|e| anyhow!("study {}: {e}", study.id))?;
            let outcome = prune(LockStep::new(batch), &mut scorer, config, |_| {})
                .map_err(|e| anyhow!("study {}: {e}", study.id))?;
            let full = fulls.get(&study.id).copied();
            if let (Some(f), None) = (&args.full, full) {
                return Err(anyhow!("study {}: not in --full {}", study.id, f.display()));
            }
            emit(
                &mut out,
                study.id.clone(),
                "live",
                outcome,
                full,
                false,
                None,
                t.elapsed().as_secs_f64(),
            )?;
            pb.inc(1);
        }
        pb.finish_and_clear();
    }
    out.finish()?;
    if !args.quiet {
        let secs = t0.elapsed().as_secs_f64();
        let mut line = format!(
            "prune: {} studies, {} tokens generated",
            totals.studies, totals.used
        );
        if totals.full > 0 {
            line += &format!(
                " of {} for the full candidates: {:.1} % saved",
                totals.full,
                100.0 * (1.0 - totals.used as f64 / totals.full as f64)
            );
        }
        if totals.compared > 0 {
            line += &format!(
                "; same pick as standard selection in {}/{}",
                totals.agree, totals.compared
            );
        }
        eprintln!("{line} ({:.1} s, {policy})", secs);
    }
    Ok(())
}
