//! Every table, heatmap and summary line of a selection evaluation, rendered
//! in memory (see [`crate::publish::publish`] to write them).

use std::cell::RefCell;

use sdr_clinical::UncertainPolicy;

#[cfg(feature = "heatmap")]
use super::policy_family;
use super::score::{BertF1, ScoredStudy};
use crate::baseline::Pool;
use crate::chexpert;
use crate::error::{EvalError, Result};
#[cfg(feature = "heatmap")]
use crate::heatmap::Heatmap;
use crate::publish::Artifact;
use crate::scores::TEXT_METRICS;
use crate::selection::{
    strata_table, summarize, SelectionConfig, SelectionStudy, SelectionSummary,
};
use crate::strata::{Abnormality, Stratum};
use crate::table::Table;

/// What the tables say besides the numbers.
#[derive(Debug, Clone)]
pub struct TablesConfig {
    /// Policy keys, in the order of each study's `chosen`.
    pub keys: Vec<String>,
    /// Seeds averaged by each random baseline.
    pub seeds: usize,
    pub uncertain: UncertainPolicy,
    /// Where the candidates come from, a line under every table.
    pub origin: Option<String>,
    /// The references' name in errors (`refs.csv`).
    pub references: String,
    /// Whether the references have a `Problems` column (the normal /
    /// abnormal and finding-strata tables).
    pub has_problems: bool,
    /// The BERTScore judge as the tables name it
    /// ([`crate::bertscore::BertScorer::describe`]); `None`: no BERTScore column.
    pub bertscore_encoder: Option<String>,
    /// Whether METEOR had WordNet's synonyms.
    pub wordnet: bool,
}

/// A selection evaluation rendered: the files of the output folder by
/// name, the summary lines, and notices (a group without studies).
#[derive(Debug, Clone)]
pub struct Tables {
    pub files: Vec<(String, Artifact)>,
    pub summary: Vec<String>,
    pub notices: Vec<String>,
}

/// Per section (findings, impression): the values and improvement tables of
/// all studies and of each group (normal, abnormal, single finding, multiple
/// findings, when the references have `Problems`), the heatmaps of all
/// studies, the strata table, and the summary lines (the five best policies
/// by mean improvement over the well-formed baseline). `bert_f1` is
/// [`super::SelectionScores::bertscore_f1`] of the same rows (empty without a judge).
///
/// # Errors
/// [`EvalError::NoReferenceSection`] when no study has a reference section;
/// a summary's or a table's error, [`EvalError::At`] naming the section and group.
pub fn tables(rows: &[ScoredStudy], bert_f1: &BertF1, config: &TablesConfig) -> Result<Tables> {
    let mut out = Output::new(config);
    out.judge = rows.iter().any(|r| r.judge.is_some());
    let mut summary = Vec::new();
    for (si, sec) in ["findings", "impression"].into_iter().enumerate() {
        summary.extend(out.section(rows, bert_f1, si, sec)?);
    }
    Ok(Tables {
        files: out.staged.into_inner(),
        summary,
        notices: out.notices.into_inner(),
    })
}

/// What the tables of every section share: settings, notes and where they go.
struct Output<'a> {
    c: &'a TablesConfig,
    /// Whether BERTScore-F1 is a column.
    bert: bool,
    metric_cols: Vec<String>,
    config: SelectionConfig,
    meteor_note: String,
    /// Whether the rows carry the judge's labels (judge-F1 columns).
    judge: bool,
    staged: RefCell<Vec<(String, Artifact)>>,
    notices: RefCell<Vec<String>>,
}

fn at(at: String) -> impl FnOnce(EvalError) -> EvalError {
    move |e| EvalError::At {
        at,
        source: Box::new(e),
    }
}

impl<'a> Output<'a> {
    fn new(c: &'a TablesConfig) -> Self {
        let bert = c.bertscore_encoder.is_some();
        let mut metric_cols: Vec<String> = TEXT_METRICS.iter().map(|s| s.to_string()).collect();
        if bert {
            metric_cols.push("BERTScore-F1".into());
        }
        let config = SelectionConfig {
            metrics: metric_cols.clone(),
            policies: c.keys.clone(),
            seeds: c.seeds,
            uncertain: c.uncertain,
        };
        let meteor_note = if c.wordnet {
            "METEOR with WordNet 3.0 synonyms.".to_string()
        } else {
            "METEOR without WordNet synonyms (no WordNet database found).".to_string()
        };
        Output {
            c,
            bert,
            metric_cols,
            config,
            meteor_note,
            judge: false,
            staged: RefCell::new(Vec::new()),
            notices: RefCell::new(Vec::new()),
        }
    }

    fn stage(&self, name: String, art: Artifact) {
        self.staged.borrow_mut().push((name, art));
    }

    /// Sets the notes and encoder line, then stages `stem`.md and `stem`.csv.
    fn write(&self, t: &mut Table, notes: &[String], stem: &str) -> Result<()> {
        t.notes = notes.to_vec();
        t.bertscore_encoder = self.c.bertscore_encoder.clone();
        self.stage(format!("{stem}.md"), Artifact::Text(t.to_markdown()?));
        self.stage(format!("{stem}.csv"), Artifact::Text(t.to_csv()?));
        Ok(())
    }

    /// Notes under a table of `group` (e.g. "normal ", or "" for all studies).
    fn base_notes(&self, sec: &str, n: usize, n_wf: usize, group: &str) -> Vec<String> {
        let mut notes = vec![
            format!("{n} {group}test studies with a reference {sec} section ({n_wf} with at least one well-formed candidate)."),
            format!("Random baselines: uniform pick per study, mean over {} seeds.", self.c.seeds),
            self.meteor_note.clone(),
            "BLEU: sentence BLEU, nltk method1 smoothing; ROUGE: F1; chrF++ on the 0-100 scale; BERTScore-F1: no idf, no rescaling.".into(),
            chexpert::note(self.config.uncertain),
        ];
        if self.judge {
            notes.push(chexpert::JUDGE_NOTE.into());
        }
        if let Some(o) = &self.c.origin {
            notes.push(format!("Candidates: {o}"));
        }
        notes
    }

    /// Stages one section's tables and heatmaps; returns its summary lines.
    fn section(
        &self,
        rows: &[ScoredStudy],
        bert_f1: &BertF1,
        si: usize,
        sec: &'static str,
    ) -> Result<Vec<String>> {
        let studies = self.section_studies(rows, bert_f1, si);
        if studies.is_empty() {
            return Err(EvalError::NoReferenceSection {
                section: sec,
                references: self.c.references.clone(),
            });
        }
        // The same studies with the judge's labels, when the rows have them.
        let judged: Option<Vec<SelectionStudy>> = studies
            .iter()
            .map(|(r, s)| {
                rows[*r].judge.as_ref().map(|j| SelectionStudy {
                    labels: j.labels[si].clone(),
                    reference_labels: j.reference[si],
                    ..s.clone()
                })
            })
            .collect();
        // Groups (positions in `studies`): all studies, then when known normal and abnormal,
        // and the SPEC's finding strata (no finding is the normal group: its tables are those).
        let mut groups: Vec<(String, Vec<usize>)> =
            vec![("all".into(), (0..studies.len()).collect())];
        let members = |keep: &dyn Fn(&ScoredStudy) -> bool| -> Vec<usize> {
            (0..studies.len())
                .filter(|&i| keep(&rows[studies[i].0]))
                .collect()
        };
        if self.c.has_problems {
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
        for (group, idx) in &groups {
            if idx.is_empty() {
                self.notices
                    .borrow_mut()
                    .push(format!("{sec}: no {group} study; no {group} tables"));
                continue;
            }
            let members: Vec<&SelectionStudy> = idx.iter().map(|&i| &studies[i].1).collect();
            let mut sm =
                summarize(&members, &self.config).map_err(at(format!("{sec} ({group})")))?;
            if let Some(j) = &judged {
                let members: Vec<&SelectionStudy> = idx.iter().map(|&i| &j[i]).collect();
                let js = summarize(&members, &self.config)
                    .map_err(at(format!("{sec} ({group}), judge labels")))?;
                sm.append_f1_columns(&js, &chexpert::JUDGE_COLUMNS)
                    .map_err(at(format!("{sec} ({group}), judge labels")))?;
            }
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
        rows: &[ScoredStudy],
        bert_f1: &BertF1,
        si: usize,
    ) -> Vec<(usize, SelectionStudy)> {
        rows.iter()
            .enumerate()
            .filter(|(_, r)| !r.reference[si].is_empty())
            .map(|(r, row)| {
                let mut values = row.text[si].clone();
                if self.bert {
                    values.push(
                        (0..row.well_formed.len())
                            .map(|c| bert_f1[&(r, si, c)])
                            .collect(),
                    );
                }
                (
                    r,
                    SelectionStudy {
                        well_formed: row.well_formed.clone(),
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
        let keys = &self.c.keys;
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
            #[cfg(feature = "heatmap")]
            {
                let hm = Heatmap {
                    title: format!("{sec}: improvement over random ({plabel}), %"),
                    subtitle: format!(
                        "IU X-ray test studies, K candidates each; {}",
                        self.meteor_note
                    ),
                    row_labels: keys.iter().map(|k| k.replace('@', " / ")).collect(),
                    row_groups: keys.iter().map(|k| policy_family(k)).collect(),
                    columns: sm.columns.clone(),
                    values: t.rows.iter().map(|r| r.cells.clone()).collect(),
                    bertscore_encoder: self.c.bertscore_encoder.clone(),
                };
                hm.validate()?;
                self.stage(
                    format!("heatmap_{sec}_vs_random_{tag}.png"),
                    Artifact::Png(hm),
                );
            }
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
            &self.c.keys,
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
        let keys = &self.c.keys;
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
