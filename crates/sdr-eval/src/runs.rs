//! Side-by-side evaluation of selection runs (random, standard best-of-K, pruning, ...)
//! against the reference reports, what `sdr eval` prints: BLEU-4, ROUGE-L and BERTScore-F1
//! on Findings and on Impression (SPEC §7), CheXpert-rule F1 of the whole report (SPEC §8),
//! the tokens each run generated, and paired-bootstrap changes between runs. Every
//! (study, text) pair is scored once ([`score_pairs`], over the one evaluation table of
//! [`crate::evaluation`]), however many runs picked it.

use std::collections::HashMap;

use sdr_clinical::{chexpert_f1, Labeler, Labels, UncertainPolicy};

use crate::baseline::Pool;
use crate::bertscore::BertScorer;
use crate::bootstrap::{interval_of, resample_indices, Interval, RESAMPLES, SEED};
use crate::chexpert::{f1_columns, random_f1, LabelledStudy};
use crate::error::{EvalError, Result};
use crate::evaluation::{hypothesis_units, score_table, EvalReference, EvalText};
use crate::report::Scope;
use crate::scores::TextScorer;

/// Reference (findings, impression) by study id.
pub type References = HashMap<String, (String, String)>;

/// A run's pick per study: (text, tokens it cost when known).
pub type RunPicks = HashMap<String, (String, Option<usize>)>;

/// Columns before the [`crate::chexpert::CHEXPERT_COLUMNS`].
pub const COLUMNS: [&str; 9] = [
    "tokens",
    "tokens saved %",
    "well-formed %",
    "F BLEU-4",
    "F ROUGE-L",
    "F BERTScore-F1",
    "I BLEU-4",
    "I ROUGE-L",
    "I BERTScore-F1",
];

/// The joined report (Findings then Impression) that CheXpert labels see.
pub fn joined(findings: &str, impression: &str) -> String {
    format!("{findings} {impression}").trim().to_string()
}

/// Scores of one (study, text) pair: [F BLEU-4, F ROUGE-L, F BERTScore,
/// I BLEU-4, I ROUGE-L, I BERTScore, well-formed 0/100], and the CheXpert
/// labels of the joined report.
pub type PairScores = HashMap<(String, String), ([f64; 7], Labels)>;

/// The largest token total a table cell (f64) holds exactly.
pub const EXACT_TOKENS: u64 = 1 << 53;

/// Scores every (study, text) pair once against the study's reference sections
/// ([`crate::evaluation::score_table`]), BERTScore (when `bert` is given) in one batch per
/// section over all pairs. A study without a reference is an [`EvalError::Study`].
pub fn score_pairs(
    pairs: &[(String, String)],
    refs: &References,
    bert: Option<&BertScorer<'_>>,
    labeler: &Labeler,
) -> Result<PairScores> {
    let mut study_of: HashMap<&str, usize> = HashMap::new();
    let mut references = Vec::new();
    let mut texts = Vec::with_capacity(pairs.len());
    for (id, t) in pairs {
        let study = match study_of.get(id.as_str()) {
            Some(&s) => s,
            None => {
                let r = refs.get(id).ok_or_else(|| EvalError::Study {
                    id: id.clone(),
                    message: "no reference report".into(),
                })?;
                references.push(EvalReference {
                    id: None,
                    units: vec![r.0.clone(), r.1.clone()],
                });
                study_of.insert(id, references.len() - 1);
                references.len() - 1
            }
        };
        texts.push(EvalText::parse(study, t, Scope::Sections));
    }
    let text = TextScorer::new(Default::default(), None);
    let mut table = score_table(Scope::Sections, references, texts, &text, labeler)?;
    if let Some(judge) = bert {
        let rows = table.positions().to_vec();
        for s in 0..2 {
            table.add_bertscore(judge, s, &rows)?;
        }
    }
    let mut out = HashMap::new();
    for (key, &row) in pairs.iter().zip(table.positions()) {
        let t = table.text(row);
        let labels = labeler.label(&joined(&t.units[0], &t.units[1]));
        let mut v = [0.0; 7];
        v[6] = if t.format_valid == Some(true) {
            100.0
        } else {
            0.0
        };
        for s in 0..2 {
            let u = table.unit(row, s);
            v[3 * s] = u.text[3];
            v[3 * s + 1] = u.text[6];
            v[3 * s + 2] = match u.bert {
                // Not computed: no cell, even for a section whose other metrics score 0.
                None => f64::NAN,
                Some(b) => b.f1,
            };
        }
        out.insert(key.clone(), (v, labels));
    }
    Ok(out)
}

/// The text CheXpert labels see for a pick: its parsed Findings and Impression, joined.
pub fn labelled_text(text: &str) -> String {
    let (_, units) = hypothesis_units(text, Scope::Sections);
    joined(&units[0], &units[1])
}

/// `scores` with every pair's labels taken from `label_many` (another labeler, such as the
/// judge of SPEC §8a) over the same texts the rules read; the metric values are kept. Each
/// distinct text is labelled once.
pub fn relabel<F>(scores: &PairScores, label_many: F) -> Result<PairScores>
where
    F: Fn(&[&str]) -> Result<Vec<Labels>>,
{
    let mut texts: Vec<String> = scores.keys().map(|(_, t)| labelled_text(t)).collect();
    texts.sort_unstable();
    texts.dedup();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let labels = label_many(&refs)?;
    if labels.len() != texts.len() {
        return Err(EvalError::LengthMismatch {
            what: "labels",
            expected: texts.len(),
            got: labels.len(),
        });
    }
    let by_text: HashMap<&str, Labels> = refs.into_iter().zip(labels).collect();
    Ok(scores
        .iter()
        .map(|(k, (v, _))| (k.clone(), (*v, by_text[labelled_text(&k.1).as_str()])))
        .collect())
}

/// A comparison's changes in % and their intervals, per column.
pub type ChangeRow = (Vec<Option<f64>>, Vec<Option<Interval>>);

/// One study: its id, its K candidates, and their summed tokens when known.
pub struct Study {
    pub id: String,
    pub candidates: Vec<String>,
    pub tokens: Option<usize>,
}

/// What every table row reads: the studies, each pair's scores, the
/// references' labels and how uncertain labels count. `scores` must hold every
/// candidate of `studies` and every pick of the runs a row is asked for (what
/// [`score_pairs`] over [`distinct_pairs`] gives), and each run must pick for every
/// study: `sdr eval` checks its runs' files for that before scoring.
pub struct Scored<'a> {
    pub studies: &'a [Study],
    pub scores: &'a PairScores,
    pub ref_labels: &'a [Labels],
    pub uncertain: UncertainPolicy,
}

/// Every (study, text) pair that a candidate or a run's pick makes, once.
pub fn distinct_pairs(cands: &[Study], runs: &[(String, RunPicks)]) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for s in cands {
        pairs.extend(s.candidates.iter().map(|c| (s.id.clone(), c.clone())));
        for (_, by_id) in runs {
            pairs.push((s.id.clone(), by_id[&s.id].0.clone()));
        }
    }
    pairs.sort_unstable();
    pairs.dedup();
    pairs
}

/// [well-formed %, the six metrics] in column order.
pub fn metric_cells(v: [f64; 7]) -> Vec<Option<f64>> {
    std::iter::once(v[6])
        .chain(v[..6].iter().copied())
        .map(|x| if x.is_nan() { None } else { Some(x) })
        .collect()
}

impl Scored<'_> {
    /// Random: expectation over a uniform pick; CheXpert-rule F1 over seeded picks.
    pub fn random_row(&self, seeds: usize) -> Result<Vec<Option<f64>>> {
        let n = self.studies.len() as f64;
        let mut random = [0.0; 7];
        let mut cand_labels: Vec<Vec<Labels>> = Vec::with_capacity(self.studies.len());
        for s in self.studies {
            let cs = &s.candidates;
            let mut ls = Vec::with_capacity(cs.len());
            for c in cs {
                let (v, l) = &self.scores[&(s.id.clone(), c.clone())];
                for j in 0..7 {
                    random[j] += v[j] / cs.len() as f64 / n;
                }
                ls.push(*l);
            }
            cand_labels.push(ls);
        }
        let studies: Vec<LabelledStudy> = cand_labels
            .iter()
            .zip(self.ref_labels)
            .map(|(c, r)| LabelledStudy {
                candidates: c,
                reference: *r,
            })
            .collect();
        let flags: Vec<Vec<bool>> = cand_labels.iter().map(|c| vec![true; c.len()]).collect();
        let flag_refs: Vec<&[bool]> = flags.iter().map(Vec::as_slice).collect();
        let random_cx = random_f1(&studies, &flag_refs, Pool::All, seeds, 0, self.uncertain)
            .map_err(|e| EvalError::At {
                at: "random CheXpert-rule F1".into(),
                source: Box::new(e),
            })?;
        let mut row = vec![None, None];
        row.extend(metric_cells(random));
        row.extend(random_cx.map(Some));
        Ok(row)
    }

    /// A run's per-study values (the 7 of [`metric_cells`]'s input) and picked labels.
    pub fn per_study(&self, by_id: &RunPicks) -> (Vec<[f64; 7]>, Vec<Labels>) {
        self.studies
            .iter()
            .map(|s| {
                let text = &by_id[&s.id].0;
                let (v, l) = &self.scores[&(s.id.clone(), text.clone())];
                (*v, *l)
            })
            .unzip()
    }

    /// Run `a`'s change against run `b` in % over the table's metric columns
    /// (well-formed %, the six metrics, CheXpert-rule F1), and the paired
    /// bootstrap interval of each; `None` where `b` is 0 or not computed.
    pub fn change_row(&self, a: &RunPicks, b: &RunPicks) -> Result<ChangeRow> {
        let ((va, la), (vb, lb)) = (self.per_study(a), self.per_study(b));
        let n = self.studies.len();
        let all: Vec<usize> = (0..n).collect();
        let draws = resample_indices(n, RESAMPLES, SEED);
        let mean = |v: &[[f64; 7]], j: usize, idx: &[usize]| {
            idx.iter().map(|&i| v[i][j]).sum::<f64>() / idx.len() as f64
        };
        let change = |x: f64, y: f64| {
            (y != 0.0 && x.is_finite() && y.is_finite()).then(|| 100.0 * (x - y) / y)
        };
        let mut cells = Vec::new();
        let mut cis = Vec::new();
        // Column order of the table: well-formed % (index 6), then 0..6.
        for j in std::iter::once(6).chain(0..6) {
            let point = change(mean(&va, j, &all), mean(&vb, j, &all));
            let ci = match point {
                Some(_) => {
                    let stats: Vec<(f64, f64)> = draws
                        .iter()
                        .map(|d| (mean(&va, j, d), mean(&vb, j, d)))
                        .collect();
                    interval_of(&stats)?
                }
                None => None,
            };
            cells.push(point);
            cis.push(ci);
        }
        let f1 = |l: &[Labels], idx: &[usize]| -> Result<[f64; 4]> {
            let h: Vec<Labels> = idx.iter().map(|&i| l[i]).collect();
            let r: Vec<Labels> = idx.iter().map(|&i| self.ref_labels[i]).collect();
            Ok(f1_columns(&chexpert_f1(&h, &r, self.uncertain)?))
        };
        let (pa, pb) = (f1(&la, &all)?, f1(&lb, &all)?);
        let boot: Vec<([f64; 4], [f64; 4])> = draws
            .iter()
            .map(|d| Ok((f1(&la, d)?, f1(&lb, d)?)))
            .collect::<Result<_>>()?;
        for k in 0..4 {
            let point = change(pa[k], pb[k]);
            let ci = match point {
                Some(_) => {
                    interval_of(&boot.iter().map(|(x, y)| (x[k], y[k])).collect::<Vec<_>>())?
                }
                None => None,
            };
            cells.push(point);
            cis.push(ci);
        }
        Ok((cells, cis))
    }

    /// A run's row: tokens, tokens saved against the full candidates
    /// (`full` per study, `full_tokens` in all), mean metrics, CheXpert-rule F1.
    pub fn run_row(
        &self,
        by_id: &RunPicks,
        full: &[Option<usize>],
        full_tokens: Option<usize>,
    ) -> Result<Vec<Option<f64>>> {
        let n = self.studies.len() as f64;
        let mut sum = [0.0; 7];
        let mut tokens: Option<usize> = Some(0);
        let mut picked: Vec<Labels> = Vec::with_capacity(self.studies.len());
        for (s, f) in self.studies.iter().zip(full) {
            let (text, used) = &by_id[&s.id];
            let (v, l) = &self.scores[&(s.id.clone(), text.clone())];
            picked.push(*l);
            for j in 0..7 {
                sum[j] += v[j] / n;
            }
            tokens = match (tokens, used.or(*f)) {
                (Some(a), Some(b)) => Some(a.checked_add(b).ok_or_else(|| EvalError::Tokens {
                    message: format!("token counts add up to more than {}", usize::MAX),
                })?),
                _ => None,
            };
        }
        // The table holds f64 cells: beyond 2^53 a total would print rounded.
        if let Some(t) = tokens.filter(|&t| t as u64 > EXACT_TOKENS) {
            return Err(EvalError::Tokens {
                message: format!("{t} tokens in all, more than the table shows exactly (2^53)"),
            });
        }
        let saved = match (tokens, full_tokens) {
            (Some(t), Some(f)) if f > 0 => Some(100.0 * (1.0 - t as f64 / f as f64)),
            _ => None,
        };
        let cx = chexpert_f1(&picked, self.ref_labels, self.uncertain)?;
        let mut row = vec![tokens.map(|t| t as f64), saved];
        row.extend(metric_cells(sum));
        row.extend(f1_columns(&cx).map(Some));
        Ok(row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs() -> References {
        [(
            "1".to_string(),
            ("No effusion.".to_string(), "Normal chest.".to_string()),
        )]
        .into()
    }

    #[test]
    fn a_study_without_reference_is_an_error_naming_it() {
        let pairs = vec![("2".to_string(), "Findings: x. Impression: y.".to_string())];
        let e = score_pairs(&pairs, &refs(), None, &Labeler::default()).unwrap_err();
        assert_eq!(e.to_string(), "study 2: no reference report");
    }

    #[test]
    fn random_is_the_mean_of_the_candidates_and_a_run_row_its_picks() {
        let good = "Findings: No effusion. Impression: Normal chest.".to_string();
        let bad = "nothing parseable".to_string();
        let studies = vec![Study {
            id: "1".into(),
            candidates: vec![good.clone(), bad.clone()],
            tokens: Some(10),
        }];
        let run: RunPicks = [("1".to_string(), (good.clone(), Some(4)))].into();
        let pairs = distinct_pairs(&studies, &[("best".to_string(), run.clone())]);
        assert_eq!(pairs.len(), 2);
        let labeler = Labeler::default();
        let scores = score_pairs(&pairs, &refs(), None, &labeler).unwrap();
        let ref_labels = vec![labeler.label(&joined("No effusion.", "Normal chest."))];
        let scored = Scored {
            studies: &studies,
            scores: &scores,
            ref_labels: &ref_labels,
            uncertain: UncertainPolicy::Positive,
        };
        let random = scored.random_row(10).unwrap();
        // well-formed %: one of the two candidates parses into both sections.
        assert_eq!(random[2], Some(50.0));
        let row = scored.run_row(&run, &[Some(10)], Some(10)).unwrap();
        assert_eq!(
            (row[0], row[1], row[2]),
            (Some(4.0), Some(60.0), Some(100.0))
        );
        // An exact copy of the reference: ROUGE-L 1 on both sections, no BERTScore cell.
        assert_eq!((row[4], row[5], row[7]), (Some(1.0), None, Some(1.0)));
    }
}
