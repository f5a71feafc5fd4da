//! A deterministic stand-in for the sentence encoder.
//!
//! Every encoder implements [`sdr_embed::SentenceEncoder`] (re-exported here); the
//! real one is `sdr_embed::Encoder` (all-mpnet-base-v2, SPEC §2). [`HashEncoder`] is a bag-of-words stand-in for
//! tests and for machines without the model: it is *not* a sentence encoder in
//! any semantic sense, and a corpus built with it records its name, so it can
//! never be mixed with real embeddings.

use std::borrow::Borrow;
use std::path::Path;
use std::sync::Arc;

use crate::error::{CorpusError, Result};
use crate::rng::{fnv1a, SplitMix64};
pub use sdr_embed::SentenceEncoder;

/// An encoder loaded by name ([`open_encoder`]), with what to tell the user.
pub struct LoadedEncoder {
    /// The encoder, under the name corpora record ([`recorded_name`]).
    pub encoder: Arc<dyn SentenceEncoder>,
    /// The model behind `mpnet` (absent for the stand-ins).
    pub model: Option<Arc<sdr_embed::Encoder>>,
    /// Why the precision asked for was replaced on this machine (one line): the
    /// CLI prints it on stderr, Python raises it as a RuntimeWarning.
    pub notice: Option<String>,
}

/// The one encoder loader of the CLI, the server and the bindings: `mpnet` (the
/// sentence-transformers folder `model_dir`, else `$SDR_MODEL`, else the default
/// cache folder; SPEC §2) or `hash-DIM` (the [`HashEncoder`] stand-in).
///
/// # Errors
/// [`CorpusError::InvalidOption`] for another name; the model's own errors
/// (missing folder, bad weights) as [`CorpusError::Encoder`].
pub fn open_encoder(
    name: &str,
    model_dir: Option<&Path>,
    options: sdr_embed::EncoderOptions,
) -> Result<LoadedEncoder> {
    if let Some(dim) = name.strip_prefix("hash-") {
        return match dim.parse::<usize>() {
            Ok(d) if (1..=HashEncoder::MAX_DIM).contains(&d) => Ok(LoadedEncoder {
                encoder: Arc::new(HashEncoder::new(d)),
                model: None,
                notice: None,
            }),
            _ => Err(CorpusError::InvalidOption {
                name: "encoder",
                value: name.to_string(),
                reason: format!(
                    "expected hash-DIM with DIM from 1 to {}",
                    HashEncoder::MAX_DIM
                ),
            }),
        };
    }
    if name != "mpnet" {
        return Err(CorpusError::InvalidOption {
            name: "encoder",
            value: name.to_string(),
            reason: "expected mpnet or hash-DIM".into(),
        });
    }
    let dir = sdr_embed::resolve_model_dir(model_dir)?;
    let model = Arc::new(sdr_embed::Encoder::load(&dir, options)?);
    Ok(LoadedEncoder {
        encoder: Arc::new(ModelEncoder(model.clone())),
        notice: model.notice().map(str::to_string),
        model: Some(model),
    })
}

/// [`open_encoder`]'s encoder alone, its notice dropped.
#[deprecated(
    since = "0.2.0",
    note = "use open_encoder, which also returns the notice"
)]
pub fn load_encoder(
    name: &str,
    model_dir: Option<&Path>,
    options: sdr_embed::EncoderOptions,
) -> Result<Box<dyn SentenceEncoder>> {
    let loaded = open_encoder(name, model_dir, options)?;
    Ok(Box::new(Shared(loaded.encoder)))
}

/// An `Arc`'d encoder as a `Box`'d one.
struct Shared(Arc<dyn SentenceEncoder>);

impl SentenceEncoder for Shared {
    fn name(&self) -> String {
        self.0.name()
    }
    fn weights_sha256(&self) -> sdr_embed::Result<String> {
        self.0.weights_sha256()
    }
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn embed(&self, texts: &[&str]) -> sdr_embed::Result<Vec<f32>> {
        self.0.embed(texts)
    }
    fn identity(&self) -> sdr_embed::Result<String> {
        self.0.identity()
    }
}

/// The encoder name a corpus records for `encoder`: the model's name, plus `+bf16`
/// (or `+f16`) when its vectors are computed at reduced precision, so that a corpus
/// built at one precision refuses queries embedded at another
/// ([`crate::Corpus::check_compatible`]). f32 adds nothing: corpora built before
/// precision existed keep matching. The precision is the one in force (`bf16` on a
/// CPU without bf16 support runs, and is recorded as, f32); every bf16 variant is
/// `+bf16`, on any device, as f32 corpora are interchangeable between devices; bf16
/// vectors of two devices differ in rounding, each within bf16's tolerance of f32.
pub fn recorded_name(encoder: &sdr_embed::Encoder) -> String {
    use sdr_embed::Precision;
    let name = encoder.name();
    match encoder.precision() {
        Precision::F32 => name.to_string(),
        Precision::Bf16 | Precision::Bf16Candle | Precision::MixedBf16 => format!("{name}+bf16"),
        Precision::F16 => format!("{name}+f16"),
    }
}

/// Splits a recorded encoder name into the model's name and its precision
/// (`f32` when there is no suffix).
pub(crate) fn split_precision(recorded: &str) -> (&str, &str) {
    match recorded.rsplit_once('+') {
        Some((model, p @ ("bf16" | "f16"))) => (model, p),
        _ => (recorded, "f32"),
    }
}

/// `sdr_embed::Encoder` (owned, or shared as `Arc<Encoder>`) under the name
/// corpora record ([`recorded_name`]); what [`open_encoder`] returns for `mpnet`.
pub struct ModelEncoder<E = sdr_embed::Encoder>(pub E);

impl<E: Borrow<sdr_embed::Encoder> + Send + Sync> SentenceEncoder for ModelEncoder<E> {
    fn name(&self) -> String {
        recorded_name(self.0.borrow())
    }
    fn weights_sha256(&self) -> sdr_embed::Result<String> {
        self.0.borrow().weights_sha256()
    }
    fn dim(&self) -> usize {
        self.0.borrow().dim()
    }
    fn embed(&self, texts: &[&str]) -> sdr_embed::Result<Vec<f32>> {
        SentenceEncoder::embed(self.0.borrow(), texts)
    }
    fn identity(&self) -> sdr_embed::Result<String> {
        SentenceEncoder::identity(self.0.borrow())
    }
}

/// Deterministic bag-of-words stand-in: each lower-cased word maps to a fixed
/// pseudo-random Gaussian-like vector (seeded by its FNV-1a hash); a sentence
/// is the normalised sum of its words' vectors. Sentences sharing words are
/// close, which is enough for tests and benchmarks of the machinery.
#[derive(Debug, Clone)]
pub struct HashEncoder {
    pub dim: usize,
}

impl HashEncoder {
    pub const NAME: &'static str = "sdr-hash-bow";
    /// Largest dimension [`load_encoder`] accepts: a stand-in needs no more,
    /// and a huge one would abort on allocating each sentence's vector.
    pub const MAX_DIM: usize = 65_536;

    pub fn new(dim: usize) -> Self {
        HashEncoder { dim }
    }

    fn word_vector(&self, word: &str, out: &mut [f32]) {
        let mut rng = SplitMix64::new(fnv1a(word.as_bytes()));
        for x in out.iter_mut() {
            // Sum of four uniforms: a cheap bell shape, centred on 0.
            let s: f64 = (0..4).map(|_| rng.unit()).sum::<f64>() - 2.0;
            *x += s as f32;
        }
    }
}

impl SentenceEncoder for HashEncoder {
    fn name(&self) -> String {
        format!("{}-{}", Self::NAME, self.dim)
    }
    fn weights_sha256(&self) -> sdr_embed::Result<String> {
        Ok("none".to_string())
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn embed(&self, texts: &[&str]) -> sdr_embed::Result<Vec<f32>> {
        let d = self.dim;
        let mut out = vec![0f32; texts.len() * d];
        for (t, row) in texts.iter().zip(out.chunks_exact_mut(d)) {
            let lower = t.to_lowercase();
            let mut any = false;
            for w in lower
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
            {
                self.word_vector(w, row);
                any = true;
            }
            if !any {
                self.word_vector("<empty>", row);
            }
            let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
            if norm > 0.0 {
                row.iter_mut().for_each(|x| *x /= norm);
            } else {
                row[0] = 1.0;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_encoder_is_deterministic_unit_and_lexical() {
        let e = HashEncoder::new(64);
        let v = e
            .embed(&[
                "No pleural effusion.",
                "no pleural effusion",
                "Heart is enlarged.",
            ])
            .unwrap();
        let row = |i: usize| &v[i * 64..(i + 1) * 64];
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
        assert!((dot(row(0), row(0)) - 1.0).abs() < 1e-5);
        assert!((dot(row(0), row(1)) - 1.0).abs() < 1e-5);
        assert!(dot(row(0), row(2)) < 0.9);
        assert_eq!(
            v,
            e.embed(&[
                "No pleural effusion.",
                "no pleural effusion",
                "Heart is enlarged."
            ])
            .unwrap()
        );
    }

    #[test]
    fn hash_dimension_is_bounded() {
        let opts = sdr_embed::EncoderOptions::default;
        assert_eq!(
            open_encoder("hash-65536", None, opts())
                .unwrap()
                .encoder
                .dim(),
            65_536
        );
        for bad in ["hash-0", "hash-65537", "hash-99999999999", "hash-x"] {
            let e = open_encoder(bad, None, opts()).err().unwrap().to_string();
            assert!(e.contains("DIM from 1 to 65536"), "{bad}: {e}");
        }
    }

    #[test]
    fn recorded_names_split_into_model_and_precision() {
        assert_eq!(
            split_precision("all-mpnet-base-v2"),
            ("all-mpnet-base-v2", "f32")
        );
        assert_eq!(
            split_precision("all-mpnet-base-v2+bf16"),
            ("all-mpnet-base-v2", "bf16")
        );
        assert_eq!(split_precision("a+b"), ("a+b", "f32"));
    }
}
