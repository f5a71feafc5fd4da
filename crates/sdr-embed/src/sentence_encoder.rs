//! The one interface every consumer of sentence embeddings uses: corpus builds,
//! selection, pruning, the reward (Python bindings and `sdr serve`) and the
//! bring-your-own-encoder hook of the bindings.
//!
//! Implementations: [`crate::Encoder`] (all-mpnet-base-v2 and BERT-family models on
//! candle; [`crate::ModelEncoder`] and [`crate::CacheKeyed`] present it under the
//! other names fixed at load), [`crate::HashEncoder`] (a deterministic stand-in for
//! tests and machines without the model), and the bindings' Python-callable adapter.

use std::sync::Arc;

use crate::error::Result;

/// A frozen sentence encoder: unit-norm (or at least non-zero) embeddings of
/// sentences, plus what identifies the vectors it produces.
pub trait SentenceEncoder: Send + Sync {
    /// Model name, e.g. `all-mpnet-base-v2`.
    fn name(&self) -> String;
    /// sha256 of the weights (hex), or another fixed identifier for stand-ins.
    fn weights_sha256(&self) -> Result<String>;
    /// Embedding dimension.
    fn dim(&self) -> usize;
    /// Embeddings of `texts`, row-major `texts.len() x dim`.
    fn embed(&self, texts: &[&str]) -> Result<Vec<f32>>;
    /// Everything the vectors depend on (name, weights, precision): sentence
    /// caches are keyed by it, so two encoders never share entries.
    fn identity(&self) -> Result<String> {
        Ok(format!("{}@{}", self.name(), self.weights_sha256()?))
    }
}

/// A shared encoder is one (`Box::new(arc)` is a `Box<dyn SentenceEncoder>`).
impl SentenceEncoder for Arc<dyn SentenceEncoder> {
    fn name(&self) -> String {
        (**self).name()
    }
    fn weights_sha256(&self) -> Result<String> {
        (**self).weights_sha256()
    }
    fn dim(&self) -> usize {
        (**self).dim()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<f32>> {
        (**self).embed(texts)
    }
    fn identity(&self) -> Result<String> {
        (**self).identity()
    }
}
