//! sacrebleu's BLEU (sacrebleu 2.6.0): corpus BLEU on pre-tokenised text, and
//! sentence BLEU with its defaults, as many radiology papers report it.
//!
//! $$ \mathrm{BLEU} = 100 \cdot \mathrm{BP} \cdot \exp\Big(\tfrac{1}{N'} \sum_{n=1}^{N'} \log p_n\Big),
//!    \qquad \mathrm{BP} = \begin{cases} 1 & c \ge r \\ e^{1 - r/c} & 0 < c < r \\ 0 & c = 0 \end{cases} $$
//!
//! where
//! - `p_n` is the clipped n-gram precision summed over the corpus (one
//!   segment for sentence BLEU); a zero count is smoothed by sacrebleu's
//!   `exp` method (the k-th zero order gets `1 / (2^k · total_n)`), or left 0;
//! - `N' = 4`, or with `effective_order` (sentence BLEU's default) the highest
//!   order with at least one hypothesis n-gram;
//! - `c` is the hypothesis length and `r` the closest reference length;
//! - BLEU is 0 when no n-gram of any order matches.
//!
//! Sentence BLEU tokenises with sacrebleu's `13a` tokenizer (mteval-v13a:
//! punctuation split off, periods and commas kept inside numbers, case kept),
//! unlike SDR's table BLEU (nltk, lower-cased `[a-z0-9]+` tokens): the two
//! differ, and papers should say which they report.
//!
//! Reference: M. Post, "A Call for Clarity in Reporting BLEU Scores", WMT 2018.

use std::sync::OnceLock;

use regex::Regex;

use crate::error::{EvalError, Result};
use crate::ngram::{closest_ref_length, ngram_counts};

const ORDER: usize = 4;

/// sacrebleu's smoothing for [`sacrebleu_corpus_bleu`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SacreSmoothing {
    /// `smooth_method="none"`.
    None,
    /// `smooth_method="exp"` (sacrebleu's default; mteval-v13a).
    Exp,
}

/// Matched and total n-gram counts and lengths, summed over segments.
#[derive(Default)]
struct Stats {
    correct: [u64; ORDER],
    total: [u64; ORDER],
    sys_len: usize,
    ref_len: usize,
}

impl Stats {
    fn add<S: AsRef<str>>(&mut self, refs: &[Vec<S>], hyp: &[S]) -> Result<()> {
        if refs.is_empty() {
            return Err(EvalError::Empty {
                what: "references of a segment",
            });
        }
        for n in 1..=ORDER {
            // Clipped by the max count over references, like nltk.
            let counts = ngram_counts(hyp, n);
            let ref_counts: Vec<_> = refs.iter().map(|r| ngram_counts(r, n)).collect();
            for (g, &c) in &counts {
                self.total[n - 1] += c;
                let m = ref_counts
                    .iter()
                    .map(|rc| rc.get(g).copied().unwrap_or(0))
                    .max()
                    .unwrap_or(0);
                self.correct[n - 1] += c.min(m);
            }
        }
        self.sys_len += hyp.len();
        self.ref_len += closest_ref_length(refs, hyp.len());
        Ok(())
    }

    /// sacrebleu `BLEU.compute_bleu`.
    fn score(&self, smoothing: SacreSmoothing, effective_order: bool) -> f64 {
        if self.correct.iter().all(|&c| c == 0) {
            return 0.0;
        }
        let bp = if self.sys_len < self.ref_len {
            if self.sys_len > 0 {
                (1.0 - self.ref_len as f64 / self.sys_len as f64).exp()
            } else {
                0.0
            }
        } else {
            1.0
        };
        let mut precisions = [0.0f64; ORDER];
        let mut smooth_mteval = 1.0;
        let mut eff_order = ORDER;
        for (n, p) in precisions.iter_mut().enumerate() {
            let (correct, total) = (self.correct[n], self.total[n]);
            if total == 0 {
                break;
            }
            if effective_order {
                eff_order = n + 1;
            }
            if correct == 0 {
                if smoothing == SacreSmoothing::Exp {
                    smooth_mteval *= 2.0;
                    *p = 100.0 / (smooth_mteval * total as f64);
                }
            } else {
                *p = 100.0 * correct as f64 / total as f64;
            }
        }
        // sacrebleu `my_log`: log(0) is floored at -9999999999; a plain sum.
        let log_sum = precisions[..eff_order]
            .iter()
            .map(|&p| if p == 0.0 { -9_999_999_999.0 } else { p.ln() })
            .fold(0.0, |a, b| a + b);
        bp * (log_sum / eff_order as f64).exp()
    }
}

/// sacrebleu 2.6.0 `BLEU(tokenize="none", smooth_method=...)
/// .corpus_score(...)` on pre-tokenised text: BLEU-4 on a 0-100 scale.
///
/// # Errors
/// [`EvalError::LengthMismatch`] for lists of different lengths,
/// [`EvalError::Empty`] for no hypotheses or a segment without references.
pub fn sacrebleu_corpus_bleu<S: AsRef<str>>(
    references: &[Vec<Vec<S>>],
    hypotheses: &[Vec<S>],
    smoothing: SacreSmoothing,
) -> Result<f64> {
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
    let mut stats = Stats::default();
    for (refs, hyp) in references.iter().zip(hypotheses) {
        stats.add(refs, hyp)?;
    }
    Ok(stats.score(smoothing, false))
}

/// sacrebleu 2.6.0 `sentence_bleu(hypothesis, references)` with its defaults:
/// 13a tokenisation, `exp` smoothing, effective order; 0-100 scale.
///
/// # Errors
/// [`EvalError::Empty`] when `references` is empty.
///
/// ```
/// use sdr_eval::sacrebleu::sacrebleu_sentence_bleu;
/// let s = sacrebleu_sentence_bleu("No acute disease.", &["No acute disease."]).unwrap();
/// assert!((s - 100.0).abs() < 1e-9);
/// ```
pub fn sacrebleu_sentence_bleu<S: AsRef<str>>(hypothesis: &str, references: &[S]) -> Result<f64> {
    let hyp = tokenize_13a(hypothesis);
    let refs: Vec<Vec<String>> = references
        .iter()
        .map(|r| tokenize_13a(r.as_ref()))
        .collect();
    let mut stats = Stats::default();
    stats.add(&refs, &hyp)?;
    Ok(stats.score(SacreSmoothing::Exp, true))
}

/// sacrebleu's `13a` tokenizer (mteval-v13a.pl): tokens of `line`.
///
/// ```
/// use sdr_eval::sacrebleu::tokenize_13a;
/// assert_eq!(tokenize_13a("Effusion (left), 3.5 cm."), ["Effusion", "(", "left", ")", ",", "3.5", "cm", "."]);
/// ```
pub fn tokenize_13a(line: &str) -> Vec<String> {
    static RULES: OnceLock<[(Regex, &'static str); 4]> = OnceLock::new();
    let rules = RULES.get_or_init(|| {
        let re = |p: &str| Regex::new(p).expect("13a pattern");
        [
            // Punctuation and symbols (not ' , - .), split off.
            (re(r"([\{-~\[-` -&\(-\+:-@/])"), " ${1} "),
            // Period and comma, unless preceded by a digit.
            (re(r"([^0-9])([\.,])"), "${1} ${2} "),
            // Period and comma, unless followed by a digit.
            (re(r"([\.,])([^0-9])"), " ${1} ${2}"),
            // Dash after a digit.
            (re(r"([0-9])(-)"), "${1} ${2} "),
        ]
    });
    let mut s = line
        .replace("<skipped>", "")
        .replace("-\n", "")
        .replace('\n', " ");
    if s.contains('&') {
        s = s
            .replace("&quot;", "\"")
            .replace("&amp;", "&")
            .replace("&lt;", "<")
            .replace("&gt;", ">");
    }
    let mut s = format!(" {s} ");
    for (re, rep) in rules {
        s = re.replace_all(&s, *rep).into_owned();
    }
    s.split_whitespace().map(str::to_string).collect()
}
