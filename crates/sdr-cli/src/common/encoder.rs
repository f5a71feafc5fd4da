//! `--encoder` / `--model`: which sentence encoder embeds text.

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use sdr_corpus::SentenceEncoder;

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
        sdr_corpus::load_encoder(
            &self.encoder,
            self.model.as_deref(),
            sdr_embed::EncoderOptions::default(),
        )
        .map_err(|e| anyhow!("{e} (run scripts/fetch-model.sh, or pass --model DIR)"))
    }
}
