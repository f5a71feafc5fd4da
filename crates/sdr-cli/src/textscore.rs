//! Helpers shared by the commands that score texts against references
//! (`sdr eval`, `sdr score`, `sdr select-eval`): BERTScore over
//! all-mpnet-base-v2 token embeddings, loading the optional BERTScore encoder
//! and WordNet.

use std::path::Path;

use anyhow::{anyhow, Result};
use sdr_eval::bertscore::BertScore;
use sdr_eval::wordnet::WordNet;

/// BERTScore (no idf, no rescaling) of every `(hypothesis, reference)` pair
/// (see [`sdr_eval::report::bertscore_pairs`], which `sdr score` uses too).
pub fn bertscore_pairs(pairs: &[(&str, &str)], enc: &sdr_embed::Encoder) -> Result<Vec<BertScore>> {
    Ok(sdr_eval::report::bertscore_pairs(pairs, enc)?)
}

/// The BERTScore encoder unless `skip`; the error says how to get the model.
pub fn load_bertscore_encoder(
    model: Option<&Path>,
    skip: bool,
) -> Result<Option<sdr_embed::Encoder>> {
    if skip {
        return Ok(None);
    }
    crate::common::encoder::check_model_arg(model)?;
    let dir = sdr_embed::resolve_model_dir(model).map_err(|e| {
        anyhow!("{e} (run scripts/fetch-model.sh, pass --model DIR, or --no-bertscore)")
    })?;
    Ok(Some(sdr_embed::Encoder::load(
        &dir,
        sdr_embed::EncoderOptions::default(),
    )?))
}

/// WordNet for METEOR's synonym stage: `dir`, else the default location
/// (`$SDR_WORDNET_DIR`, `/usr/share/wordnet`); `None` when there is none.
pub fn load_wordnet(dir: Option<&Path>) -> Result<Option<WordNet>> {
    if let Some(d) = dir {
        // The folder the user named: say which option it came from.
        return WordNet::load(d)
            .map(Some)
            .map_err(|e| anyhow!("--wordnet {}: {e}", d.display()));
    }
    match WordNet::default_dir() {
        Some(d) => Ok(Some(WordNet::load(&d).map_err(|e| anyhow!("{e}"))?)),
        None => Ok(None),
    }
}
