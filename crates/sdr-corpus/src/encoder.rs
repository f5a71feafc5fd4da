//! The encoder loader and the stand-in encoder moved to `sdr-embed`
//! ([`sdr_embed::open_encoder`], [`sdr_embed::HashEncoder`], [`sdr_embed::ModelEncoder`],
//! [`sdr_embed::LoadedEncoder`]); their 0.1 paths here are kept for one release
//! (CHANGELOG, "Deprecated"). What stays is the corpus's reading of a recorded
//! encoder name (`split_precision`).

use std::path::Path;

use crate::error::{CorpusError, Result};
pub use sdr_embed::{HashEncoder, LoadedEncoder, ModelEncoder, SentenceEncoder};

/// [`sdr_embed::open_encoder`], with its errors as [`CorpusError`] (an unknown name
/// as [`CorpusError::InvalidOption`], as before).
#[deprecated(
    since = "0.2.0",
    note = "use sdr_embed::open_encoder; removed in 0.3.0"
)]
pub fn open_encoder(
    name: &str,
    model_dir: Option<&Path>,
    options: sdr_embed::EncoderOptions,
) -> Result<LoadedEncoder> {
    sdr_embed::open_encoder(name, model_dir, options).map_err(|e| match e {
        sdr_embed::EmbedError::UnknownEncoder { value, reason } => CorpusError::InvalidOption {
            name: "encoder",
            value,
            reason: reason.to_string(),
        },
        other => CorpusError::from(other),
    })
}

/// [`sdr_embed::open_encoder`]'s encoder alone, its notice dropped.
#[deprecated(
    since = "0.2.0",
    note = "use sdr_embed::open_encoder, which also returns the notice; removed in 0.3.0"
)]
pub fn load_encoder(
    name: &str,
    model_dir: Option<&Path>,
    options: sdr_embed::EncoderOptions,
) -> Result<Box<dyn SentenceEncoder>> {
    #[allow(deprecated)]
    let loaded = open_encoder(name, model_dir, options)?;
    Ok(Box::new(loaded.encoder))
}

/// The encoder name a corpus records for `encoder` ([`sdr_embed::Encoder::recorded_name`]).
#[deprecated(
    since = "0.2.0",
    note = "use sdr_embed::Encoder::recorded_name; removed in 0.3.0"
)]
pub fn recorded_name(encoder: &sdr_embed::Encoder) -> String {
    encoder.recorded_name().to_string()
}

/// Splits a recorded encoder name ([`sdr_embed::Encoder::recorded_name`]) into the
/// model's name and its precision (`f32` when there is no suffix).
pub(crate) fn split_precision(recorded: &str) -> (&str, &str) {
    match recorded.rsplit_once('+') {
        Some((model, p @ ("bf16" | "f16"))) => (model, p),
        _ => (recorded, "f32"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(deprecated)]
    fn the_old_paths_load_through_sdr_embed() {
        let opts = sdr_embed::EncoderOptions::default;
        let e = open_encoder("hash-0", None, opts()).err().unwrap();
        assert!(matches!(e, CorpusError::InvalidOption { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            "invalid option `encoder` = `hash-0`: expected hash-DIM with DIM from 1 to 65536"
        );
        let boxed = load_encoder("hash-8", None, opts()).unwrap();
        assert_eq!(boxed.identity().unwrap(), "sdr-hash-bow-8@none");
        assert_eq!(boxed.name(), HashEncoder::new(8).name());
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
