//! Every metric of (hypothesis, reference) report pairs, per section: the
//! one implementation behind `sdr score` and Python's `sdr_rewards.metrics`.
//!
//! A pair is split into units: its Findings and its Impression (both texts
//! parsed as reports, template or `Findings:` / `Impression:` headers), or
//! the whole texts with [`Scope::Whole`]. Each unit gets the text metrics of
//! [`TextScorer`] (SDR's fixed choices), BERTScore P/R/F1 when an encoder is
//! given, and the CheXpert-rule example F1 of its rule-based labels
//! (`sdr-clinical`), all read from the one evaluation table
//! ([`crate::evaluation`]), each pair its own study. A hypothesis section
//! that is missing follows the table's rule for an empty hypothesis: 0 on
//! every text metric, BERTScore as the judge gives an empty side (0 unless
//! rescaled), the clinical F1 of an empty text's labels against the
//! reference's. A reference without both sections is an error.
//!
//! Per pair, [`ReportScores::pair_json`] is one `sdr score` output line
//! (without the `id`); [`ReportScores::summary_json`] holds the corpus
//! aggregates: per-unit means, corpus BLEU-1..4 (nltk `corpus_bleu`, same
//! tokens and smoothing as the sentence BLEU) and CheXpert-rule F1 over the
//! corpus (macro and micro over 14 and 5 observations).

use sdr_clinical::{chexpert_f1, example_f1, Labeler, Labels, UncertainPolicy};
use sdr_core::report::parse_report;
use serde_json::{Map, Value};

use crate::bertscore::{BertScore, BertScorer, TokenEncoder};
use crate::bleu::{corpus_bleu, Smoothing};
use crate::error::{EvalError, Result};
use crate::evaluation::{hypothesis_units, score_table, section_texts, EvalReference, EvalText};
use crate::scores::{TextScorer, TEXT_METRICS};
use crate::tokenize::tokenize;

/// The BERTScore column names, appended after [`TEXT_METRICS`] when an encoder is given.
pub const BERT_METRICS: [&str; 3] = ["BERTScore-P", "BERTScore-R", "BERTScore-F1"];
/// The clinical column name, always last.
pub const CHEXPERT_RULE_F1: &str = "CheXpert-rule F1";

/// The example F1 of the judge's labels (SPEC §8a), after [`CHEXPERT_RULE_F1`] when asked for.
pub const JUDGE_F1: &str = "judge F1";

pub use crate::evaluation::Scope;

/// One pair split into units.
#[derive(Debug, Clone, PartialEq)]
pub struct PairUnits {
    /// Whether the hypothesis is a well-formed report (`None` for [`Scope::Whole`]).
    pub format_valid: Option<bool>,
    /// `(hypothesis, reference)` text per unit, in [`Scope::names`] order.
    pub units: Vec<(String, String)>,
}

/// Splits one pair into its units.
///
/// # Errors
/// [`EvalError::MissingSection`] when, with [`Scope::Sections`], the
/// reference has no Findings or no Impression; callers prefix where the pair is.
///
/// ```
/// use sdr_eval::report::{split_pair, Scope};
/// let p = split_pair("Findings: Clear.\nImpression: Normal.", "<think>Clear.</think><answer>Fine.</answer>", Scope::Sections).unwrap();
/// assert_eq!(p.units[1], ("Normal.".to_string(), "Fine.".to_string()));
/// let e = split_pair("x", "Findings: A.", Scope::Sections).unwrap_err();
/// assert_eq!(e.to_string(), "the reference has no Impression section (template or `Impression:` header)");
/// ```
pub fn split_pair(hypothesis: &str, reference: &str, scope: Scope) -> Result<PairUnits> {
    if scope == Scope::Whole {
        return Ok(PairUnits {
            format_valid: None,
            units: vec![(hypothesis.to_string(), reference.to_string())],
        });
    }
    let r = parse_report(reference);
    if r.findings.is_empty() || r.impression.is_empty() {
        let section = if r.findings.is_empty() {
            "Findings"
        } else {
            "Impression"
        };
        return Err(EvalError::MissingSection { section });
    }
    let (format_valid, h) = hypothesis_units(hypothesis, scope);
    let r = section_texts(&r);
    Ok(PairUnits {
        format_valid,
        units: h.into_iter().zip(r).collect(),
    })
}

/// BERTScore (no idf, no rescaling) of every `(hypothesis, reference)` pair:
/// [`BertScorer::score_pairs`] with the plain judge. Each distinct string is
/// encoded once, in one encoder call. A pair with an empty (whitespace-only)
/// side scores 0.
///
/// # Errors
/// The encoder's errors, an encoder returning the wrong number of texts.
pub fn bertscore_pairs(pairs: &[(&str, &str)], enc: &dyn TokenEncoder) -> Result<Vec<BertScore>> {
    BertScorer::new(enc).score_pairs(pairs)
}

/// The scores of a list of pairs: values per unit, labels for the corpus F1.
#[derive(Debug, Clone)]
pub struct ReportScores {
    /// Split into sections or whole.
    pub scope: Scope,
    /// Column names of each unit's values: [`TEXT_METRICS`], then
    /// [`BERT_METRICS`] when an encoder was given, then [`CHEXPERT_RULE_F1`].
    pub metrics: Vec<&'static str>,
    /// Per pair, whether the hypothesis is well formed (`None` when whole).
    pub format_valid: Vec<Option<bool>>,
    /// Per unit (pair `n`, unit `s` at `n * units_per_pair + s`), the values.
    pub values: Vec<Vec<f64>>,
    /// How uncertain labels count.
    pub policy: UncertainPolicy,
    /// Whether METEOR had WordNet synonyms.
    pub wordnet: bool,
    /// The BERTScore encoder's name.
    pub encoder: Option<String>,
    labels: Vec<(Labels, Labels)>,
    judge_labels: Option<Vec<(Labels, Labels)>>,
    units: Vec<(String, String)>,
    smoothing: Smoothing,
}

/// Scores `pairs` on every metric: text metrics with `scorer`, BERTScore with
/// `bert` when given (per unit: idf weights come from that unit's
/// references), CheXpert-rule F1 with `policy`.
///
/// # Errors
/// A pair whose reference lacks a section, as
/// [`EvalError::Pair`] naming its index; encoder and configuration errors.
pub fn score_pairs(
    pairs: &[(&str, &str)],
    scope: Scope,
    scorer: &TextScorer<'_>,
    bert: Option<&BertScorer<'_>>,
    policy: UncertainPolicy,
) -> Result<ReportScores> {
    let split: Vec<PairUnits> = pairs
        .iter()
        .enumerate()
        .map(|(i, (h, r))| {
            split_pair(h, r, scope).map_err(|e| EvalError::Pair {
                index: i,
                message: e.to_string(),
            })
        })
        .collect::<Result<_>>()?;
    score_split(split, scope, scorer, bert, policy)
}

/// [`score_pairs`] on pairs already split by [`split_pair`] (the CLI splits
/// while reading, to name a bad line by its file position).
///
/// # Errors
/// Pairs with the wrong number of units for `scope`; encoder and
/// configuration errors.
pub fn score_split(
    split: Vec<PairUnits>,
    scope: Scope,
    scorer: &TextScorer<'_>,
    bert: Option<&BertScorer<'_>>,
    policy: UncertainPolicy,
) -> Result<ReportScores> {
    let per = scope.names().len();
    let mut references = Vec::with_capacity(split.len());
    let mut texts = Vec::with_capacity(split.len());
    for (n, p) in split.into_iter().enumerate() {
        if p.units.len() != per {
            return Err(EvalError::LengthMismatch {
                what: "units of a pair",
                expected: per,
                got: p.units.len(),
            });
        }
        // Each pair is its own study: the same hypothesis against two
        // references is two rows.
        let (h, r): (Vec<String>, Vec<String>) = p.units.into_iter().unzip();
        references.push(EvalReference { id: None, units: r });
        texts.push(EvalText {
            study: n,
            format_valid: p.format_valid,
            units: h,
        });
    }
    let mut table = score_table(scope, references, texts, scorer, &Labeler::default())?;
    // One bert-score call per unit (Findings, Impression): idf is over that
    // unit's references.
    if let Some(judge) = bert {
        let rows = table.positions().to_vec();
        for u in 0..per {
            table.add_bertscore(judge, u, &rows)?;
        }
    }
    let mut format_valid = Vec::with_capacity(table.positions().len());
    let mut units = Vec::new();
    let mut labels = Vec::new();
    let mut values = Vec::new();
    for (n, &row) in table.positions().iter().enumerate() {
        let t = table.text(row);
        format_valid.push(t.format_valid);
        for (u, hyp) in t.units.iter().enumerate() {
            let s = table.unit(row, u);
            let reference_labels = table.reference_labels(n, u);
            let mut v = s.text.to_vec();
            if let Some(b) = s.bert {
                v.extend([b.precision, b.recall, b.f1]);
            }
            v.push(example_f1(&s.labels, &reference_labels, policy));
            values.push(v);
            labels.push((s.labels, reference_labels));
            units.push((hyp.clone(), table.reference(n).units[u].clone()));
        }
    }
    let metrics = TEXT_METRICS
        .iter()
        .copied()
        .chain(bert.iter().flat_map(|_| BERT_METRICS))
        .chain([CHEXPERT_RULE_F1])
        .collect();
    Ok(ReportScores {
        scope,
        metrics,
        format_valid,
        values,
        policy,
        wordnet: scorer.wordnet.is_some(),
        encoder: bert.map(BertScorer::label),
        labels,
        judge_labels: None,
        units,
        smoothing: scorer.config.bleu_smoothing,
    })
}

impl ReportScores {
    /// Adds [`JUDGE_F1`]: every unit's hypothesis and reference labelled by `label_many`
    /// (the judge of SPEC §8a), its example F1 as the last value, and its corpus F1 in
    /// [`ReportScores::summary_json`] under `"judge"`. Distinct texts are labelled once.
    ///
    /// # Errors
    /// The labeler's, or a label count that does not match the texts.
    pub fn add_judge<F>(&mut self, label_many: F) -> Result<()>
    where
        F: Fn(&[&str]) -> Result<Vec<Labels>>,
    {
        let texts: Vec<&str> = self
            .units
            .iter()
            .flat_map(|(h, r)| [h.as_str(), r.as_str()])
            .collect();
        let labels = label_many(&texts)?;
        if labels.len() != texts.len() {
            return Err(EvalError::LengthMismatch {
                what: "judge labels",
                expected: texts.len(),
                got: labels.len(),
            });
        }
        let pairs: Vec<(Labels, Labels)> = labels.chunks_exact(2).map(|c| (c[0], c[1])).collect();
        for (v, (h, r)) in self.values.iter_mut().zip(&pairs) {
            // Labels of an empty hypothesis are all null, as with the rules.
            v.push(example_f1(h, r, self.policy));
        }
        self.metrics.push(JUDGE_F1);
        self.judge_labels = Some(pairs);
        Ok(())
    }

    /// Number of pairs.
    pub fn len(&self) -> usize {
        self.format_valid.len()
    }

    /// Whether there is no pair.
    pub fn is_empty(&self) -> bool {
        self.format_valid.is_empty()
    }

    /// Pairs whose hypothesis is well formed (0 when whole).
    pub fn well_formed(&self) -> usize {
        self.format_valid
            .iter()
            .filter(|v| **v == Some(true))
            .count()
    }

    /// Pair `n` as one `sdr score` line: `format_valid` (sections only), then
    /// one object of metric values per unit.
    pub fn pair_json(&self, n: usize) -> Map<String, Value> {
        let mut obj = Map::new();
        if let Some(v) = self.format_valid[n] {
            obj.insert("format_valid".into(), Value::Bool(v));
        }
        let names = self.scope.names();
        for (s, name) in names.iter().enumerate() {
            let vals = &self.values[n * names.len() + s];
            let m: Map<String, Value> = self
                .metrics
                .iter()
                .zip(vals)
                .map(|(k, v)| (k.to_string(), Value::from(*v)))
                .collect();
            obj.insert(name.to_string(), Value::Object(m));
        }
        obj
    }

    /// Corpus aggregates per unit: `{"pairs", "well_formed" (sections only),
    /// "uncertain", "wordnet", "bertscore_model", <unit>: {"mean": {metric:
    /// mean}, "corpus_bleu": {"BLEU-1".."BLEU-4"}, "chexpert_rule": {"macro_14",
    /// "micro_14", "macro_5", "micro_5"}}}`. The means and corpus scores of
    /// an empty list are `null`.
    ///
    /// # Errors
    /// Only a bad BLEU smoothing parameter.
    pub fn summary_json(&self) -> Result<Map<String, Value>> {
        let mut out = Map::new();
        out.insert("pairs".into(), Value::from(self.len()));
        if self.scope == Scope::Sections {
            out.insert("well_formed".into(), Value::from(self.well_formed()));
        }
        let policy = match self.policy {
            UncertainPolicy::Positive => "positive",
            UncertainPolicy::Negative => "negative",
        };
        out.insert("uncertain".into(), Value::from(policy));
        out.insert("wordnet".into(), Value::Bool(self.wordnet));
        out.insert(
            "bertscore_model".into(),
            self.encoder.clone().map_or(Value::Null, Value::from),
        );
        let names = self.scope.names();
        let count = self.len() as f64;
        for (s, name) in names.iter().enumerate() {
            let rows: Vec<usize> = (0..self.len()).map(|n| n * names.len() + s).collect();
            let mean: Map<String, Value> = self
                .metrics
                .iter()
                .enumerate()
                .map(|(k, m)| {
                    if self.is_empty() {
                        // No pairs, no mean (as the corpus scores below).
                        return (m.to_string(), Value::Null);
                    }
                    let sum: f64 = rows.iter().map(|&j| self.values[j][k]).sum();
                    // `+ 0.0` turns a -0.0 (an f64 sum starts at -0.0) into 0.0.
                    (m.to_string(), Value::from(sum / count + 0.0))
                })
                .collect();
            let mut unit = Map::new();
            unit.insert("mean".into(), Value::Object(mean));
            if self.is_empty() {
                unit.insert("corpus_bleu".into(), Value::Null);
                unit.insert("chexpert_rule".into(), Value::Null);
            } else {
                let hyps: Vec<Vec<String>> =
                    rows.iter().map(|&j| tokenize(&self.units[j].0)).collect();
                let refs: Vec<Vec<Vec<String>>> = rows
                    .iter()
                    .map(|&j| vec![tokenize(&self.units[j].1)])
                    .collect();
                let bleu = corpus_bleu(&refs, &hyps, 4, self.smoothing)?;
                let bleu: Map<String, Value> = bleu
                    .iter()
                    .enumerate()
                    .map(|(k, v)| (format!("BLEU-{}", k + 1), Value::from(*v)))
                    .collect();
                unit.insert("corpus_bleu".into(), Value::Object(bleu));
                let (h, r): (Vec<Labels>, Vec<Labels>) =
                    rows.iter().map(|&j| self.labels[j]).unzip();
                let f1 = f1_map(&chexpert_f1(&h, &r, self.policy)?);
                unit.insert("chexpert_rule".into(), Value::Object(f1));
                if let Some(jl) = &self.judge_labels {
                    let (h, r): (Vec<Labels>, Vec<Labels>) = rows.iter().map(|&j| jl[j]).unzip();
                    let f1 = f1_map(&chexpert_f1(&h, &r, self.policy)?);
                    unit.insert("judge".into(), Value::Object(f1));
                }
            }
            out.insert(name.to_string(), Value::Object(unit));
        }
        Ok(out)
    }
}

/// The summary's four corpus F1 values of a report.
fn f1_map(rep: &sdr_clinical::F1Report) -> Map<String, Value> {
    [
        ("macro_14", rep.macro_14.f1),
        ("micro_14", rep.micro_14.f1),
        ("macro_5", rep.macro_5.f1),
        ("micro_5", rep.micro_5.f1),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), Value::from(v)))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bertscore::{FnEncoder, TokenEmbeddings};

    const REF: &str =
        "Findings: The lungs are clear. Mild cardiomegaly.\nImpression: No acute disease.";

    #[test]
    fn sections_lines_and_summary() {
        let scorer = TextScorer::new(Default::default(), None);
        let hyp = "<think>The lungs are clear. Mild cardiomegaly.</think><answer>No acute disease.</answer>";
        let s = score_pairs(
            &[(hyp, REF), ("not a report", REF)],
            Scope::Sections,
            &scorer,
            None,
            UncertainPolicy::Positive,
        )
        .unwrap();
        assert_eq!(s.metrics.len(), 10);
        let l0 = s.pair_json(0);
        assert_eq!(l0["format_valid"], Value::Bool(true));
        assert!((l0["findings"]["BLEU-4"].as_f64().unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(l0["impression"]["CheXpert-rule F1"].as_f64(), Some(1.0));
        let l1 = s.pair_json(1);
        assert_eq!(l1["format_valid"], Value::Bool(false));
        assert_eq!(l1["findings"]["ROUGE-L"].as_f64(), Some(0.0));
        let sum = s.summary_json().unwrap();
        assert_eq!(
            (sum["pairs"].as_u64(), sum["well_formed"].as_u64()),
            (Some(2), Some(1))
        );
        let mean = sum["findings"]["mean"]["ROUGE-L"].as_f64().unwrap();
        assert!((mean - 0.5).abs() < 1e-12, "{mean}");
        assert!(sum["findings"]["corpus_bleu"]["BLEU-4"].as_f64().unwrap() > 0.0);
        assert!(sum["impression"]["chexpert_rule"]["micro_14"].is_number());
    }

    #[test]
    fn bad_input_names_the_pair_and_empty_lists_work() {
        let scorer = TextScorer::new(Default::default(), None);
        let e = score_pairs(
            &[("x", REF), ("x", "Findings: A.")],
            Scope::Sections,
            &scorer,
            None,
            UncertainPolicy::Positive,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "pair 1: the reference has no Impression section (template or `Impression:` header)"
        );
        let s = score_pairs(&[], Scope::Whole, &scorer, None, UncertainPolicy::Positive).unwrap();
        let sum = s.summary_json().unwrap();
        assert_eq!(sum["whole"]["corpus_bleu"], Value::Null);
        assert!(sum.get("well_formed").is_none());
        // No pairs: null means, never a -0.0 mean over nothing.
        let mean = sum["whole"]["mean"].as_object().unwrap();
        assert_eq!(mean.len(), 10);
        assert!(mean.values().all(Value::is_null), "{mean:?}");
        let s = score_pairs(
            &[],
            Scope::Sections,
            &scorer,
            None,
            UncertainPolicy::Positive,
        )
        .unwrap();
        let sum = s.summary_json().unwrap();
        assert!(sum["findings"]["mean"]["ROUGE-L"].is_null());
        assert!(!serde_json::to_string(&sum).unwrap().contains("-0.0"));
    }

    #[test]
    fn bertscore_encodes_each_distinct_text_once() {
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let enc = FnEncoder {
            name: "bag".to_string(),
            encode: |texts: &[&str]| -> Result<Vec<TokenEmbeddings>> {
                calls.fetch_add(texts.len(), std::sync::atomic::Ordering::SeqCst);
                Ok(texts
                    .iter()
                    .map(|t| {
                        let n = t.split_whitespace().count();
                        let data = (0..n).flat_map(|i| [1.0, i as f32]).collect();
                        TokenEmbeddings::with_special_ids(vec![5; n], data, 2, &[])
                    })
                    .collect())
            },
        };
        let pairs = [("a b", "a b"), ("a b", "c"), ("", "c")];
        let b = bertscore_pairs(&pairs, &enc).unwrap();
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
        assert!((b[0].f1 - 1.0).abs() < 1e-6);
        assert_eq!(b[2], BertScore::default());
        let s = score_pairs(
            &[("the lungs", "the lungs")],
            Scope::Whole,
            &TextScorer::new(Default::default(), None),
            Some(&BertScorer::new(&enc)),
            UncertainPolicy::Positive,
        )
        .unwrap();
        assert_eq!(s.metrics[9..12], BERT_METRICS);
        assert_eq!(s.encoder.as_deref(), Some("bag"));
    }
}
