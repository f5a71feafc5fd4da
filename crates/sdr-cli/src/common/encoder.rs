//! `--encoder` / `--model` / `--device` / `--cache-dir`: which sentence encoder embeds
//! text, where it runs, and where its sentence cache is kept between runs.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use sdr_corpus::SentenceEncoder;
use sdr_embed::{Encoder, EncoderDevice, EncoderOptions};

/// Which sentence encoder embeds text.
#[derive(clap::Args, Clone)]
pub struct EncoderArgs {
    /// Sentence-transformers model folder (default: $SDR_MODEL, then
    /// ~/.cache/sdr/models/all-mpnet-base-v2, as put there by scripts/fetch-model.sh).
    #[arg(long, value_name = "DIR")]
    pub model: Option<PathBuf>,
    /// `mpnet`: the model folder above (SPEC §2). `hash-DIM`: a deterministic
    /// bag-of-words stand-in with no semantics, for tests and machines without
    /// the model; corpora record which one built them and refuse the other.
    #[arg(long, default_value = "mpnet", value_name = "NAME")]
    pub encoder: String,
    /// Where the encoder runs: `cpu`, or `cuda` / `cuda:N` (a build made with
    /// `bash scripts/build-sdr.sh --cuda`; batches of 256 sentences). Corpora built on
    /// either device are interchangeable (f32 on both).
    #[arg(long, default_value = "cpu", value_name = "DEVICE", value_parser = parse_device)]
    pub device: EncoderDevice,
    /// Keep the sentence-embedding cache in this folder across runs (one file per
    /// model weights and precision, the one `sdr embed --cache-dir` uses): sentences
    /// embedded by an earlier command are read back instead of embedded again. Loaded
    /// at start (a damaged file or one of another encoder is ignored, with a notice),
    /// written atomically when the command ends.
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
}

/// clap's parser for `--device`, with the encoder's own message on bad input.
pub fn parse_device(s: &str) -> std::result::Result<EncoderDevice, String> {
    let device: EncoderDevice = s.parse().map_err(|e| format!("{e}"))?;
    if !device.compiled_in() {
        return Err(format!(
            "{device}: this `sdr` has no CUDA back-end; build one with \
             `bash scripts/build-sdr.sh --cuda`"
        ));
    }
    Ok(device)
}

impl EncoderArgs {
    pub fn load(&self) -> Result<Box<dyn SentenceEncoder>> {
        let options = EncoderOptions {
            device: self.device,
            batch_size: self.device.default_batch_size(),
            ..Default::default()
        };
        let hint = |e: &dyn std::fmt::Display| {
            anyhow!("{e} (run scripts/fetch-model.sh, or pass --model DIR)")
        };
        match (&self.cache_dir, self.encoder.as_str()) {
            (Some(dir), "mpnet") => {
                let model =
                    sdr_embed::resolve_model_dir(self.model.as_deref()).map_err(|e| hint(&e))?;
                let encoder = Encoder::load(&model, options).map_err(|e| hint(&e))?;
                Ok(Box::new(CachedEncoder::open(encoder, dir)?))
            }
            _ => sdr_corpus::load_encoder(&self.encoder, self.model.as_deref(), options)
                .map_err(|e| hint(&e)),
        }
    }
}

/// The cache file of `encoder` in `dir`: model name, weights hash and precision, so
/// that a file is only ever read by the encoder that wrote it.
pub fn cache_file(encoder: &Encoder, dir: &Path) -> Result<PathBuf> {
    let hash = encoder.weights_sha256()?;
    Ok(dir.join(format!(
        "{}-{}-{:?}.sdrc",
        encoder.name(),
        &hash[..16],
        encoder.precision()
    )))
}

/// Fills `encoder`'s sentence cache from `file` when there is one; a damaged file or
/// one of another encoder costs only time, with a notice naming it.
pub fn load_cache(encoder: &Encoder, file: &Path, who: &str) {
    if let (true, Some(cache)) = (file.is_file(), encoder.cache()) {
        if let Err(e) = cache.load(file) {
            eprintln!("{who}: {e}; starting with an empty sentence cache");
        }
    }
}

/// An encoder whose sentence cache is read from a file at start and written back
/// (atomically, only if it changed) when it is dropped, at the end of the command.
struct CachedEncoder {
    encoder: Encoder,
    file: PathBuf,
}

impl CachedEncoder {
    fn open(encoder: Encoder, dir: &Path) -> Result<Self> {
        let file =
            cache_file(&encoder, dir).with_context(|| format!("--cache-dir {}", dir.display()))?;
        load_cache(&encoder, &file, "sdr");
        Ok(Self { encoder, file })
    }
}

impl Drop for CachedEncoder {
    fn drop(&mut self) {
        if let Some(cache) = self.encoder.cache().filter(|c| c.is_dirty()) {
            if let Err(e) = cache.save(&self.file) {
                eprintln!("sdr: could not save the sentence cache: {e}");
            }
        }
    }
}

impl SentenceEncoder for CachedEncoder {
    fn name(&self) -> String {
        SentenceEncoder::name(&self.encoder)
    }
    fn weights_sha256(&self) -> sdr_embed::Result<String> {
        SentenceEncoder::weights_sha256(&self.encoder)
    }
    fn dim(&self) -> usize {
        SentenceEncoder::dim(&self.encoder)
    }
    fn embed(&self, texts: &[&str]) -> sdr_embed::Result<Vec<f32>> {
        SentenceEncoder::embed(&self.encoder, texts)
    }
    fn identity(&self) -> sdr_embed::Result<String> {
        SentenceEncoder::identity(&self.encoder)
    }
}
