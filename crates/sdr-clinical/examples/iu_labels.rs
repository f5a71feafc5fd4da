//! Writes IU X-ray's human labels, mapped to CheXpert's observations by
//! `data/clinical/iu_mesh_map.json`, one JSON line per study: the supervision
//! and the held-out reference of the judge (`recipes/train_judge.py`).
//!
//! ```sh
//! cargo run --release -p sdr-clinical --example iu_labels -- data/judge/iu_human_labels.jsonl
//! ```
//!
//! Each line is `{"uid", "split", "human", "findings", "impression"}`:
//! `split` is the project's split (`uid % 10`: 0 test, 1 validation, else
//! train), `human` the positive observations (`No Finding` by CheXpert's rule
//! from the others), or null for a study coded `No Indexing`; `findings` and
//! `impression` are the sections' sentences as both labelers read them
//! ([`sdr_clinical::report_sentences`]). Studies without Findings and
//! Impression text are left out.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use sdr_clinical::iu::MeshMap;
use sdr_clinical::{report_sentences, Observation};

fn root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .nth(2)
        .unwrap_or(manifest)
        .to_path_buf()
}

fn split(uid: u64) -> &'static str {
    match uid % 10 {
        0 => "test",
        1 => "validation",
        _ => "train",
    }
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(args.next().ok_or("usage: iu_labels OUT.jsonl [CSV]")?);
    let csv = args.next().map_or_else(
        || root().join("data/iu-xray/indiana_reports.csv"),
        PathBuf::from,
    );
    let mut rdr = csv::Reader::from_path(&csv).map_err(|e| format!("{}: {e}", csv.display()))?;
    let headers = rdr.headers().map_err(|e| e.to_string())?.clone();
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| format!("{}: no `{name}` column", csv.display()))
    };
    let (uid, mesh, f, i) = (
        col("uid")?,
        col("MeSH")?,
        col("findings")?,
        col("impression")?,
    );
    let map = MeshMap::default();
    let mut body = String::new();
    let mut n = 0;
    for r in rdr.records() {
        let r = r.map_err(|e| format!("{}: {e}", csv.display()))?;
        if r[f].trim().is_empty() && r[i].trim().is_empty() {
            continue;
        }
        let id: u64 = r[uid]
            .parse()
            .map_err(|e| format!("{}: uid `{}`: {e}", csv.display(), &r[uid]))?;
        let human = map.reference(&r[mesh]).map(|labels| {
            Observation::ALL
                .into_iter()
                .filter(|&o| labels.is_positive(o, false))
                .map(|o| o.name())
                .collect::<Vec<_>>()
        });
        let findings = report_sentences(&format!("FINDINGS: {}", r[f].trim()));
        let impression = report_sentences(&format!("IMPRESSION: {}", r[i].trim()));
        let line = serde_json::json!({
            "uid": id, "split": split(id), "human": human,
            "findings": findings, "impression": impression,
        });
        body.push_str(&line.to_string());
        body.push('\n');
        n += 1;
    }
    let tmp = out.with_extension("jsonl.tmp");
    std::fs::File::create(&tmp)
        .and_then(|mut w| w.write_all(body.as_bytes()))
        .and_then(|()| std::fs::rename(&tmp, &out))
        .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    eprintln!("iu_labels: {n} studies -> {}", out.display());
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("iu_labels: {e}");
            ExitCode::FAILURE
        }
    }
}
