//! BLEU-1..4, sentence- and corpus-level, as nltk computes them
//! (`nltk.translate.bleu_score`, nltk 3.10.4).
//!
//! $$ \mathrm{BLEU}_N = \mathrm{BP} \cdot \exp\Big(\sum_{n=1}^{N} \tfrac{1}{N} \log p_n\Big),
//!    \qquad \mathrm{BP} = \begin{cases} 1 & c > r \\ 0 & c = 0 \\ e^{1 - r/c} & \text{otherwise} \end{cases} $$
//!
//! where
//! - `p_n` is the modified n-gram precision: hypothesis n-gram counts clipped
//!   by their maximum count in any one reference, summed over the corpus, over
//!   the number of hypothesis n-grams (at least 1 per segment), summed too;
//! - `c` is the total hypothesis length and `r` the sum over segments of the
//!   reference length closest to the hypothesis length (ties: the shorter);
//! - BLEU is 0 whenever no unigram matches.
//!
//! Sentence BLEU is corpus BLEU over one segment. Zero higher-order counts
//! are handled by a [`Smoothing`]; SDR's tables use
//! [`Smoothing::Epsilon`]`(0.1)` (nltk `method1`) for sentence BLEU and
//! [`Smoothing::None`] (nltk `method0`) for corpus BLEU, the usual choices.
//!
//! [`sacrebleu_corpus_bleu`] gives sacrebleu's corpus BLEU-4 on the same
//! tokens (its `tokenize="none"` on SDR-tokenised text joined by spaces):
//! plain-sum log precisions, its `exp` (NIST) smoothing by default, 0-100
//! scale.
//!
//! Reference: K. Papineni, S. Roukos, T. Ward, W.-J. Zhu, "BLEU: a Method for
//! Automatic Evaluation of Machine Translation", ACL 2002. Smoothing methods:
//! B. Chen and C. Cherry, "A Systematic Comparison of Smoothing Techniques for
//! Sentence-Level BLEU", WMT 2014.

use std::collections::HashMap;

use crate::error::{EvalError, Result};
use crate::ngram::{closest_ref_length, ngram_counts};

/// How zero n-gram matches are handled (nltk `SmoothingFunction`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Smoothing {
    /// nltk `method0`: a zero precision becomes `sys.float_info.min`, so the
    /// score is (practically) 0 when any order up to N has no match.
    None,
    /// nltk `method1`: a zero numerator becomes `epsilon` (nltk default 0.1).
    Epsilon(f64),
    /// nltk `method2` (Lin and Och 2004): add 1 to numerator and denominator
    /// of every order above 1.
    AddOne,
}

/// Modified precision numerator and denominator of one segment for order `n`.
fn modified_precision<S: AsRef<str>>(
    references: &[Vec<S>],
    hypothesis: &[S],
    n: usize,
) -> (u64, u64) {
    let counts = ngram_counts(hypothesis, n);
    let mut max_ref: HashMap<Vec<&str>, u64> = HashMap::new();
    for reference in references {
        let rc = ngram_counts(reference, n);
        for g in counts.keys() {
            let c = rc.get(g).copied().unwrap_or(0);
            let e = max_ref.entry(g.clone()).or_insert(0);
            *e = (*e).max(c);
        }
    }
    let numerator = counts
        .iter()
        .map(|(g, &c)| c.min(max_ref.get(g).copied().unwrap_or(0)))
        .sum();
    let denominator = counts.values().sum::<u64>().max(1);
    (numerator, denominator)
}

/// Python's `math.fsum`: the correctly rounded sum (Shewchuk's algorithm
/// with CPython's final half-even correction).
pub(crate) fn fsum(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut partials: Vec<f64> = Vec::new();
    for mut x in values {
        let mut i = 0;
        for j in 0..partials.len() {
            let mut y = partials[j];
            if x.abs() < y.abs() {
                std::mem::swap(&mut x, &mut y);
            }
            let hi = x + y;
            let lo = y - (hi - x);
            if lo != 0.0 {
                partials[i] = lo;
                i += 1;
            }
            x = hi;
        }
        partials.truncate(i);
        partials.push(x);
    }
    let Some(mut hi) = partials.pop() else {
        return 0.0;
    };
    let mut lo = 0.0;
    while let Some(p) = partials.pop() {
        let x = hi;
        let y = p;
        hi = x + y;
        let yr = hi - x;
        lo = y - yr;
        if lo != 0.0 {
            break;
        }
    }
    if let Some(&next) = partials.last() {
        if (lo < 0.0 && next < 0.0) || (lo > 0.0 && next > 0.0) {
            let y = lo * 2.0;
            let x = hi + y;
            if y == x - hi {
                hi = x;
            }
        }
    }
    hi
}

fn brevity_penalty(ref_len: usize, hyp_len: usize) -> f64 {
    if hyp_len > ref_len {
        1.0
    } else if hyp_len == 0 {
        0.0
    } else {
        (1.0 - ref_len as f64 / hyp_len as f64).exp()
    }
}

/// Corpus BLEU-1..`max_order` (nltk `corpus_bleu` with weights
/// `(1/n,)*n` for each n): element `n-1` is BLEU-n.
///
/// `references[i]` holds the (one or more) tokenised references of
/// `hypotheses[i]`.
///
/// # Errors
/// [`EvalError::LengthMismatch`] when the two lists differ in length,
/// [`EvalError::Empty`] when a segment has no reference or the corpus is
/// empty, [`EvalError::BadParameter`] when `max_order` is 0 or the epsilon
/// is not positive and finite.
///
/// ```
/// use sdr_eval::bleu::{corpus_bleu, Smoothing};
/// let h = vec![vec!["the", "heart", "is", "normal", "in", "size"]];
/// let r = vec![vec![vec!["the", "heart", "is", "normal", "in", "size"]]];
/// let b = corpus_bleu(&r, &h, 4, Smoothing::None).unwrap();
/// assert!(b.iter().all(|&x| (x - 1.0).abs() < 1e-12));
/// ```
pub fn corpus_bleu<S: AsRef<str>>(
    references: &[Vec<Vec<S>>],
    hypotheses: &[Vec<S>],
    max_order: usize,
    smoothing: Smoothing,
) -> Result<Vec<f64>> {
    if references.len() != hypotheses.len() {
        return Err(EvalError::LengthMismatch {
            what: "references",
            expected: hypotheses.len(),
            got: references.len(),
        });
    }
    if hypotheses.is_empty() {
        return Err(EvalError::Empty { what: "hypotheses" });
    }
    if max_order == 0 {
        return Err(EvalError::BadParameter {
            name: "max_order",
            value: "0".into(),
            message: "must be at least 1",
        });
    }
    if let Smoothing::Epsilon(e) = smoothing {
        if !(e.is_finite() && e > 0.0) {
            return Err(EvalError::BadParameter {
                name: "epsilon",
                value: e.to_string(),
                message: "must be positive and finite",
            });
        }
    }
    let mut num = vec![0u64; max_order];
    let mut den = vec![0u64; max_order];
    let (mut hyp_total, mut ref_total) = (0usize, 0usize);
    for (refs, hyp) in references.iter().zip(hypotheses) {
        if refs.is_empty() {
            return Err(EvalError::Empty {
                what: "references of a segment",
            });
        }
        for n in 1..=max_order {
            let (a, b) = modified_precision(refs, hyp, n);
            num[n - 1] += a;
            den[n - 1] += b;
        }
        hyp_total += hyp.len();
        ref_total += closest_ref_length(refs, hyp.len());
    }
    if num[0] == 0 {
        return Ok(vec![0.0; max_order]);
    }
    let bp = brevity_penalty(ref_total, hyp_total);
    let p: Vec<f64> = (0..max_order)
        .map(|i| match smoothing {
            Smoothing::None if num[i] == 0 => f64::MIN_POSITIVE,
            Smoothing::Epsilon(e) if num[i] == 0 => e / den[i] as f64,
            Smoothing::AddOne if i != 0 => (num[i] + 1) as f64 / (den[i] + 1) as f64,
            _ => num[i] as f64 / den[i] as f64,
        })
        .collect();
    Ok((1..=max_order)
        .map(|n| {
            let w = 1.0 / n as f64;
            bp * fsum(p[..n].iter().filter(|&&x| x > 0.0).map(|&x| w * x.ln())).exp()
        })
        .collect())
}

/// Sentence BLEU-1..`max_order` (nltk `sentence_bleu`): corpus BLEU of one
/// segment.
///
/// # Errors
/// As [`corpus_bleu`].
pub fn sentence_bleu<S: AsRef<str> + Clone>(
    references: &[Vec<S>],
    hypothesis: &[S],
    max_order: usize,
    smoothing: Smoothing,
) -> Result<Vec<f64>> {
    corpus_bleu(
        &[references.to_vec()],
        &[hypothesis.to_vec()],
        max_order,
        smoothing,
    )
}

pub use crate::sacrebleu::{sacrebleu_corpus_bleu, SacreSmoothing};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fsum_is_exact() {
        assert_eq!(fsum([0.1; 10]), 1.0);
        assert_eq!(fsum([1e100, 1.0, -1e100, 1e-100]), 1.0);
        assert_eq!(fsum([]), 0.0);
        assert_eq!(fsum([1.0, 1e-16, 1e-16]), 1.0000000000000002);
    }

    #[test]
    fn no_unigram_match_is_zero() {
        let b = sentence_bleu(&[vec!["a", "b"]], &["c", "d"], 4, Smoothing::Epsilon(0.1)).unwrap();
        assert_eq!(b, vec![0.0; 4]);
    }

    #[test]
    fn bad_inputs_are_errors() {
        let h: Vec<Vec<&str>> = vec![vec!["a"]];
        assert!(corpus_bleu(&[], &h, 4, Smoothing::None).is_err());
        assert!(corpus_bleu(&[vec![]], &h, 4, Smoothing::None).is_err());
        assert!(corpus_bleu(&[vec![vec!["a"]]], &h, 0, Smoothing::None).is_err());
        assert!(corpus_bleu(&[vec![vec!["a"]]], &h, 4, Smoothing::Epsilon(f64::NAN)).is_err());
    }

    #[test]
    fn brevity_penalty_values() {
        assert_eq!(brevity_penalty(3, 5), 1.0);
        assert_eq!(brevity_penalty(3, 0), 0.0);
        assert!((brevity_penalty(4, 2) - (-1.0f64).exp()).abs() < 1e-15);
    }
}
