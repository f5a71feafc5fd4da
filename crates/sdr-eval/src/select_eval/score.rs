//! Per study: the candidates' sections as the parser sees them, each scored
//! once against the reference with every text metric and labelled with
//! CheXpert-rule labels; every policy and every random seed reuses these
//! values.

use std::collections::HashMap;

use sdr_clinical::{Labeler, Labels};

use crate::bertscore::BertScorer;
use crate::error::{EvalError, Result};
use crate::evaluation::{score_table, EvalReference, EvalTable, EvalText, UnitScores};
use crate::report::Scope;
use crate::scores::{TextScorer, TEXT_METRICS};
use crate::strata::{stratum_from_problems, Abnormality, Stratum};

/// One reference study: its sections and its `Problems` value when the
/// reference table has one.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// `[findings, impression]`; empty when the reference lacks a section.
    pub sections: [String; 2],
    pub problems: Option<String>,
    /// Where the reference is (`refs.csv:3`), for errors.
    pub at: String,
}

/// One study to score: its candidates, which of them are well-formed, each
/// policy's pick and the reference.
#[derive(Debug, Clone, Copy)]
pub struct StudyToScore<'a> {
    pub id: &'a str,
    pub candidates: &'a [String],
    pub well_formed: &'a [bool],
    /// Each policy's pick, checked ([`super::chosen_indices`]).
    pub chosen: &'a [usize],
    pub reference: &'a Reference,
}

/// A study scored: every candidate section's metric values and labels.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredStudy {
    pub well_formed: Vec<bool>,
    /// `hyps[section][candidate]`: the candidate's section text.
    pub hyps: [Vec<String>; 2],
    /// `text[section][metric][candidate]`, metrics as [`TEXT_METRICS`].
    pub text: [Vec<Vec<f64>>; 2],
    pub labels: [Vec<Labels>; 2],
    pub reference: [String; 2],
    pub reference_labels: [Labels; 2],
    /// Normal or abnormal, from the reference's `Problems`.
    pub abnormality: Option<Abnormality>,
    pub stratum: Option<Stratum>,
    pub chosen: Vec<usize>,
    /// The judge's labels (SPEC §8a) of the same texts, after [`add_judge_labels`].
    pub judge: Option<JudgeLabels>,
}

/// The judge's labels of a study's candidate sections and reference sections.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeLabels {
    /// `labels[section][candidate]`.
    pub labels: [Vec<Labels>; 2],
    pub reference: [Labels; 2],
}

/// Labels every candidate section and reference section of `rows` with `label_many` (the
/// judge), each distinct text once, so that the tables gain judge-F1 columns.
///
/// # Errors
/// The labeler's, or a label count that does not match the texts.
pub fn add_judge_labels<F>(rows: &mut [ScoredStudy], label_many: F) -> Result<()>
where
    F: Fn(&[&str]) -> Result<Vec<Labels>>,
{
    let mut texts: Vec<&str> = rows
        .iter()
        .flat_map(|r| {
            r.hyps
                .iter()
                .flatten()
                .chain(r.reference.iter())
                .map(String::as_str)
        })
        .collect();
    texts.sort_unstable();
    texts.dedup();
    let labels = label_many(&texts)?;
    if labels.len() != texts.len() {
        return Err(EvalError::LengthMismatch {
            what: "judge labels",
            expected: texts.len(),
            got: labels.len(),
        });
    }
    let by: HashMap<String, Labels> = texts.iter().map(|t| t.to_string()).zip(labels).collect();
    for r in rows.iter_mut() {
        r.judge = Some(JudgeLabels {
            labels: [0, 1].map(|si| r.hyps[si].iter().map(|h| by[h]).collect()),
            reference: [0, 1].map(|si| by[&r.reference[si]]),
        });
    }
    Ok(())
}

/// BERTScore-F1 by (study, section, candidate).
pub type BertF1 = HashMap<(usize, usize, usize), f64>;

/// Every study scored ([`score_selection`]): the rows the tables read, over the
/// evaluation table that holds each distinct (study, candidate) once.
#[derive(Debug, Clone)]
pub struct SelectionScores {
    /// One per study, in input order.
    pub rows: Vec<ScoredStudy>,
    table: EvalTable,
    /// `cells[study][candidate]`: the candidate's row of `table`.
    cells: Vec<Vec<usize>>,
}

/// Scores every study's candidate sections against its reference sections
/// ([`crate::evaluation::score_table`]: each distinct candidate of a study
/// once), in input order.
///
/// # Errors
/// [`EvalError::Study`] for a study whose counts disagree or whose text
/// fails a metric; [`EvalError::At`] naming the reference whose `Problems`
/// holds no label.
pub fn score_selection(
    studies: &[StudyToScore<'_>],
    scorer: &TextScorer,
) -> Result<SelectionScores> {
    let mut strata = Vec::with_capacity(studies.len());
    let mut references = Vec::with_capacity(studies.len());
    let mut texts = Vec::new();
    for (n, s) in studies.iter().enumerate() {
        strata.push(check_study(s)?);
        references.push(EvalReference {
            id: Some(s.id.to_string()),
            units: s.reference.sections.to_vec(),
        });
        texts.extend(
            s.candidates
                .iter()
                .map(|t| EvalText::parse(n, t, Scope::Sections)),
        );
    }
    let table = score_table(
        Scope::Sections,
        references,
        texts,
        scorer,
        &Labeler::default(),
    )?;
    let mut positions = table.positions().iter().copied();
    let cells: Vec<Vec<usize>> = studies
        .iter()
        .map(|s| positions.by_ref().take(s.candidates.len()).collect())
        .collect();
    let rows = studies
        .iter()
        .zip(strata)
        .zip(&cells)
        .enumerate()
        .map(|(n, ((s, (abnormality, stratum)), cells))| {
            let unit = |si: usize, c: usize| table.unit(cells[c], si);
            let candidates = || 0..cells.len();
            ScoredStudy {
                well_formed: s.well_formed.to_vec(),
                hyps: [0, 1].map(|si| {
                    cells
                        .iter()
                        .map(|&r| table.text(r).units[si].clone())
                        .collect()
                }),
                text: [0, 1].map(|si| {
                    (0..TEXT_METRICS.len())
                        .map(|m| candidates().map(|c| unit(si, c).text[m]).collect())
                        .collect()
                }),
                labels: [0, 1].map(|si| candidates().map(|c| unit(si, c).labels).collect()),
                reference: s.reference.sections.clone(),
                reference_labels: [0, 1].map(|si| table.reference_labels(n, si)),
                abnormality,
                stratum,
                chosen: s.chosen.to_vec(),
                judge: None,
            }
        })
        .collect();
    Ok(SelectionScores { rows, table, cells })
}

/// A study's counts checked, and its normal / abnormal group and finding
/// stratum from the reference's `Problems`.
fn check_study(s: &StudyToScore<'_>) -> Result<(Option<Abnormality>, Option<Stratum>)> {
    if s.candidates.len() != s.well_formed.len() {
        return Err(EvalError::Study {
            id: s.id.to_string(),
            message: format!(
                "{} candidates but {} well_formed flags",
                s.candidates.len(),
                s.well_formed.len()
            ),
        });
    }
    let at = |e| EvalError::At {
        at: s.reference.at.clone(),
        source: Box::new(e),
    };
    Ok(match &s.reference.problems {
        Some(p) => (
            Some(Abnormality::from_problems(p).map_err(at)?),
            Some(stratum_from_problems(p).map_err(at)?),
        ),
        None => (None, None),
    })
}

impl SelectionScores {
    /// BERTScore-F1 of every candidate section whose reference section exists:
    /// one batch per section over those (candidate section, reference) pairs
    /// (idf, when the scorer asks for it, over that section's pairs, each
    /// candidate counted); each distinct text is encoded once per section.
    /// Empty without a scorer.
    ///
    /// # Errors
    /// The scorer's.
    pub fn bertscore_f1(&mut self, bert: Option<&BertScorer<'_>>) -> Result<BertF1> {
        let mut bert_f1: BertF1 = HashMap::new();
        let Some(scorer) = bert else {
            return Ok(bert_f1);
        };
        for si in 0..2 {
            let mut at = Vec::new();
            let mut rows = Vec::new();
            for (r, (row, cells)) in self.rows.iter().zip(&self.cells).enumerate() {
                if row.reference[si].is_empty() {
                    continue;
                }
                for (c, &cell) in cells.iter().enumerate() {
                    at.push((r, si, c));
                    rows.push(cell);
                }
            }
            self.table.add_bertscore(scorer, si, &rows)?;
            for (key, cell) in at.into_iter().zip(rows) {
                let b = self.table.unit(cell, si).bert.unwrap_or_default();
                bert_f1.insert(key, b.f1);
            }
        }
        Ok(bert_f1)
    }

    /// The scores of `rows` (as [`score_selection`] made them) over a table
    /// rebuilt from their own values, for the deprecated [`bertscore_f1`].
    fn from_rows(rows: &[ScoredStudy]) -> Self {
        let mut references = Vec::with_capacity(rows.len());
        let mut reference_labels = Vec::with_capacity(rows.len());
        let mut scored = Vec::new();
        for (n, row) in rows.iter().enumerate() {
            references.push(EvalReference {
                id: None,
                units: row.reference.to_vec(),
            });
            reference_labels.push(row.reference_labels.to_vec());
            for c in 0..row.hyps[0].len().min(row.hyps[1].len()) {
                let units = [0, 1].map(|si| UnitScores {
                    text: std::array::from_fn(|m| {
                        row.text[si]
                            .get(m)
                            .and_then(|v| v.get(c))
                            .copied()
                            .unwrap_or(0.0)
                    }),
                    labels: row.labels[si].get(c).copied().unwrap_or_default(),
                    bert: None,
                });
                let text = EvalText {
                    study: n,
                    format_valid: row.well_formed.get(c).copied(),
                    units: vec![row.hyps[0][c].clone(), row.hyps[1][c].clone()],
                };
                scored.push((text, units.to_vec()));
            }
        }
        let table = EvalTable::from_scored(Scope::Sections, references, reference_labels, scored);
        let mut positions = table.positions().iter().copied();
        let cells = rows
            .iter()
            .map(|row| {
                let n = row.hyps[0].len().min(row.hyps[1].len());
                positions.by_ref().take(n).collect()
            })
            .collect();
        SelectionScores {
            rows: rows.to_vec(),
            table,
            cells,
        }
    }
}

/// Scores every study, in input order: the rows of [`score_selection`],
/// for callers without BERTScore.
///
/// # Errors
/// As [`score_selection`].
pub fn score_studies(
    studies: &[StudyToScore<'_>],
    scorer: &TextScorer,
) -> Result<Vec<ScoredStudy>> {
    Ok(score_selection(studies, scorer)?.rows)
}

/// BERTScore-F1 of `rows`, as [`SelectionScores::bertscore_f1`].
///
/// # Errors
/// The scorer's.
#[deprecated(
    since = "0.2.0",
    note = "use `SelectionScores::bertscore_f1` on `select_eval::score_selection`'s result; removed in 0.3.0"
)]
pub fn bertscore_f1(rows: &[ScoredStudy], bert: Option<&BertScorer<'_>>) -> Result<BertF1> {
    SelectionScores::from_rows(rows).bertscore_f1(bert)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_study_is_scored_per_candidate_section() {
        let reference = Reference {
            sections: [
                "Heart size normal. Lungs clear.".into(),
                "No acute disease.".into(),
            ],
            problems: Some("normal".into()),
            at: "refs.csv:2".into(),
        };
        let candidates = vec![
            "Findings: Heart size normal. Lungs clear.\nImpression: No acute disease.".to_string(),
            "Findings: Large effusion.".to_string(),
        ];
        let study = StudyToScore {
            id: "1",
            candidates: &candidates,
            well_formed: &[true, false],
            chosen: &[0, 1],
            reference: &reference,
        };
        let scorer = TextScorer::new(Default::default(), None);
        let rows = score_studies(&[study], &scorer).unwrap();
        let row = &rows[0];
        assert_eq!(row.hyps[1], ["No acute disease.", ""]);
        assert_eq!(row.text[0].len(), TEXT_METRICS.len());
        // Identical sections score 1 on ROUGE-L, the missing one 0.
        let rl = TEXT_METRICS.iter().position(|m| *m == "ROUGE-L").unwrap();
        assert_eq!(row.text[1][rl], [1.0, 0.0]);
        assert_eq!(row.abnormality, Some(Abnormality::Normal));
        assert_eq!(row.chosen, [0, 1]);

        // A `Problems` value with no label names the reference.
        let bad = Reference {
            problems: Some(" ; ".into()),
            ..reference.clone()
        };
        let e = score_studies(
            &[StudyToScore {
                reference: &bad,
                ..study
            }],
            &scorer,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("refs.csv:2: "), "{e}");
        let e = score_studies(
            &[StudyToScore {
                well_formed: &[true],
                ..study
            }],
            &scorer,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "study 1: 2 candidates but 1 well_formed flags");
    }

    #[test]
    #[allow(deprecated)]
    fn duplicate_candidates_share_a_row_and_the_old_bertscore_path_agrees() {
        let reference = Reference {
            sections: ["Lungs clear.".into(), "No acute disease.".into()],
            problems: None,
            at: "refs.csv:2".into(),
        };
        let a = "Findings: Lungs clear.\nImpression: Effusion.".to_string();
        let candidates = vec![a.clone(), a, "Findings: Lungs clear.".to_string()];
        let study = StudyToScore {
            id: "1",
            candidates: &candidates,
            well_formed: &[true, true, false],
            chosen: &[0],
            reference: &reference,
        };
        let mut s = score_selection(&[study], &TextScorer::new(Default::default(), None)).unwrap();
        assert_eq!(s.table.len(), 2);
        assert_eq!(s.cells, [[0, 0, 1]]);
        let enc = crate::evaluation::tests::bag_encoder();
        let judge = BertScorer::new(&enc);
        let f1 = s.bertscore_f1(Some(&judge)).unwrap();
        assert_eq!(f1.len(), 6);
        assert_eq!(f1[&(0, 1, 2)], 0.0, "the missing Impression");
        assert_eq!(f1[&(0, 1, 0)], f1[&(0, 1, 1)]);
        assert_eq!(bertscore_f1(&s.rows, Some(&judge)).unwrap(), f1);
        assert!(s.bertscore_f1(None).unwrap().is_empty());
    }
}
