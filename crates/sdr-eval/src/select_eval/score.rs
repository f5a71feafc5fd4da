//! Per study: the candidates' sections as the parser sees them, each scored
//! once against the reference with every text metric and labelled with
//! CheXpert-rule labels; every policy and every random seed reuses these
//! values.

use std::collections::HashMap;

use rayon::prelude::*;
use sdr_clinical::{Labeler, Labels};
use sdr_core::report::parse_report;

use crate::bertscore::BertScorer;
use crate::error::{EvalError, Result};
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

/// Scores every study, in parallel over studies, in input order.
///
/// # Errors
/// [`EvalError::Study`] for a study whose counts disagree or whose text
/// fails a metric; [`EvalError::At`] naming the reference whose `Problems`
/// holds no label.
pub fn score_studies(
    studies: &[StudyToScore<'_>],
    scorer: &TextScorer,
) -> Result<Vec<ScoredStudy>> {
    let labeler = Labeler::default();
    studies
        .par_iter()
        .map(|s| score_study(s, scorer, &labeler))
        .collect()
}

fn score_study(
    s: &StudyToScore<'_>,
    scorer: &TextScorer,
    labeler: &Labeler,
) -> Result<ScoredStudy> {
    let (id, texts, reference) = (s.id, s.candidates, s.reference);
    if texts.len() != s.well_formed.len() {
        return Err(EvalError::Study {
            id: id.to_string(),
            message: format!(
                "{} candidates but {} well_formed flags",
                texts.len(),
                s.well_formed.len()
            ),
        });
    }
    let at = |e| EvalError::At {
        at: reference.at.clone(),
        source: Box::new(e),
    };
    let (abnormality, stratum) = match &reference.problems {
        Some(p) => (
            Some(Abnormality::from_problems(p).map_err(at)?),
            Some(stratum_from_problems(p).map_err(at)?),
        ),
        None => (None, None),
    };
    let hyps = candidate_sections(texts);
    let text = text_scores(scorer, &hyps, &reference.sections, id)?;
    let labels: [Vec<Labels>; 2] =
        [0, 1].map(|si| hyps[si].iter().map(|h| labeler.label(h)).collect());
    let reference_labels = [0, 1].map(|si| labeler.label(&reference.sections[si]));
    Ok(ScoredStudy {
        well_formed: s.well_formed.to_vec(),
        hyps,
        text,
        labels,
        reference: reference.sections.clone(),
        reference_labels,
        abnormality,
        stratum,
        chosen: s.chosen.to_vec(),
        judge: None,
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
                .map_err(|e| EvalError::Study {
                    id: id.to_string(),
                    message: e.to_string(),
                })?;
            for (m, v) in sc.values().iter().enumerate() {
                vs[m].push(*v);
            }
        }
    }
    Ok(text)
}

/// BERTScore-F1 of every candidate section whose reference section exists:
/// one batch per section over those (candidate section, reference) pairs
/// (idf, when the scorer asks for it, over that section's pairs); each
/// distinct text is encoded once per section. Empty without a scorer.
///
/// # Errors
/// The scorer's.
pub fn bertscore_f1(rows: &[ScoredStudy], bert: Option<&BertScorer<'_>>) -> Result<BertF1> {
    let mut bert_f1: BertF1 = HashMap::new();
    if let Some(scorer) = bert {
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
            for (key, b) in at.into_iter().zip(scorer.score_pairs(&pairs)?) {
                bert_f1.insert(key, b.f1);
            }
        }
    }
    Ok(bert_f1)
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
}
