//! `--encoder` / `--model`: which sentence encoder embeds text.

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use sdr_corpus::{HashEncoder, SentenceEncoder};

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
}

impl EncoderArgs {
    pub fn load(&self) -> Result<Box<dyn SentenceEncoder>> {
        if let Some(dim) = self.encoder.strip_prefix("hash-") {
            let dim: usize = dim.parse().ok().filter(|&d| d > 0).ok_or_else(|| {
                anyhow!(
                    "--encoder {}: expected hash-DIM with DIM >= 1",
                    self.encoder
                )
            })?;
            return Ok(Box::new(HashEncoder::new(dim)));
        }
        if self.encoder != "mpnet" {
            return Err(anyhow!(
                "--encoder {}: expected mpnet or hash-DIM",
                self.encoder
            ));
        }
        let dir = sdr_embed::resolve_model_dir(self.model.as_deref())
            .map_err(|e| anyhow!("{e} (run scripts/fetch-model.sh, or pass --model DIR)"))?;
        let enc = sdr_embed::Encoder::load(&dir, sdr_embed::EncoderOptions::default())
            .map_err(|e| anyhow!("{e}"))?;
        Ok(Box::new(enc))
    }
}
