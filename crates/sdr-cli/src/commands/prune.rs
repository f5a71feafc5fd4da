//! `sdr prune`: distance-guided pruning (paper Alg. 1, SPEC §6), live against
//! a generation back-end or replayed over already generated candidates.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, Result};
use sdr_core::report::SEGMENTER_VERSION;
use sdr_core::Metric;
use sdr_corpus::{
    Aggregation, Convergence, Corpus, CorpusCost, CorpusError, CorpusScorer, PartialSections,
    Policy,
};
use sdr_gen::replay::{GenRecord, ReplayRecord};
use sdr_gen::{
    study_seed, Backend, Distances, Generation, LiveStudy, Partial, PromptTemplate, PruneConfig,
    PruneRecord, Pruner, ReplayStudy, RunSettings, Sampling, StudyScorer, Totals,
};
use serde_json::Value;

use crate::common::{
    check_outputs, convergence_warning, failure_warning, knn_warning, log_line, partial_path,
    progress_bar, BackendArgs, EncoderArgs, Journal, Study as GenStudy, StudyArgs,
};
use crate::jsonl::{parse_json, read_text, Output};

#[derive(clap::Args)]
#[command(
    after_help = "Live: every study's K candidates are generated in lock-step, one sentence at a time;\n\
after the warm-up each round scores the active candidates' complete sentences against the\n\
corpus (mean of the aggregated Findings / Impression distances over the sections present;\n\
+inf when neither is) and cancels the ceil(p * active) worst; the survivor is decoded to its end.\n\
Replay (--replay FILE): the same over the full candidates of `sdr generate` (or any\n\
{\"id\", \"candidates\"} file; without token_ends, tokens are estimated as words and\n\
punctuation marks and the output says so), with standard best-of-K selection under the same\n\
policy alongside. A candidate's token_ends (byte offsets after each token) must not decrease,\n\
must fall on UTF-8 character boundaries and must end at the text's length; with \"tokens\"\n\
(non-negative integers, one per candidate) there is one end per token (at most one for an\n\
\"openai:...\" back-end, whose server may count more tokens than its stream had chunks).\n\
Replay refuses the options only a live run reads (studies, prompt and context, back-end and\n\
sampling, --full, --resume).\n\n\
Output line per study:\n  \
{\"id\": \"10\", \"mode\": \"replay\", \"policy\": \"chamfer@min\", \"chosen\": 3, \"text\": \"...\",\n   \
\"tokens_used\": 412, \"tokens_full\": 903, \"saving\": 0.544, \"tokens_produced\": 412,\n   \
\"standard_chosen\": 3, \"standard_text\": \"...\", \"estimated_tokens\": false, \"rounds\": [...],\n   \
\"survivors\": 1, \"corpus_sha256\": \"...\", \"distances\": {\"evaluated\": 96, \"unconverged\": 0, \"failed\": 0}}\n\
Live records add what generated them: \"backend\", \"prompt\", \"context\", \"seed\" and\n\
\"sampling\": {\"k\", \"temperature\", \"top_p\", \"max_tokens\", \"repetition_penalty\", \"prefill\"}.\n\n\
Live with -o FILE, each study is written to FILE.partial as soon as it is pruned; FILE appears\n\
when the run ends, with the studies in input order. A stopped run continues with the same\n\
command plus --resume, and its summary line counts the kept studies too. Replay writes FILE\n\
atomically at the end.\n\n\
Examples:\n  \
sdr prune --replay gen.jsonl --corpus iu-train.safetensors -o prune.jsonl\n  \
sdr prune --corpus iu-train.safetensors --limit 50 -k 8 --prompt p2 -o prune-live.jsonl\n  \
sdr prune --corpus iu-train.safetensors --limit 50 -k 8 --prompt p2 -o prune-live.jsonl --resume",
    mut_args = live_only
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
    /// The sentence cost of the partial scores and of standard best-of-K: `cosine`
    /// (the paper's) or `clinical` (`clinical:lambda=L`; SPEC §10: the cosine cost plus a
    /// penalty on sentences whose findings the corpus report contradicts or lacks). The
    /// records' `policy` then starts with `clinical/`.
    #[arg(long, default_value = "cosine", value_name = "COST",
          value_parser = crate::common::parse_cost)]
    pub cost: sdr_core::cost::CostKind,
    /// Sentences every candidate decodes before the first round (the paper's wu).
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 1,
        value_name = "N"
    )]
    pub warmup: usize,
    /// Fraction of the active candidates dropped per round.
    #[arg(
        allow_negative_numbers = true,
        long,
        short = 'p',
        default_value_t = 0.5,
        value_name = "P"
    )]
    pub fraction: f64,
    /// Candidates decoded to their end when the rounds stop; the best complete
    /// report among them is chosen (the paper: 1; 2 covers a survivor that
    /// ends malformed, at the cost of its tokens).
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 1,
        value_name = "S"
    )]
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
    /// Write to this file instead of stdout (live: through FILE.partial, one
    /// study at a time, renamed to FILE at the end; replay: atomically).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Live only: continue a stopped run: keep the studies already in
    /// FILE.partial (or FILE) and prune the rest. The settings must be the
    /// same (checked per study: back-end, prompt, context, seed, K, sampling,
    /// metric and aggregation, warm-up, fraction, survivors, corpus, --full).
    #[arg(long)]
    pub resume: bool,
    /// No progress bar and no summary line on stderr.
    #[arg(long)]
    pub quiet: bool,
}

/// Options that only a live run reads: given with `--replay`, they are an
/// error rather than silently unused (clap ignores defaults in conflicts).
const LIVE_ONLY: &[&str] = &[
    "studies",
    "split",
    "limit",
    "prompt",
    "context",
    "backend",
    "gguf",
    "base_url",
    "api_model",
    "api_key_env",
    "timeout",
    "retries",
    "k",
    "temperature",
    "top_p",
    "max_tokens",
    "seed",
    "repetition_penalty",
    "prefill",
    "full",
];

fn live_only(arg: clap::Arg) -> clap::Arg {
    if LIVE_ONLY.contains(&arg.get_id().as_str()) {
        arg.conflicts_with("replay")
    } else {
        arg
    }
}

/// `sdr_corpus`'s partial score and best-of-K as the runs of `sdr_gen` ask for them.
struct Scoring<'a>(CorpusScorer<'a>);

fn distances(evaluated: usize, c: Convergence) -> Distances {
    Distances {
        evaluated,
        unconverged: c.unconverged,
        failed: c.failed,
    }
}

impl StudyScorer for Scoring<'_> {
    type Error = CorpusError;

    fn partial_scores(&mut self, parts: &[Partial]) -> Result<(Vec<f64>, Distances), CorpusError> {
        let sections: Vec<PartialSections<'_, String>> = parts
            .iter()
            .map(|p| PartialSections {
                findings: &p.findings,
                impression: &p.impression,
            })
            .collect();
        let s = self.0.score(&sections)?;
        Ok((s.scores, distances(s.evaluated, s.convergence)))
    }

    fn best_of_k(&mut self, texts: &[&str]) -> Result<(usize, Distances), CorpusError> {
        let b = self.0.best_of_k(texts)?;
        Ok((b.selection.index, distances(b.evaluated, b.convergence)))
    }
}

/// Where the records go.
enum Sink {
    /// Replay: written at once, atomically, at the end.
    Whole(Output),
    /// Live: one study at a time through `FILE.partial`, with the input
    /// index of each record in file order (kept ones first).
    Journal(Journal, Vec<usize>),
}

impl Sink {
    fn write(&mut self, index: usize, rec: &PruneRecord<'_>) -> Result<()> {
        let line = serde_json::to_string(rec)?;
        match self {
            Sink::Whole(out) => {
                let w = out.writer();
                w.write_all(line.as_bytes())?;
                w.write_all(b"\n")?;
            }
            Sink::Journal(journal, order) => {
                journal.append(&line)?;
                order.push(index);
            }
        }
        Ok(())
    }
}

/// The summary line on stderr.
fn summary(t: Totals, policy: &str, secs: f64) -> String {
    let mut line = format!("prune: {} studies, {} tokens generated", t.studies, t.used);
    if t.full > 0 {
        line += &format!(
            " of {} for the full candidates: {:.1} % saved",
            t.full,
            100.0 * (1.0 - t.used as f64 / t.full as f64)
        );
    }
    if t.compared > 0 {
        line += &format!(
            "; same pick as standard selection in {}/{}",
            t.agree, t.compared
        );
    }
    format!("{line} ({secs:.1} s, {policy})")
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
    // missing --studies or a bad -o before the model loads, and before
    // FILE.partial is made.
    let is_live = args.replay.is_none();
    let dest = args.output.as_deref().filter(|p| *p != Path::new("-"));
    if args.resume && !is_live {
        return Err(anyhow!(
            "--resume continues a live run; --replay writes its output at once"
        ));
    }
    if args.resume && dest.is_none() {
        return Err(anyhow!("--resume needs an output file (-o FILE)"));
    }
    if is_live {
        args.backend.check()?;
        args.studies.check()?;
    }
    let studies = is_live.then_some(args.studies.studies.as_path());
    let prompt = is_live.then(|| args.studies.prompt_file()).flatten();
    let partial = dest.filter(|_| is_live).map(partial_path);
    check_outputs(
        &[("--output", dest), ("--output", partial.as_deref())],
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
    corpus.check_encoder(encoder.encoder(), SEGMENTER_VERSION)?;
    if let Some(line) = crate::common::shard_warning(&args.corpus, &corpus) {
        log_line(line);
    }
    let index = corpus.index()?;
    let clinical_cost = crate::common::sentence_cost(&args.cost)?;
    let clinical = clinical_cost
        .as_ref()
        .map(|c| CorpusCost::from_corpus(c.as_ref(), &corpus, &index));
    let key = format!("{}{policy}", crate::common::cost_prefix(&args.cost));
    if let Some(line) = knn_warning(&policy.agg, &index) {
        log_line(line);
    }
    let mut live_input = if is_live {
        Some(LiveInput::load(&args)?)
    } else {
        None
    };
    let corpus_sha256 = corpus.meta_sha256().to_string();
    // One cache for the live scores and standard best-of-K.
    let scorer = CorpusScorer::with_embedder(&index, (*encoder).clone(), policy);
    let scorer = match &clinical {
        Some(c) => scorer.with_clinical(c),
        None => scorer,
    };
    let mut run = Pruner::new(Scoring(scorer), key.clone(), config, corpus_sha256.clone());
    // Live: through the journal, with the studies a stopped run kept, checked
    // against this run's settings (and counted as kept).
    let (mut out, kept) = match &live_input {
        None => (
            Sink::Whole(Output::create(args.output.as_deref())?),
            Vec::new(),
        ),
        Some(input) => {
            let (journal, kept) = Journal::open(args.output.as_deref(), args.resume, |kept| {
                let records = kept.iter().map(|k| -> Result<(String, Value)> {
                    let rec = parse_json(&k.line).map_err(|e| anyhow!("{}: {e}", k.at))?;
                    Ok((k.at.clone(), rec))
                });
                let ids = input.studies.iter().map(|s| s.id.as_str());
                run.resume(ids, records, |si| {
                    let s = &input.studies[si];
                    input.expected(&args, &key, config, &corpus_sha256, s, si)
                })
            })?;
            (Sink::Journal(journal, kept.clone()), kept)
        }
    };
    let t0 = Instant::now();
    match (&args.replay, &mut live_input) {
        (Some(path), _) => replay(&args, path, &mut run, &mut out)?,
        (None, Some(input)) => {
            if args.resume && !args.quiet {
                log_line(format_args!(
                    "resume: {} of {} studies already pruned",
                    kept.len(),
                    input.studies.len()
                ));
            }
            let done: HashSet<usize> = kept.iter().copied().collect();
            if let Err(e) = live(&args, input, &done, &mut run, &mut out) {
                // Said where the run stops on an error; a signal says it
                // through the journal's note.
                let kept = match &partial {
                    Some(p) => format!(
                        "; {} keeps {} finished studies: rerun with --resume to go on",
                        p.display(),
                        run.totals().studies
                    ),
                    None => String::new(),
                };
                return Err(anyhow!("{e:#}{kept}"));
            }
        }
        (None, None) => unreachable!("a live run loads its input"),
    }
    let summary = summary(run.totals(), run.policy(), t0.elapsed().as_secs_f64());
    let d = run.distances();
    match out {
        Sink::Whole(out) => out.finish()?,
        Sink::Journal(journal, order) => journal.finish_in_order(&order)?,
    }
    if !args.quiet {
        log_line(&summary);
    }
    let warnings = [
        convergence_warning(d.unconverged, d.evaluated),
        failure_warning(d.failed, d.evaluated),
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
fn replay(args: &Args, path: &Path, run: &mut Pruner<Scoring<'_>>, out: &mut Sink) -> Result<()> {
    let name = path.display().to_string();
    let text = read_text(path)?;
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    let pb = progress_bar(lines.len(), args.quiet, "pruning (replay)");
    let studies = lines.into_iter().map(|(no, line)| -> Result<ReplayStudy> {
        let at = format!("{name}:{}", no + 1);
        let record: ReplayRecord = parse_json(line).map_err(|e| anyhow!("{at}: {e}"))?;
        let id = record.id.text();
        crate::common::refuse_failed(&at, &id, &record)?;
        Ok(ReplayStudy { at, id, record })
    });
    run.replay(studies, |index, rec| {
        out.write(index, rec)?;
        pb.inc(1);
        Ok(())
    })?;
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

/// What a live run reads and loads before its output is opened, so that a
/// bad studies file, model or `--full` leaves no `FILE.partial` behind.
struct LiveInput {
    fulls: HashMap<String, usize>,
    studies: Vec<GenStudy>,
    template: PromptTemplate,
    backend: Box<dyn Backend>,
    describe: String,
}

impl LiveInput {
    fn load(args: &Args) -> Result<Self> {
        let fulls = full_tokens(args.full.as_deref())?;
        let studies = args.studies.load()?;
        if let Some(f) = &args.full {
            if let Some(s) = studies.iter().find(|s| !fulls.contains_key(&s.id)) {
                return Err(anyhow!("study {}: not in --full {}", s.id, f.display()));
            }
        }
        let template = args.studies.template();
        template.text()?;
        let backend = args.backend.load()?;
        let describe = backend.describe();
        Ok(LiveInput {
            fulls,
            studies,
            template,
            backend,
            describe,
        })
    }

    /// How study `si` is generated.
    fn generation(&self, args: &Args, study: &GenStudy, si: usize) -> Generation {
        generation(&self.describe, &self.template, args, study, si)
    }

    /// The settings that study `si`'s record holds in this run.
    fn expected(
        &self,
        args: &Args,
        policy: &str,
        config: PruneConfig,
        corpus_sha256: &str,
        study: &GenStudy,
        si: usize,
    ) -> RunSettings {
        let full = self.fulls.get(&study.id).copied();
        self.generation(args, study, si)
            .settings(policy, config, corpus_sha256, full)
    }
}

/// How study `si` is generated by `describe` (the back-end) from `template`.
fn generation(
    describe: &str,
    template: &PromptTemplate,
    args: &Args,
    study: &GenStudy,
    si: usize,
) -> Generation {
    let b = &args.backend;
    Generation {
        backend: describe.to_string(),
        prompt: template.name(),
        context: study.context.clone(),
        seed: study_seed(b.seed, si),
        sampling: Sampling {
            k: b.k,
            temperature: b.temperature,
            top_p: b.top_p,
            max_tokens: b.max_tokens,
            repetition_penalty: b.repetition_penalty,
            prefill: b.prefill.clone(),
        },
    }
}

/// Live: generate each study's candidates in lock-step and prune them,
/// skipping the studies in `done` (kept from a stopped run).
fn live(
    args: &Args,
    input: &mut LiveInput,
    done: &HashSet<usize>,
    run: &mut Pruner<Scoring<'_>>,
    out: &mut Sink,
) -> Result<()> {
    let pb = progress_bar(input.studies.len(), args.quiet, "pruning (live)");
    pb.inc(done.len() as u64);
    let LiveInput {
        fulls,
        studies,
        template,
        backend,
        describe,
    } = input;
    let studies = studies
        .iter()
        .enumerate()
        .filter(|(si, _)| !done.contains(si))
        .map(|(si, study)| -> Result<LiveStudy> {
            Ok(LiveStudy {
                index: si,
                id: study.id.clone(),
                request: args.backend.request(study, si, template)?,
                generation: generation(describe, template, args, study, si),
                tokens_full: fulls.get(&study.id).copied(),
            })
        });
    run.live(backend.as_mut(), studies, |index, rec| {
        out.write(index, rec)?;
        pb.inc(1);
        Ok(())
    })?;
    pb.finish_and_clear();
    Ok(())
}
