//! `sdr prune`: distance-guided pruning (paper Alg. 1, SPEC §6), live against
//! a generation back-end or replayed over already generated candidates.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, Result};
use sdr_core::report::SEGMENTER_VERSION;
use sdr_core::Metric;
use sdr_corpus::{
    argmin, embed_candidates, Aggregation, Convergence, Corpus, CorpusIndex, CorpusScorer,
    PartialSections, Policy, ScoreOptions, SentenceEncoder,
};
use sdr_gen::replay::{Replay, Stored};
use sdr_gen::{prune, GenError, LockStep, Partial, PruneConfig, PruneOutcome, Round};
use serde::{Deserialize, Serialize};

use crate::common::{
    check_outputs, convergence_warning, failure_warning, knn_warning, log_line, progress_bar,
    BackendArgs, EncoderArgs, GenRecord, StudyArgs,
};
use crate::jsonl::{id_text, parse_json, read_text, Output};

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
    /// Candidates decoded to their end when the rounds stop; the best complete
    /// report among them is chosen (the paper: 1; 2 covers a survivor that
    /// ends malformed, at the cost of its tokens).
    #[arg(long, default_value_t = 1, value_name = "S")]
    pub survivors: usize,
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

/// SPEC §6's partial scores of `parts` (the rule is `sdr_corpus::partial`),
/// in the form `sdr_gen::prune` calls; counts what did not converge.
fn score_partials(
    scorer: &CorpusScorer<'_>,
    parts: &[Partial],
    stats: &mut Stats,
) -> Result<Vec<f64>, GenError> {
    let sections: Vec<PartialSections<'_, String>> = parts
        .iter()
        .map(|p| PartialSections {
            findings: &p.findings,
            impression: &p.impression,
        })
        .collect();
    let scored = scorer
        .score(&sections)
        .map_err(|e| GenError::Score(Box::new(e)))?;
    stats.evaluated += scored.evaluated;
    stats.convergence += scored.convergence;
    Ok(scored.scores)
}

/// Corpus distances computed (partial scores and standard selection), and
/// how many did not converge or failed.
#[derive(Default)]
struct Stats {
    evaluated: usize,
    convergence: Convergence,
}

#[derive(Deserialize)]
struct ReplayLine {
    id: serde_json::Value,
    candidates: Vec<String>,
    #[serde(default)]
    token_ends: Option<Vec<Vec<usize>>>,
    /// `sdr generate`'s end of each candidate; an `{"error": ...}` is refused.
    #[serde(default)]
    finish: Vec<serde_json::Value>,
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

/// One study's result, before it becomes a [`PruneRecord`].
struct Study<'a> {
    id: String,
    mode: &'static str,
    outcome: PruneOutcome,
    full: Option<usize>,
    estimated: bool,
    standard: Option<(usize, &'a str)>,
    seconds: f64,
}

/// What every study shares: the scorer, the settings, the output and the totals.
struct Run<'a> {
    scorer: CorpusScorer<'a>,
    index: &'a CorpusIndex<'a>,
    encoder: &'a dyn SentenceEncoder,
    config: PruneConfig,
    out: Output,
    studies: usize,
    used: usize,
    full: usize,
    agree: usize,
    compared: usize,
    stats: Stats,
}

impl Run<'_> {
    fn prune(&mut self, run: LockStep<'_>) -> Result<PruneOutcome, GenError> {
        let (scorer, stats) = (&self.scorer, &mut self.stats);
        let mut score = |parts: &[Partial]| score_partials(scorer, parts, stats);
        prune(run, &mut score, self.config, |_| {})
    }

    fn emit(&mut self, s: Study<'_>) -> Result<()> {
        let chosen = s.outcome.chosen;
        self.studies += 1;
        self.used += s.outcome.tokens_used;
        if let Some(f) = s.full {
            self.full += f;
        }
        if let Some((c, _)) = s.standard {
            self.compared += 1;
            self.agree += usize::from(c == chosen);
        }
        let rec = PruneRecord {
            id: s.id,
            mode: s.mode,
            policy: self.scorer.policy().to_string(),
            warmup: self.config.warmup,
            fraction: self.config.fraction,
            chosen,
            text: &s.outcome.candidates[chosen].text,
            tokens_used: s.outcome.tokens_used,
            tokens_produced: s.outcome.tokens_produced,
            tokens_full: s.full,
            saving: s
                .full
                .map(|f| 1.0 - s.outcome.tokens_used as f64 / f as f64),
            estimated_tokens: s.estimated,
            standard_chosen: s.standard.map(|x| x.0),
            standard_text: s.standard.map(|x| x.1),
            rounds: &s.outcome.rounds,
            candidate_tokens: s.outcome.candidates.iter().map(|c| c.tokens).collect(),
            seconds: s.seconds,
        };
        serde_json::to_writer(self.out.writer(), &rec)?;
        self.out.writer().write_all(b"\n")?;
        Ok(())
    }

    /// The summary line on stderr.
    fn summary(&self, secs: f64) -> String {
        let mut line = format!(
            "prune: {} studies, {} tokens generated",
            self.studies, self.used
        );
        if self.full > 0 {
            line += &format!(
                " of {} for the full candidates: {:.1} % saved",
                self.full,
                100.0 * (1.0 - self.used as f64 / self.full as f64)
            );
        }
        if self.compared > 0 {
            line += &format!(
                "; same pick as standard selection in {}/{}",
                self.agree, self.compared
            );
        }
        format!("{line} ({secs:.1} s, {})", self.scorer.policy())
    }
}

pub fn run(args: Args) -> Result<()> {
    let metric: Metric = args
        .metric
        .parse()
        .map_err(|e| anyhow!("--metric {}: {e}", args.metric))?;
    let agg: Aggregation = args.agg.parse().map_err(|e| anyhow!("--agg: {e}"))?;
    let policy = Policy { metric, agg };
    let config = prune_config(&args)?;
    // Arguments and paths before any work: live runs refuse a bad request, a
    // missing --studies or a bad -o before the model loads.
    let is_live = args.replay.is_none();
    if is_live {
        args.backend.check()?;
        args.studies.check()?;
    }
    let studies = is_live.then_some(args.studies.studies.as_path());
    let prompt = is_live.then(|| args.studies.prompt_file()).flatten();
    check_outputs(
        &[("--output", args.output.as_deref())],
        &[
            args.replay.as_deref(),
            Some(&args.corpus),
            args.full.as_deref(),
            studies,
            prompt,
        ],
    )?;
    let encoder = args.encoder.load()?;
    let corpus = Corpus::open(&args.corpus)?;
    corpus.check_encoder(encoder.as_ref(), SEGMENTER_VERSION)?;
    let index = corpus.index()?;
    if let Some(line) = knn_warning(&policy.agg, &index) {
        log_line(line);
    }
    let mut run = Run {
        scorer: CorpusScorer::new(&index, encoder.as_ref(), policy),
        index: &index,
        encoder: encoder.as_ref(),
        config,
        out: Output::create(args.output.as_deref())?,
        studies: 0,
        used: 0,
        full: 0,
        agree: 0,
        compared: 0,
        stats: Stats::default(),
    };
    let t0 = Instant::now();
    match &args.replay {
        Some(path) => replay(&args, path, &mut run)?,
        None => live(&args, &mut run)?,
    }
    let summary = run.summary(t0.elapsed().as_secs_f64());
    let Stats {
        evaluated,
        convergence,
    } = run.stats;
    run.out.finish()?;
    if !args.quiet {
        log_line(&summary);
    }
    let warnings = [
        convergence_warning(convergence.unconverged, evaluated),
        failure_warning(convergence.failed, evaluated),
    ];
    for line in warnings.into_iter().flatten() {
        log_line(line);
    }
    Ok(())
}

/// The pruning settings; each bad one is refused naming its option.
fn prune_config(args: &Args) -> Result<PruneConfig> {
    let config = PruneConfig {
        warmup: args.warmup,
        fraction: args.fraction,
        survivors: args.survivors,
    };
    if config.warmup == 0 {
        return Err(anyhow!("--warmup 0: must be at least 1 sentence"));
    }
    if config.survivors == 0 {
        return Err(anyhow!("--survivors 0: must be at least 1 candidate"));
    }
    if !(config.fraction > 0.0 && config.fraction < 1.0) {
        return Err(anyhow!("--fraction {}: must be in (0, 1)", config.fraction));
    }
    // sdr-gen's own rules, should they ever be stricter.
    config
        .validate()
        .map_err(|e| anyhow!("--warmup/--fraction/--survivors: {e}"))?;
    Ok(config)
}

/// `--replay FILE`: prune over stored candidates, with standard best-of-K
/// under the same policy alongside.
fn replay(args: &Args, path: &Path, run: &mut Run<'_>) -> Result<()> {
    let name = path.display().to_string();
    let text = read_text(path)?;
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    let pb = progress_bar(lines.len(), args.quiet, "pruning (replay)");
    for (no, line) in lines {
        let where_ = format!("{name}:{}", no + 1);
        let l: ReplayLine = parse_json(line).map_err(|e| anyhow!("{where_}: {e}"))?;
        crate::common::refuse_failed(&where_, &crate::jsonl::id_text(&l.id), &l.finish)?;
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
        let emb = embed_candidates(&texts, run.encoder)?;
        let policy = run.scorer.policy();
        let s = run
            .index
            .score(&emb, std::slice::from_ref(&policy), ScoreOptions::default())?;
        run.stats.evaluated += s.evaluated;
        run.stats.convergence += s.convergence;
        let std_choice = argmin(&s.total[0]).index;
        let outcome = run
            .prune(LockStep::new(Box::new(replay)))
            .map_err(|e| anyhow!("{where_}: {e}"))?;
        run.emit(Study {
            id: id_text(&l.id),
            mode: "replay",
            outcome,
            full: Some(full),
            estimated,
            standard: Some((std_choice, &l.candidates[std_choice])),
            seconds: t.elapsed().as_secs_f64(),
        })?;
        pb.inc(1);
    }
    pb.finish_and_clear();
    Ok(())
}

/// Full token counts per study id from a `sdr generate` output (`--full`).
fn full_tokens(path: Option<&Path>) -> Result<HashMap<String, usize>> {
    let Some(p) = path else {
        return Ok(HashMap::new());
    };
    let name = p.display().to_string();
    let text = read_text(p)?;
    let mut m = HashMap::new();
    for (no, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let r: GenRecord = parse_json(line).map_err(|e| anyhow!("{name}:{}: {e}", no + 1))?;
        m.insert(r.id.clone(), r.tokens.iter().sum());
    }
    Ok(m)
}

/// Live: generate each study's candidates in lock-step and prune them.
fn live(args: &Args, run: &mut Run<'_>) -> Result<()> {
    let fulls = full_tokens(args.full.as_deref())?;
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
        let outcome = run
            .prune(LockStep::new(batch))
            .map_err(|e| anyhow!("study {}: {e}", study.id))?;
        let full = fulls.get(&study.id).copied();
        if let (Some(f), None) = (&args.full, full) {
            return Err(anyhow!("study {}: not in --full {}", study.id, f.display()));
        }
        run.emit(Study {
            id: study.id.clone(),
            mode: "live",
            outcome,
            full,
            estimated: false,
            standard: None,
            seconds: t.elapsed().as_secs_f64(),
        })?;
        pb.inc(1);
    }
    pb.finish_and_clear();
    Ok(())
}
