//! Evaluation for SDR (paper "SDR: Set-Distance Rewards for Radiology Report
//! Generation", §4 and appendix C; SPEC §5, §7).
//!
//! Text metrics, each a port of a named reference implementation whose
//! numbers it reproduces (see `tests/metrics.rs` for the parity tests):
//!
//! | module | metric | reference |
//! |---|---|---|
//! | [`bleu`] | BLEU-1..4, sentence and corpus | nltk 3.10.4 `sentence_bleu` / `corpus_bleu`; sacrebleu 2.6.0 corpus BLEU |
//! | [`rouge`] | ROUGE-1/2/L P, R, F1 | `rouge-score` 0.1.2 |
//! | [`meteor`] | METEOR | nltk 3.10.4 `meteor_score` (+ WordNet 3.0) |
//! | [`chrf`] | chrF++ sentence and corpus | sacrebleu 2.6.0 `CHRF(word_order=2)` |
//! | [`bertscore`] | BERTScore P, R, F1 | bert-score 0.3.13 `greedy_cos_idf`, over the caller's token embeddings |
//!
//! [`scores::TextScorer`] computes them all for one pair with SDR's fixed
//! choices (tokenisation, smoothing, stemming), documented there.
//!
//! Selection evaluation: random baselines and improvement over random
//! ([`baseline`]), finding strata ([`strata`]), Markdown/CSV tables
//! ([`table`]) and the policy × metric heatmap ([`heatmap`]).

pub mod atomic;
pub mod baseline;
pub mod bertscore;
pub mod bleu;
pub mod chrf;
pub mod error;
pub mod heatmap;
pub mod meteor;
pub mod porter;
pub mod rouge;
pub mod scores;
pub mod strata;
pub mod table;
pub mod tokenize;
pub mod wordnet;

pub use error::{EvalError, Result};
