//! ROUGE-1, ROUGE-2 and ROUGE-L (precision, recall, F1) as Google's
//! `rouge-score` package computes them (`rouge_score.rouge_scorer`,
//! version 0.1.2).
//!
//! $$ P = \frac{|G_h \cap G_r|}{\max(|G_h|, 1)}, \quad
//!    R = \frac{|G_h \cap G_r|}{\max(|G_r|, 1)}, \quad F = \frac{2PR}{P + R} $$
//!
//! where
//! - for ROUGE-N, `G_h` and `G_r` are the multisets of n-grams of the
//!   prediction and the target, and `∩` is the multiset intersection;
//! - for ROUGE-L, `|G_h ∩ G_r|` is the length of the longest common
//!   subsequence and the denominators are the token counts (0 when either
//!   side is empty);
//! - `F = 0` when `P + R = 0`.
//!
//! Tokenisation (`rouge_score/tokenize.py`): lower-case, replace every
//! character outside `[a-z0-9]` by a space, split, and with `use_stemmer`
//! replace each token longer than 3 characters by its NLTK Porter stem
//! ([`crate::porter`]). SDR's tables use `use_stemmer = false`, the
//! package's default.
//!
//! Reference: C.-Y. Lin, "ROUGE: A Package for Automatic Evaluation of
//! Summaries", ACL Workshop 2004.

use std::collections::HashMap;

use crate::error::{EvalError, Result};
use crate::porter;
use crate::tokenize::tokenize;

/// Precision, recall and F1 of one ROUGE variant.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct RougeScore {
    pub precision: f64,
    pub recall: f64,
    pub fmeasure: f64,
}

/// ROUGE-1, ROUGE-2 and ROUGE-L of one prediction against one target.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct RougeScores {
    pub rouge1: RougeScore,
    pub rouge2: RougeScore,
    pub rouge_l: RougeScore,
}

/// `rouge_score.tokenize.tokenize(text, stemmer)`.
pub fn rouge_tokenize(text: &str, use_stemmer: bool) -> Vec<String> {
    let tokens = tokenize(text);
    if !use_stemmer {
        return tokens;
    }
    tokens
        .into_iter()
        .map(|t| {
            if t.chars().count() > 3 {
                porter::stem(&t)
            } else {
                t
            }
        })
        .filter(|t| !t.is_empty())
        .collect()
}

fn fmeasure(precision: f64, recall: f64) -> f64 {
    if precision + recall > 0.0 {
        2.0 * precision * recall / (precision + recall)
    } else {
        0.0
    }
}

/// ROUGE-N on token lists (`_score_ngrams`).
///
/// # Errors
/// [`EvalError::BadParameter`] when `n` is 0.
pub fn rouge_n<S: AsRef<str>>(target: &[S], prediction: &[S], n: usize) -> Result<RougeScore> {
    if n == 0 {
        return Err(EvalError::BadParameter {
            name: "n",
            value: "0".into(),
            message: "ROUGE-N needs n >= 1",
        });
    }
    let (gt, gp) = (ngrams(target, n), ngrams(prediction, n));
    let overlap: usize = gt
        .iter()
        .map(|(g, &c)| c.min(gp.get(g).copied().unwrap_or(0)))
        .sum();
    let nt: usize = gt.values().sum();
    let np: usize = gp.values().sum();
    let precision = overlap as f64 / np.max(1) as f64;
    let recall = overlap as f64 / nt.max(1) as f64;
    Ok(RougeScore {
        precision,
        recall,
        fmeasure: fmeasure(precision, recall),
    })
}

fn ngrams<S: AsRef<str>>(t: &[S], n: usize) -> HashMap<Vec<&str>, usize> {
    let mut m: HashMap<Vec<&str>, usize> = HashMap::new();
    if t.len() >= n {
        for w in t.windows(n) {
            *m.entry(w.iter().map(AsRef::as_ref).collect()).or_default() += 1;
        }
    }
    m
}

/// Length of the longest common subsequence (`_lcs_table[-1][-1]`).
///
/// Bit-parallel (L. Allison and T. I. Dix, 1986; H. Hyyrö, 2004): a row of
/// the LCS table over the shorter list `a` is held as bits `V`, where a zero
/// bit marks a step up of the row, so `LCS = zeros(V)`. For each token `y`
/// of the longer list, with `M` the bits of `a`'s positions holding `y`,
///
/// $$ V \leftarrow (V + (V \wedge M)) \vee (V \wedge \neg M). $$
///
/// `a` is taken 64 positions at a time; the addition's carry out of one
/// block enters the next block at the same token of `b`, so the work is
/// `|a||b|/64` word steps and the memory `O(|a| + |b|)` (the quadratic table
/// made a 20,000-word pair take 1.4 s). The value equals the table's.
pub fn lcs_length<S: AsRef<str>>(a: &[S], b: &[S]) -> usize {
    let (a, b) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if a.is_empty() {
        return 0;
    }
    let mut ids: HashMap<&str, u32> = HashMap::new();
    let a_ids: Vec<u32> = a
        .iter()
        .map(|t| {
            let next = ids.len() as u32;
            *ids.entry(t.as_ref()).or_insert(next)
        })
        .collect();
    // Tokens absent from `a` leave `V` and every carry unchanged.
    let b_ids: Vec<u32> = b
        .iter()
        .filter_map(|t| ids.get(t.as_ref()).copied())
        .collect();
    let mut masks = vec![0u64; ids.len()];
    let mut carries = vec![false; b_ids.len()];
    let mut lcs = 0;
    for block in a_ids.chunks(64) {
        for (bit, &id) in block.iter().enumerate() {
            masks[id as usize] |= 1 << bit;
        }
        let mut v = u64::MAX;
        for (&id, carry) in b_ids.iter().zip(carries.iter_mut()) {
            let m = masks[id as usize];
            let (sum, c1) = v.overflowing_add(v & m);
            let (sum, c2) = sum.overflowing_add(u64::from(*carry));
            *carry = c1 | c2;
            v = sum | (v & !m);
        }
        // Bits past the end of `a` start at 1 and `| (v & !m)` keeps them so
        // (their mask is 0); the mask only makes that explicit.
        let valid = if block.len() == 64 {
            u64::MAX
        } else {
            (1u64 << block.len()) - 1
        };
        lcs += (!v & valid).count_ones() as usize;
        for &id in block {
            masks[id as usize] = 0;
        }
    }
    lcs
}

/// ROUGE-L on token lists (`_score_lcs`).
pub fn rouge_l<S: AsRef<str>>(target: &[S], prediction: &[S]) -> RougeScore {
    if target.is_empty() || prediction.is_empty() {
        return RougeScore::default();
    }
    let l = lcs_length(target, prediction) as f64;
    let precision = l / prediction.len() as f64;
    let recall = l / target.len() as f64;
    RougeScore {
        precision,
        recall,
        fmeasure: fmeasure(precision, recall),
    }
}

/// `RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer).score(target, prediction)`.
///
/// ```
/// use sdr_eval::rouge::rouge;
/// let s = rouge("The heart is normal.", "Heart normal.", false);
/// assert!((s.rouge1.fmeasure - 2.0 * 1.0 * 0.5 / 1.5).abs() < 1e-12);
/// assert_eq!(s.rouge2.fmeasure, 0.0);
/// ```
pub fn rouge(target: &str, prediction: &str, use_stemmer: bool) -> RougeScores {
    let t = rouge_tokenize(target, use_stemmer);
    let p = rouge_tokenize(prediction, use_stemmer);
    RougeScores {
        rouge1: rouge_n(&t, &p, 1).unwrap_or_default(),
        rouge2: rouge_n(&t, &p, 2).unwrap_or_default(),
        rouge_l: rouge_l(&t, &p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table `rouge-score` fills (`_lcs_table`), one row at a time.
    fn lcs_table(a: &[String], b: &[String]) -> usize {
        let mut prev = vec![0usize; b.len() + 1];
        let mut cur = vec![0usize; b.len() + 1];
        for x in a {
            for (j, y) in b.iter().enumerate() {
                cur[j + 1] = if x == y {
                    prev[j] + 1
                } else {
                    prev[j + 1].max(cur[j])
                };
            }
            std::mem::swap(&mut prev, &mut cur);
        }
        prev[b.len()]
    }

    #[test]
    fn lcs_known() {
        assert_eq!(lcs_length(&["a", "b", "c", "d"], &["b", "d", "a"]), 2);
        assert_eq!(lcs_length::<&str>(&[], &["a"]), 0);
        assert_eq!(lcs_length::<&str>(&["a"], &[]), 0);
        let a: Vec<String> = (0..200).map(|i| format!("w{}", i % 7)).collect();
        assert_eq!(lcs_length(&a, &a), 200);
    }

    proptest::proptest! {
        /// Lengths across several 64-position blocks, over alphabets from
        /// one token (every carry chain at its longest) to many.
        #[test]
        fn lcs_equals_the_table(
            alphabet in 1u32..12,
            a in proptest::collection::vec(0u32..12, 0..300),
            b in proptest::collection::vec(0u32..12, 0..300),
        ) {
            let word = |v: &Vec<u32>| -> Vec<String> {
                v.iter().map(|x| format!("t{}", x % alphabet)).collect()
            };
            let (a, b) = (word(&a), word(&b));
            proptest::prop_assert_eq!(lcs_length(&a, &b), lcs_table(&a, &b));
            proptest::prop_assert_eq!(lcs_length(&b, &a), lcs_table(&a, &b));
        }
    }

    #[test]
    fn empty_prediction_scores_zero() {
        let s = rouge("no acute disease", "", false);
        assert_eq!(s, RougeScores::default());
        assert!(rouge_n(&["a"], &["a"], 0).is_err());
    }

    #[test]
    fn stemming_matches_inflections() {
        let s = rouge("opacities seen", "opacity seen", true);
        assert_eq!(s.rouge1.fmeasure, 1.0);
        let s = rouge("opacities seen", "opacity seen", false);
        assert_eq!(s.rouge1.fmeasure, 0.5);
    }
}
