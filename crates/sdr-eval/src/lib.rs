//! Evaluation for SDR (paper "SDR: Set-Distance Rewards for Radiology Report
//! Generation", §4 and appendix C; SPEC §5, §7).
//!
//! Text metrics, each a port of a named reference implementation whose
//! numbers it reproduces (see `tests/metrics.rs` for the parity tests):
//!
//! | module | metric | reference |
//! |---|---|---|
//! | [`bleu`] | BLEU-1..4, sentence and corpus | nltk 3.10.4 `sentence_bleu` / `corpus_bleu` |
//! | [`sacrebleu`] | BLEU (13a tokens), sentence and corpus | sacrebleu 2.6.0 `sentence_bleu`, `BLEU.corpus_score` |
//! | [`rouge`] | ROUGE-1/2/L P, R, F1 | `rouge-score` 0.1.2 |
//! | [`meteor`] | METEOR | nltk 3.10.4 `meteor_score` (+ WordNet 3.0) |
//! | [`chrf`] | chrF++ sentence and corpus | sacrebleu 2.6.0 `CHRF(word_order=2)` |
//! | [`bertscore`] | BERTScore P, R, F1 | bert-score 0.3.13 `greedy_cos_idf`, over the caller's token embeddings |
//!
//! [`scores::TextScorer`] computes them all for one pair with SDR's fixed
//! choices (tokenisation, smoothing, stemming), documented there;
//! [`evaluation`] is the one table every evaluation renders: each distinct
//! (study, text) scored once against the study's reference, one rule for an
//! empty hypothesis; [`report`] renders it as report pairs per section with
//! every metric plus CheXpert-rule F1 (the library behind `sdr score` and
//! `sdr_rewards.metrics`), [`runs`] as `sdr eval`'s side-by-side runs.
//!
//! ## Parity with the references
//!
//! `tools/fixtures/eval_metrics.py` (requirements in
//! `scripts/requirements-eval-fixtures.txt`, WordNet from Debian
//! `wordnet-base`) writes `tests/fixtures/eval_metrics.json` from the
//! reference implementations on 40 random IU X-ray Findings/Impression pairs,
//! 6 high-overlap pairs, 4 two-reference pairs and 9 edge cases (identical,
//! empty hypothesis, empty reference, punctuation only, Unicode, one word,
//! repeats, inflections, synonyms), plus the WordNet subset those texts touch
//! (`tests/fixtures/wordnet-mini/`, WordNet 3.0 licence). `tests/metrics.rs`
//! compares every value:
//!
//! | metric | tolerance | largest deviation seen |
//! |---|---|---|
//! | BLEU-1..4 (nltk, 3 smoothings, sentence + corpus) | 1e-12 relative | 0 |
//! | sacrebleu corpus BLEU (exp, none) | 1e-12 relative | 0 |
//! | sacrebleu sentence BLEU (13a, exp, effective order; 63 pairs) and 13a tokens | 1e-12 relative; tokens exact | see the test |
//! | ROUGE-1/2/L P, R, F1 (stemmer off and on) | 1e-12 | 0 |
//! | METEOR (WordNet subset; stub without synonyms) | 1e-12 | 0 |
//! | chrF++ sentence + corpus (0-100) | 1e-10 | 0 |
//! | BERTScore P, R, F1 (plain, idf) | 1e-9 | 2.2e-16 |
//!
//! `tools/fixtures/bertscore_roberta.py` builds a small random RoBERTa and
//! BERT with transformers and writes the `bert-score` package's P/R/F1 on
//! them at two layers, with and without idf and baseline rescaling;
//! `tests/bertscore_models.rs` runs the same texts through
//! `sdr_embed::RobertaEncoder` and [`bertscore::BertScorer`] (tolerance 1e-5:
//! f32 encoders on both sides).
//!
//! NLTK's Porter stems of all 426 fixture words and WordNet synonym sets of
//! 626 words are compared exactly; a further test repeats the METEOR and
//! synonym checks against the full WordNet 3.0 database (Debian `wordnet-base`,
//! which `scripts/test.sh` installs). `tools/fixtures/sacrebleu_sentence.py`
//! writes `tests/fixtures/sacrebleu_sentence.json` (the same pairs plus 13a
//! edge cases).
//!
//! Selection evaluation: random baselines and improvement over random
//! ([`baseline`]), CheXpert-rule F1 columns ([`chexpert`]), finding strata
//! and the normal / abnormal split ([`strata`]), the per-policy summaries
//! and stratified tables ([`selection`]), Markdown/CSV tables ([`table`])
//! and the policy × metric heatmap ([`heatmap`]); a paired bootstrap over
//! studies gives the 95 % interval of every relative change ([`bootstrap`]).
//! `select_eval` (feature `heatmap`) runs the whole evaluation of
//! `sdr select --all-policies` output: per-study scoring, every table and
//! heatmap, and `publish`, which writes an output folder all or nothing.

pub mod baseline;
pub mod bertscore;
pub mod bleu;
pub mod bootstrap;
pub mod chexpert;
pub mod chrf;
pub mod error;
pub mod evaluation;
#[cfg(feature = "heatmap")]
pub mod heatmap;
#[cfg(feature = "embed")]
pub mod judge;
pub mod meteor;
mod ngram;
pub mod porter;
pub mod publish;
pub mod report;
pub mod rouge;
pub mod runs;
pub mod sacrebleu;
pub mod scores;
pub mod select_eval;
pub mod selection;
pub mod strata;
pub mod table;
pub mod tokenize;
pub mod wordnet;

pub use error::{EvalError, Result};
