//! SDR reference corpus: the cached training-report embeddings behind
//! inference-time response selection (paper §3.3, appendix C; SPEC §5).
//!
//! - [`source`]: read reports (CSV in the IU X-ray/Kaggle layout or with
//!   ReXGradient-style column names, JSON Lines, a folder of MIMIC-CXR `.txt`
//!   reports), apply the IU split, sample `N` reports with a seed.
//! - [`build`]: deduplicate sentences, embed them ([`SentenceEncoder`]).
//! - [`store`]: the `.safetensors` file, written atomically and memory-mapped
//!   on load; corrupt, truncated or mismatched files are refused.
//! - [`index`], [`score`], [`bounds`]: per-report set distances from one GEMM
//!   of candidate sentences against the corpus's distinct sentences, `min`,
//!   `avg`, `knn` aggregation, and exact lower-bound pruning.
//! - [`select`]: best-of-K selection and consensus (minimum Bayes risk).
//! - [`findings`]: candidate Impressions chosen by their own Findings (no
//!   corpus, no reference; SPEC §10a).
//! - [`partial`]: the partial score of distance-guided pruning (SPEC §6).
//! - [`convergence`]: counts of distances that did not converge or failed.
//! - [`shard`]: one build split over machines (`--shard I/N`, contiguous
//!   report ranges) and the merge that checks and concatenates the shards.
//!
//! # Opening a corpus from Python
//!
//! The file is plain safetensors; `pip install safetensors numpy`:
//!
//! ```python
//! import json
//! import numpy as np
//! from safetensors import safe_open
//! from safetensors.numpy import load_file
//!
//! t = load_file("corpus.safetensors")
//! E = t["embeddings"]                        # (S, 768) float32, one row per distinct sentence
//! fo, fi = t["findings.offsets"], t["findings.indices"]      # int64 (N+1,), uint32
//! io, ii = t["impression.offsets"], t["impression.indices"]
//! ids = bytes(t["report_ids.bytes"]).decode()
//! io_ = t["report_ids.offsets"]
//! report_id = lambda r: ids.encode()[io_[r]:io_[r + 1]].decode()
//! findings_of = lambda r: E[fi[fo[r]:fo[r + 1]]]          # (n_r, 768); empty when absent
//! sent = t["sentences.bytes"].tobytes(); so = t["sentences.offsets"]
//! sentence = lambda s: sent[so[s]:so[s + 1]].decode()
//! with safe_open("corpus.safetensors", "np") as f:
//!     meta = f.metadata()   # encoder, encoder_sha256, segmenter_version, source_sha256, n_reports, seed, ...
//! ```
//!
//! Keys: `embeddings`, `sentences.bytes`, `sentences.offsets`,
//! `findings.offsets`, `findings.indices`, `impression.offsets`,
//! `impression.indices`, `report_ids.bytes`, `report_ids.offsets`
//! (layout in [`store`]).

pub mod agg;
pub mod bounds;
pub mod build;
pub mod clinical;
pub mod convergence;
pub mod encoder;
pub mod error;
pub mod findings;
pub mod gram;
pub mod index;
pub mod partial;
pub mod rng;
pub mod score;
pub mod select;
pub mod shard;
mod shard_meta;
pub mod source;
pub mod store;
pub mod synth;
pub mod table;

pub use agg::{all_policies, Aggregation, Policy};
pub use build::{build_corpus, build_corpus_with, BuildInfo, Progress};
pub use clinical::{CandidateSentences, CorpusClinical, CorpusCost};
pub use convergence::Convergence;
// The loader and the stand-in live in sdr-embed; their 0.1 paths here stay one
// release (the functions deprecated).
#[allow(deprecated)]
pub use encoder::{load_encoder, open_encoder, recorded_name};
pub use error::{CorpusError, Result};
pub use findings::{
    select_by_findings, FindingsScore, FindingsSelection, FindingsStudy, FINDINGS_POLICY,
};
pub use index::CorpusIndex;
pub use partial::{partial_score, CorpusScorer, PartialScores, PartialSections};
pub use score::{CandidateEmbedding, ScoreOptions, Scores};
pub use sdr_embed::{EmbedControl, SectionBatch, SectionEmbedder};
pub use sdr_embed::{HashEncoder, LoadedEncoder, ModelEncoder, SentenceEncoder};
pub use select::{
    argmin, best_of_k, best_of_k_with, consensus_scores, consensus_scores_with,
    embed_candidate_sentences, embed_candidate_texts, embed_candidates, BestOfK, Consensus,
    PlanScores, Selection, SelectionPlan,
};
pub use shard::{merge_corpora, merge_files, shard_source, ShardInfo, ShardSpec};
pub use source::{read_source, Columns, Source, SourceFormat, SourceOptions, SourceReport, Split};
pub use store::{Corpus, CorpusData, CorpusMeta, CorpusView, Section};
pub use table::CsvTable;
