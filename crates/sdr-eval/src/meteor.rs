//! METEOR, as nltk computes it (`nltk.translate.meteor_score`, nltk 3.10.4).
//!
//! For a hypothesis `h` and a reference `r` (token lists, lower-cased):
//!
//! $$ \mathrm{METEOR} = (1 - \gamma\, (c / m)^{\beta}) \cdot
//!    \frac{P R}{\alpha P + (1 - \alpha) R} $$
//!
//! where
//! - `m` is the number of aligned unigrams, found in three stages, each on the
//!   words left unaligned by the previous ones: exact match, match of NLTK
//!   Porter stems ([`crate::porter`]), and WordNet synonym match
//!   ([`crate::wordnet`]); within a stage nltk walks the hypothesis from its
//!   last word backwards and takes the last still-free reference position;
//! - `P = m / |h|`, `R = m / |r|`;
//! - `c` is the number of chunks: runs of alignments adjacent in both
//!   hypothesis and reference, after sorting alignments by hypothesis position;
//! - `alpha = 0.9`, `beta = 3`, `gamma = 0.5` (nltk's defaults).
//!
//! With several references the maximum is taken. A score is 0 when nothing
//! aligns or either side is empty (nltk's `ZeroDivisionError` branch).
//!
//! Synonyms: pass `Some(&WordNet)` for nltk's behaviour with WordNet 3.0, or
//! `None` for "exact + stem only", which equals nltk with a WordNet stub whose
//! `synsets()` returns nothing.
//!
//! Reference: A. Lavie and A. Agarwal, "METEOR: An Automatic Metric for MT
//! Evaluation with High Levels of Correlation with Human Judgments", WMT 2007.

use std::collections::HashMap;

use crate::error::{EvalError, Result};
use crate::porter;
use crate::wordnet::WordNet;

/// METEOR's weights (nltk defaults).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MeteorConfig {
    pub alpha: f64,
    pub beta: f64,
    pub gamma: f64,
}

impl Default for MeteorConfig {
    fn default() -> Self {
        MeteorConfig {
            alpha: 0.9,
            beta: 3.0,
            gamma: 0.5,
        }
    }
}

type Enum = Vec<(usize, String)>;

/// nltk `_match_enums`: returns (matches, unmatched hyp, unmatched ref).
fn match_enums(hyp: Enum, reference: Enum) -> (Vec<(usize, usize)>, Enum, Enum) {
    let mut positions: HashMap<&str, Vec<usize>> = HashMap::new();
    for (j, (_, w)) in reference.iter().enumerate() {
        positions.entry(w.as_str()).or_default().push(j);
    }
    let mut matched_h = vec![false; hyp.len()];
    let mut matched_r = vec![false; reference.len()];
    let mut matches = Vec::new();
    for i in (0..hyp.len()).rev() {
        if let Some(j) = positions.get_mut(hyp[i].1.as_str()).and_then(Vec::pop) {
            matched_h[i] = true;
            matched_r[j] = true;
            matches.push((hyp[i].0, reference[j].0));
        }
    }
    (matches, keep(hyp, &matched_h), keep(reference, &matched_r))
}

fn keep(list: Enum, matched: &[bool]) -> Enum {
    list.into_iter()
        .zip(matched)
        .filter(|(_, &m)| !m)
        .map(|(p, _)| p)
        .collect()
}

/// nltk `_enum_wordnetsyn_match`.
fn synonym_match(
    hyp: Enum,
    reference: Enum,
    wordnet: &WordNet,
) -> (Vec<(usize, usize)>, Enum, Enum) {
    let mut positions: HashMap<&str, Vec<usize>> = HashMap::new();
    for (j, (_, w)) in reference.iter().enumerate() {
        positions.entry(w.as_str()).or_default().push(j);
    }
    let mut matched_h = vec![false; hyp.len()];
    let mut matched_r = vec![false; reference.len()];
    let mut matches = Vec::new();
    for i in (0..hyp.len()).rev() {
        let mut syns = wordnet.synonyms(&hyp[i].1);
        syns.insert(hyp[i].1.clone());
        // The last free position over all synonyms; positions of different
        // words differ, so the set's iteration order cannot matter.
        let best = syns
            .iter()
            .filter_map(|s| {
                positions
                    .get(s.as_str())
                    .and_then(|p| p.last())
                    .map(|&j| (j, s))
            })
            .max_by_key(|(j, _)| *j);
        if let Some((j, word)) = best {
            if let Some(p) = positions.get_mut(word.as_str()) {
                p.pop();
            }
            matched_h[i] = true;
            matched_r[j] = true;
            matches.push((hyp[i].0, reference[j].0));
        }
    }
    (matches, keep(hyp, &matched_h), keep(reference, &matched_r))
}

/// nltk `_count_chunks` on alignments sorted by hypothesis position.
fn count_chunks(matches: &[(usize, usize)]) -> usize {
    1 + matches
        .windows(2)
        .filter(|w| !(w[1].0 == w[0].0 + 1 && w[1].1 == w[0].1 + 1))
        .count()
}

/// The alignment METEOR scores: (hypothesis index, reference index) pairs
/// sorted by hypothesis index (nltk `align_words`).
pub fn align_words<S: AsRef<str>>(
    hypothesis: &[S],
    reference: &[S],
    wordnet: Option<&WordNet>,
) -> Vec<(usize, usize)> {
    let h: Enum = hypothesis
        .iter()
        .map(|w| w.as_ref().to_lowercase())
        .enumerate()
        .collect();
    let r: Enum = reference
        .iter()
        .map(|w| w.as_ref().to_lowercase())
        .enumerate()
        .collect();
    let (mut all, h, r) = match_enums(h, r);
    let stem = |l: Enum| -> Enum { l.into_iter().map(|(i, w)| (i, porter::stem(&w))).collect() };
    // nltk matches stems but keeps the *stemmed* words in the lists it hands
    // to the synonym stage, so synonyms are looked up for the stems.
    let (stem_matches, h, r) = match_enums(stem(h), stem(r));
    all.extend(stem_matches);
    if let Some(wn) = wordnet {
        let (syn_matches, _, _) = synonym_match(h, r, wn);
        all.extend(syn_matches);
    }
    all.sort_by_key(|&(i, _)| i);
    all
}

/// nltk `single_meteor_score(reference, hypothesis)` on token lists.
///
/// ```
/// use sdr_eval::meteor::{single_meteor, MeteorConfig};
/// let h = ["the", "heart", "is", "normal"];
/// let r = ["the", "heart", "is", "normal"];
/// let s = single_meteor(&r, &h, None, &MeteorConfig::default());
/// assert!((s - 0.9921875).abs() < 1e-12);
/// ```
pub fn single_meteor<S: AsRef<str>>(
    reference: &[S],
    hypothesis: &[S],
    wordnet: Option<&WordNet>,
    cfg: &MeteorConfig,
) -> f64 {
    let matches = align_words(hypothesis, reference, wordnet);
    let m = matches.len();
    if m == 0 || hypothesis.is_empty() || reference.is_empty() {
        return 0.0;
    }
    let precision = m as f64 / hypothesis.len() as f64;
    let recall = m as f64 / reference.len() as f64;
    let fmean = (precision * recall) / (cfg.alpha * precision + (1.0 - cfg.alpha) * recall);
    let frag_frac = count_chunks(&matches) as f64 / m as f64;
    let penalty = cfg.gamma * frag_frac.powf(cfg.beta);
    (1.0 - penalty) * fmean
}

/// nltk `meteor_score(references, hypothesis)`: the best score over the
/// references.
///
/// # Errors
/// [`EvalError::Empty`] when `references` is empty (nltk raises on `max()`
/// of nothing).
pub fn meteor<S: AsRef<str>>(
    references: &[Vec<S>],
    hypothesis: &[S],
    wordnet: Option<&WordNet>,
    cfg: &MeteorConfig,
) -> Result<f64> {
    if references.is_empty() {
        return Err(EvalError::Empty { what: "references" });
    }
    Ok(references
        .iter()
        .map(|r| single_meteor(r, hypothesis, wordnet, cfg))
        .fold(f64::NEG_INFINITY, f64::max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks() {
        assert_eq!(count_chunks(&[(0, 0), (1, 1), (2, 3)]), 2);
        assert_eq!(count_chunks(&[(0, 0)]), 1);
    }

    #[test]
    fn nltk_docstring_example_without_synonyms_is_lower() {
        // nltk's docstring gives 0.6944 for this pair *with* WordNet; without
        // synonyms there is less to align, so the score cannot be higher.
        let h = "It is a guide to action which ensures that the military always obeys the commands of the party";
        let r = "It is a guide to action that ensures that the military will forever heed Party commands";
        let h: Vec<&str> = h.split(' ').collect();
        let r: Vec<&str> = r.split(' ').collect();
        let s = single_meteor(&r, &h, None, &MeteorConfig::default());
        assert!(s > 0.5 && s <= 0.6944 + 1e-4, "{s}");
    }

    #[test]
    fn empty_and_disjoint_give_zero() {
        let cfg = MeteorConfig::default();
        let e: [&str; 0] = [];
        assert_eq!(single_meteor(&["a"], &e, None, &cfg), 0.0);
        assert_eq!(single_meteor(&["a"], &["b"], None, &cfg), 0.0);
        assert!(meteor::<&str>(&[], &["a"], None, &cfg).is_err());
    }
}
