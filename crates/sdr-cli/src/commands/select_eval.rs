//! `sdr select-eval`: score the candidates that `sdr select` chose against the
//! reference reports, next to the two random baselines (SPEC §5, §7), as
//! Markdown/CSV tables and policy x metric heatmaps (sdr-eval).

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use rayon::prelude::*;
use sdr_clinical::{Labeler, Labels, UncertainPolicy};
use sdr_core::io::AtomicFile;
use sdr_core::report::parse_report;
use sdr_corpus::CsvTable;
use sdr_eval::baseline::Pool;
use sdr_eval::chexpert;
use sdr_eval::heatmap::Heatmap;
use sdr_eval::scores::{TextScorer, TEXT_METRICS};
use sdr_eval::selection::{
    strata_table, summarize, SelectionConfig, SelectionStudy, SelectionSummary,
};
use sdr_eval::strata::{stratum_from_problems, Abnormality, Stratum};
use sdr_eval::table::Table;
use serde::Deserialize;

use crate::common::{candidates_hash, check_output_dir, log_line, print_stdout};
use crate::jsonl::{id_text, parse_json, read_jsonl_file, read_jsonl_lines};
use crate::textscore::{load_judge, load_wordnet, BertScoreArgs, Judge};

#[derive(clap::Args)]
#[command(
    after_help = "Writes into --out-dir, per section S in findings, impression:\n  \
S_values.{md,csv}           every policy's mean metric value, and the two random baselines\n  \
S_vs_random_all.{md,csv}    improvement over a uniform pick among all K candidates, in %\n  \
S_vs_random_wf.{md,csv}     improvement over a uniform pick among the well-formed candidates, in %\n  \
heatmap_S_vs_random_all.png, heatmap_S_vs_random_wf.png\n  \
S_values_G, S_vs_random_all_G, S_vs_random_wf_G (.md, .csv) for G in normal, abnormal,\n  \
                            single_finding, multiple_findings\n  \
S_strata.{md,csv}           best policy vs random per stratum (no finding / single finding /\n                              multiple findings; BERTScore-F1, ROUGE-L, METEOR,\n                              CheXpert-rule F1)\n\
and prints a summary. A candidate's section is what the parser extracts from it (empty\n\
when missing), scored against the reference section; studies whose reference lacks a\n\
section are skipped for that section. Strata come from the reference CSV's `Problems`\n\
column, when it has one: `normal` vs anything else, and (SPEC 7) no finding / one\n\
finding / several distinct findings. Columns: BLEU-1..4, ROUGE-1/2/L,\n\
METEOR, chrF++, BERTScore-F1 (bert-score's, with --bertscore-model DIR, else the reward's\n\
own all-mpnet-base-v2; the tables name it; each candidate scored once) as means over studies, and CheXpert-rule F1 (rule-based labels, not\n\
CheXbert) macro / micro over 14 and over 5 observations, corpus-level over the chosen\n\
set; random baselines draw the same seeded picks for every column."
)]
pub struct Args {
    /// Reference reports: CSV with an id column and findings/impression columns (IU X-ray layout).
    #[arg(long, value_name = "CSV")]
    pub references: PathBuf,
    /// Candidate file given to `sdr select` ({"id", "candidates"} per line);
    /// each study's texts must be the ones selected from (checked against
    /// the selections' candidates_hash, when they have one).
    #[arg(long, value_name = "JSONL")]
    pub candidates: PathBuf,
    /// Output of `sdr select --all-policies` (optionally with --consensus)
    /// on --candidates.
    #[arg(long, value_name = "JSONL")]
    pub selections: PathBuf,
    /// Folder for the tables and heatmaps (created if needed).
    #[arg(long, value_name = "DIR")]
    pub out_dir: PathBuf,
    /// Seeds averaged by each random baseline (1 to 100000).
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 1000,
        value_name = "N"
    )]
    pub seeds: usize,
    /// Id column of the reference CSV.
    #[arg(long, default_value = "uid", value_name = "NAME")]
    pub id_col: String,
    /// WordNet database folder for METEOR's synonym stage (default:
    /// $SDR_WORDNET_DIR, then /usr/share/wordnet; without one, METEOR runs
    /// without synonyms and the tables say so).
    #[arg(long, value_name = "DIR")]
    pub wordnet: Option<PathBuf>,
    /// A line naming where the candidates come from, printed under every table.
    #[arg(long, value_name = "TEXT")]
    pub origin: Option<String>,
    #[command(flatten)]
    pub bert: BertScoreArgs,
    /// Count uncertain CheXpert-rule labels as absent (default: as present,
    /// the convention of the common CheXbert-F1 scripts).
    #[arg(long)]
    pub uncertain_negative: bool,
}

/// One reference study: its sections and its `Problems` value when the CSV has one.
struct Reference {
    sections: [String; 2],
    problems: Option<String>,
    /// CSV line, for error messages.
    line: usize,
}

#[derive(Deserialize)]
struct CandLine {
    id: serde_json::Value,
    candidates: Vec<String>,
}

#[derive(Deserialize)]
struct Chosen {
    chosen: usize,
}

#[derive(Deserialize)]
struct SelLine {
    id: serde_json::Value,
    well_formed: Vec<bool>,
    /// Fingerprint of the candidate texts selected from; selections written
    /// before `sdr select` had it load unchecked.
    #[serde(default)]
    candidates_hash: Option<String>,
    policies: indexmap_free::OrderedPolicies,
}

/// Keeps the policies in file order (serde_json's map is sorted otherwise).
mod indexmap_free {
    use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};

    pub struct OrderedPolicies(pub Vec<(String, super::Chosen)>);

    impl<'de> Deserialize<'de> for OrderedPolicies {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = OrderedPolicies;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a map of policy -> {chosen, scores}")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                    let mut v = Vec::new();
                    while let Some((k, c)) = m.next_entry::<String, super::Chosen>()? {
                        v.push((k, c));
                    }
                    Ok(OrderedPolicies(v))
                }
            }
            d.deserialize_map(V)
        }
    }
}

/// The lines of `sdr select --all-policies` output, each with its `file:line`;
/// a line without `policies` (one policy's output) says what is needed.
fn read_selections(path: &Path) -> Result<Vec<(String, SelLine)>> {
    read_jsonl_lines(path, |at, l| {
        parse_json::<SelLine>(l).map_err(|e| {
            let v = parse_json::<serde_json::Value>(l).ok();
            if v.is_some_and(|v| v.is_object() && v.get("policies").is_none()) {
                anyhow!("{at}: no \"policies\": select-eval needs the output of `sdr select --all-policies`")
            } else {
                anyhow!("{at}: {e}")
            }
        })
    })
}

/// Family label of a policy key (`sinkhorn:eps=0.1@min` -> `sinkhorn`); a
/// key under another sentence cost keeps its cost's name
/// (`clinical/chamfer@min` -> `clinical/chamfer`, `clinical/ot@consensus`
/// -> `clinical/consensus`).
fn family(key: &str) -> String {
    if let Some((cost, rest)) = key.split_once('/') {
        let name = cost.split(':').next().unwrap_or(cost);
        return format!("{name}/{}", family(rest));
    }
    let (metric, agg) = key.split_once('@').unwrap_or((key, ""));
    if agg == "consensus" {
        return "consensus".into();
    }
    metric.split(':').next().unwrap_or(metric).to_string()
}

/// The inputs every later phase reads: references by id, candidates by id,
/// the selections and their policy keys (the first line's, in file order).
struct Inputs {
    refs: HashMap<String, Reference>,
    /// Whether the reference CSV has a `Problems` column (normal / abnormal strata).
    has_problems: bool,
    cands: HashMap<String, Vec<String>>,
    sels: Vec<SelLine>,
    keys: Vec<String>,
}

/// Per study: candidate sections as the parser sees them, each scored
/// once; every policy and every random seed reuses these values.
struct Row {
    well: Vec<bool>,
    /// hyps[section][candidate]
    hyps: [Vec<String>; 2],
    /// text[section][metric][candidate]
    text: [Vec<Vec<f64>>; 2],
    labels: [Vec<Labels>; 2],
    reference: [String; 2],
    reference_labels: [Labels; 2],
    abnormality: Option<Abnormality>,
    stratum: Option<Stratum>,
    chosen: Vec<usize>,
}

/// BERTScore-F1 by (row, section, candidate).
type BertF1 = HashMap<(usize, usize, usize), f64>;

pub fn run(a: Args) -> Result<()> {
    crate::common::check_seeds(a.seeds)?;
    // The folder is made only once every table is ready (see `publish`); a
    // bad path fails here, before the scoring.
    check_output_dir("--out-dir", &a.out_dir)?;
    let inputs = load_inputs(&a)?;
    let wordnet = load_wordnet(a.wordnet.as_deref())?;
    let scorer = TextScorer::new(Default::default(), wordnet.as_ref());
    let rows = score_studies(&a, &inputs, &scorer)?;
    let bert = load_judge(&a.bert)?;
    let bert_f1 = bertscore_rows(&rows, bert.as_ref())?;
    let out = Output::new(&a, &inputs, bert.as_ref(), wordnet.is_some());
    if !inputs.has_problems {
        log_line(format_args!(
            "sdr select-eval: {} has no `Problems` column: no normal / abnormal tables",
            a.references.display()
        ));
    }
    let mut summary = Vec::new();
    for (si, sec) in ["findings", "impression"].into_iter().enumerate() {
        summary.extend(out.section(&rows, &bert_f1, si, sec)?);
    }
    publish(&a.out_dir, out.staged.into_inner())?;
    let mut text = summary.join("\n");
    text.push_str(&format!("\ntables and heatmaps: {}\n", a.out_dir.display()));
    print_stdout(&text)
}

/// A file of the output folder, rendered in memory until [`publish`].
enum Artifact {
    Text(String),
    Png(Heatmap),
}

/// Writes every artifact into `dir` all or nothing: each goes to a temporary
/// file first, and the files are renamed into place only when all are
/// written. On failure the temporary files and the folders this call made
/// are removed, so a failed run leaves nothing behind.
fn publish(dir: &Path, files: Vec<(String, Artifact)>) -> Result<()> {
    for (name, _) in &files {
        let dest = dir.join(name);
        if dest.is_dir() {
            return Err(anyhow!("cannot write {}: is a folder", dest.display()));
        }
    }
    // The folders to make, outermost last, to remove them again on failure.
    let made: Vec<PathBuf> = dir
        .ancestors()
        .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
        .map(Path::to_path_buf)
        .collect();
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let staged = files
        .iter()
        .map(|(name, art)| {
            let dest = dir.join(name);
            let at = || format!("cannot write {}", dest.display());
            let mut f = AtomicFile::create(&dest).with_context(at)?;
            match art {
                Artifact::Text(t) => f
                    .write_all(t.as_bytes())
                    .and_then(|()| f.flush())
                    .with_context(at)?,
                Artifact::Png(hm) => hm.render_png_into(&mut f)?,
            }
            Ok((dest, f))
        })
        .collect::<Result<Vec<_>>>();
    let staged = match staged {
        Ok(s) => s,
        Err(e) => {
            // The temporary files are gone with the failed collection.
            for d in &made {
                let _ = std::fs::remove_dir(d);
            }
            return Err(e);
        }
    };
    for (dest, f) in staged {
        f.commit()
            .with_context(|| format!("cannot write {}", dest.display()))?;
    }
    Ok(())
}

fn load_inputs(a: &Args) -> Result<Inputs> {
    let table = CsvTable::read(&a.references)?;
    let (ci, cf, cim) = (
        table.column(&a.id_col)?,
        table.column("findings")?,
        table.column("impression")?,
    );
    let cp = table.find("problems");
    let refs: HashMap<String, Reference> = (0..table.len())
        .map(|r| {
            let g = |c: usize| table.field(r, c).to_string();
            let reference = Reference {
                sections: [g(cf), g(cim)],
                problems: cp.map(g),
                line: table.line(r),
            };
            (g(ci), reference)
        })
        .collect();
    // A repeated study would count twice in every mean: refused in both files.
    let mut cands: HashMap<String, Vec<String>> = HashMap::new();
    let mut first_at: HashMap<String, String> = HashMap::new();
    let mut cand_order: Vec<(String, String)> = Vec::new();
    for (at, c) in read_jsonl_file::<CandLine>(&a.candidates)? {
        let id = id_text(&c.id);
        if let Some(first) = first_at.insert(id.clone(), at.clone()) {
            return Err(anyhow!("{at}: study {id} again (first at {first})"));
        }
        cand_order.push((at, id.clone()));
        cands.insert(id, c.candidates);
    }
    let sels = read_selections(&a.selections)?;
    let first = sels
        .first()
        .ok_or_else(|| anyhow!("{}: no selections", a.selections.display()))?;
    let keys: Vec<String> = first.1.policies.0.iter().map(|(k, _)| k.clone()).collect();
    if keys.is_empty() {
        return Err(anyhow!(
            "{}: no policies (run sdr select --all-policies)",
            a.selections.display()
        ));
    }

    // Every line checked here, in file order, so that an error names its line.
    let mut first_at: HashMap<String, String> = HashMap::new();
    for (at, s) in &sels {
        let id = id_text(&s.id);
        if let Some(first) = first_at.insert(id.clone(), at.clone()) {
            return Err(anyhow!("{at}: study {id} again (first at {first})"));
        }
        let texts = cands
            .get(&id)
            .ok_or_else(|| anyhow!("{at}: study {id}: not in {}", a.candidates.display()))?;
        if !refs.contains_key(&id) {
            return Err(anyhow!(
                "{at}: study {id}: not in {}",
                a.references.display()
            ));
        }
        if texts.len() != s.well_formed.len() {
            return Err(anyhow!(
                "{at}: study {id}: {} candidates in {} but {} well_formed flags",
                texts.len(),
                a.candidates.display(),
                s.well_formed.len()
            ));
        }
        if let Some(want) = &s.candidates_hash {
            let got = candidates_hash(texts);
            if *want != got {
                return Err(anyhow!(
                    "{at}: study {id} was selected from other candidates than {} holds \
                     (its candidates_hash is {want}, theirs {got}: other texts or another order; \
                     give the file that `sdr select` read)",
                    a.candidates.display()
                ));
            }
        }
        chosen_indices(&keys, s, &id, texts.len()).map_err(|e| anyhow!("{at}: {e}"))?;
    }
    // A study with candidates but no selection would drop out of every
    // table unnoticed (a selections file cut short), as `sdr eval` refuses.
    if let Some((at, id)) = cand_order.iter().find(|(_, id)| !first_at.contains_key(id)) {
        return Err(anyhow!(
            "{at}: study {id} has no line in {} ({} of {} studies selected);              give the selections of every study in {}",
            a.selections.display(),
            first_at.len(),
            cand_order.len(),
            a.candidates.display()
        ));
    }
    let sels = sels.into_iter().map(|(_, s)| s).collect();
    Ok(Inputs {
        refs,
        has_problems: cp.is_some(),
        cands,
        sels,
        keys,
    })
}

/// Scores every study's candidates, in parallel over studies.
fn score_studies(a: &Args, inputs: &Inputs, scorer: &TextScorer) -> Result<Vec<Row>> {
    let labeler = Labeler::default();
    inputs
        .sels
        .par_iter()
        .map(|s| score_study(a, inputs, scorer, &labeler, s))
        .collect()
}

fn score_study(
    a: &Args,
    inputs: &Inputs,
    scorer: &TextScorer,
    labeler: &Labeler,
    s: &SelLine,
) -> Result<Row> {
    let id = id_text(&s.id);
    let texts = inputs
        .cands
        .get(&id)
        .ok_or_else(|| anyhow!("study {id}: not in {}", a.candidates.display()))?;
    let reference = inputs
        .refs
        .get(&id)
        .ok_or_else(|| anyhow!("study {id}: not in {}", a.references.display()))?;
    if texts.len() != s.well_formed.len() {
        return Err(anyhow!(
            "study {id}: {} candidates but {} well_formed flags",
            texts.len(),
            s.well_formed.len()
        ));
    }
    let at = |e| anyhow!("{}:{}: {e}", a.references.display(), reference.line);
    let (abnormality, stratum) = match &reference.problems {
        Some(p) => (
            Some(Abnormality::from_problems(p).map_err(at)?),
            Some(stratum_from_problems(p).map_err(at)?),
        ),
        None => (None, None),
    };
    let hyps = candidate_sections(texts);
    let text = text_scores(scorer, &hyps, &reference.sections, &id)?;
    let labels: [Vec<Labels>; 2] =
        [0, 1].map(|si| hyps[si].iter().map(|h| labeler.label(h)).collect());
    let reference_labels = [0, 1].map(|si| labeler.label(&reference.sections[si]));
    let chosen = chosen_indices(&inputs.keys, s, &id, texts.len())?;
    Ok(Row {
        well: s.well_formed.clone(),
        hyps,
        text,
        labels,
        reference: reference.sections.clone(),
        reference_labels,
        abnormality,
        stratum,
        chosen,
    })
}

/// [findings, impression] of every candidate; empty when the parser finds none.
fn candidate_sections(texts: &[String]) -> [Vec<String>; 2] {
    let parsed: Vec<_> = texts.iter().map(|t| parse_report(t)).collect();
    [0, 1].map(|si| {
        parsed
            .iter()
            .map(|p| {
                if si == 0 {
                    p.findings.join(" ")
                } else {
                    p.impression.join(" ")
                }
            })
            .collect::<Vec<String>>()
    })
}

/// text[section][metric][candidate] against the reference sections.
fn text_scores(
    scorer: &TextScorer,
    hyps: &[Vec<String>; 2],
    reference: &[String; 2],
    id: &str,
) -> Result<[Vec<Vec<f64>>; 2]> {
    let mut text: [Vec<Vec<f64>>; 2] = [
        vec![Vec::new(); TEXT_METRICS.len()],
        vec![Vec::new(); TEXT_METRICS.len()],
    ];
    for (si, vs) in text.iter_mut().enumerate() {
        for hyp in &hyps[si] {
            let sc = scorer
                .score(hyp, &reference[si])
                .map_err(|e| anyhow!("study {id}: {e}"))?;
            for (m, v) in sc.values().iter().enumerate() {
                vs[m].push(*v);
            }
        }
    }
    Ok(text)
}

/// Each policy's pick, checked against the first line's policies and the
/// candidate count.
fn chosen_indices(keys: &[String], s: &SelLine, id: &str, n: usize) -> Result<Vec<usize>> {
    let line = &s.policies.0;
    if let Some(k) = keys.iter().find(|k| !line.iter().any(|(k2, _)| k2 == *k)) {
        return Err(anyhow!(
            "study {id}: policy {k} is missing (the first line has it)"
        ));
    }
    if let Some((k, _)) = line.iter().find(|(k, _)| !keys.contains(k)) {
        return Err(anyhow!("study {id}: policy {k} is not on the first line"));
    }
    let mut chosen = Vec::with_capacity(keys.len());
    for (k, (k2, c)) in keys.iter().zip(line) {
        if k != k2 {
            return Err(anyhow!(
                "study {id}: policies in another order than on the first line"
            ));
        }
        if c.chosen >= n {
            return Err(anyhow!(
                "study {id}: policy {k} chose {} of {n} candidates",
                c.chosen
            ));
        }
        chosen.push(c.chosen);
    }
    Ok(chosen)
}

/// BERTScore: one batch per section over every (candidate section,
/// reference) pair whose reference section exists (idf, when asked for, over
/// that section's pairs); each distinct text is encoded once per section.
fn bertscore_rows(rows: &[Row], bert: Option<&Judge>) -> Result<BertF1> {
    let mut bert_f1: BertF1 = HashMap::new();
    if let Some(judge) = bert {
        for si in 0..2 {
            let mut at = Vec::new();
            let mut pairs: Vec<(&str, &str)> = Vec::new();
            for (r, row) in rows.iter().enumerate() {
                if row.reference[si].is_empty() {
                    continue;
                }
                for (c, h) in row.hyps[si].iter().enumerate() {
                    at.push((r, si, c));
                    pairs.push((h.as_str(), row.reference[si].as_str()));
                }
            }
            for (key, b) in at.into_iter().zip(judge.scorer().score_pairs(&pairs)?) {
                bert_f1.insert(key, b.f1);
            }
        }
    }
    Ok(bert_f1)
}

/// What the tables of every section share: settings, notes and where they go.
struct Output<'a> {
    a: &'a Args,
    keys: &'a [String],
    has_problems: bool,
    /// Whether BERTScore-F1 is a column.
    bert: bool,
    metric_cols: Vec<String>,
    config: SelectionConfig,
    encoder_name: Option<String>,
    meteor_note: String,
    /// Every file to write, by name in the output folder (see [`publish`]).
    staged: RefCell<Vec<(String, Artifact)>>,
}

impl<'a> Output<'a> {
    fn new(a: &'a Args, inputs: &'a Inputs, judge: Option<&Judge>, wordnet: bool) -> Self {
        let keys = &inputs.keys;
        let bert = judge.is_some();
        let mut metric_cols: Vec<String> = TEXT_METRICS.iter().map(|s| s.to_string()).collect();
        if bert {
            metric_cols.push("BERTScore-F1".into());
        }
        let encoder_name = judge.map(Judge::describe);
        let uncertain = if a.uncertain_negative {
            UncertainPolicy::Negative
        } else {
            UncertainPolicy::Positive
        };
        let config = SelectionConfig {
            metrics: metric_cols.clone(),
            policies: keys.clone(),
            seeds: a.seeds,
            uncertain,
        };
        let meteor_note = if wordnet {
            "METEOR with WordNet 3.0 synonyms.".to_string()
        } else {
            "METEOR without WordNet synonyms (no WordNet database found).".to_string()
        };
        Output {
            a,
            keys,
            has_problems: inputs.has_problems,
            bert,
            metric_cols,
            config,
            encoder_name,
            meteor_note,
            staged: RefCell::new(Vec::new()),
        }
    }

    fn stage(&self, name: String, art: Artifact) {
        self.staged.borrow_mut().push((name, art));
    }

    /// Sets the notes and encoder line, then stages `stem`.md and `stem`.csv.
    fn write(&self, t: &mut Table, notes: &[String], stem: &str) -> Result<()> {
        t.notes = notes.to_vec();
        t.bertscore_encoder = self.encoder_name.clone();
        self.stage(format!("{stem}.md"), Artifact::Text(t.to_markdown()?));
        self.stage(format!("{stem}.csv"), Artifact::Text(t.to_csv()?));
        Ok(())
    }

    /// Notes under a table of `group` (e.g. "normal ", or "" for all studies).
    fn base_notes(&self, sec: &str, n: usize, n_wf: usize, group: &str) -> Vec<String> {
        let mut notes = vec![
            format!("{n} {group}test studies with a reference {sec} section ({n_wf} with at least one well-formed candidate)."),
            format!("Random baselines: uniform pick per study, mean over {} seeds.", self.a.seeds),
            self.meteor_note.clone(),
            "BLEU: sentence BLEU, nltk method1 smoothing; ROUGE: F1; chrF++ on the 0-100 scale; BERTScore-F1: no idf, no rescaling.".into(),
            chexpert::note(self.config.uncertain),
        ];
        if let Some(o) = &self.a.origin {
            notes.push(format!("Candidates: {o}"));
        }
        notes
    }

    /// Writes one section's tables and heatmaps; returns its summary lines.
    fn section(&self, rows: &[Row], bert_f1: &BertF1, si: usize, sec: &str) -> Result<Vec<String>> {
        let studies = self.section_studies(rows, bert_f1, si);
        if studies.is_empty() {
            return Err(anyhow!(
                "no study has a reference {sec} section in {}",
                self.a.references.display()
            ));
        }
        // Groups: all studies, then when known normal and abnormal, and the SPEC's
        // finding strata (no finding is the normal group: its tables are those).
        let mut groups: Vec<(String, Vec<&SelectionStudy>)> =
            vec![("all".into(), studies.iter().map(|(_, s)| s).collect())];
        let members = |keep: &dyn Fn(&Row) -> bool| -> Vec<&SelectionStudy> {
            studies
                .iter()
                .filter(|(r, _)| keep(&rows[*r]))
                .map(|(_, s)| s)
                .collect()
        };
        if self.has_problems {
            for ab in Abnormality::ALL {
                groups.push((
                    ab.label().to_string(),
                    members(&|r| r.abnormality == Some(ab)),
                ));
            }
            for st in [Stratum::SingleFinding, Stratum::MultipleFindings] {
                groups.push((st.label().to_string(), members(&|r| r.stratum == Some(st))));
            }
        }
        let mut summaries: Vec<(String, SelectionSummary)> = Vec::new();
        for (group, members) in &groups {
            if members.is_empty() {
                log_line(format_args!(
                    "sdr select-eval: {sec}: no {group} study; no {group} tables"
                ));
                continue;
            }
            let sm =
                summarize(members, &self.config).map_err(|e| anyhow!("{sec} ({group}): {e}"))?;
            self.group_tables(sec, group, &sm)?;
            summaries.push((group.clone(), sm));
        }
        // The stratified view (paper appendix, SPEC 7): all, no finding, single
        // finding, multiple findings.
        let strata: Vec<(String, &SelectionSummary)> = summaries
            .iter()
            .filter(|(g, _)| g != Abnormality::Abnormal.label())
            .map(|(g, s)| {
                let name = if g == Abnormality::Normal.label() {
                    Stratum::NoFinding.label().to_string()
                } else {
                    g.clone()
                };
                (name, s)
            })
            .collect();
        self.strata(sec, &strata)?;
        Ok(self.summary_lines(sec, &summaries[0].1))
    }

    /// The section's studies whose reference section exists, with their row index.
    fn section_studies(
        &self,
        rows: &[Row],
        bert_f1: &BertF1,
        si: usize,
    ) -> Vec<(usize, SelectionStudy)> {
        rows.iter()
            .enumerate()
            .filter(|(_, r)| !r.reference[si].is_empty())
            .map(|(r, row)| {
                let mut values = row.text[si].clone();
                if self.bert {
                    values.push((0..row.well.len()).map(|c| bert_f1[&(r, si, c)]).collect());
                }
                (
                    r,
                    SelectionStudy {
                        well_formed: row.well.clone(),
                        values,
                        labels: row.labels[si].clone(),
                        reference_labels: row.reference_labels[si],
                        chosen: row.chosen.clone(),
                    },
                )
            })
            .collect()
    }

    /// Values and improvement tables of one group; heatmaps for all studies only.
    fn group_tables(&self, sec: &str, group: &str, sm: &SelectionSummary) -> Result<()> {
        let keys = self.keys;
        let (suffix, label, in_group) = if group == "all" {
            (String::new(), String::new(), String::new())
        } else {
            (
                format!("_{}", group.replace(' ', "_")),
                format!(" ({group} studies)"),
                format!("{group} "),
            )
        };
        let notes = self.base_notes(sec, sm.n_studies, sm.n_well_formed, &in_group);
        let mut values = sm.values_table(
            format!("Selection on the {sec} section{label}, {} studies: mean metric of the chosen candidate; CheXpert-rule F1 over the chosen set", sm.n_studies),
            keys,
        )?;
        self.write(&mut values, &notes, &format!("{sec}_values{suffix}"))?;
        for (pool, tag, plabel) in [
            (Pool::All, "all", "all candidates"),
            (Pool::WellFormed, "wf", "well-formed candidates only"),
        ] {
            let mut t = sm.improvement_table(
                format!(
                    "Selection on the {sec} section{label}, {} studies: improvement over random ({plabel}), % [95 % paired-bootstrap interval]",
                    sm.n_studies
                ),
                keys,
                pool,
            )?;
            self.write(&mut t, &notes, &format!("{sec}_vs_random_{tag}{suffix}"))?;
            if group != "all" {
                continue;
            }
            let hm = Heatmap {
                title: format!("{sec}: improvement over random ({plabel}), %"),
                subtitle: format!(
                    "IU X-ray test studies, K candidates each; {}",
                    self.meteor_note
                ),
                row_labels: keys.iter().map(|k| k.replace('@', " / ")).collect(),
                row_groups: keys.iter().map(|k| family(k)).collect(),
                columns: sm.columns.clone(),
                values: t.rows.iter().map(|r| r.cells.clone()).collect(),
                bertscore_encoder: self.encoder_name.clone(),
            };
            hm.validate()?;
            self.stage(
                format!("heatmap_{sec}_vs_random_{tag}.png"),
                Artifact::Png(hm),
            );
        }
        Ok(())
    }

    /// The paper's stratified headline view (per group: BERTScore-F1,
    /// ROUGE-L, METEOR and CheXpert-rule F1 of the best policy vs random).
    fn strata(&self, sec: &str, summaries: &[(String, &SelectionSummary)]) -> Result<()> {
        let headline: Vec<&str> = [
            "BERTScore-F1",
            "ROUGE-L",
            "METEOR",
            chexpert::CHEXPERT_COLUMNS[0],
        ]
        .into_iter()
        .filter(|c| self.metric_cols.iter().any(|m| m == c) || c.starts_with("CheXpert"))
        .collect();
        let mut st = strata_table(
            format!("Selection on the {sec} section by stratum, {} studies: best policy vs random (well-formed only) [95 % paired-bootstrap interval]", summaries.first().map_or(0, |(_, s)| s.n_studies)),
            summaries,
            self.keys,
            &headline,
            Pool::WellFormed,
        )?;
        let counts: Vec<String> = summaries
            .iter()
            .map(|(g, s)| format!("{g} n = {}", s.n_studies))
            .collect();
        let mut notes = vec![format!(
            "Strata by the reference CSV's `Problems` column: no finding (`normal` only), single finding (one distinct label besides `normal`), multiple findings; {}. The best policy maximises the mean improvement over random across all (stratum x metric) cells of this table.",
            counts.join(", ")
        )];
        let all = summaries[0].1;
        notes.extend(
            self.base_notes(sec, all.n_studies, all.n_well_formed, "")
                .into_iter()
                .skip(1),
        );
        self.write(&mut st, &notes, &format!("{sec}_strata"))
    }

    /// Summary: best policies by mean improvement over the well-formed baseline.
    fn summary_lines(&self, sec: &str, sm: &SelectionSummary) -> Vec<String> {
        let keys = self.keys;
        let improve = sm.improvement(Pool::WellFormed);
        let mut ranked: Vec<(f64, usize)> = improve
            .iter()
            .enumerate()
            .map(|(p, r)| {
                let v: Vec<f64> = r.iter().flatten().copied().collect();
                (v.iter().sum::<f64>() / v.len().max(1) as f64, p)
            })
            .collect();
        ranked.sort_by(|x, y| y.0.total_cmp(&x.0));
        let at = |name: &str| sm.columns.iter().position(|c| c == name).unwrap_or(0);
        let (rl, me, cx) = (
            at("ROUGE-L"),
            at("METEOR"),
            at(chexpert::CHEXPERT_COLUMNS[0]),
        );
        let mut summary = vec![format!(
            "{sec}: {} studies; random(all) ROUGE-L {:.4} METEOR {:.4} CheXpert-rule F1 {:.4}; random(well-formed) ROUGE-L {:.4} METEOR {:.4} CheXpert-rule F1 {:.4}",
            sm.n_studies, sm.random[0][rl], sm.random[0][me], sm.random[0][cx], sm.random[1][rl], sm.random[1][me], sm.random[1][cx]
        )];
        for (v, p) in ranked.iter().take(5) {
            summary.push(format!(
                "  {:<28} ROUGE-L {:.4} METEOR {:.4} CheXpert-rule F1 {:.4}  mean improvement over random(well-formed) {v:+.2}%",
                keys[*p], sm.policies[*p][rl], sm.policies[*p][me], sm.policies[*p][cx]
            ));
        }
        summary
    }
}
