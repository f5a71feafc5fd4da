//! Building a corpus: distinct sentence texts, their embeddings, and each
//! report's rows for both sections.

use std::collections::HashMap;

use sdr_core::report::SEGMENTER_VERSION;
use sdr_embed::{EmbedControl, SectionEmbedder};

use crate::error::Result;
use crate::source::Source;
use crate::store::{CorpusData, CorpusMeta};
use sdr_embed::SentenceEncoder;

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

/// Progress of a long library call: told `(done, total)` as work completes (a
/// command draws a bar with it; the library prints nothing).
pub type Progress<'a> = Option<&'a (dyn Fn(usize, usize) + Sync)>;

/// [`build_corpus_with`] through a [`SectionEmbedder`] of its own.
///
/// Deprecated since 0.2.0 (kept for one release, see CHANGELOG.md): use
/// [`build_corpus_with`], which takes the run's embedder.
pub fn build_corpus(
    source: &Source,
    encoder: &dyn SentenceEncoder,
    info: &BuildInfo,
    progress: Progress<'_>,
) -> Result<CorpusData> {
    build_corpus_with(source, &SectionEmbedder::transient(encoder), info, progress)
}

/// Embeds the distinct sentences of `source` through `embedder` ([`EMBED_CHUNK`]
/// new sentences per encoder call) and lays the reports out as a
/// [`CorpusData`]. `progress(done, total)` is told the distinct sentences
/// embedded so far (or found in the embedder's cache) out of all.
pub fn build_corpus_with(
    source: &Source,
    embedder: &SectionEmbedder<'_>,
    info: &BuildInfo,
    progress: Progress<'_>,
) -> Result<CorpusData> {
    let progress = |done: usize, total: usize| {
        if let Some(p) = progress {
            p(done, total);
        }
    };
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
    let encoder = embedder.encoder();
    let dim = encoder.dim();
    let total = sentences.len();
    progress(0, total);
    let done = std::sync::atomic::AtomicUsize::new(0);
    let advance = |n: usize| {
        let d = done.fetch_add(n, std::sync::atomic::Ordering::Relaxed) + n;
        progress(d, total);
    };
    let control = EmbedControl {
        chunk: EMBED_CHUNK,
        stop: None,
        progress: Some(&advance),
    };
    let (embeddings, _) = embedder.embed_texts(&sentences, &control)?;
    progress(total, total);
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
