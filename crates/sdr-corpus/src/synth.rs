//! Synthetic corpora made by resampling a real one, for scale tests and
//! benchmarks (e.g. 200,000 reports from IU X-ray sentences, the size of the
//! MIMIC-CXR training set).
//!
//! Each synthetic report draws, per section, a length from the base corpus's
//! empirical section lengths and that many sentences from the base corpus's
//! sentence occurrences in that section (so frequent sentences stay frequent),
//! with [`crate::rng::SplitMix64`]. The embedding table is the base table:
//! no new text is invented, and no encoder is needed.

use crate::rng::SplitMix64;
use crate::store::{CorpusData, CorpusMeta, Section};

/// `n` reports resampled from `base` with `seed`.
pub fn resample(base: &CorpusData, n: usize, seed: u64) -> CorpusData {
    let view = base.view();
    let mut rng = SplitMix64::new(seed);
    let mut offs = [vec![0i64], vec![0i64]];
    let mut idxs: [Vec<u32>; 2] = [Vec::new(), Vec::new()];
    let pools: Vec<(Vec<usize>, &[u32])> = Section::BOTH
        .iter()
        .map(|&s| {
            let idx = view.section(s);
            let lens = (0..idx.n_reports()).map(|t| idx.rows(t).len()).collect();
            (lens, idx.indices)
        })
        .collect();
    for _ in 0..n {
        for k in 0..2 {
            let (lens, occ) = &pools[k];
            let len = if lens.is_empty() || occ.is_empty() {
                0
            } else {
                lens[rng.below(lens.len() as u64) as usize]
            };
            for _ in 0..len {
                idxs[k].push(occ[rng.below(occ.len() as u64) as usize]);
            }
            offs[k].push(idxs[k].len() as i64);
        }
    }
    let [fo, io] = offs;
    let [fi, ii] = idxs;
    CorpusData {
        meta: CorpusMeta {
            source: format!("synthetic:{}", base.meta.source),
            source_format: "synthetic".into(),
            sample: n.to_string(),
            seed,
            ..base.meta.clone()
        },
        embeddings: base.embeddings.clone(),
        sentences: base.sentences.clone(),
        ids: (0..n).map(|t| format!("synth-{t}")).collect(),
        findings_offsets: fo,
        findings_indices: fi,
        impression_offsets: io,
        impression_indices: ii,
    }
}
