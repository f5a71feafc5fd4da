//! Building a corpus: distinct sentence texts, their embeddings, and each
//! report's rows for both sections.

use std::collections::HashMap;

use indicatif::ProgressBar;
use sdr_core::report::SEGMENTER_VERSION;

use crate::encoder::SentenceEncoder;
use crate::error::{CorpusError, Result};
use crate::source::Source;
use crate::store::{CorpusData, CorpusMeta};

/// Sentences sent to the encoder per call (it batches by length inside).
pub const EMBED_CHUNK: usize = 512;

/// What [`build_corpus`] records besides the reports themselves.
#[derive(Debug, Clone)]
pub struct BuildInfo {
    pub source_format: String,
    pub split: String,
    pub sample: Option<usize>,
    pub seed: u64,
}

/// Embeds the distinct sentences of `source` and lays the reports out as a
/// [`CorpusData`]. `progress`, when given, is advanced by one per distinct
/// sentence embedded (its length is set here).
pub fn build_corpus(
    source: &Source,
    encoder: &dyn SentenceEncoder,
    info: &BuildInfo,
    progress: Option<&ProgressBar>,
) -> Result<CorpusData> {
    let mut table: HashMap<&str, u32> = HashMap::new();
    let mut sentences: Vec<&str> = Vec::new();
    let mut f_off = vec![0i64];
    let mut f_idx = Vec::new();
    let mut i_off = vec![0i64];
    let mut i_idx = Vec::new();
    for r in &source.reports {
        for (sents, off, idx) in [
            (&r.findings, &mut f_off, &mut f_idx),
            (&r.impression, &mut i_off, &mut i_idx),
        ] {
            for s in sents {
                let id = *table.entry(s.as_str()).or_insert_with(|| {
                    sentences.push(s.as_str());
                    (sentences.len() - 1) as u32
                });
                idx.push(id);
            }
            off.push(idx.len() as i64);
        }
    }
    let dim = encoder.dim();
    if let Some(pb) = progress {
        pb.set_length(sentences.len() as u64);
    }
    let mut embeddings = Vec::with_capacity(sentences.len() * dim);
    for chunk in sentences.chunks(EMBED_CHUNK) {
        let e = encoder.embed(chunk)?;
        if e.len() != chunk.len() * dim {
            return Err(CorpusError::EncoderShape {
                encoder: encoder.name(),
                texts: chunk.len(),
                dim,
                got: e.len(),
            });
        }
        for (k, row) in e.chunks_exact(dim).enumerate() {
            if row.iter().any(|x| !x.is_finite()) || row.iter().all(|&x| x == 0.0) {
                return Err(CorpusError::BadVector {
                    what: format!("sentence `{}`", chunk[k]),
                    index: k,
                    fault: "non-finite or zero",
                });
            }
        }
        embeddings.extend_from_slice(&e);
        if let Some(pb) = progress {
            pb.inc(chunk.len() as u64);
        }
    }
    Ok(CorpusData {
        meta: CorpusMeta {
            encoder: encoder.name(),
            encoder_sha256: encoder.weights_sha256()?,
            dim,
            segmenter_version: SEGMENTER_VERSION.to_string(),
            source: source.name.clone(),
            source_format: info.source_format.clone(),
            source_sha256: source.sha256.clone(),
            split: info.split.clone(),
            sample: info
                .sample
                .map(|n| n.to_string())
                .unwrap_or_else(|| "all".into()),
            seed: info.seed,
        },
        embeddings,
        sentences: sentences.iter().map(|s| s.to_string()).collect(),
        ids: source.reports.iter().map(|r| r.id.clone()).collect(),
        findings_offsets: f_off,
        findings_indices: f_idx,
        impression_offsets: i_off,
        impression_indices: i_idx,
    })
}
