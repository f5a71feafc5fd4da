//! Building one corpus on many machines: shards and their merge.
//!
//! A shard is a **contiguous range** of the selected reports (after the split
//! filter and sampling, in source order): shard `i` of `N` holds reports
//! `⌊i·n/N⌋ .. ⌊(i+1)·n/N⌋`. Contiguous ranges (rather than every N-th report)
//! make the merge a concatenation: a sentence's first occurrence in the whole
//! selection is its first occurrence in the first shard that holds it, so
//! appending each shard's sentence table in shard order, skipping texts already
//! seen, rebuilds the single-build table in the same order. Shard sizes differ
//! by at most one report.
//!
//! Every worker reads the whole source (cheap next to embedding), so each shard
//! records a hash of the whole selection ([`selection_sha256`]: ids and
//! sentences of every selected report). Merge refuses shards that disagree on
//! it, on the encoder, the segmenter or the settings, that overlap, or that do
//! not cover the selection.
//!
//! The merged file equals a single `sdr corpus build` of the same selection:
//! same reports in the same order, same sentence table, same vectors bit for
//! bit given an encoder whose vector for a sentence does not depend on the
//! other sentences of its batch ([`crate::HashEncoder`]; all-mpnet-base-v2's
//! padded batches can move the last bits, about 1e-7), and the same metadata,
//! except `source`, the
//! path as the first shard's worker spelled it (workers may mount the data at
//! different paths; `source_sha256` and `selection_sha256` are what is checked).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::build::Progress;
use crate::error::{CorpusError, Result};
use crate::source::Source;
use crate::store::{hex, Corpus, CorpusData, CorpusMeta};

// Their own file, so the corpus header (`store.rs`) reads them without
// importing the merge, which reads corpora.
pub use crate::shard_meta::{ShardInfo, ShardSpec};

/// sha256 over every selected report's id and the sentences of both sections,
/// in order: equal for two workers only if they selected the same reports and
/// segmented them the same way (same source, columns, split, sample, seed,
/// segmenter).
pub fn selection_sha256(source: &Source) -> String {
    let mut h = Sha256::new();
    let mut put = |s: &str| {
        h.update((s.len() as u64).to_le_bytes());
        h.update(s.as_bytes());
    };
    for r in &source.reports {
        put(&r.id);
        for sec in [&r.findings, &r.impression] {
            put(&sec.len().to_string());
            for s in sec {
                put(s);
            }
        }
    }
    hex(&h.finalize())
}

/// This shard's reports of `source`, and the metadata that places them.
/// Refuses more shards than reports (a shard would be empty).
pub fn shard_source(source: &Source, spec: ShardSpec) -> Result<(Source, ShardInfo)> {
    let n = source.reports.len();
    if spec.count > n {
        return Err(CorpusError::InvalidOption {
            name: "shard",
            value: spec.to_string(),
            reason: format!(
                "{} selects {n} reports, fewer than {} shards",
                source.name, spec.count
            ),
        });
    }
    let range = spec.range(n);
    let info = ShardInfo {
        index: spec.index,
        count: spec.count,
        first: range.start,
        total: n,
        selection_sha256: selection_sha256(source),
    };
    let part = Source {
        name: source.name.clone(),
        sha256: source.sha256.clone(),
        reports: source.reports[range].to_vec(),
        records: source.records,
        dropped_empty: source.dropped_empty,
    };
    Ok((part, info))
}

/// The settings every shard of one build must share, with their names.
fn settings(meta: &CorpusMeta, shard: &ShardInfo) -> [(&'static str, String); 12] {
    [
        ("encoder", meta.encoder.clone()),
        ("encoder_sha256", meta.encoder_sha256.clone()),
        ("dim", meta.dim.to_string()),
        ("segmenter_version", meta.segmenter_version.clone()),
        ("source_format", meta.source_format.clone()),
        ("source_sha256", meta.source_sha256.clone()),
        ("split", meta.split.clone()),
        ("sample", meta.sample.clone()),
        ("seed", meta.seed.to_string()),
        ("shard_count", shard.count.to_string()),
        ("shard_total", shard.total.to_string()),
        ("selection_sha256", shard.selection_sha256.clone()),
    ]
}

/// Checks that `parts` are the complete, disjoint shards of one build and
/// concatenates them, in shard order, into the corpus a single build would
/// have written. `parts` may come in any order. `progress`, when given, is
/// told `(shards merged, shards)`.
pub fn merge_corpora(parts: &[Corpus], progress: Progress<'_>) -> Result<CorpusData> {
    let first = parts.first().ok_or_else(|| CorpusError::InvalidOption {
        name: "parts",
        value: String::new(),
        reason: "no shard files to merge".into(),
    })?;
    let mut by_index: Vec<Option<&Corpus>> = Vec::new();
    let mut reference: Option<(&Path, [(&'static str, String); 12])> = None;
    for c in parts {
        let shard = c.shard().ok_or_else(|| {
            CorpusError::bad(
                c.path(),
                "not a shard (no shard metadata); merge takes the files of `sdr corpus build --shard I/N`",
            )
        })?;
        let mine = settings(c.meta(), shard);
        match &reference {
            None => reference = Some((c.path(), mine)),
            Some((ref_path, theirs)) => {
                if let Some(((what, found), (_, expected))) =
                    mine.iter().zip(theirs.iter()).find(|(a, b)| a.1 != b.1)
                {
                    return Err(CorpusError::ShardMismatch {
                        path: c.path().to_path_buf(),
                        what,
                        found: found.clone(),
                        expected: expected.clone(),
                        other: ref_path.to_path_buf(),
                    });
                }
            }
        }
        if by_index.is_empty() {
            by_index = vec![None; shard.count];
        }
        if let Some(other) = by_index[shard.index] {
            return Err(CorpusError::bad(
                c.path(),
                format!(
                    "shard {} is given twice (also {})",
                    shard.spec(),
                    other.path().display()
                ),
            ));
        }
        let want = shard.spec().range(shard.total);
        if shard.first != want.start || c.n_reports() != want.len() {
            return Err(CorpusError::bad(
                c.path(),
                format!(
                    "shard {} holds reports {}..{} of {}, expected {}..{}",
                    shard.spec(),
                    shard.first,
                    shard.first + c.n_reports(),
                    shard.total,
                    want.start,
                    want.end
                ),
            ));
        }
        by_index[shard.index] = Some(c);
    }
    let missing: Vec<String> = by_index
        .iter()
        .enumerate()
        .filter(|(_, c)| c.is_none())
        .map(|(i, _)| format!("{i}/{}", by_index.len()))
        .collect();
    if !missing.is_empty() {
        let given: Vec<String> = parts
            .iter()
            .map(|c| c.path().display().to_string())
            .collect();
        return Err(CorpusError::MissingShards {
            missing: missing.join(", "),
            given: given.join(", "),
        });
    }
    let ordered: Vec<&Corpus> = by_index.into_iter().flatten().collect();
    let head = ordered[0];
    let dim = head.meta().dim;
    let mut table: HashMap<String, u32> = HashMap::new();
    let mut out = CorpusData {
        meta: head.meta().clone(),
        embeddings: Vec::new(),
        sentences: Vec::new(),
        ids: Vec::new(),
        findings_offsets: vec![0],
        findings_indices: Vec::new(),
        impression_offsets: vec![0],
        impression_indices: Vec::new(),
    };
    let total = ordered.len();
    if let Some(p) = progress {
        p(0, total);
    }
    for (done, c) in ordered.into_iter().enumerate() {
        let v = c.view();
        // Local sentence id -> merged id, in the shard's table order.
        let remap: Vec<u32> = (0..c.n_sentences())
            .map(|s| {
                let text = c.sentence(s);
                if let Some(&id) = table.get(text) {
                    return id;
                }
                let id = out.sentences.len() as u32;
                table.insert(text.to_string(), id);
                out.sentences.push(text.to_string());
                out.embeddings
                    .extend_from_slice(&v.embeddings[s * dim..(s + 1) * dim]);
                id
            })
            .collect();
        for t in 0..c.n_reports() {
            out.ids.push(c.id(t).to_string());
        }
        for (sec, offs, idx) in [
            (
                v.findings,
                &mut out.findings_offsets,
                &mut out.findings_indices,
            ),
            (
                v.impression,
                &mut out.impression_offsets,
                &mut out.impression_indices,
            ),
        ] {
            for t in 0..sec.n_reports() {
                idx.extend(sec.rows(t).iter().map(|&s| remap[s as usize]));
                offs.push(idx.len() as i64);
            }
        }
        if let Some(p) = progress {
            p(done + 1, total);
        }
    }
    if out.sentences.len() > u32::MAX as usize {
        return Err(CorpusError::bad(
            first.path(),
            "merged corpus would hold more than 2^32 distinct sentences",
        ));
    }
    Ok(out)
}

/// Opens every shard file (validating each) and merges them; see [`merge_corpora`].
pub fn merge_files(paths: &[PathBuf], progress: Progress<'_>) -> Result<CorpusData> {
    let parts = paths
        .iter()
        .map(|p| Corpus::open(p))
        .collect::<Result<Vec<_>>>()?;
    merge_corpora(&parts, progress)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_ranges_tile() {
        let s: ShardSpec = "1/3".parse().unwrap();
        assert_eq!((s.index, s.count), (1, 3));
        for bad in ["3/3", "1", "a/3", "1/0", "-1/3", "1/b"] {
            assert!(bad.parse::<ShardSpec>().is_err(), "{bad}");
        }
        for n in [3usize, 7, 10, 101] {
            for count in 1..=n.min(9) {
                let mut next = 0;
                for index in 0..count {
                    let r = ShardSpec { index, count }.range(n);
                    assert_eq!(r.start, next);
                    assert!(r.len() == n / count || r.len() == n / count + 1);
                    next = r.end;
                }
                assert_eq!(next, n);
            }
        }
    }
}
