//! Helpers shared by the sdr-corpus integration tests.
#![allow(dead_code)]

use sdr_corpus::rng::SplitMix64;
use sdr_corpus::{build_corpus, BuildInfo, CorpusData, HashEncoder, Source, SourceReport};

/// Words radiology sentences are made of, for random reports.
pub const WORDS: &[&str] = &[
    "heart",
    "size",
    "normal",
    "lungs",
    "clear",
    "no",
    "pleural",
    "effusion",
    "pneumothorax",
    "focal",
    "consolidation",
    "mild",
    "cardiomegaly",
    "atelectasis",
    "left",
    "right",
    "lower",
    "lobe",
    "granuloma",
    "calcified",
    "degenerative",
    "spine",
    "changes",
    "stable",
    "opacity",
    "acute",
    "disease",
    "edema",
    "hiatal",
    "hernia",
];

pub fn random_sentence(rng: &mut SplitMix64) -> String {
    let n = 2 + rng.below(5) as usize;
    let words: Vec<&str> = (0..n)
        .map(|_| WORDS[rng.below(WORDS.len() as u64) as usize])
        .collect();
    let mut s = words.join(" ");
    s.push('.');
    s[..1].to_uppercase() + &s[1..]
}

/// A random report; with `pool`, sentences are drawn from it (so they repeat).
pub fn random_report(
    rng: &mut SplitMix64,
    id: usize,
    pool: &[String],
    missing: bool,
) -> SourceReport {
    let section = |rng: &mut SplitMix64, max: u64| -> Vec<String> {
        let n = 1 + rng.below(max) as usize;
        (0..n)
            .map(|_| {
                if pool.is_empty() {
                    random_sentence(rng)
                } else {
                    pool[rng.below(pool.len() as u64) as usize].clone()
                }
            })
            .collect()
    };
    let mut findings = section(rng, 6);
    let mut impression = section(rng, 3);
    if missing {
        match rng.below(3) {
            0 => findings.clear(),
            1 => impression.clear(),
            _ => {}
        }
    }
    SourceReport {
        id: format!("r{id}"),
        findings,
        impression,
    }
}

pub fn source_of(reports: Vec<SourceReport>) -> Source {
    Source {
        name: "test".into(),
        sha256: "0".repeat(64),
        records: reports.len(),
        dropped_empty: 0,
        reports,
    }
}

pub fn build(reports: Vec<SourceReport>, dim: usize) -> CorpusData {
    build_corpus(
        &source_of(reports),
        &HashEncoder::new(dim),
        &BuildInfo {
            source_format: "test".into(),
            split: "all".into(),
            sample: None,
            seed: 0,
        },
        None,
    )
    .expect("build")
}

/// A corpus of `n` random reports over a pool of `pool` sentences.
pub fn random_corpus(n: usize, pool: usize, dim: usize, seed: u64) -> CorpusData {
    let mut rng = SplitMix64::new(seed);
    let sentences: Vec<String> = (0..pool).map(|_| random_sentence(&mut rng)).collect();
    let reports = (0..n)
        .map(|t| random_report(&mut rng, t, &sentences, true))
        .collect();
    build(reports, dim)
}
