//! chrF / chrF++ as sacrebleu computes them (`sacrebleu.metrics.chrf.CHRF`,
//! sacrebleu 2.6.0); chrF++ is `CHRF(word_order=2)`, SDR's default.
//!
//! $$ \mathrm{chrF}_\beta = 100 \cdot \frac{(1 + \beta^2)\, \bar P \bar R}{\beta^2 \bar P + \bar R} $$
//!
//! where
//! - for each character order 1..6 (whitespace removed from the text first)
//!   and each word order 1..2 (words split on whitespace, with one leading or
//!   trailing ASCII punctuation mark split off), `P_n` and `R_n` are the
//!   clipped n-gram match counts over the hypothesis and reference n-gram
//!   counts;
//! - `P̄` and `R̄` average `P_n`, `R_n` over the orders where both the
//!   hypothesis and the reference have n-grams (sacrebleu's "effective
//!   order"); the score is 0 when there is none or `P̄ + R̄ = 0`;
//! - `beta = 2`.
//!
//! Corpus chrF sums the per-segment counts (each segment's best reference by
//! its own chrF) before computing the score; sentence chrF is corpus chrF of
//! one segment. Scores are on sacrebleu's 0-100 scale.
//!
//! Reference: M. Popović, "chrF++: words helping character n-grams", WMT 2017.

use std::collections::HashMap;

use crate::error::{EvalError, Result};
use crate::tokenize::python_split;

/// sacrebleu `CHRF(...)` arguments; the default is chrF++.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ChrfConfig {
    pub char_order: usize,
    pub word_order: usize,
    pub beta: u32,
    pub lowercase: bool,
    pub whitespace: bool,
    pub eps_smoothing: bool,
}

impl Default for ChrfConfig {
    fn default() -> Self {
        ChrfConfig {
            char_order: 6,
            word_order: 2,
            beta: 2,
            lowercase: false,
            whitespace: false,
            eps_smoothing: false,
        }
    }
}

const PUNCTS: &str = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

/// sacrebleu `_remove_punctuation`.
fn words(sent: &str) -> Vec<String> {
    let mut out = Vec::new();
    for w in python_split(sent) {
        let chars: Vec<char> = w.chars().collect();
        if chars.len() == 1 {
            out.push(w.to_string());
        } else if PUNCTS.contains(chars[chars.len() - 1]) {
            out.push(chars[..chars.len() - 1].iter().collect());
            out.push(chars[chars.len() - 1].to_string());
        } else if PUNCTS.contains(chars[0]) {
            out.push(chars[0].to_string());
            out.push(chars[1..].iter().collect());
        } else {
            out.push(w.to_string());
        }
    }
    out
}

type Counter = HashMap<String, u64>;

fn all_ngrams(text: &str, cfg: &ChrfConfig) -> Vec<Counter> {
    let line: Vec<char> = if cfg.whitespace {
        text.chars().collect()
    } else {
        python_split(text).concat().chars().collect()
    };
    let mut out = Vec::with_capacity(cfg.char_order + cfg.word_order);
    for n in 1..=cfg.char_order {
        let mut c = Counter::new();
        if line.len() >= n {
            for w in line.windows(n) {
                *c.entry(w.iter().collect()).or_default() += 1;
            }
        }
        out.push(c);
    }
    if cfg.word_order > 0 {
        let ws = words(text);
        for n in 1..=cfg.word_order {
            let mut c = Counter::new();
            if ws.len() >= n {
                for w in ws.windows(n) {
                    *c.entry(w.join(" ")).or_default() += 1;
                }
            }
            out.push(c);
        }
    }
    out
}

fn match_stats(hyp: &Counter, reference: &Counter) -> [u64; 3] {
    let mut matched = 0;
    let mut hyp_count = 0;
    for (g, &c) in hyp {
        hyp_count += c;
        if let Some(&r) = reference.get(g) {
            matched += c.min(r);
        }
    }
    [
        if reference.is_empty() { 0 } else { hyp_count },
        reference.values().sum(),
        matched,
    ]
}

/// sacrebleu `_compute_f_score` over `[hyp, ref, match]` triplets.
fn f_score(stats: &[u64], cfg: &ChrfConfig) -> f64 {
    let eps = 1e-16;
    let factor = f64::from(cfg.beta * cfg.beta);
    let order = cfg.char_order + cfg.word_order;
    let mut score = 0.0;
    let (mut avg_p, mut avg_r, mut effective) = (0.0, 0.0, 0usize);
    for s in stats.chunks_exact(3).take(order) {
        let (h, r, m) = (s[0], s[1], s[2]);
        let p = if h > 0 { m as f64 / h as f64 } else { eps };
        let rc = if r > 0 { m as f64 / r as f64 } else { eps };
        let denom = factor * p + rc;
        score += if denom > 0.0 {
            (1.0 + factor) * p * rc / denom
        } else {
            eps
        };
        if h > 0 && r > 0 {
            avg_p += p;
            avg_r += rc;
            effective += 1;
        }
    }
    if cfg.eps_smoothing {
        return 100.0 * score / order as f64;
    }
    if effective == 0 {
        avg_p = 0.0;
        avg_r = 0.0;
    } else {
        avg_p /= effective as f64;
        avg_r /= effective as f64;
    }
    if avg_p + avg_r != 0.0 {
        let s = (1.0 + factor) * avg_p * avg_r;
        100.0 * (s / ((factor * avg_p) + avg_r))
    } else {
        0.0
    }
}

fn preprocess(s: &str, cfg: &ChrfConfig) -> String {
    if cfg.lowercase {
        s.to_lowercase()
    } else {
        s.to_string()
    }
}

/// The `[hyp, ref, match]` counts per order of one segment against its best
/// reference (sacrebleu `_compute_segment_statistics`).
fn segment_stats<S: AsRef<str>>(hyp: &str, refs: &[S], cfg: &ChrfConfig) -> Vec<u64> {
    let h = all_ngrams(&preprocess(hyp, cfg), cfg);
    let mut best: Vec<u64> = Vec::new();
    let mut best_f = -1.0;
    for r in refs {
        let rg = all_ngrams(&preprocess(r.as_ref(), cfg), cfg);
        let stats: Vec<u64> = h
            .iter()
            .zip(&rg)
            .flat_map(|(a, b)| match_stats(a, b))
            .collect();
        let f = f_score(&stats, cfg);
        if f > best_f {
            best_f = f;
            best = stats;
        }
    }
    best
}

fn check(cfg: &ChrfConfig) -> Result<()> {
    if cfg.char_order + cfg.word_order == 0 {
        return Err(EvalError::BadParameter {
            name: "char_order + word_order",
            value: "0".into(),
            message: "at least one n-gram order is needed",
        });
    }
    Ok(())
}

/// Corpus chrF (sacrebleu `CHRF(...).corpus_score(hyps, [refs...])`), with
/// `references[i]` the references of `hypotheses[i]`.
///
/// # Errors
/// [`EvalError::LengthMismatch`] for lists of different lengths,
/// [`EvalError::Empty`] for an empty corpus or a segment without reference,
/// [`EvalError::BadParameter`] when both orders are 0.
///
/// ```
/// use sdr_eval::chrf::{corpus_chrf, ChrfConfig};
/// let s = corpus_chrf(&["No acute disease."], &[vec!["No acute disease."]], &ChrfConfig::default()).unwrap();
/// assert!((s - 100.0).abs() < 1e-9);
/// ```
pub fn corpus_chrf<H: AsRef<str>, R: AsRef<str>>(
    hypotheses: &[H],
    references: &[Vec<R>],
    cfg: &ChrfConfig,
) -> Result<f64> {
    check(cfg)?;
    if hypotheses.len() != references.len() {
        return Err(EvalError::LengthMismatch {
            what: "references",
            expected: hypotheses.len(),
            got: references.len(),
        });
    }
    if hypotheses.is_empty() {
        return Err(EvalError::Empty { what: "hypotheses" });
    }
    let order = cfg.char_order + cfg.word_order;
    let mut total = vec![0u64; 3 * order];
    for (h, refs) in hypotheses.iter().zip(references) {
        if refs.is_empty() {
            return Err(EvalError::Empty {
                what: "references of a segment",
            });
        }
        for (t, s) in total.iter_mut().zip(segment_stats(h.as_ref(), refs, cfg)) {
            *t += s;
        }
    }
    Ok(f_score(&total, cfg))
}

/// Sentence chrF (sacrebleu `sentence_score(hyp, refs)`).
///
/// # Errors
/// As [`corpus_chrf`].
pub fn sentence_chrf<R: AsRef<str>>(
    hypothesis: &str,
    references: &[R],
    cfg: &ChrfConfig,
) -> Result<f64> {
    let refs: Vec<&str> = references.iter().map(AsRef::as_ref).collect();
    corpus_chrf(&[hypothesis], &[refs], cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn punctuation_split() {
        assert_eq!(
            words("Heart, (normal) a ."),
            vec!["Heart", ",", "(normal", ")", "a", "."]
        );
    }

    #[test]
    fn empty_hypothesis_is_zero() {
        let s = sentence_chrf("", &["No acute disease."], &ChrfConfig::default()).unwrap();
        assert_eq!(s, 0.0);
    }

    #[test]
    fn bad_inputs() {
        let cfg = ChrfConfig {
            char_order: 0,
            word_order: 0,
            ..ChrfConfig::default()
        };
        assert!(sentence_chrf("a", &["a"], &cfg).is_err());
        let none: [&str; 0] = [];
        assert!(sentence_chrf("a", &none, &ChrfConfig::default()).is_err());
    }
}
