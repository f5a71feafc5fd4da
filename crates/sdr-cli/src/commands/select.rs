//! `sdr select`: best-of-K selection of candidate reports by their set
//! distance to a reference corpus (paper §3.3, SPEC §5), or by consensus;
//! of candidate Impressions by their own Findings (SPEC §10a).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use sdr_clinical::Consistency;
use sdr_core::cost::CostKind;
use sdr_core::report::SEGMENTER_VERSION;
use sdr_core::Metric;
use sdr_corpus::{
    all_policies, argmin, embed_candidate_sentences, select_by_findings, Aggregation, Convergence,
    Corpus, CorpusCost, FindingsSelection, FindingsStudy, Policy, ScoreOptions, SelectionPlan,
    FINDINGS_POLICY,
};
use sdr_gen::replay::ReplayRecord;
use serde::Deserialize;

use crate::common::{
    candidates_hash, check_outputs, convergence_warning, failure_warning, knn_warning, log_line,
    or_stdin, EncoderArgs, LogProgress,
};
use crate::jsonl::{parse_json, Input, Output};

#[derive(clap::Args)]
#[command(
    after_help = "Input line:   {\"id\": \"s1\", \"candidates\": [\"Findings: ... Impression: ...\", \"<think>...</think><answer>...</answer>\", ...]}\n\
Output line (one policy):\n  \
{\"id\": \"s1\", \"policy\": \"chamfer@min\", \"chosen\": 2, \"text\": \"...\", \"scores\": [0.41, null, 0.37],\n   \
\"well_formed\": [true, false, true], \"all_malformed\": false, \"candidates_hash\": \"3f2a...\"}\n\
Output line (--all-policies):\n  \
{\"id\": \"s1\", \"well_formed\": [...], \"all_malformed\": false, \"candidates_hash\": \"3f2a...\",\n   \
\"policies\": {\"chamfer@min\": {\"chosen\": 2, \"scores\": [...]}, ... 45 entries}}\n\
candidates_hash: 16 hex digits of the SHA-256 over the study's candidate texts in order (each\n\
preceded by its byte length, 8 bytes little-endian); `sdr select-eval` checks it against the\n\
candidates file it is given.\n\n\
A candidate is well-formed when it parses (template <think>F</think><answer>I</answer>, or\n\
plain Findings:/Impression: headers) into two non-empty sections; a malformed one scores\n\
+inf (null in the output). Score = D_F + D_I, each the aggregation over the corpus reports\n\
that have that section of the set distance between sentence-embedding sets. Ties go to the\n\
lowest index; when all candidates are malformed the first is kept (all_malformed: true).\n\
Policy keys are METRIC@AGG (METRIC as in `sdr distances`, AGG min, avg or knn:k=K),\n\
and METRIC@consensus for consensus selection; under --cost clinical every key starts with\n\
`clinical/` (`clinical:lambda=L/` at another strength), e.g. clinical/chamfer@min.\n\n\
--findings-consistency (no corpus, no reference; docs/SPEC.md section 10a): the candidates are\n\
Impression texts and each study's Findings are given, in the line or by --findings FILE:\n  \
{\"id\": \"s1\", \"candidates\": [\"Small right pleural effusion.\", \"No acute disease.\"], \"findings\": \"...\"}\n\
Each candidate is checked against the Findings by the clinical facts of its sentences: a finding\n\
it contradicts (polarity, hedge, side, grade), a present finding the Findings never name\n\
(unsupported), a present finding of the Findings it never names (omitted, weighed by how often\n\
radiologists' Impressions name that finding; the Findings' normal statements are not expected).\n\
score = 1 x contradictions + 0.5 x unsupported + 0.5 x omissions, lower is better; ties go to the\n\
candidate whose sentences are closest to the Findings' (directed Chamfer of the embeddings,\n\
`semantic`), then to the lowest index. A candidate with no sentence scores null.\n\
Output line:\n  \
{\"id\": \"s1\", \"policy\": \"findings-consistency\", \"chosen\": 0, \"text\": \"...\", \"scores\": [0.0, 0.41],\n   \
\"well_formed\": [true, true], \"all_malformed\": false, \"candidates_hash\": \"...\",\n   \
\"breakdown\": [{\"score\": 0.0, \"contradictions\": 0.0, \"unsupported\": 0.0, \"omissions\": 0.0,\n   \
\"semantic\": 0.12, \"contradicted\": [], \"unsupported_findings\": [], \"omitted\": []}, ...]}\n\
(`contradicted` names each finding with its kind, e.g. \"Pleural Effusion (polarity)\"; `sdr\n\
check-impression` shows the sentences.)"
)]
pub struct Args {
    /// JSON Lines with one {"id": ..., "candidates": [...]} object per line; `-` or absent reads stdin.
    pub input: Option<PathBuf>,
    /// Corpus file built by `sdr corpus build` (needed, unless --consensus alone, which
    /// uses none and refuses one).
    #[arg(long, value_name = "FILE")]
    pub corpus: Option<PathBuf>,
    #[arg(long, short = 'm', default_value = "chamfer", value_name = "SPEC",
          help = format!("Set distance. {}", crate::common::metric_forms()))]
    pub metric: String,
    /// Aggregation over the corpus: min, avg, or knn:k=K (mean of the K
    /// smallest; `knn` alone is K = 5).
    #[arg(long, default_value = "min", value_name = "AGG")]
    pub agg: String,
    /// Score all 45 policies (15 metric specs x min, avg, knn:k=5) in one pass;
    /// with --consensus, the 15 consensus policies are added.
    #[arg(long, conflicts_with_all = ["metric", "agg"])]
    pub all_policies: bool,
    /// Consensus (minimum Bayes risk): pick the candidate with the smallest
    /// mean set distance to the other well-formed candidates; no corpus needed.
    #[arg(long, conflicts_with = "agg")]
    pub consensus: bool,
    /// Choose each study's Impression by its own Findings (no corpus, no reference; SPEC
    /// section 10a): the fewest contradicted, unsupported and omitted findings, then the
    /// closest in embedding. The candidates are Impression texts; the Findings come from
    /// each line's "findings" or from --findings.
    #[arg(long, conflicts_with_all = ["corpus", "consensus", "all_policies", "agg", "metric", "no_prune", "cost"])]
    pub findings_consistency: bool,
    /// The Findings of each study, for --findings-consistency: a CSV with `uid` (or `id`) and
    /// `findings` columns (data/iu-xray/indiana_reports.csv), or JSON Lines
    /// {"id": ..., "findings": "..."}. A line's own "findings" wins.
    // The conflicts of --findings-consistency too: clap drops `requires` when the
    // required flag conflicts with an option given, which would ignore --findings.
    #[arg(long, value_name = "FILE", requires = "findings_consistency",
          conflicts_with_all = ["corpus", "consensus", "all_policies", "agg", "metric", "no_prune", "cost"])]
    pub findings: Option<PathBuf>,
    /// Compute every corpus distance (no lower-bound pruning for min / knn);
    /// results are identical, only slower. For checking and timing.
    #[arg(long)]
    pub no_prune: bool,
    /// The sentence cost every distance reads: `cosine` (the paper's, (1 - cos) / 2) or
    /// `clinical` (`clinical:lambda=L`; SPEC §10): the cosine cost plus a penalty on
    /// sentences whose findings the other set contradicts (polarity, side, size) or lacks,
    /// for corpus and consensus policies alike. Clinical keys start with `clinical/`.
    #[arg(long, default_value = "cosine", value_name = "COST",
          value_parser = crate::common::parse_cost)]
    pub cost: CostKind,
    #[command(flatten)]
    pub encoder: EncoderArgs,
    /// Write to this file (atomically) instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Studies embedded per encoder call.
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 32,
        value_name = "N"
    )]
    pub batch: usize,
    /// No progress bar and no summary line on stderr.
    #[arg(long)]
    pub quiet: bool,
}

fn num(v: f64) -> serde_json::Value {
    serde_json::Number::from_f64(v)
        .map(serde_json::Value::Number)
        .unwrap_or(serde_json::Value::Null)
}

/// The selection plan of the arguments: corpus policies, consensus metrics, cost.
fn plan(args: &Args) -> Result<SelectionPlan> {
    let metric: Metric = args
        .metric
        .parse()
        .map_err(|e| anyhow!("--metric {}: {e}", args.metric))?;
    let agg: Aggregation = args.agg.parse().map_err(|e| anyhow!("--agg: {e}"))?;
    let policies: Vec<Policy> = if !uses_corpus(args) {
        Vec::new()
    } else if args.all_policies {
        all_policies()
    } else {
        vec![Policy { metric, agg }]
    };
    let consensus: Vec<Metric> = match (args.consensus, args.all_policies) {
        (false, _) => Vec::new(),
        (true, true) => Metric::all(),
        (true, false) => vec![metric],
    };
    Ok(SelectionPlan::new(
        policies,
        consensus,
        &crate::common::cost_prefix(&args.cost),
        ScoreOptions {
            prune: !args.no_prune,
        },
        crate::common::sentence_cost(&args.cost)?,
    ))
}

/// The corpus is needed unless consensus alone is asked for.
fn uses_corpus(args: &Args) -> bool {
    !args.consensus || args.all_policies
}

/// Distances computed, and how many did not converge or failed.
#[derive(Default)]
struct Stats {
    evaluated: usize,
    convergence: Convergence,
}

/// The output object of one study.
fn record(
    l: &ReplayRecord,
    single: bool,
    keys: &[String],
    per_policy: &[Vec<f64>],
    well: &[bool],
) -> serde_json::Value {
    let sel: Vec<_> = per_policy.iter().map(|s| argmin(s)).collect();
    let all_malformed = well.iter().all(|w| !w);
    if single {
        let s = &sel[0];
        return serde_json::json!({
            "id": l.id,
            "policy": keys[0],
            "chosen": s.index,
            "text": l.candidates[s.index],
            "scores": per_policy[0].iter().map(|&v| num(v)).collect::<Vec<_>>(),
            "well_formed": well,
            "all_malformed": all_malformed,
            "candidates_hash": candidates_hash(&l.candidates),
        });
    }
    let mut map = serde_json::Map::new();
    for (k, (s, scores)) in keys.iter().zip(sel.iter().zip(per_policy)) {
        map.insert(
            k.clone(),
            serde_json::json!({
                "chosen": s.index,
                "scores": scores.iter().map(|&v| num(v)).collect::<Vec<_>>(),
            }),
        );
    }
    serde_json::json!({
        "id": l.id,
        "well_formed": well,
        "all_malformed": all_malformed,
        "candidates_hash": candidates_hash(&l.candidates),
        "policies": map,
    })
}

fn progress(quiet: bool) -> Result<ProgressBar> {
    if quiet {
        return Ok(ProgressBar::hidden());
    }
    let pb = ProgressBar::new_spinner();
    pb.set_style(
        ProgressStyle::with_template("selecting {pos} studies [{elapsed_precise}] {per_sec}")
            .map_err(|e| anyhow!("{e}"))?,
    );
    // Drawn from the start: the first batch of studies can take many seconds.
    pb.enable_steady_tick(std::time::Duration::from_millis(250));
    Ok(pb)
}

pub fn run(args: Args) -> Result<()> {
    if args.batch == 0 {
        return Err(anyhow!("--batch must be at least 1"));
    }
    if args.findings_consistency {
        return run_findings(args);
    }
    let plan = plan(&args)?;
    check_outputs(
        &[("--output", args.output.as_deref())],
        &[or_stdin(args.input.as_deref()), args.corpus.as_deref()],
    )?;
    let encoder = args.encoder.load()?;
    let corpus = match (&args.corpus, uses_corpus(&args)) {
        (Some(p), true) => {
            let c = Corpus::open(p)?;
            c.check_encoder(encoder.encoder(), SEGMENTER_VERSION)?;
            if let Some(line) = crate::common::shard_warning(p, &c) {
                log_line(format_args!("sdr select: {line}"));
            }
            Some(c)
        }
        (None, true) => {
            return Err(anyhow!(
                "--corpus FILE is required (unless --consensus alone)"
            ))
        }
        (Some(p), false) => {
            // Silently ignored, a missing or wrong corpus would go unnoticed.
            return Err(anyhow!(
                "--corpus {}: --consensus alone uses no corpus; drop --corpus, or add \
                 --all-policies to score the corpus policies too",
                p.display()
            ));
        }
        (None, false) => None,
    };
    // `Corpus::index` names the file when a section is missing from it.
    let index = corpus.as_ref().map(Corpus::index).transpose()?;
    // The clinical cost labels each corpus sentence once, here.
    let corpus_clinical = match (&plan.clinical, &corpus, &index) {
        (Some(cost), Some(c), Some(ix)) => Some(CorpusCost::from_corpus(cost.as_ref(), c, ix)),
        _ => None,
    };
    let single = !args.all_policies;
    if let (Some(ix), [policy], false) = (&index, &plan.policies[..], args.quiet) {
        if let Some(line) = knn_warning(&policy.agg, ix) {
            log_line(format_args!("sdr select: {line}"));
        }
    }
    // Line of each study id: a repeated study would be selected, and then
    // evaluated, twice.
    let mut first_at: HashMap<String, usize> = HashMap::new();
    let mut input = Input::open(args.input.as_deref())?;
    let mut output = Output::create(args.output.as_deref())?;
    let pb = progress(args.quiet)?;
    let log = LogProgress::new("sdr select:", "studies", args.quiet);
    let t0 = Instant::now();
    let (mut studies, mut all_bad) = (0usize, 0usize);
    let mut stats = Stats::default();
    let mut line_no = 0;
    loop {
        let chunk = input.next_chunk(args.batch, &mut line_no)?;
        if chunk.is_empty() {
            break;
        }
        let lines: Vec<(usize, ReplayRecord)> = chunk
            .iter()
            .map(|(no, text)| {
                let l: ReplayRecord =
                    parse_json(text).map_err(|e| anyhow!("{}:{no}: {e}", input.name))?;
                if l.candidates.is_empty() {
                    return Err(anyhow!("{}:{no}: `candidates` is empty", input.name));
                }
                let at = format!("{}:{no}", input.name);
                let id = l.id.text();
                if let Some(first) = first_at.insert(id.clone(), *no) {
                    return Err(anyhow!(
                        "{at}: study {id} again (first at {}:{first})",
                        input.name
                    ));
                }
                crate::common::refuse_failed(&at, &id, &l)?;
                Ok((*no, l))
            })
            .collect::<Result<_>>()?;
        // One encoder call for the whole chunk.
        let texts: Vec<&str> = lines
            .iter()
            .flat_map(|(_, l)| l.candidates.iter().map(String::as_str))
            .collect();
        let (embedded, sentences) = embed_candidate_sentences(&texts, &encoder)?;
        let (mut embedded, mut sentences) = (embedded.into_iter(), sentences.into_iter());
        for (no, l) in &lines {
            let cands: Vec<_> = embedded.by_ref().take(l.candidates.len()).collect();
            let texts: Vec<_> = sentences.by_ref().take(l.candidates.len()).collect();
            let well: Vec<bool> = cands.iter().map(Option::is_some).collect();
            let scored = plan
                .scores(
                    index.as_ref(),
                    corpus_clinical.as_ref(),
                    &cands,
                    &texts,
                    encoder.dim(),
                )
                .map_err(|e| anyhow!("{}:{no}: {e}", input.name))?;
            stats.evaluated += scored.evaluated;
            stats.convergence += scored.convergence;
            let per_policy = scored.per_policy;
            all_bad += well.iter().all(|w| !w) as usize;
            let obj = record(l, single, &plan.keys, &per_policy, &well);
            let w = output.writer();
            serde_json::to_writer(&mut *w, &obj)
                .map_err(std::io::Error::from)
                .and_then(|()| w.write_all(b"\n"))
                .context("cannot write output")?;
            studies += 1;
            pb.inc(1);
        }
        log.update(studies, None);
    }
    pb.finish_and_clear();
    output.finish()?;
    if !args.quiet {
        log_line(format_args!(
            "sdr select: {studies} studies, {} policies, {all_bad} with every candidate malformed (first kept), {:.2}s",
            plan.keys.len(),
            t0.elapsed().as_secs_f64()
        ));
    }
    let warnings = [
        convergence_warning(stats.convergence.unconverged, stats.evaluated),
        failure_warning(stats.convergence.failed, stats.evaluated),
    ];
    for line in warnings.into_iter().flatten() {
        log_line(format_args!("sdr select: {line}"));
    }
    Ok(())
}

/// One input line of `--findings-consistency`.
#[derive(Deserialize)]
struct FindingsLine {
    id: serde_json::Value,
    candidates: Vec<String>,
    #[serde(default)]
    findings: Option<String>,
}

/// Findings by study id from `--findings FILE`: a CSV whose header names the
/// id (`uid`, `id` or `study_id`, case-insensitive) and `findings` (IU X-ray's
/// layout), or JSON Lines `{"id", "findings"}`. Errors name the file and line.
fn findings_file(path: &std::path::Path) -> Result<HashMap<String, String>> {
    let name = path.display();
    let csv = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    let mut out = HashMap::new();
    if csv {
        let mut rdr =
            csv::Reader::from_path(path).map_err(|e| anyhow!("--findings {name}: {e}"))?;
        let headers = rdr
            .headers()
            .map_err(|e| anyhow!("--findings {name}: {e}"))?
            .clone();
        let col = |names: &[&str]| {
            names.iter().find_map(|n| {
                headers
                    .iter()
                    .position(|h| h.trim().eq_ignore_ascii_case(n))
            })
        };
        let (Some(id_c), Some(f_c)) = (col(&["uid", "id", "study_id"]), col(&["findings"])) else {
            return Err(anyhow!(
                "--findings {name}: the header needs an id column (uid, id or study_id) and a \
                 `findings` column (columns: {})",
                headers.iter().collect::<Vec<_>>().join(", ")
            ));
        };
        for rec in rdr.records() {
            let rec = rec.map_err(|e| anyhow!("--findings {name}: {e}"))?;
            let line = rec.position().map_or(0, |p| p.line());
            let (Some(id), Some(f)) = (rec.get(id_c), rec.get(f_c)) else {
                return Err(anyhow!("--findings {name}:{line}: a short record"));
            };
            let id = id.trim().to_string();
            if out.insert(id.clone(), f.to_string()).is_some() {
                return Err(anyhow!("--findings {name}:{line}: study {id} again"));
            }
        }
        return Ok(out);
    }
    #[derive(Deserialize)]
    struct Line {
        id: serde_json::Value,
        findings: String,
    }
    for (at, l) in crate::jsonl::read_jsonl_file::<Line>(path)? {
        let id = crate::jsonl::id_text(&l.id);
        if out.insert(id.clone(), l.findings).is_some() {
            return Err(anyhow!("{at}: study {id} again"));
        }
    }
    Ok(out)
}

/// The output object of one study under `--findings-consistency`.
fn findings_record(l: &FindingsLine, sel: &FindingsSelection) -> serde_json::Value {
    let names = |v: &[sdr_clinical::Issue], kind: bool| -> Vec<String> {
        v.iter()
            .map(|x| {
                if kind {
                    format!("{} ({})", x.finding, x.kind)
                } else {
                    x.finding.clone()
                }
            })
            .collect()
    };
    let breakdown: Vec<serde_json::Value> = sel
        .candidates
        .iter()
        .map(|c| match &c.report {
            None => serde_json::Value::Null,
            Some(r) => serde_json::json!({
                "score": num(r.score),
                "contradictions": num(r.contradiction),
                "unsupported": num(r.unsupported),
                "omissions": num(r.omission),
                "semantic": num(c.semantic),
                "contradicted": names(&r.contradictions, true),
                "unsupported_findings": names(&r.unsupported_findings, false),
                "omitted": names(&r.omissions, false),
            }),
        })
        .collect();
    let s = &sel.selection;
    serde_json::json!({
        "id": l.id,
        "policy": FINDINGS_POLICY,
        "chosen": s.index,
        "text": l.candidates[s.index],
        "scores": sel.candidates.iter().map(|c| num(c.score())).collect::<Vec<_>>(),
        "well_formed": sel.candidates.iter().map(|c| c.report.is_some()).collect::<Vec<_>>(),
        "all_malformed": s.all_malformed,
        "candidates_hash": candidates_hash(&l.candidates),
        "breakdown": breakdown,
    })
}

/// `sdr select --findings-consistency`: Impressions chosen by their own Findings.
fn run_findings(args: Args) -> Result<()> {
    check_outputs(
        &[("--output", args.output.as_deref())],
        &[or_stdin(args.input.as_deref()), args.findings.as_deref()],
    )?;
    let by_id = args.findings.as_deref().map(findings_file).transpose()?;
    let encoder = args.encoder.load()?;
    let check = Consistency::default();
    let mut first_at: HashMap<String, usize> = HashMap::new();
    let mut input = Input::open(args.input.as_deref())?;
    let mut output = Output::create(args.output.as_deref())?;
    let pb = progress(args.quiet)?;
    let log = LogProgress::new("sdr select:", "studies", args.quiet);
    let t0 = Instant::now();
    let (mut studies, mut all_bad, mut contradicting) = (0usize, 0usize, 0usize);
    let mut line_no = 0;
    loop {
        let chunk = input.next_chunk(args.batch, &mut line_no)?;
        if chunk.is_empty() {
            break;
        }
        let mut lines: Vec<(usize, FindingsLine, String)> = Vec::with_capacity(chunk.len());
        for (no, text) in &chunk {
            let at = format!("{}:{no}", input.name);
            let mut l: FindingsLine = parse_json(text).map_err(|e| anyhow!("{at}: {e}"))?;
            let id = crate::jsonl::id_text(&l.id);
            if l.candidates.is_empty() {
                return Err(anyhow!("{at}: study {id}: `candidates` is empty"));
            }
            if let Some(first) = first_at.insert(id.clone(), *no) {
                return Err(anyhow!(
                    "{at}: study {id} again (first at {}:{first})",
                    input.name
                ));
            }
            let findings = match (l.findings.take(), &by_id) {
                (Some(f), _) => f,
                (None, Some(map)) => map.get(&id).cloned().ok_or_else(|| {
                    anyhow!(
                        "{at}: study {id}: no Findings for it in --findings {}",
                        args.findings.as_deref().unwrap_or(std::path::Path::new("")).display()
                    )
                })?,
                (None, None) => {
                    return Err(anyhow!(
                        "{at}: study {id}: no \"findings\" in the line; give them there or with --findings FILE"
                    ))
                }
            };
            if sdr_core::report::split_sentences(&findings).is_empty() {
                return Err(anyhow!("{at}: study {id}: the Findings have no sentence"));
            }
            lines.push((*no, l, findings));
        }
        let texts: Vec<Vec<&str>> = lines
            .iter()
            .map(|(_, l, _)| l.candidates.iter().map(String::as_str).collect())
            .collect();
        let batch: Vec<FindingsStudy<'_>> = lines
            .iter()
            .zip(&texts)
            .map(|((_, _, f), c)| FindingsStudy {
                candidates: c,
                findings: f,
            })
            .collect();
        let selections = select_by_findings(&batch, &encoder, &check)
            .map_err(|e| anyhow!("{}:{}: {e}", input.name, lines[0].0))?;
        for ((_, l, _), sel) in lines.iter().zip(&selections) {
            all_bad += sel.selection.all_malformed as usize;
            contradicting += sel.candidates[sel.selection.index]
                .report
                .as_ref()
                .is_some_and(|r| !r.contradictions.is_empty())
                as usize;
            let obj = findings_record(l, sel);
            let w = output.writer();
            serde_json::to_writer(&mut *w, &obj)
                .map_err(std::io::Error::from)
                .and_then(|()| w.write_all(b"\n"))
                .context("cannot write output")?;
            studies += 1;
            pb.inc(1);
        }
        log.update(studies, None);
    }
    pb.finish_and_clear();
    output.finish()?;
    if !args.quiet {
        log_line(format_args!(
            "sdr select --findings-consistency: {studies} studies, {contradicting} picks contradicting their Findings, {all_bad} with no candidate sentence (first kept), {:.2}s",
            t0.elapsed().as_secs_f64()
        ));
    }
    Ok(())
}
