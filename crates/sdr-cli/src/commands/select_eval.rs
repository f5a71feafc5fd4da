//! `sdr select-eval`: score the candidates that `sdr select` chose against the
//! reference reports, next to the two random baselines (SPEC §5, §7), as
//! Markdown/CSV tables and policy x metric heatmaps (sdr-eval).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use rayon::prelude::*;
use sdr_core::report::parse_report;
use sdr_eval::baseline::{improvement_percent, policy_mean, random_baseline_seeded, Pool, Study};
use sdr_eval::heatmap::Heatmap;
use sdr_eval::scores::{TextScorer, TEXT_METRICS};
use sdr_eval::table::Table;
use serde::Deserialize;

use crate::jsonl::{id_text, read_jsonl_file};
use crate::textscore::load_wordnet;

#[derive(clap::Args)]
#[command(
    after_help = "Writes into --out-dir, per section S in findings, impression:\n  \
S_values.{md,csv}           every policy's mean metric value, and the two random baselines\n  \
S_vs_random_all.{md,csv}    improvement over a uniform pick among all K candidates, in %\n  \
S_vs_random_wf.{md,csv}     improvement over a uniform pick among the well-formed candidates, in %\n  \
heatmap_S_vs_random_all.png, heatmap_S_vs_random_wf.png\n\
and prints a summary. A candidate's section is what the parser extracts from it (empty\n\
when missing), scored against the reference section; studies whose reference lacks a\n\
section are skipped for that section."
)]
pub struct Args {
    /// Reference reports: CSV with an id column and findings/impression columns (IU X-ray layout).
    #[arg(long, value_name = "CSV")]
    pub references: PathBuf,
    /// Candidate file given to `sdr select` ({"id", "candidates"} per line).
    #[arg(long, value_name = "JSONL")]
    pub candidates: PathBuf,
    /// Output of `sdr select --all-policies` (optionally with --consensus).
    #[arg(long, value_name = "JSONL")]
    pub selections: PathBuf,
    /// Folder for the tables and heatmaps (created if needed).
    #[arg(long, value_name = "DIR")]
    pub out_dir: PathBuf,
    /// Seeds averaged by each random baseline.
    #[arg(long, default_value_t = 1000, value_name = "N")]
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

fn read_jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    Ok(read_jsonl_file(path)?.into_iter().map(|(_, v)| v).collect())
}

/// Family label of a policy key (`sinkhorn:eps=0.1@min` -> `sinkhorn`).
fn family(key: &str) -> String {
    let (metric, agg) = key.split_once('@').unwrap_or((key, ""));
    if agg == "consensus" {
        return "consensus".into();
    }
    metric.split(':').next().unwrap_or(metric).to_string()
}

pub fn run(a: Args) -> Result<()> {
    std::fs::create_dir_all(&a.out_dir)
        .with_context(|| format!("cannot create {}", a.out_dir.display()))?;
    // References.
    let mut rdr = csv::Reader::from_path(&a.references)
        .with_context(|| format!("cannot read {}", a.references.display()))?;
    let headers: Vec<String> = rdr
        .headers()?
        .iter()
        .map(|h| h.trim().to_string())
        .collect();
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| h.eq_ignore_ascii_case(name))
            .ok_or_else(|| anyhow!("{}: no column `{name}`", a.references.display()))
    };
    let (ci, cf, cim) = (col(&a.id_col)?, col("findings")?, col("impression")?);
    let mut refs: HashMap<String, [String; 2]> = HashMap::new();
    for (no, row) in rdr.records().enumerate() {
        let row = row.map_err(|e| anyhow!("{}:{}: {e}", a.references.display(), no + 2))?;
        let g = |i: usize| row.get(i).unwrap_or("").trim().to_string();
        refs.insert(g(ci), [g(cf), g(cim)]);
    }
    let cands: HashMap<String, Vec<String>> = read_jsonl::<CandLine>(&a.candidates)?
        .into_iter()
        .map(|c| (id_text(&c.id), c.candidates))
        .collect();
    let sels: Vec<SelLine> = read_jsonl(&a.selections)?;
    let first = sels
        .first()
        .ok_or_else(|| anyhow!("{}: no selections", a.selections.display()))?;
    let keys: Vec<String> = first.policies.0.iter().map(|(k, _)| k.clone()).collect();
    if keys.is_empty() {
        return Err(anyhow!(
            "{}: no policies (run sdr select --all-policies)",
            a.selections.display()
        ));
    }

    let wordnet = load_wordnet(a.wordnet.as_deref())?;
    let scorer = TextScorer::new(Default::default(), wordnet.as_ref());

    // Per study: candidate sections as the parser sees them.
    struct Row {
        well: Vec<bool>,
        /// values[section][metric][candidate]
        values: [Vec<Vec<f64>>; 2],
        has: [bool; 2],
        chosen: Vec<usize>,
    }
    let rows: Vec<Row> = sels
        .par_iter()
        .map(|s| -> Result<Row> {
            let id = id_text(&s.id);
            let texts = cands
                .get(&id)
                .ok_or_else(|| anyhow!("study {id}: not in {}", a.candidates.display()))?;
            let reference = refs
                .get(&id)
                .ok_or_else(|| anyhow!("study {id}: not in {}", a.references.display()))?;
            if texts.len() != s.well_formed.len() {
                return Err(anyhow!(
                    "study {id}: {} candidates but {} well_formed flags",
                    texts.len(),
                    s.well_formed.len()
                ));
            }
            let parsed: Vec<_> = texts.iter().map(|t| parse_report(t)).collect();
            let mut values: [Vec<Vec<f64>>; 2] = [
                vec![Vec::new(); TEXT_METRICS.len()],
                vec![Vec::new(); TEXT_METRICS.len()],
            ];
            for (si, vs) in values.iter_mut().enumerate() {
                for p in &parsed {
                    let hyp = if si == 0 {
                        p.findings.join(" ")
                    } else {
                        p.impression.join(" ")
                    };
                    let sc = scorer
                        .score(&hyp, &reference[si])
                        .map_err(|e| anyhow!("study {id}: {e}"))?;
                    for (m, v) in sc.values().iter().enumerate() {
                        vs[m].push(*v);
                    }
                }
            }
            let mut chosen = Vec::with_capacity(keys.len());
            for (k, (k2, c)) in keys.iter().zip(&s.policies.0) {
                if k != k2 {
                    return Err(anyhow!("study {id}: policies differ from the first line's"));
                }
                if c.chosen >= texts.len() {
                    return Err(anyhow!(
                        "study {id}: policy {k} chose {} of {} candidates",
                        c.chosen,
                        texts.len()
                    ));
                }
                chosen.push(c.chosen);
            }
            Ok(Row {
                well: s.well_formed.clone(),
                values,
                has: [!reference[0].is_empty(), !reference[1].is_empty()],
                chosen,
            })
        })
        .collect::<Result<_>>()?;

    let metric_cols: Vec<String> = TEXT_METRICS.iter().map(|s| s.to_string()).collect();
    let meteor_note = if wordnet.is_some() {
        "METEOR with WordNet 3.0 synonyms.".to_string()
    } else {
        "METEOR without WordNet synonyms (no WordNet database found).".to_string()
    };
    let mut summary = Vec::new();
    for (si, sec) in ["findings", "impression"].into_iter().enumerate() {
        let idx: Vec<usize> = (0..rows.len()).filter(|&r| rows[r].has[si]).collect();
        let n_wf = idx
            .iter()
            .filter(|&&r| rows[r].well.iter().any(|&w| w))
            .count();
        let mut base = [vec![0.0; metric_cols.len()], vec![0.0; metric_cols.len()]];
        let mut pol = vec![vec![0.0; metric_cols.len()]; keys.len()];
        for m in 0..metric_cols.len() {
            let studies: Vec<Study> = idx
                .iter()
                .map(|&r| Study {
                    values: &rows[r].values[si][m],
                    well_formed: &rows[r].well,
                })
                .collect();
            for (b, pool) in [Pool::All, Pool::WellFormed].into_iter().enumerate() {
                base[b][m] = random_baseline_seeded(&studies, pool, a.seeds, 0)
                    .map_err(|e| anyhow!("{e}"))?
                    .mean;
            }
            for (p, row) in pol.iter_mut().enumerate() {
                let choices: Vec<usize> = idx.iter().map(|&r| rows[r].chosen[p]).collect();
                row[m] = policy_mean(&studies, &choices).map_err(|e| anyhow!("{e}"))?;
            }
        }
        let mut notes = vec![
            format!("{} test studies with a reference {sec} section ({n_wf} with at least one well-formed candidate).", idx.len()),
            format!("Random baselines: uniform pick per study, mean over {} seeds.", a.seeds),
            meteor_note.clone(),
            "BLEU: sentence BLEU, nltk method1 smoothing; ROUGE: F1; chrF++ on the 0-100 scale.".into(),
        ];
        if let Some(o) = &a.origin {
            notes.push(format!("Candidates: {o}"));
        }
        let mut values = Table::new(
            format!("Selection on the {sec} section: mean metric of the chosen candidate"),
            "policy",
            metric_cols.clone(),
        );
        values.notes = notes.clone();
        values.push_row(
            "random (all candidates)",
            base[0].iter().map(|&v| Some(v)).collect(),
        )?;
        values.push_row(
            "random (well-formed only)",
            base[1].iter().map(|&v| Some(v)).collect(),
        )?;
        for (k, row) in keys.iter().zip(&pol) {
            values.push_row(k.clone(), row.iter().map(|&v| Some(v)).collect())?;
        }
        values.write_markdown(&a.out_dir.join(format!("{sec}_values.md")))?;
        values.write_csv(&a.out_dir.join(format!("{sec}_values.csv")))?;
        for (b, tag, label) in [
            (0, "all", "all candidates"),
            (1, "wf", "well-formed candidates only"),
        ] {
            let improve: Vec<Vec<Option<f64>>> = pol
                .iter()
                .map(|row| {
                    row.iter()
                        .zip(&base[b])
                        .map(|(&p, &r)| improvement_percent(p, r).ok())
                        .collect()
                })
                .collect();
            let mut t = Table::new(
                format!("Selection on the {sec} section: improvement over random ({label}), %"),
                "policy",
                metric_cols.clone(),
            );
            t.notes = notes.clone();
            t.decimals = 2;
            for (k, row) in keys.iter().zip(&improve) {
                t.push_row(k.clone(), row.clone())?;
            }
            t.write_markdown(&a.out_dir.join(format!("{sec}_vs_random_{tag}.md")))?;
            t.write_csv(&a.out_dir.join(format!("{sec}_vs_random_{tag}.csv")))?;
            let hm = Heatmap {
                title: format!("{sec}: improvement over random ({label}), %"),
                subtitle: format!("IU X-ray test studies, K candidates each; {meteor_note}"),
                row_labels: keys.iter().map(|k| k.replace('@', " / ")).collect(),
                row_groups: keys.iter().map(|k| family(k)).collect(),
                columns: metric_cols.clone(),
                values: improve.clone(),
                bertscore_encoder: None,
            };
            hm.render_png(&a.out_dir.join(format!("heatmap_{sec}_vs_random_{tag}.png")))?;
            if b == 1 {
                // Summary: best policies by mean improvement over the well-formed baseline.
                let mut ranked: Vec<(f64, &String)> = improve
                    .iter()
                    .zip(&keys)
                    .map(|(r, k)| {
                        let v: Vec<f64> = r.iter().flatten().copied().collect();
                        (v.iter().sum::<f64>() / v.len().max(1) as f64, k)
                    })
                    .collect();
                ranked.sort_by(|x, y| y.0.total_cmp(&x.0));
                let col = |name: &str| metric_cols.iter().position(|c| c == name).unwrap_or(0);
                let (rl, me) = (col("ROUGE-L"), col("METEOR"));
                summary.push(format!(
                    "{sec}: {} studies; random(all) ROUGE-L {:.4} METEOR {:.4}; random(well-formed) ROUGE-L {:.4} METEOR {:.4}",
                    idx.len(), base[0][rl], base[0][me], base[1][rl], base[1][me]
                ));
                for (v, k) in ranked.iter().take(5) {
                    let p = keys.iter().position(|x| x == *k).unwrap_or(0);
                    summary.push(format!(
                        "  {k:<28} ROUGE-L {:.4} METEOR {:.4}  mean improvement over random(well-formed) {v:+.2}%",
                        pol[p][rl], pol[p][me]
                    ));
                }
            }
        }
    }
    for l in summary {
        println!("{l}");
    }
    println!("tables and heatmaps: {}", a.out_dir.display());
    Ok(())
}
