//! The one encoder loader ([`open_encoder`]): every command of the CLI, `sdr serve`
//! and every class of the Python bindings loads its sentence encoder here, by name.
//!
//! A model loaded here is handed out under the names fixed at load
//! ([`crate::EncoderIdentity`]): [`ModelEncoder`] presents it under the name corpora
//! record and its identity; [`CacheKeyed`] under the same name and the cache key of
//! the CLI's `--cache-dir` files.

use std::borrow::Borrow;
use std::path::Path;
use std::sync::Arc;

use crate::discover::resolve_model_dir;
use crate::encoder::{Encoder, EncoderOptions};
use crate::error::{EmbedError, Result};
use crate::hash_encoder::HashEncoder;
use crate::sentence_encoder::SentenceEncoder;

/// An encoder loaded by name ([`open_encoder`]), with what to tell the user.
pub struct LoadedEncoder {
    /// The encoder, under the name corpora record ([`Encoder::recorded_name`]).
    pub encoder: Arc<dyn SentenceEncoder>,
    /// The model behind `mpnet` (absent for the stand-ins).
    pub model: Option<Arc<Encoder>>,
    /// Why the precision asked for was replaced on this machine (one line): the
    /// CLI prints it on stderr, Python raises it as a RuntimeWarning.
    pub notice: Option<String>,
}

/// What [`open_encoder`] says of a `hash-DIM` out of range.
const HASH_DIM_RANGE: &str = "expected hash-DIM with DIM from 1 to 65536";
const _: () = assert!(
    HashEncoder::MAX_DIM == 65_536,
    "HASH_DIM_RANGE names MAX_DIM"
);

/// The one encoder loader of the CLI, the server and the bindings: `mpnet` (the
/// sentence-transformers folder `model_dir`, else `$SDR_MODEL`, else the default
/// cache folder; SPEC §2) or `hash-DIM` (the [`HashEncoder`] stand-in).
///
/// # Errors
/// [`EmbedError::UnknownEncoder`] for another name; the model's own errors
/// (missing folder, bad weights).
pub fn open_encoder(
    name: &str,
    model_dir: Option<&Path>,
    options: EncoderOptions,
) -> Result<LoadedEncoder> {
    if let Some(dim) = name.strip_prefix("hash-") {
        return match dim.parse::<usize>() {
            Ok(d) if (1..=HashEncoder::MAX_DIM).contains(&d) => Ok(LoadedEncoder {
                encoder: Arc::new(HashEncoder::new(d)),
                model: None,
                notice: None,
            }),
            _ => Err(EmbedError::UnknownEncoder {
                value: name.to_string(),
                reason: HASH_DIM_RANGE,
            }),
        };
    }
    if name != "mpnet" {
        return Err(EmbedError::UnknownEncoder {
            value: name.to_string(),
            reason: "expected mpnet or hash-DIM",
        });
    }
    let dir = resolve_model_dir(model_dir)?;
    let model = Arc::new(Encoder::load(&dir, options)?);
    Ok(LoadedEncoder {
        encoder: Arc::new(ModelEncoder(model.clone())),
        notice: model.notice().map(str::to_string),
        model: Some(model),
    })
}

/// What both wrappers below take from the model as it is (they differ only in
/// the identity they give).
macro_rules! forward_to_model {
    () => {
        fn name(&self) -> String {
            self.0.borrow().recorded_name().to_string()
        }
        fn weights_sha256(&self) -> Result<String> {
            self.0.borrow().weights_sha256()
        }
        fn dim(&self) -> usize {
            self.0.borrow().dim()
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<f32>> {
            SentenceEncoder::embed(self.0.borrow(), texts)
        }
    };
}

/// [`Encoder`] (owned, or shared as `Arc<Encoder>`) under the name corpora record
/// ([`Encoder::recorded_name`]) and its identity ([`crate::EncoderIdentity::identity`]),
/// both fixed at load; what [`open_encoder`] returns for `mpnet`.
pub struct ModelEncoder<E = Encoder>(pub E);

impl<E: Borrow<Encoder> + Send + Sync> SentenceEncoder for ModelEncoder<E> {
    forward_to_model!();
    fn identity(&self) -> Result<String> {
        SentenceEncoder::identity(self.0.borrow())
    }
}

/// [`Encoder`] under the name corpora record and its cache key
/// ([`crate::EncoderIdentity::cache_key`], `name/precision`), both fixed at load: the
/// identity of [`Encoder::cache`] and of the CLI's `--cache-dir` files, so that
/// `sdr embed` and the other commands share one file per model and precision.
pub struct CacheKeyed<E = Arc<Encoder>>(pub E);

impl<E: Borrow<Encoder> + Send + Sync> SentenceEncoder for CacheKeyed<E> {
    forward_to_model!();
    fn identity(&self) -> Result<String> {
        Ok(self.0.borrow().encoder_identity().cache_key().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_dimension_is_bounded() {
        let opts = EncoderOptions::default;
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
            assert_eq!(
                e,
                format!("invalid option `encoder` = `{bad}`: {HASH_DIM_RANGE}")
            );
        }
        let e = open_encoder("minilm", None, opts()).err().unwrap();
        assert_eq!(
            e.to_string(),
            "invalid option `encoder` = `minilm`: expected mpnet or hash-DIM"
        );
    }

    #[test]
    fn the_stand_in_has_the_identity_of_its_dimension() {
        let loaded = open_encoder("hash-8", None, EncoderOptions::default()).unwrap();
        assert!(loaded.model.is_none() && loaded.notice.is_none());
        assert_eq!(loaded.encoder.name(), "sdr-hash-bow-8");
        assert_eq!(loaded.encoder.identity().unwrap(), "sdr-hash-bow-8@none");
        assert_eq!(
            loaded.encoder.identity().unwrap(),
            HashEncoder::new(8).identity().unwrap()
        );
    }
}
