//! Sentence embeddings for SDR (SPEC §2): the frozen
//! `sentence-transformers/all-mpnet-base-v2` encoder on candle, offline, with
//! sentence-transformers' tokenisation, mean pooling and L2 normalisation.
//!
//! Every command and Python class loads its encoder by name through
//! [`open_encoder`] (`mpnet`, or the `hash-DIM` stand-in):
//!
//! ```no_run
//! use sdr_embed::{open_encoder, EncoderOptions};
//! // --model, then $SDR_MODEL, then the cache folder
//! let loaded = open_encoder("mpnet", None, EncoderOptions::default())?;
//! let enc = loaded.model.expect("mpnet is a model");
//! let v = enc.embed(&["No acute cardiopulmonary abnormality."])?;
//! assert_eq!(v[0].len(), 768);
//! # Ok::<(), sdr_embed::EmbedError>(())
//! ```
//!
//! Paper: "SDR: Set-Distance Rewards for Radiology Report Generation".

// The embedding stage and what a user configures: encoders, precision, device, cache.
pub mod cache;
pub mod discover;
pub mod encoder;
pub mod error;
pub mod hash_encoder;
pub mod identity;
pub mod open;
pub mod precision;
pub mod rng;
pub mod sections;
pub mod sentence_encoder;
pub mod tokenize;

// Private: models (the transformers), the choice of GEMM per dense layer, and the
// kernels they run. Nothing outside the crate depends on their layout.
mod cpu;
mod gemm;
mod kernels;
mod models;
mod stored;

/// The kernels for the GEMM micro-benchmark (`examples/gemm_peak.rs`), behind the
/// `bench-internals` feature: not a supported API.
#[cfg(feature = "bench-internals")]
#[doc(hidden)]
pub mod bench_internals {
    pub use crate::gemm::{Bf16Gemm, Dense};
    pub use crate::kernels::avx512_gemm::{supported, supported_f32, PackedWeights};
    /// The packed encoder's time per stage (`examples/encoder_profile.rs`).
    pub mod profile {
        pub use crate::models::profile::{reset, totals, Stage, StageTotal};
    }
}

// 0.1's public paths of the models and kernels, kept for one release (CHANGELOG).
#[deprecated(
    since = "0.2.0",
    note = "sdr-embed's kernels are private; use `Encoder`; removed in 0.3.0"
)]
#[doc(hidden)]
pub mod activation {
    pub use crate::kernels::activation::{
        gelu, gelu_bias_in_place, gelu_erf, gelu_in_place, gelu_slice,
    };
}
#[deprecated(
    since = "0.2.0",
    note = "sdr-embed's kernels are private; use `Encoder`; removed in 0.3.0"
)]
#[doc(hidden)]
pub mod avx512_gemm {
    pub use crate::kernels::avx512_gemm::{supported, supported_f32, PackedWeights};
}
#[deprecated(
    since = "0.2.0",
    note = "sdr-embed's kernels are private; use `Encoder`; removed in 0.3.0"
)]
#[doc(hidden)]
pub mod linear {
    pub use crate::gemm::{Bf16Gemm, Dense, F32Gemm, F32Weights, F32_GEMM_ENV};
}
#[deprecated(
    since = "0.2.0",
    note = "sdr-embed's models are private; use `Encoder`; removed in 0.3.0"
)]
#[doc(hidden)]
pub mod packed {
    pub use crate::models::packed::{PackedMpnet, Weights};
}
#[deprecated(
    since = "0.2.0",
    note = "sdr-embed's models are private; use `Encoder`; removed in 0.3.0"
)]
#[doc(hidden)]
pub mod mpnet {
    pub use crate::models::mpnet::{relative_position_bucket, Config, MpnetModel};
}
#[deprecated(
    since = "0.2.0",
    note = "sdr-embed's models are private; use `Encoder`; removed in 0.3.0"
)]
#[doc(hidden)]
pub mod backbone {
    pub use crate::models::backbone::{Backbone, Loaded, GRAPH_ENV};
}
#[deprecated(
    since = "0.2.0",
    note = "use `sdr_embed::{RobertaEncoder, LayerTokens, bertscore_default_layer}`; removed in 0.3.0"
)]
#[doc(hidden)]
pub mod roberta {
    pub use crate::models::roberta::{
        bertscore_default_layer, Config, LayerTokens, Positions, RobertaEncoder, BERTSCORE_LAYERS,
    };
}

pub use cache::{normalise, text_key, CacheStats, SentenceCache, TextKey};
pub use discover::{
    default_model_dir, resolve_model_dir, sdr_home, weights_sha256, DEFAULT_MODEL,
    DEFAULT_MODEL_SHA256, MODEL_ENV,
};
pub use encoder::{
    Embeddings, Encoder, EncoderDevice, EncoderOptions, Parallelism, Precision, TokenEmbeddings,
};
pub use error::{EmbedError, Result};
pub use hash_encoder::HashEncoder;
pub use identity::EncoderIdentity;
pub use models::pack_cache::{
    list_packed_cache, packed_cache_dir, remove_lone_locks, remove_packed_entry, PackedEntry,
    PackedStatus, Removal, PACKED_CACHE_ENV,
};
pub use models::roberta::{bertscore_default_layer, LayerTokens, LowRankDelta, RobertaEncoder};
pub use open::{open_encoder, CacheKeyed, LoadedEncoder, ModelEncoder};
#[allow(deprecated)]
pub use sections::{Cosine, SetCost};
pub use sections::{
    EmbedControl, EmbedStats, EmbeddedSets, SectionBatch, SectionEmbedder, SentenceSet,
};
pub use sentence_encoder::SentenceEncoder;
