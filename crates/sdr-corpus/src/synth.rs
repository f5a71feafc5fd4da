//! Synthetic corpora made by resampling a real one, for scale tests and
//! benchmarks (e.g. 200,000 reports from IU X-ray sentences, the size of the
//! MIMIC-CXR training set).
//!
//! Each synthetic report draws, per section, a length from the base corpus's
//! empirical section lengths and that many sentences from the base corpus's
//! sentence occurrences in that section (so frequent sentences stay frequent),
//! with [`crate::rng::SplitMix64`]. The embedding table is the base table:
//! no new text is invented, and no encoder is needed.

use crate::error::{CorpusError, Result};
use crate::rng::SplitMix64;
use crate::store::{CorpusData, CorpusMeta, Section};

/// Largest synthetic corpus [`resample_checked`] makes, in estimated bytes
/// of the written file (held about twice in memory while it is written).
pub const MAX_BYTES: u64 = 8 << 30;

/// Expected size in bytes of the file of `n` reports resampled from `base`:
/// per report its two section offsets, its id and id offset, and its
/// expected sentence indices; plus the base's embeddings and sentences.
/// `None` when it overflows `u64`.
pub fn estimated_bytes(base: &CorpusData, n: usize) -> Option<u64> {
    let reports = base.n_reports().max(1) as u64;
    let occurrences = (base.findings_indices.len() + base.impression_indices.len()) as u64;
    let indices = occurrences.checked_mul(4)?.div_ceil(reports);
    // Two i64 section offsets, an i64 id offset, "synth-" and up to 20 digits.
    let per_report = indices.checked_add(8 * 3 + 26)?;
    let fixed = (base.embeddings.len() as u64).checked_mul(4)?.checked_add(
        base.sentences
            .iter()
            .map(|s| s.len() as u64 + 8)
            .sum::<u64>(),
    )?;
    (n as u64).checked_mul(per_report)?.checked_add(fixed)
}

/// [`resample`], refusing an `n` whose corpus would exceed [`MAX_BYTES`]
/// (before allocating anything).
///
/// # Errors
/// [`CorpusError::InvalidOption`] naming `n` and the estimated size.
pub fn resample_checked(base: &CorpusData, n: usize, seed: u64) -> Result<CorpusData> {
    match estimated_bytes(base, n) {
        Some(b) if b <= MAX_BYTES => Ok(resample(base, n, seed)),
        est => Err(CorpusError::InvalidOption {
            name: "n",
            value: n.to_string(),
            reason: format!(
                "a corpus of {n} reports resampled from this one would take {}, over the limit of {} GiB",
                est.map_or_else(
                    || "more than 2^64 bytes".to_string(),
                    |b| format!("about {} GiB", b.div_ceil(1 << 30))
                ),
                MAX_BYTES >> 30
            ),
        }),
    }
}

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
