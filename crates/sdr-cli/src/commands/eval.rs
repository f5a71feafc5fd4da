//! `sdr eval`: side-by-side evaluation of selection runs (random, standard
//! best-of-K, pruning, ...) against the reference reports: BLEU-4, ROUGE-L
//! and BERTScore-F1 on Findings and on Impression (SPEC §7), CheXpert-rule F1
//! on the whole report (SPEC §8), with the tokens each run generated.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use sdr_clinical::{Labeler, Labels, Observation, UncertainPolicy};
use sdr_corpus::CsvTable;
use sdr_eval::chexpert::{self, CHEXPERT_COLUMNS, JUDGE_COLUMNS, JUDGE_NOTE};
use sdr_eval::runs::{
    distinct_pairs, joined, relabel, score_pairs, References, RunPicks, Scored, Study, COLUMNS,
};
use sdr_eval::table::Table;
use sdr_gen::replay::ReplayRecord;
use sdr_io::AtomicFile;

use crate::common::{
    check_input, check_outputs, log_line, non_negative_count, print_stdout, JudgeArgs,
};
use crate::jsonl::{id_text, read_jsonl_file};
use crate::textscore::{load_judge, BertScoreArgs, Judge};

#[derive(clap::Args)]
#[command(
    after_help = "Runs are JSON Lines with an \"id\" and the chosen report under FIELD (default \"text\"):\n\
the output of `sdr select` (one policy) and of `sdr prune` both qualify, and\n\
`NAME=prune.jsonl#standard_text` reads the standard best-of-K pick that `sdr prune --replay`\n\
records. A run's tokens are its lines' \"tokens_used\" when present; otherwise the full K\n\
candidates' tokens from --candidates (what best-of-K generation costs). The Random row is\n\
the expectation of a uniform pick among the K candidates (exact, no seeds) for the per-study\n\
metrics, and the mean over --seeds seeded uniform picks for CheXpert-rule F1.\n\
BERTScore-F1 is bert-score's with --bertscore-model DIR (a RoBERTa/BERT folder; see `sdr score\n\
--help`), else the reward's own encoder (all-mpnet-base-v2, last layer); the table names it;\n\
an empty section scores 0 on every metric (BERTScore-F1: bert-score's value for an empty side,\n\
which --rescale-baseline rescales like any other). CheXpert-rule F1 (rule-based CheXpert labels of\n\
the whole report, Findings and Impression joined; not CheXbert) is corpus-level over the\n\
run's picks: macro and micro over 14 observations and over 5. Every text is scored once,\n\
however many runs picked it: give all runs to one call. A study appears once per file, and\n\
token counts are non-negative integers; anything else is an error naming the line.\n\n\
Example:\n  \
sdr eval --candidates gen.jsonl --run standard=prune.jsonl#standard_text --run pruning=prune.jsonl -o table.md"
)]
pub struct Args {
    /// Reference reports: IU X-ray style CSV (id, findings, impression columns).
    #[arg(long, default_value = DEFAULT_REFERENCES, value_name = "CSV")]
    pub references: PathBuf,
    /// Id column of the reference CSV.
    #[arg(long, default_value = "uid", value_name = "NAME")]
    pub id_col: String,
    /// The candidates the runs chose from ({"id", "candidates", "tokens"?} per
    /// line, e.g. `sdr generate` output); gives the Random row and the
    /// full-generation token count.
    #[arg(long, value_name = "JSONL")]
    pub candidates: PathBuf,
    /// A run to evaluate, NAME=FILE or NAME=FILE#FIELD; repeat for several.
    #[arg(long = "run", value_name = "NAME=FILE[#FIELD]")]
    pub runs: Vec<String>,
    #[command(flatten)]
    pub bert: BertScoreArgs,
    #[command(flatten)]
    pub judge: JudgeArgs,
    /// Title printed above the table.
    #[arg(
        long,
        default_value = "Selection on generated candidates",
        value_name = "TEXT"
    )]
    pub title: String,
    /// A note printed under the table (repeatable), e.g. the command that made the inputs.
    #[arg(long, value_name = "TEXT")]
    pub note: Vec<String>,
    /// Compare run A with run B ("A=B", repeatable): a second table of A's
    /// change against B in %, per metric, each with its 95 % paired-bootstrap
    /// interval over the studies (1,000 resamples, fixed seed; `*` where it
    /// excludes 0), e.g. --compare "chamfer@min pruning wu1=chamfer@min standard".
    #[arg(long, value_name = "A=B")]
    pub compare: Vec<String>,
    /// Write the Markdown table here (atomically); a .csv beside it holds full precision.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Write every study's values here (JSON Lines, atomically): per study its full-candidate
    /// tokens, the reference's present observations, the random pick's expected values and, per
    /// run, its tokens, values and present observations: what the table's means, corpus-level
    /// F1 and bootstrap intervals are computed from (values in the order well-formed 0/100,
    /// F BLEU-4, F ROUGE-L, F BERTScore-F1, I BLEU-4, I ROUGE-L, I BERTScore-F1; observations a
    /// string of 14 `0`/`1` in CheXpert's order, uncertain as the table counts it).
    #[arg(long, value_name = "FILE")]
    pub per_study: Option<PathBuf>,
    /// Seeds of the random row's CheXpert-rule F1 (1 to 100000).
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 1000,
        value_name = "N"
    )]
    pub seeds: usize,
    /// Count uncertain CheXpert-rule labels as absent (default: as present,
    /// the convention of the common CheXbert-F1 scripts).
    #[arg(long)]
    pub uncertain_negative: bool,
}

/// `--per-study`'s lines: one JSON object per study (see the option's help).
fn per_study_lines(
    scored: &Scored<'_>,
    judged: Option<&Scored<'_>>,
    runs: &[(String, RunPicks)],
    full: &[Option<usize>],
) -> Result<String> {
    use serde_json::{json, Map, Value};
    let present = |l: &Labels, u: UncertainPolicy| -> String {
        Observation::ALL
            .iter()
            .map(|&o| {
                if l.is_positive(o, u == UncertainPolicy::Positive) {
                    '1'
                } else {
                    '0'
                }
            })
            .collect()
    };
    let values = |v: &[f64; 7]| -> Value {
        let cells: Vec<f64> = std::iter::once(v[6])
            .chain(v[..6].iter().copied())
            .collect();
        Value::Array(
            cells
                .into_iter()
                .map(|x| if x.is_finite() { json!(x) } else { Value::Null })
                .collect(),
        )
    };
    let mut out = String::new();
    for (i, s) in scored.studies.iter().enumerate() {
        let mut random = [0.0; 7];
        for c in &s.candidates {
            let (v, _) = &scored.scores[&(s.id.clone(), c.clone())];
            for j in 0..7 {
                random[j] += v[j] / s.candidates.len() as f64;
            }
        }
        let mut reference = Map::new();
        reference.insert(
            "rules".into(),
            json!(present(&scored.ref_labels[i], scored.uncertain)),
        );
        if let Some(j) = judged {
            reference.insert(
                "judge".into(),
                json!(present(&j.ref_labels[i], j.uncertain)),
            );
        }
        let mut by_run = Map::new();
        for (name, by_id) in runs {
            let (text, used) = &by_id[&s.id];
            let key = (s.id.clone(), text.clone());
            let (v, l) = &scored.scores[&key];
            let mut r = Map::new();
            r.insert("tokens".into(), json!(used.or(full[i])));
            r.insert("values".into(), values(v));
            r.insert("rules".into(), json!(present(l, scored.uncertain)));
            if let Some(j) = judged {
                r.insert(
                    "judge".into(),
                    json!(present(&j.scores[&key].1, j.uncertain)),
                );
            }
            by_run.insert(name.clone(), Value::Object(r));
        }
        let line = json!({
            "id": s.id,
            "full_tokens": full[i],
            "reference": reference,
            "random": values(&random),
            "runs": by_run,
        });
        out.push_str(&serde_json::to_string(&line)?);
        out.push('\n');
    }
    Ok(out)
}

/// `--references` when not given: relative to the current folder.
const DEFAULT_REFERENCES: &str = "data/iu-xray/indiana_reports.csv";

type Refs = References;

/// Runs by name, and the full-generation tokens some run lines record
/// ("tokens_full"), for studies whose candidates lack "tokens".
struct Runs {
    runs: Vec<(String, RunPicks)>,
    full_from_runs: HashMap<String, usize>,
}

pub fn run(args: Args) -> Result<()> {
    // Arguments, and bad output paths, fail before any input is read or
    // scored, and leave nothing behind.
    crate::common::check_seeds(args.seeds)?;
    let specs = run_specs(&args.runs)?;
    let compares = compare_specs(&args.compare, &specs)?;
    let outputs = match &args.output {
        Some(md) => {
            let csv = md.with_extension("csv");
            if csv == *md {
                return Err(anyhow!(
                    "--output {}: the full-precision CSV goes beside the table under this very name; give the table another extension (.md)",
                    md.display()
                ));
            }
            Some((md.clone(), csv))
        }
        None => None,
    };
    let mut inputs = vec![Some(args.references.as_path()), Some(&args.candidates)];
    inputs.extend(specs.iter().map(|s| Some(Path::new(s.file))));
    check_outputs(
        &[
            ("--output", outputs.as_ref().map(|(md, _)| md.as_path())),
            ("--output", outputs.as_ref().map(|(_, csv)| csv.as_path())),
            ("--per-study", args.per_study.as_deref()),
        ],
        &inputs,
    )?;
    check_input("--references", &args.references, DEFAULT_REFERENCES)?;
    let (refs, rname) = load_references(&args)?;
    let cands = load_candidates(&args.candidates, &refs, &rname)?;
    let Runs {
        runs,
        full_from_runs,
    } = load_runs(&specs, &cands)?;
    let full: Vec<Option<usize>> = cands
        .iter()
        .map(|s| s.tokens.or_else(|| full_from_runs.get(&s.id).copied()))
        .collect();
    let full_tokens = checked_total(&full).map_err(|e| anyhow!("--candidates: {e}"))?;
    let bert = load_judge(&args.bert)?;
    let clinical_judge = args.judge.load()?;
    let pairs = distinct_pairs(&cands, &runs);
    let labeler = Labeler::default();
    let scorer = bert.as_ref().map(Judge::scorer);
    let scores = score_pairs(&pairs, &refs, scorer.as_ref(), &labeler)?;
    let uncertain = if args.uncertain_negative {
        UncertainPolicy::Negative
    } else {
        UncertainPolicy::Positive
    };
    let ref_labels: Vec<Labels> = cands
        .iter()
        .map(|s| labeler.label(&joined(&refs[&s.id].0, &refs[&s.id].1)))
        .collect();
    let mut table = new_table(
        &args,
        cands.len(),
        bert.as_ref().map(Judge::describe),
        uncertain,
        clinical_judge.is_some(),
    )?;
    let scored = Scored {
        studies: &cands,
        scores: &scores,
        ref_labels: &ref_labels,
        uncertain,
    };
    // The judge's labels of the same texts: its F1 columns come from the same rows.
    let judged_parts = match &clinical_judge {
        Some(j) => {
            let label = |t: &[&str]| j.label_many(t);
            let texts: Vec<String> = cands
                .iter()
                .map(|s| joined(&refs[&s.id].0, &refs[&s.id].1))
                .collect();
            let text_refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            Some((relabel(&scores, label)?, label(&text_refs)?))
        }
        None => None,
    };
    let judged = judged_parts.as_ref().map(|(s, r)| Scored {
        studies: &cands,
        scores: s,
        ref_labels: r,
        uncertain,
    });
    // The last four cells of a row are its F1 columns; the judge's follow the rules'.
    let with_judge = |mut row: Vec<Option<f64>>, judge_row: Option<Vec<Option<f64>>>| {
        if let Some(j) = judge_row {
            row.extend_from_slice(&j[j.len() - 4..]);
        }
        row
    };
    let random_judge = judged
        .as_ref()
        .map(|j| j.random_row(args.seeds))
        .transpose()?;
    table.push_row(
        "random",
        with_judge(scored.random_row(args.seeds)?, random_judge),
    )?;
    for (name, by_id) in &runs {
        let row = scored
            .run_row(by_id, &full, full_tokens)
            .map_err(|e| anyhow!("--run {name}: {e}"))?;
        let judge_row = judged
            .as_ref()
            .map(|j| j.run_row(by_id, &full, full_tokens))
            .transpose()
            .map_err(|e| anyhow!("--run {name}: {e}"))?;
        table.push_row(name.as_str(), with_judge(row, judge_row))?;
    }
    let mut md = table.to_markdown()?;
    let mut csv = table.to_csv()?;
    if !compares.is_empty() {
        let mut t = Table::new(
            format!(
                "Change against the compared run, % ({} studies, paired bootstrap 95 % intervals)",
                cands.len()
            ),
            "comparison",
            table.columns[2..].to_vec(),
        );
        t.decimals = 2;
        t.bertscore_encoder = table.bertscore_encoder.clone();
        for (k, (a, b)) in compares.iter().enumerate() {
            let by = |n: &str| &runs.iter().find(|(r, _)| r == n).expect("checked").1;
            let (mut cells, mut cis) = scored.change_row(by(a), by(b))?;
            if let Some(j) = &judged {
                let (jc, jci) = j.change_row(by(a), by(b))?;
                cells.extend_from_slice(&jc[jc.len() - 4..]);
                cis.extend_from_slice(&jci[jci.len() - 4..]);
            }
            t.push_row(format!("{a} vs {b}"), cells)?;
            t.set_intervals(k, cis)?;
        }
        t.notes.push(
            "Change = 100 (A - B) / B of the column's value over the same studies; the interval \
             resamples studies (the same for A and B) and recomputes both, corpus-level \
             CheXpert-rule F1 included."
                .into(),
        );
        md.push('\n');
        md.push_str(&t.to_markdown()?);
        csv.push_str("\r\n");
        csv.push_str(&t.to_csv()?);
    }
    if let Some(path) = &args.per_study {
        let text = per_study_lines(&scored, judged.as_ref(), &runs, &full)?;
        let f = AtomicFile::create(path)
            .and_then(|mut f| f.write_all(text.as_bytes()).map(|()| f))
            .and_then(|mut f| f.flush().map(|()| f))
            .with_context(|| format!("cannot write {}", path.display()))?;
        f.commit()
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    print_stdout(&md)?;
    if let Some((md_path, csv_path)) = &outputs {
        // Both files are written before either is committed, so a failure
        // leaves neither.
        let files = [(md_path, md), (csv_path, csv)]
            .into_iter()
            .map(|(path, text)| {
                let mut f = AtomicFile::create(path)
                    .and_then(|mut f| f.write_all(text.as_bytes()).map(|()| f))
                    .with_context(|| format!("cannot write {}", path.display()))?;
                f.flush()
                    .with_context(|| format!("cannot write {}", path.display()))?;
                Ok((path, f))
            })
            .collect::<Result<Vec<_>>>()?;
        for (path, f) in files {
            f.commit()
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    Ok(())
}

/// The sum of per-study token counts; `None` when one is unknown, an error
/// when it overflows.
fn checked_total(counts: &[Option<usize>]) -> Result<Option<usize>> {
    let mut total = 0usize;
    for c in counts {
        let Some(c) = c else { return Ok(None) };
        total = total
            .checked_add(*c)
            .ok_or_else(|| anyhow!("token counts add up to more than {}", usize::MAX))?;
    }
    Ok(Some(total))
}

/// A token count under `key` of a JSON line: absent or null is unknown.
fn token_count(v: &serde_json::Value, key: &str, at: &str) -> Result<Option<usize>> {
    match v.get(key) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(t) => non_negative_count(t, key, at).map(Some),
    }
}

/// Reference sections by id, and the CSV's name for error messages.
fn load_references(args: &Args) -> Result<(Refs, String)> {
    let table = CsvTable::read(&args.references)?;
    let (ic, fc, mc) = (
        table.column(&args.id_col)?,
        table.column("findings")?,
        table.column("impression")?,
    );
    let refs = (0..table.len())
        .map(|r| {
            let f = |c: usize| table.field(r, c).to_string();
            (f(ic), (f(fc), f(mc)))
        })
        .collect();
    Ok((refs, table.name))
}

/// The candidate studies, each checked against the references.
fn load_candidates(path: &Path, refs: &Refs, rname: &str) -> Result<Vec<Study>> {
    let mut cands = Vec::new();
    let mut first_at: HashMap<String, String> = HashMap::new();
    for (at, v) in read_jsonl_file::<serde_json::Value>(path)? {
        let l: ReplayRecord = serde_json::from_value(v).map_err(|e| anyhow!("{at}: {e}"))?;
        let id = l.id.text();
        // A repeated study would count twice in every mean.
        if let Some(first) = first_at.insert(id.clone(), at.clone()) {
            return Err(anyhow!("{at}: study {id} again (first at {first})"));
        }
        let r = refs
            .get(&id)
            .ok_or_else(|| anyhow!("{at}: study {id} is not in {rname}"))?;
        if r.0.is_empty() || r.1.is_empty() {
            return Err(anyhow!(
                "{at}: study {id} lacks a reference section in {rname}"
            ));
        }
        if l.candidates.is_empty() {
            return Err(anyhow!("{at}: no candidates"));
        }
        crate::common::refuse_failed(&at, &id, &l)?;
        let tokens = match l.token_counts().map_err(|e| anyhow!("{at}: {e}"))? {
            Some(counts) => {
                let counts: Vec<_> = counts.into_iter().map(Some).collect();
                checked_total(&counts).map_err(|e| anyhow!("{at}: \"tokens\": {e}"))?
            }
            None => None,
        };
        cands.push(Study {
            id,
            candidates: l.candidates,
            tokens,
        });
    }
    if cands.is_empty() {
        return Err(anyhow!(
            "{}: no studies (the candidates file is empty)",
            path.display()
        ));
    }
    Ok(cands)
}

/// One `--run NAME=FILE[#FIELD]`.
struct RunSpec<'a> {
    name: &'a str,
    file: &'a str,
    field: &'a str,
}

/// Every `--run`, parsed and checked before any file is read: a name that is
/// empty or given twice would make rows that cannot be told apart.
fn run_specs(specs: &[String]) -> Result<Vec<RunSpec<'_>>> {
    let mut out: Vec<RunSpec<'_>> = Vec::new();
    for spec in specs {
        let (name, rest) = spec
            .split_once('=')
            .filter(|(n, f)| !n.trim().is_empty() && !f.is_empty())
            .ok_or_else(|| anyhow!("--run {spec}: expected NAME=FILE[#FIELD]"))?;
        if out.iter().any(|s| s.name == name) {
            return Err(anyhow!(
                "--run {spec}: the name {name} is given twice; give each run its own name"
            ));
        }
        if name.trim() == "random" {
            return Err(anyhow!(
                "--run {spec}: the name random is the table's random baseline row; give the run \
                 another name"
            ));
        }
        let (file, field) = rest.split_once('#').unwrap_or((rest, "text"));
        out.push(RunSpec { name, file, field });
    }
    Ok(out)
}

/// Every `--compare A=B`, both names runs of the table.
fn compare_specs(specs: &[String], runs: &[RunSpec<'_>]) -> Result<Vec<(String, String)>> {
    specs
        .iter()
        .map(|spec| {
            // Run names may hold `=` nowhere (see run_specs), so the first one splits.
            let (a, b) = spec
                .split_once('=')
                .ok_or_else(|| anyhow!("--compare {spec}: expected A=B (two --run names)"))?;
            for n in [a, b] {
                if !runs.iter().any(|r| r.name == n) {
                    return Err(anyhow!("--compare {spec}: no --run is named {n:?}"));
                }
            }
            if a == b {
                return Err(anyhow!("--compare {spec}: a run compared with itself"));
            }
            Ok((a.to_string(), b.to_string()))
        })
        .collect()
}

fn load_runs(specs: &[RunSpec<'_>], cands: &[Study]) -> Result<Runs> {
    let mut runs = Vec::new();
    let mut full_from_runs = HashMap::new();
    for spec in specs {
        runs.push(load_run(spec, cands, &mut full_from_runs)?);
    }
    Ok(Runs {
        runs,
        full_from_runs,
    })
}

/// One --run NAME=FILE[#FIELD]: its pick for every candidate study.
fn load_run(
    spec: &RunSpec<'_>,
    cands: &[Study],
    full_from_runs: &mut HashMap<String, usize>,
) -> Result<(String, RunPicks)> {
    let RunSpec { name, file, field } = *spec;
    let mut by_id: RunPicks = HashMap::new();
    let mut first_at: HashMap<String, String> = HashMap::new();
    let mut in_file: Vec<String> = Vec::new();
    for (at, v) in read_jsonl_file::<serde_json::Value>(Path::new(file))? {
        let id = v
            .get("id")
            .map(id_text)
            .ok_or_else(|| anyhow!("{at}: no \"id\""))?;
        // A later line must not silently replace an earlier pick.
        if let Some(first) = first_at.insert(id.clone(), at.clone()) {
            return Err(anyhow!("{at}: study {id} again (first at {first})"));
        }
        let text = v
            .get(field)
            .and_then(|t| t.as_str())
            .ok_or_else(|| anyhow!("{at}: no string field \"{field}\""))?
            .to_string();
        let full = token_count(&v, "tokens_full", &at)?;
        let used = token_count(&v, "tokens_used", &at)?;
        if let Some(f) = full {
            full_from_runs.insert(id.clone(), f);
        }
        // The pick's own cost when the line is the run's own record;
        // another field (standard_text) costs the full K candidates.
        let used = if field == "text" { used } else { None };
        in_file.push(id.clone());
        by_id.insert(id, (text, used));
    }
    for s in cands {
        if !by_id.contains_key(&s.id) {
            return Err(anyhow!(
                "--run {name}: study {} is missing from {file}",
                s.id
            ));
        }
    }
    // A run over more studies than the candidates is fine (a subset is
    // evaluated), but said: a wrong --candidates file would look the same.
    let known: HashSet<&str> = cands.iter().map(|s| s.id.as_str()).collect();
    let extra: Vec<&String> = in_file
        .iter()
        .filter(|id| !known.contains(id.as_str()))
        .collect();
    if let Some(first) = extra.first() {
        log_line(format_args!(
            "sdr eval: warning: --run {name}: {} {} of {file} not in --candidates \
             (the first: {first}) left out",
            extra.len(),
            if extra.len() == 1 { "study" } else { "studies" }
        ));
    }
    Ok((name.to_string(), by_id))
}

/// The empty table with its columns and notes.
fn new_table(
    args: &Args,
    n: usize,
    bert: Option<String>,
    uncertain: UncertainPolicy,
    judge: bool,
) -> Result<Table> {
    let judge_columns: &[&str] = if judge { &JUDGE_COLUMNS } else { &[] };
    let mut table = Table::new(
        args.title.clone(),
        "policy",
        COLUMNS
            .iter()
            .chain(&CHEXPERT_COLUMNS)
            .chain(judge_columns)
            .map(|s| s.to_string())
            .collect(),
    );
    table.set_integer_column("tokens")?;
    table.bertscore_encoder = bert;
    table.notes.push(format!(
        "{n} studies; metrics on Findings (F) and Impression (I); tokens summed over studies; \
         saved = 1 - tokens / tokens of the K full candidates; \
         well-formed = picks that parse into both sections."
    ));
    table.notes.push(chexpert::note(uncertain));
    if judge {
        table.notes.push(JUDGE_NOTE.into());
    }
    table.notes.push(format!(
        "Random row: exact expectation of a uniform pick; CheXpert-rule F1 per seed, mean over {} seeds.",
        args.seeds
    ));
    table.notes.extend(args.note.iter().cloned());
    Ok(table)
}
