//! Sentence embeddings for SDR (SPEC §2): the frozen
//! `sentence-transformers/all-mpnet-base-v2` encoder on candle, offline, with
//! sentence-transformers' tokenisation, mean pooling and L2 normalisation.
//!
//! ```no_run
//! use sdr_embed::{resolve_model_dir, Encoder, EncoderOptions};
//! let dir = resolve_model_dir(None)?; // --model, then $SDR_MODEL, then the cache folder
//! let enc = Encoder::load(&dir, EncoderOptions::default())?;
//! let v = enc.embed(&["No acute cardiopulmonary abnormality."])?;
//! assert_eq!(v[0].len(), 768);
//! # Ok::<(), sdr_embed::EmbedError>(())
//! ```
//!
//! Paper: "SDR: Set-Distance Rewards for Radiology Report Generation".

pub mod activation;
pub mod avx512_gemm;
pub mod backbone;
pub mod cache;
pub mod discover;
pub mod encoder;
pub mod error;
pub mod linear;
pub mod mpnet;
pub mod packed;
pub mod roberta;
pub mod sections;
pub mod sentence_encoder;
pub mod tokenize;

pub use cache::{normalise, text_key, CacheStats, SentenceCache, TextKey};
pub use discover::{
    default_model_dir, resolve_model_dir, sdr_home, weights_sha256, DEFAULT_MODEL,
    DEFAULT_MODEL_SHA256, MODEL_ENV,
};
pub use encoder::{
    Embeddings, Encoder, EncoderDevice, EncoderOptions, Parallelism, Precision, TokenEmbeddings,
};
pub use error::{EmbedError, Result};
pub use roberta::{bertscore_default_layer, LayerTokens, RobertaEncoder};
pub use sections::{
    Cosine, EmbedControl, EmbedStats, EmbeddedSets, SectionBatch, SectionEmbedder, SentenceSet,
    SetCost,
};
pub use sentence_encoder::SentenceEncoder;
