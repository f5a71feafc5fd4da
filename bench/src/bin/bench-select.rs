//! Rust side of `bench/selection.py`: selection scoring against a corpus file.
//!
//! ```text
//! bench-select all    CORPUS CANDS.bin K REPEATS [LIMIT]  # 45 policies, K candidates
//! bench-select chamfer CORPUS CANDS.bin K REPEATS          # chamfer@min, pruned and not
//! bench-select embed  CANDS.jsonl STUDY OUT.bin [MODEL]    # embed one study's candidates
//! ```
//!
//! `CANDS.bin`: per candidate `u32 nF, u32 nI`, then `nF + nI` rows of `dim`
//! little-endian f32 (Findings rows first). Prints one JSON object: seconds per
//! repeat (all of them, the first included), and the scores of the last run.
//! `LIMIT` keeps only the first LIMIT corpus reports (for the parity check
//! against the Python subset).

use std::path::Path;
use std::time::Instant;

use anyhow::{anyhow, ensure, Context, Result};
use sdr_core::Metric;
use sdr_corpus::store::SectionIndex;
use sdr_corpus::{
    all_policies, embed_candidate_texts, Aggregation, CandidateEmbedding, Corpus, CorpusIndex,
    CorpusView, Policy, ScoreOptions, SectionEmbedder, SentenceEncoder,
};

fn read_cands(path: &str, dim: usize) -> Result<Vec<Option<CandidateEmbedding>>> {
    let raw = std::fs::read(path).with_context(|| format!("reading {path}"))?;
    let mut pos = 0;
    let mut out = Vec::new();
    let u32_at = |p: usize| -> Result<usize> {
        Ok(u32::from_le_bytes(
            raw.get(p..p + 4)
                .ok_or_else(|| anyhow!("truncated"))?
                .try_into()?,
        ) as usize)
    };
    while pos < raw.len() {
        let (nf, ni) = (u32_at(pos)?, u32_at(pos + 4)?);
        pos += 8;
        let take = |n: usize, pos: &mut usize| -> Result<Vec<f32>> {
            let bytes = raw
                .get(*pos..*pos + n * dim * 4)
                .ok_or_else(|| anyhow!("truncated"))?;
            *pos += n * dim * 4;
            Ok(bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().expect("4")))
                .collect())
        };
        let f = take(nf, &mut pos)?;
        let i = take(ni, &mut pos)?;
        out.push(if nf == 0 || ni == 0 {
            None
        } else {
            Some(CandidateEmbedding {
                findings: f,
                impression: i,
            })
        });
    }
    Ok(out)
}

/// The first `limit` reports of a corpus view.
fn first_reports(v: CorpusView<'_>, limit: usize) -> CorpusView<'_> {
    fn cut(s: SectionIndex<'_>, limit: usize) -> SectionIndex<'_> {
        SectionIndex {
            offsets: &s.offsets[..limit + 1],
            indices: &s.indices[..s.offsets[limit] as usize],
        }
    }
    CorpusView {
        dim: v.dim,
        embeddings: v.embeddings,
        findings: cut(v.findings, limit),
        impression: cut(v.impression, limit),
    }
}

fn timed<T>(repeats: usize, mut f: impl FnMut() -> Result<T>) -> Result<(Vec<f64>, T)> {
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..repeats.max(1) {
        let t = Instant::now();
        last = Some(f()?);
        times.push(t.elapsed().as_secs_f64());
    }
    Ok((times, last.expect("at least one run")))
}

fn main() -> Result<()> {
    let a: Vec<String> = std::env::args().collect();
    ensure!(
        a.len() >= 2,
        "usage: see the doc comment of bench/src/bin/bench-select.rs"
    );
    match a[1].as_str() {
        "embed" => {
            ensure!(
                a.len() >= 5,
                "bench-select embed CANDS.jsonl STUDY OUT.bin [MODEL]"
            );
            // The one loader, default options: `mpnet` from MODEL, else
            // `$SDR_MODEL`, else the default cache folder.
            let loaded = sdr_embed::open_encoder(
                "mpnet",
                a.get(5).map(Path::new),
                sdr_embed::EncoderOptions::default(),
            )
            .map_err(|e| anyhow!("{e}"))?;
            if let Some(notice) = &loaded.notice {
                eprintln!("{notice}");
            }
            let model = loaded
                .model
                .ok_or_else(|| anyhow!("the mpnet encoder loaded without its model"))?;
            let enc: &sdr_embed::Encoder = &model;
            let text = std::fs::read_to_string(&a[2])?;
            let line = text
                .lines()
                .find(|l| {
                    serde_json::from_str::<serde_json::Value>(l)
                        .ok()
                        .and_then(|v| v.get("id").map(|x| x.as_str() == Some(a[3].as_str())))
                        .unwrap_or(false)
                })
                .ok_or_else(|| anyhow!("study {} not in {}", a[3], a[2]))?;
            let v: serde_json::Value = serde_json::from_str(line)?;
            let texts: Vec<String> = serde_json::from_value(v["candidates"].clone())?;
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let cands = embed_candidate_texts(&refs, &SectionEmbedder::transient(enc))?;
            let mut out = Vec::new();
            for c in &cands {
                let (f, i) = c
                    .as_ref()
                    .map(|c| (&c.findings[..], &c.impression[..]))
                    .unwrap_or((&[], &[]));
                out.extend((f.len() as u32 / enc.dim() as u32).to_le_bytes());
                out.extend((i.len() as u32 / enc.dim() as u32).to_le_bytes());
                for x in f.iter().chain(i) {
                    out.extend(x.to_le_bytes());
                }
            }
            std::fs::write(&a[4], out)?;
            println!(
                "{}",
                serde_json::json!({"encoder": SentenceEncoder::name(enc), "dim": enc.dim(), "well_formed": cands.iter().map(Option::is_some).collect::<Vec<_>>()})
            );
        }
        mode @ ("all" | "chamfer") => {
            ensure!(
                a.len() >= 6,
                "bench-select {mode} CORPUS CANDS.bin K REPEATS [LIMIT]"
            );
            let t_open = Instant::now();
            let corpus = Corpus::open(Path::new(&a[2]))?;
            let open_s = t_open.elapsed().as_secs_f64();
            let k: usize = a[4].parse()?;
            let repeats: usize = a[5].parse()?;
            let mut cands = read_cands(&a[3], corpus.meta().dim)?;
            cands.truncate(k);
            let full = corpus.view();
            let limit: usize = a
                .get(6)
                .map(|s| s.parse())
                .transpose()?
                .unwrap_or(corpus.n_reports());
            let limit = limit.min(corpus.n_reports());
            let view = first_reports(full, limit);
            let t_index = Instant::now();
            let index = CorpusIndex::new(view)?;
            let index_s = t_index.elapsed().as_secs_f64();
            let threads = rayon::current_num_threads();
            if mode == "all" {
                let policies = all_policies();
                let (times, s) = timed(repeats, || {
                    Ok(index.score(&cands, &policies, ScoreOptions::default())?)
                })?;
                let keys: Vec<String> = policies.iter().map(|p| p.to_string()).collect();
                println!(
                    "{}",
                    serde_json::json!({
                        "threads": threads, "reports": limit, "candidates": cands.len(),
                        "open_s": open_s, "index_s": index_s, "times": times,
                        "distinct_sets": [index.section(sdr_corpus::Section::Findings).len(), index.section(sdr_corpus::Section::Impression).len()],
                        "policies": keys,
                        "total": s.total.iter().map(|r| r.iter().map(|&v| if v.is_finite() { serde_json::json!(v) } else { serde_json::Value::Null }).collect::<Vec<_>>()).collect::<Vec<_>>(),
                    })
                );
            } else {
                let p = [Policy {
                    metric: Metric::Chamfer,
                    agg: Aggregation::Min,
                }];
                let (tp, sp) = timed(repeats, || {
                    Ok(index.score(&cands, &p, ScoreOptions { prune: true })?)
                })?;
                let (tb, sb) = timed(repeats, || {
                    Ok(index.score(&cands, &p, ScoreOptions { prune: false })?)
                })?;
                ensure!(
                    sp.total == sb.total,
                    "pruned and unpruned chamfer@min differ"
                );
                println!(
                    "{}",
                    serde_json::json!({
                        "threads": threads, "reports": limit, "candidates": cands.len(),
                        "open_s": open_s, "index_s": index_s,
                        "distinct_sets": [index.section(sdr_corpus::Section::Findings).len(), index.section(sdr_corpus::Section::Impression).len()],
                        "pruned_times": tp, "unpruned_times": tb,
                        "pruned_evaluated": sp.evaluated, "unpruned_evaluated": sb.evaluated,
                        "total": sp.total[0],
                    })
                );
            }
        }
        other => return Err(anyhow!("unknown mode `{other}` (all, chamfer, embed)")),
    }
    Ok(())
}
