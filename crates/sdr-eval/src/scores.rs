//! All text metrics of one (hypothesis, reference) pair at once, with SDR's
//! fixed choices, for the per-candidate values that selection evaluation
//! ([`crate::baseline`]) consumes. BERTScore needs an encoder and lives in
//! [`crate::bertscore`].
//!
//! Choices (see each metric's module for its definition and reference):
//! - tokens: [`crate::tokenize::tokenize`] (lower-case, `[a-z0-9]+` runs) for
//!   BLEU and METEOR; ROUGE tokenises the same way itself;
//! - BLEU-1..4: sentence BLEU with nltk `method1` smoothing (epsilon 0.1);
//! - ROUGE-1/2/L: F1, `use_stemmer = false`;
//! - METEOR: nltk defaults, with WordNet synonyms when a [`WordNet`] is given;
//! - chrF++: sacrebleu `CHRF(word_order=2)` on the raw text, 0-100 scale.

use crate::bleu::{sentence_bleu, Smoothing};
use crate::chrf::{sentence_chrf, ChrfConfig};
use crate::error::Result;
use crate::meteor::{single_meteor, MeteorConfig};
use crate::rouge::rouge;
use crate::tokenize::tokenize;
use crate::wordnet::WordNet;

/// Column names of [`TextScores::values`], in order.
pub const TEXT_METRICS: [&str; 9] = [
    "BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "ROUGE-1", "ROUGE-2", "ROUGE-L", "METEOR", "chrF++",
];

/// The text metrics of one pair.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TextScores {
    pub bleu: [f64; 4],
    pub rouge1: f64,
    pub rouge2: f64,
    pub rouge_l: f64,
    pub meteor: f64,
    /// On sacrebleu's 0-100 scale.
    pub chrf_pp: f64,
}

impl TextScores {
    /// The values in [`TEXT_METRICS`] order.
    pub fn values(&self) -> [f64; 9] {
        let b = self.bleu;
        [
            b[0],
            b[1],
            b[2],
            b[3],
            self.rouge1,
            self.rouge2,
            self.rouge_l,
            self.meteor,
            self.chrf_pp,
        ]
    }
}

/// The knobs of [`TextScorer`]; the default is SDR's table configuration.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TextMetricConfig {
    pub bleu_smoothing: Smoothing,
    pub rouge_stemmer: bool,
    pub meteor: MeteorConfig,
    pub chrf: ChrfConfig,
}

impl Default for TextMetricConfig {
    fn default() -> Self {
        TextMetricConfig {
            bleu_smoothing: Smoothing::Epsilon(0.1),
            rouge_stemmer: false,
            meteor: MeteorConfig::default(),
            chrf: ChrfConfig::default(),
        }
    }
}

/// Scores pairs with one configuration and an optional WordNet.
#[derive(Debug, Clone, Copy)]
pub struct TextScorer<'w> {
    pub config: TextMetricConfig,
    pub wordnet: Option<&'w WordNet>,
}

impl<'w> TextScorer<'w> {
    pub fn new(config: TextMetricConfig, wordnet: Option<&'w WordNet>) -> Self {
        TextScorer { config, wordnet }
    }

    /// Every text metric of `hypothesis` against `reference`.
    ///
    /// # Errors
    /// Only for an invalid configuration (e.g. a non-positive BLEU epsilon).
    ///
    /// ```
    /// use sdr_eval::scores::TextScorer;
    /// let s = TextScorer::new(Default::default(), None);
    /// let t = s.score("The heart size is normal.", "The heart size is normal.").unwrap();
    /// assert!(t.values()[..7].iter().all(|&v| (v - 1.0).abs() < 1e-12));
    /// ```
    pub fn score(&self, hypothesis: &str, reference: &str) -> Result<TextScores> {
        let h = tokenize(hypothesis);
        let r = tokenize(reference);
        let b = sentence_bleu(std::slice::from_ref(&r), &h, 4, self.config.bleu_smoothing)?;
        let rg = rouge(reference, hypothesis, self.config.rouge_stemmer);
        Ok(TextScores {
            bleu: [b[0], b[1], b[2], b[3]],
            rouge1: rg.rouge1.fmeasure,
            rouge2: rg.rouge2.fmeasure,
            rouge_l: rg.rouge_l.fmeasure,
            meteor: single_meteor(&r, &h, self.wordnet, &self.config.meteor),
            chrf_pp: sentence_chrf(hypothesis, &[reference], &self.config.chrf)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_hypothesis_scores_zero_everywhere() {
        let s = TextScorer::new(TextMetricConfig::default(), None);
        let t = s.score("", "Heart size is normal.").unwrap();
        assert!(t.values().iter().all(|&v| v == 0.0), "{t:?}");
    }

    #[test]
    fn bad_config_is_an_error() {
        let cfg = TextMetricConfig {
            bleu_smoothing: Smoothing::Epsilon(-1.0),
            ..TextMetricConfig::default()
        };
        assert!(TextScorer::new(cfg, None).score("a", "a").is_err());
    }
}
