//! `sdr select-eval`: score the candidates that `sdr select` chose against the
//! reference reports, next to the two random baselines (SPEC §5, §7), as
//! Markdown/CSV tables and policy x metric heatmaps (sdr-eval).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use sdr_clinical::UncertainPolicy;
use sdr_corpus::CsvTable;
use sdr_eval::publish::publish;
use sdr_eval::scores::TextScorer;
use sdr_eval::select_eval::{
    add_judge_labels, chosen_indices, score_selection, tables, Reference, SelectionRecord,
    StudyToScore, TablesConfig,
};
use sdr_gen::replay::ReplayRecord;

use crate::common::{candidates_hash, check_output_dir, log_line, print_stdout, JudgeArgs};
use crate::jsonl::{id_text, parse_json, read_jsonl_file, read_jsonl_lines};
use crate::textscore::{load_judge, load_wordnet, BertScoreArgs};

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
    #[command(flatten)]
    pub judge: JudgeArgs,
    /// Count uncertain CheXpert-rule labels as absent (default: as present,
    /// the convention of the common CheXbert-F1 scripts).
    #[arg(long)]
    pub uncertain_negative: bool,
}

/// The lines of `sdr select --all-policies` output, each with its `file:line`;
/// a line without `policies` (one policy's output) says what is needed.
fn read_selections(path: &Path) -> Result<Vec<(String, SelectionRecord)>> {
    read_jsonl_lines(path, |at, l| {
        parse_json::<SelectionRecord>(l).map_err(|e| {
            let v = parse_json::<serde_json::Value>(l).ok();
            if v.is_some_and(|v| v.is_object() && v.get("policies").is_none()) {
                anyhow!("{at}: no \"policies\": select-eval needs the output of `sdr select --all-policies`")
            } else {
                anyhow!("{at}: {e}")
            }
        })
    })
}

/// The inputs, checked: references by id, candidates by id, each selection
/// line's id and checked picks (in file order), and the policy keys (the
/// first line's, in file order).
struct Inputs {
    refs: HashMap<String, Reference>,
    /// Whether the reference CSV has a `Problems` column (normal / abnormal strata).
    has_problems: bool,
    cands: HashMap<String, Vec<String>>,
    /// (id, selection line, each policy's pick)
    sels: Vec<(String, SelectionRecord, Vec<usize>)>,
    keys: Vec<String>,
}

pub fn run(a: Args) -> Result<()> {
    crate::common::check_seeds(a.seeds)?;
    // The folder is made only once every table is ready (see `publish`); a
    // bad path fails here, before the scoring.
    check_output_dir("--out-dir", &a.out_dir)?;
    let inputs = load_inputs(&a)?;
    let wordnet = load_wordnet(a.wordnet.as_deref())?;
    let scorer = TextScorer::new(Default::default(), wordnet.as_ref());
    let studies: Vec<StudyToScore<'_>> = inputs
        .sels
        .iter()
        .map(|(id, s, chosen)| StudyToScore {
            id,
            candidates: &inputs.cands[id],
            well_formed: &s.well_formed,
            chosen,
            reference: &inputs.refs[id],
        })
        .collect();
    let judge = a.judge.load()?;
    let mut scored = score_selection(&studies, &scorer)?;
    if let Some(j) = &judge {
        add_judge_labels(&mut scored.rows, |t| j.label_many(t))?;
    }
    let bert = load_judge(&a.bert)?;
    let bert_f1 = scored.bertscore_f1(bert.as_ref().map(|j| j.scorer()).as_ref())?;
    if !inputs.has_problems {
        log_line(format_args!(
            "sdr select-eval: {} has no `Problems` column: no normal / abnormal tables",
            a.references.display()
        ));
    }
    let config = TablesConfig {
        keys: inputs.keys.clone(),
        seeds: a.seeds,
        uncertain: if a.uncertain_negative {
            UncertainPolicy::Negative
        } else {
            UncertainPolicy::Positive
        },
        origin: a.origin.clone(),
        references: a.references.display().to_string(),
        has_problems: inputs.has_problems,
        bertscore_encoder: bert.as_ref().map(|j| j.describe()),
        wordnet: wordnet.is_some(),
    };
    let out = tables(&scored.rows, &bert_f1, &config);
    if let Ok(t) = &out {
        for n in &t.notices {
            log_line(format_args!("sdr select-eval: {n}"));
        }
    }
    let out = out?;
    let removed = publish(&a.out_dir, &out.files)?;
    if !removed.is_empty() {
        log_line(format_args!(
            "sdr select-eval: removed {} file(s) of an earlier run into {} that this run does \
             not write ({}{})",
            removed.len(),
            a.out_dir.display(),
            removed[..removed.len().min(3)].join(", "),
            if removed.len() > 3 { ", ..." } else { "" }
        ));
    }
    let mut text = out.summary.join("\n");
    text.push_str(&format!("\ntables and heatmaps: {}\n", a.out_dir.display()));
    print_stdout(&text)
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
                at: format!("{}:{}", a.references.display(), table.line(r)),
            };
            (g(ci), reference)
        })
        .collect();
    // A repeated study would count twice in every mean: refused in both files.
    let mut cands: HashMap<String, Vec<String>> = HashMap::new();
    let mut first_at: HashMap<String, String> = HashMap::new();
    let mut cand_order: Vec<(String, String)> = Vec::new();
    for (at, c) in read_jsonl_file::<ReplayRecord>(&a.candidates)? {
        let id = c.id.text();
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
    let keys: Vec<String> = first.1.policies.keys().cloned().collect();
    if keys.is_empty() {
        return Err(anyhow!(
            "{}: no policies (run sdr select --all-policies)",
            a.selections.display()
        ));
    }

    // Every line checked here, in file order, so that an error names its line.
    let mut first_at: HashMap<String, String> = HashMap::new();
    let mut checked = Vec::with_capacity(sels.len());
    for (at, s) in sels {
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
        let chosen = chosen_indices(&keys, &s.policies, &id, texts.len())
            .map_err(|e| anyhow!("{at}: {e}"))?;
        checked.push((id, s, chosen));
    }
    // A study with candidates but no selection would drop out of every
    // table unnoticed (a selections file cut short), as `sdr eval` refuses.
    if let Some((at, id)) = cand_order.iter().find(|(_, id)| !first_at.contains_key(id)) {
        return Err(anyhow!(
            "{at}: study {id} has no line in {} ({} of {} studies selected); \
             give the selections of every study in {}",
            a.selections.display(),
            first_at.len(),
            cand_order.len(),
            a.candidates.display()
        ));
    }
    Ok(Inputs {
        refs,
        has_problems: cp.is_some(),
        cands,
        sels: checked,
        keys,
    })
}
