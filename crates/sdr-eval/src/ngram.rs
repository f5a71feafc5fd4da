//! The n-gram counts and reference length that nltk's BLEU ([`crate::bleu`])
//! and sacrebleu's ([`crate::sacrebleu`]) share. A leaf: it imports neither
//! of them, so that `bleu` may re-export `sacrebleu`'s items while both use
//! these helpers.

use std::collections::HashMap;

/// Counts of the `n`-grams of `tokens` (none when `tokens` is shorter than `n`).
pub(crate) fn ngram_counts<S: AsRef<str>>(tokens: &[S], n: usize) -> HashMap<Vec<&str>, u64> {
    let mut m = HashMap::new();
    if tokens.len() >= n {
        for w in tokens.windows(n) {
            *m.entry(w.iter().map(AsRef::as_ref).collect()).or_insert(0) += 1;
        }
    }
    m
}

/// nltk `closest_ref_length`: the reference length nearest `hyp_len`, the
/// shorter one on ties.
pub(crate) fn closest_ref_length<S>(references: &[Vec<S>], hyp_len: usize) -> usize {
    references
        .iter()
        .map(Vec::len)
        .min_by_key(|&r| (r.abs_diff(hyp_len), r))
        .unwrap_or(0)
}
