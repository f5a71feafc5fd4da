//! Helpers shared by the commands that score texts against references
//! (`sdr eval`, `sdr score`): BERTScore over all-mpnet-base-v2 token embeddings,
//! and loading the optional BERTScore encoder and WordNet.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{anyhow, Result};
use sdr_eval::bertscore::{bert_score_pair, BertScore, TokenEmbeddings, MPNET_SPECIAL_IDS};
use sdr_eval::wordnet::WordNet;

/// BERTScore (no idf, no rescaling) of every `(hypothesis, reference)` pair.
/// Each distinct string is encoded once, in length-sorted batches. A pair
/// with an empty (whitespace-only) side scores 0.
pub fn bertscore_pairs(pairs: &[(&str, &str)], enc: &sdr_embed::Encoder) -> Result<Vec<BertScore>> {
    let mut uniq: Vec<&str> = pairs
        .iter()
        .flat_map(|&(h, r)| [h, r])
        .filter(|s| !s.trim().is_empty())
        .collect();
    uniq.sort_unstable();
    uniq.dedup();
    let toks = enc.embed_tokens(&uniq)?;
    let emb: HashMap<&str, TokenEmbeddings> = uniq
        .iter()
        .zip(toks)
        .map(|(s, t)| {
            (
                *s,
                TokenEmbeddings::with_special_ids(t.ids, t.vectors, t.dim, &MPNET_SPECIAL_IDS),
            )
        })
        .collect();
    pairs
        .iter()
        .map(|(h, r)| match (emb.get(h), emb.get(r)) {
            (Some(he), Some(re)) => Ok(bert_score_pair(he, re, None)?),
            _ => Ok(BertScore::default()),
        })
        .collect()
}

/// The BERTScore encoder unless `skip`; the error says how to get the model.
pub fn load_bertscore_encoder(
    model: Option<&Path>,
    skip: bool,
) -> Result<Option<sdr_embed::Encoder>> {
    if skip {
        return Ok(None);
    }
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
    match dir.map(Path::to_path_buf).or_else(WordNet::default_dir) {
        Some(d) => Ok(Some(WordNet::load(&d).map_err(|e| anyhow!("{e}"))?)),
        None => Ok(None),
    }
}
