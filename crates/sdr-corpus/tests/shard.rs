//! Sharded builds: N shards merged equal one build; merge refuses missing,
//! duplicate, foreign and non-shard files with one line naming the file.

mod common;

use std::path::{Path, PathBuf};

use common::{random_report, random_sentence, source_of};
use sdr_corpus::rng::SplitMix64;
use sdr_corpus::{
    build_corpus, merge_files, shard_source, BuildInfo, Corpus, CorpusData, HashEncoder, ShardSpec,
    Source,
};

fn info() -> BuildInfo {
    BuildInfo {
        source_format: "test".into(),
        split: "all".into(),
        sample: None,
        seed: 0,
    }
}

fn source(n: usize, seed: u64) -> Source {
    let mut rng = SplitMix64::new(seed);
    let pool: Vec<String> = (0..40).map(|_| random_sentence(&mut rng)).collect();
    source_of(
        (0..n)
            .map(|t| random_report(&mut rng, t, &pool, true))
            .collect(),
    )
}

fn build(src: &Source, dim: usize) -> CorpusData {
    build_corpus(src, &HashEncoder::new(dim), &info(), None).unwrap()
}

/// Writes shard `i` of `n` of `src` to `dir/part-i.safetensors`.
fn write_shard(dir: &Path, src: &Source, i: usize, n: usize, dim: usize) -> PathBuf {
    let (part, shard) = shard_source(src, ShardSpec { index: i, count: n }).unwrap();
    let p = dir.join(format!("part-{i}.safetensors"));
    build(&part, dim).write_shard(&p, &shard).unwrap();
    p
}

fn header_meta(p: &Path) -> serde_json::Map<String, serde_json::Value> {
    let bytes = std::fs::read(p).unwrap();
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let v: serde_json::Value = serde_json::from_slice(&bytes[8..8 + len]).unwrap();
    v["__metadata__"].as_object().unwrap().clone()
}

fn assert_same(a: &Corpus, b: &Corpus) {
    assert_eq!(a.meta(), b.meta());
    assert_eq!(a.n_reports(), b.n_reports());
    assert_eq!(a.n_sentences(), b.n_sentences());
    let (va, vb) = (a.view(), b.view());
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(va.embeddings), bits(vb.embeddings));
    assert_eq!(va.findings.offsets, vb.findings.offsets);
    assert_eq!(va.findings.indices, vb.findings.indices);
    assert_eq!(va.impression.offsets, vb.impression.offsets);
    assert_eq!(va.impression.indices, vb.impression.indices);
    for t in 0..a.n_reports() {
        assert_eq!(a.id(t), b.id(t));
    }
    for s in 0..a.n_sentences() {
        assert_eq!(a.sentence(s), b.sentence(s));
    }
    assert!(b.shard().is_none());
    // The whole header metadata, content checksum included, is the same.
    assert_eq!(header_meta(a.path()), header_meta(b.path()));
}

#[test]
fn shards_merged_equal_a_single_build() {
    let dir = tempfile::tempdir().unwrap();
    for (n, count) in [(50usize, 3usize), (7, 7), (10, 1), (31, 4)] {
        let src = source(n, n as u64);
        let single = dir.path().join(format!("single-{n}.safetensors"));
        build(&src, 16).write(&single).unwrap();
        // Given in reverse order: merge orders them by shard index.
        let parts: Vec<PathBuf> = (0..count)
            .rev()
            .map(|i| write_shard(dir.path(), &src, i, count, 16))
            .collect();
        let merged = dir.path().join(format!("merged-{n}.safetensors"));
        merge_files(&parts, None).unwrap().write(&merged).unwrap();
        assert_same(
            &Corpus::open(&single).unwrap(),
            &Corpus::open(&merged).unwrap(),
        );
        // A shard is itself a valid corpus of its reports.
        let p0 = Corpus::open(&parts[count - 1]).unwrap();
        assert_eq!(p0.shard().unwrap().index, 0);
        assert_eq!(p0.n_reports(), n / count);
    }
}

fn merge_err(parts: &[PathBuf]) -> String {
    let e = merge_files(parts, None).unwrap_err().to_string();
    assert!(!e.contains('\n'), "{e}");
    e
}

#[test]
fn merge_refuses_missing_duplicate_and_foreign_shards() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let src = source(30, 1);
    let parts: Vec<PathBuf> = (0..3).map(|i| write_shard(d, &src, i, 3, 16)).collect();

    let e = merge_err(&parts[..2]);
    assert!(e.contains("shards 2/3 missing"), "{e}");

    let dup = d.join("dup.safetensors");
    std::fs::copy(&parts[1], &dup).unwrap();
    let e = merge_err(&[parts[0].clone(), parts[1].clone(), dup.clone()]);
    assert!(
        e.contains("dup.safetensors") && e.contains("given twice"),
        "{e}"
    );

    // Another encoder.
    let other_dir = d.join("other");
    std::fs::create_dir(&other_dir).unwrap();
    let foreign = write_shard(&other_dir, &src, 2, 3, 8);
    let e = merge_err(&[parts[0].clone(), parts[1].clone(), foreign.clone()]);
    assert!(
        e.contains(&foreign.display().to_string()) && e.contains("encoder"),
        "{e}"
    );

    // Another selection (different reports), same everything else.
    let other_src = source(30, 2);
    let foreign = write_shard(&other_dir, &other_src, 2, 3, 16);
    let e = merge_err(&[parts[0].clone(), parts[1].clone(), foreign.clone()]);
    assert!(e.contains("selection_sha256"), "{e}");

    // Another shard count.
    let foreign = write_shard(&other_dir, &src, 1, 4, 16);
    let e = merge_err(&[parts[0].clone(), foreign.clone()]);
    assert!(e.contains("shard_count"), "{e}");

    // An ordinary corpus is not a shard.
    let single = d.join("single.safetensors");
    build(&src, 16).write(&single).unwrap();
    let e = merge_err(std::slice::from_ref(&single));
    assert!(
        e.contains("single.safetensors") && e.contains("not a shard"),
        "{e}"
    );

    assert!(merge_files(&[], None).is_err());
}

#[test]
fn more_shards_than_reports_is_refused() {
    let src = source(3, 0);
    let e = shard_source(&src, ShardSpec { index: 0, count: 4 })
        .unwrap_err()
        .to_string();
    assert!(e.contains("fewer than 4 shards"), "{e}");
}
