//! The one evaluation table behind `sdr score` ([`crate::report`]), `sdr eval`
//! ([`crate::runs`]) and `sdr select-eval` ([`crate::select_eval`]): texts
//! scored against study references, each distinct (study, text) once.
//!
//! A study's reference is an [`EvalReference`]: the text of each unit of a
//! [`Scope`] (Findings and Impression, or the whole report). A text to score
//! is an [`EvalText`], split into the same units by [`hypothesis_units`].
//! [`score_table`] gives every unit of every distinct text the text metrics
//! of [`TextScorer`] and its rule-based CheXpert labels, and labels every
//! reference unit; [`EvalTable::add_bertscore`] adds BERTScore over the
//! batch a caller names (idf weights come from that batch's references, so
//! the batch is the caller's choice). The callers only render the table.
//!
//! **An empty hypothesis** (a unit whose text is empty or whitespace, such
//! as a section the parser does not find) is never passed to the text
//! metrics: it scores 0 on each of them. Its BERTScore is what the judge
//! gives a pair with an empty side (0, rescaled when the judge rescales),
//! and its labels are the labeler's labels of that empty text, so its
//! CheXpert-rule F1 still counts against the reference's findings.
//!
//! An empty reference unit is scored like any other; callers refuse it
//! (`sdr score`, `sdr eval`) or leave it out of their tables (`sdr select-eval`).

use std::collections::HashMap;

use rayon::prelude::*;
use sdr_clinical::{Labeler, Labels};
use sdr_core::report::{parse_report, ParsedReport};

use crate::bertscore::{BertScore, BertScorer};
use crate::error::{EvalError, Result};
use crate::scores::{TextScorer, TEXT_METRICS};

/// What a pair is split into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scope {
    /// Findings and Impression, scored apart (SPEC §7).
    #[default]
    Sections,
    /// The raw texts, unsplit.
    Whole,
}

impl Scope {
    /// The unit names, in output order.
    pub fn names(self) -> &'static [&'static str] {
        match self {
            Scope::Sections => &["findings", "impression"],
            Scope::Whole => &["whole"],
        }
    }
}

/// One study's reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalReference {
    /// Names the study in a text metric's error ([`EvalError::Study`]);
    /// `None` leaves the error as the metric gives it.
    pub id: Option<String>,
    /// The text of each unit, in [`Scope::names`] order; empty where the
    /// reference lacks the unit.
    pub units: Vec<String>,
}

/// A text to score against one study's reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EvalText {
    /// Index of the study's [`EvalReference`].
    pub study: usize,
    /// Whether the text is a well-formed report (`None` for [`Scope::Whole`]).
    pub format_valid: Option<bool>,
    /// The text of each unit, in [`Scope::names`] order.
    pub units: Vec<String>,
}

impl EvalText {
    /// `text` split into the units of `scope` ([`hypothesis_units`]).
    pub fn parse(study: usize, text: &str, scope: Scope) -> Self {
        let (format_valid, units) = hypothesis_units(text, scope);
        EvalText {
            study,
            format_valid,
            units,
        }
    }
}

/// The Findings and the Impression of a parsed report as the tables compare
/// them: each section's sentences joined by one space, `""` when missing (the
/// one rule; `sdr_rewards.metrics.section_texts` reads it too).
pub fn section_texts(report: &ParsedReport) -> [String; 2] {
    [report.findings.join(" "), report.impression.join(" ")]
}

/// A hypothesis split into the units of `scope`: with [`Scope::Sections`] its
/// Findings and Impression as the report parser finds them (empty when
/// missing) and whether it is well formed; with [`Scope::Whole`] the text itself.
pub fn hypothesis_units(text: &str, scope: Scope) -> (Option<bool>, Vec<String>) {
    match scope {
        Scope::Whole => (None, vec![text.to_string()]),
        Scope::Sections => {
            let p = parse_report(text);
            (Some(p.format_valid), section_texts(&p).into())
        }
    }
}

/// The scores of one unit of a text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UnitScores {
    /// In [`TEXT_METRICS`] order.
    pub text: [f64; TEXT_METRICS.len()],
    /// Rule-based CheXpert labels of the unit's text.
    pub labels: Labels,
    /// Set by [`EvalTable::add_bertscore`].
    pub bert: Option<BertScore>,
}

/// Every distinct text scored against its study's reference (see the module).
#[derive(Debug, Clone)]
pub struct EvalTable {
    scope: Scope,
    references: Vec<EvalReference>,
    /// `reference_labels[study][unit]`.
    reference_labels: Vec<Vec<Labels>>,
    rows: Vec<EvalText>,
    /// `scores[row][unit]`.
    scores: Vec<Vec<UnitScores>>,
    /// The row of each text given, in the order given.
    positions: Vec<usize>,
}

/// Scores `texts` against `references` with `scorer` and labels them with
/// `labeler`; a text given twice for the same study is scored once.
///
/// # Errors
/// A reference or text without one unit per [`Scope::names`], a text naming
/// no study, and a text metric's error (only for a bad [`TextScorer`]
/// configuration), as [`EvalError::Study`] when the reference has an id.
pub fn score_table(
    scope: Scope,
    references: Vec<EvalReference>,
    texts: Vec<EvalText>,
    scorer: &TextScorer<'_>,
    labeler: &Labeler,
) -> Result<EvalTable> {
    score_with(scope, references, texts, labeler, |h, r| {
        Ok(scorer.score(h, r)?.values())
    })
}

/// [`score_table`] with the text metrics of `score`, so that tests can count its calls.
fn score_with<F>(
    scope: Scope,
    references: Vec<EvalReference>,
    texts: Vec<EvalText>,
    labeler: &Labeler,
    score: F,
) -> Result<EvalTable>
where
    F: Fn(&str, &str) -> Result<[f64; TEXT_METRICS.len()]> + Sync,
{
    let per = scope.names().len();
    for units in references
        .iter()
        .map(|r| &r.units)
        .chain(texts.iter().map(|t| &t.units))
    {
        if units.len() != per {
            return Err(EvalError::LengthMismatch {
                what: "units of a pair",
                expected: per,
                got: units.len(),
            });
        }
    }
    if let Some(t) = texts.iter().find(|t| t.study >= references.len()) {
        return Err(EvalError::LengthMismatch {
            what: "references (a text names a study beyond them)",
            expected: t.study + 1,
            got: references.len(),
        });
    }
    let (rows, positions) = distinct(texts);
    let cells: Vec<(usize, usize)> = (0..rows.len())
        .flat_map(|r| (0..per).map(move |u| (r, u)))
        .collect();
    // Every cell is scored before the first error (in row order) is returned,
    // so that which error is reported does not depend on the thread schedule.
    let scored: Vec<Result<UnitScores>> = cells
        .par_iter()
        .map(|&(r, u)| {
            let row = &rows[r];
            let reference = &references[row.study];
            let hyp = row.units[u].as_str();
            // The one rule for an empty hypothesis (see the module).
            let text = if hyp.trim().is_empty() {
                [0.0; TEXT_METRICS.len()]
            } else {
                score(hyp, &reference.units[u]).map_err(|e| match &reference.id {
                    Some(id) => EvalError::Study {
                        id: id.clone(),
                        message: e.to_string(),
                    },
                    None => e,
                })?
            };
            Ok(UnitScores {
                text,
                labels: labeler.label(hyp),
                bert: None,
            })
        })
        .collect();
    let mut flat = scored.into_iter().collect::<Result<Vec<_>>>()?.into_iter();
    let scores = (0..rows.len())
        .map(|_| flat.by_ref().take(per).collect())
        .collect();
    let reference_labels = references
        .par_iter()
        .map(|r| r.units.iter().map(|u| labeler.label(u)).collect())
        .collect();
    Ok(EvalTable {
        scope,
        references,
        reference_labels,
        rows,
        scores,
        positions,
    })
}

/// The distinct texts in first-seen order, and the row of each text given.
fn distinct(texts: Vec<EvalText>) -> (Vec<EvalText>, Vec<usize>) {
    let mut index: HashMap<EvalText, usize> = HashMap::with_capacity(texts.len());
    let mut rows = Vec::new();
    let positions = texts
        .into_iter()
        .map(|t| {
            *index.entry(t).or_insert_with_key(|t| {
                rows.push(t.clone());
                rows.len() - 1
            })
        })
        .collect();
    (rows, positions)
}

impl EvalTable {
    /// A table whose rows were scored elsewhere, `scores[row][unit]` (the
    /// deprecated select-eval adapter rebuilds one from its own rows).
    pub(crate) fn from_scored(
        scope: Scope,
        references: Vec<EvalReference>,
        reference_labels: Vec<Vec<Labels>>,
        scored: Vec<(EvalText, Vec<UnitScores>)>,
    ) -> Self {
        let (texts, unit_scores): (Vec<EvalText>, Vec<Vec<UnitScores>>) =
            scored.into_iter().unzip();
        let (rows, positions) = distinct(texts);
        let mut scores = vec![Vec::new(); rows.len()];
        for (&row, s) in positions.iter().zip(unit_scores) {
            if scores[row].is_empty() {
                scores[row] = s;
            }
        }
        EvalTable {
            scope,
            references,
            reference_labels,
            rows,
            scores,
            positions,
        }
    }

    /// BERTScore of unit `unit` of `rows` (table rows; a row may repeat) as one
    /// bert-score call: idf weights from the references of `rows`, each
    /// occurrence counted; each distinct text encoded once. Every row's value
    /// is stored in its [`UnitScores::bert`], replacing an earlier one.
    ///
    /// # Errors
    /// A unit or row out of range; the judge's errors.
    pub fn add_bertscore(
        &mut self,
        judge: &BertScorer<'_>,
        unit: usize,
        rows: &[usize],
    ) -> Result<()> {
        let per = self.scope.names().len();
        if unit >= per {
            return Err(EvalError::BadParameter {
                name: "unit",
                value: unit.to_string(),
                message: "beyond the units of the table's scope",
            });
        }
        if let Some(&r) = rows.iter().find(|&&r| r >= self.rows.len()) {
            return Err(EvalError::BadParameter {
                name: "row",
                value: r.to_string(),
                message: "beyond the table's rows",
            });
        }
        let pairs: Vec<(&str, &str)> = rows
            .iter()
            .map(|&r| {
                let t = &self.rows[r];
                (
                    t.units[unit].as_str(),
                    self.references[t.study].units[unit].as_str(),
                )
            })
            .collect();
        let scores = judge.score_pairs(&pairs)?;
        for (&r, b) in rows.iter().zip(scores) {
            self.scores[r][unit].bert = Some(b);
        }
        Ok(())
    }

    /// The units the texts are split into.
    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// Number of distinct texts (rows).
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there is no row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The row of each text given to [`score_table`], in the order given.
    pub fn positions(&self) -> &[usize] {
        &self.positions
    }

    /// Row `row`'s text: its study, well-formedness and units. Panics, as
    /// slice indexing does, for a row beyond [`EvalTable::len`] (as the
    /// accessors below for their indices).
    pub fn text(&self, row: usize) -> &EvalText {
        &self.rows[row]
    }

    /// The scores of unit `unit` of row `row`.
    pub fn unit(&self, row: usize, unit: usize) -> &UnitScores {
        &self.scores[row][unit]
    }

    /// Study `study`'s reference.
    pub fn reference(&self, study: usize) -> &EvalReference {
        &self.references[study]
    }

    /// The labels of unit `unit` of study `study`'s reference.
    pub fn reference_labels(&self, study: usize, unit: usize) -> Labels {
        self.reference_labels[study][unit]
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::bertscore::{Baseline, FnEncoder, TokenEmbeddings};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    /// A token encoder for tests: one token per word, vector `[1, position]`.
    pub(crate) fn bag_encoder() -> impl crate::bertscore::TokenEncoder {
        FnEncoder {
            name: "bag".to_string(),
            encode: |texts: &[&str]| -> Result<Vec<TokenEmbeddings>> {
                Ok(texts
                    .iter()
                    .map(|t| {
                        let n = t.split_whitespace().count();
                        let data = (0..n).flat_map(|i| [1.0, i as f32]).collect();
                        TokenEmbeddings::with_special_ids(vec![5; n], data, 2, &[])
                    })
                    .collect())
            },
        }
    }

    fn reference(f: &str, i: &str) -> EvalReference {
        EvalReference {
            id: Some("7".into()),
            units: vec![f.into(), i.into()],
        }
    }

    #[test]
    fn each_distinct_study_and_text_is_scored_once() {
        let refs = vec![
            reference("Lungs clear.", "Normal."),
            reference("Effusion.", "Abnormal."),
        ];
        let a = "Findings: Lungs clear.\nImpression: Normal.";
        let texts = vec![
            EvalText::parse(0, a, Scope::Sections),
            EvalText::parse(1, a, Scope::Sections),
            EvalText::parse(0, a, Scope::Sections),
            EvalText::parse(0, "Findings: Effusion.\nImpression: Sick.", Scope::Sections),
        ];
        let seen = Mutex::new(Vec::new());
        let t = score_with(Scope::Sections, refs, texts, &Labeler::default(), |h, r| {
            seen.lock().unwrap().push((h.to_string(), r.to_string()));
            Ok([1.0; 9])
        })
        .unwrap();
        // Three distinct (study, text), two units each: six calls, none repeated.
        let mut seen = seen.into_inner().unwrap();
        assert_eq!(seen.len(), 6, "{seen:?}");
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 6, "a pair scored twice");
        assert_eq!(t.len(), 3);
        assert_eq!(t.positions(), [0, 1, 0, 2]);
        assert_eq!(t.text(1).study, 1);
        assert_eq!(t.unit(2, 1).text, [1.0; 9]);
    }

    #[test]
    fn an_empty_hypothesis_scores_zero_without_the_metrics_and_keeps_its_labels() {
        let calls = AtomicUsize::new(0);
        let refs = vec![reference("Large pleural effusion.", "Effusion.")];
        let texts = vec![
            EvalText::parse(0, "Impression: Effusion.", Scope::Sections),
            EvalText {
                study: 0,
                format_valid: None,
                units: vec![" \n\t".into(), String::new()],
            },
        ];
        let t = score_with(Scope::Sections, refs, texts, &Labeler::default(), |_, _| {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok([0.5; 9])
        })
        .unwrap();
        // Only the one non-empty unit reaches the metrics.
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(t.unit(0, 1).text, [0.5; 9]);
        for (r, u) in [(0, 0), (1, 0), (1, 1)] {
            let v = t.unit(r, u).text;
            assert!(v.iter().all(|x| x.to_bits() == 0), "{r} {u}: {v:?}");
            assert_eq!(t.unit(r, u).labels, Labeler::default().label(""));
        }
        assert_ne!(t.reference_labels(0, 0), Labeler::default().label(""));
    }

    #[test]
    fn the_metrics_agree_with_the_rule_on_empty_hypotheses() {
        // The rule skips the metrics; they give the same +0.0 (select-eval
        // called them before), so no table changes.
        let s = TextScorer::new(Default::default(), None);
        for r in ["", "Heart size is normal.", "...", "a"] {
            for h in ["", "  ", "\u{3000}"] {
                let v = s.score(h, r).unwrap().values();
                assert!(v.iter().all(|x| x.to_bits() == 0), "{h:?} {r:?}: {v:?}");
            }
        }
    }

    #[test]
    fn bertscore_of_an_empty_hypothesis_is_the_judges_value() {
        let enc = bag_encoder();
        let refs = vec![EvalReference {
            id: None,
            units: vec!["a b".into()],
        }];
        let texts = vec![
            EvalText::parse(0, "a b", Scope::Whole),
            EvalText::parse(0, "", Scope::Whole),
        ];
        let mut t = score_table(
            Scope::Whole,
            refs,
            texts,
            &TextScorer::new(Default::default(), None),
            &Labeler::default(),
        )
        .unwrap();
        let judge = BertScorer {
            encoder: &enc,
            idf: false,
            baseline: Some(Baseline {
                precision: 0.5,
                recall: 0.5,
                f1: 0.5,
            }),
        };
        t.add_bertscore(&judge, 0, &[0, 1, 1]).unwrap();
        assert!((t.unit(0, 0).bert.unwrap().f1 - 1.0).abs() < 1e-6);
        // 0 before rescaling: (0 - 0.5) / (1 - 0.5).
        assert_eq!(t.unit(1, 0).bert.unwrap().f1, -1.0);
        assert_eq!(t.unit(1, 0).text, [0.0; 9]);
        let e = t.add_bertscore(&judge, 1, &[0]).unwrap_err();
        assert!(e.to_string().contains("unit"), "{e}");
        let e = t.add_bertscore(&judge, 0, &[2]).unwrap_err();
        assert!(e.to_string().contains("row"), "{e}");
    }

    #[test]
    fn bad_shapes_and_metric_errors_are_errors() {
        let scorer = TextScorer::new(Default::default(), None);
        let l = Labeler::default();
        let e = score_table(
            Scope::Sections,
            vec![reference("a", "b")],
            vec![EvalText::parse(1, "x", Scope::Sections)],
            &scorer,
            &l,
        )
        .unwrap_err();
        assert!(e.to_string().contains("references"), "{e}");
        let e = score_table(
            Scope::Sections,
            vec![reference("a", "b")],
            vec![EvalText::parse(0, "x", Scope::Whole)],
            &scorer,
            &l,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "`units of a pair`: expected 2 items, got 1");
        let bad = TextScorer::new(
            crate::scores::TextMetricConfig {
                bleu_smoothing: crate::bleu::Smoothing::Epsilon(-1.0),
                ..Default::default()
            },
            None,
        );
        let e = score_table(
            Scope::Whole,
            vec![EvalReference {
                id: Some("9".into()),
                units: vec!["a".into()],
            }],
            vec![EvalText::parse(0, "a", Scope::Whole)],
            &bad,
            &l,
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("study 9: "), "{e}");
    }
}
