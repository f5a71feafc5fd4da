//! How IU X-ray's own Impressions read against their Findings under the
//! Findings-consistency check (SPEC §10a): per finding, how often an
//! Impression names a finding its Findings state (present or hedged), which
//! is the finding's expectation `e(o)`, and the check's terms over the
//! radiologists' Impressions (the numbers behind the defaults).
//!
//! ```sh
//! cargo run --release -p sdr-clinical --example findings_consistency -- \
//!     [train|validation|test|all] [--write data/clinical/impression_expectation.json] [--csv CSV]
//! ```
//!
//! `e(o)` = 1 - (studies whose Impression omits `o`) / (studies whose
//! Findings state `o`), an omission as the check counts it with every
//! finding expected (neither `o` nor a related finding stated in the
//! Impression). `SHOW=polarity` (any contradiction kind, `unsupported` or
//! `omitted`) prints those issues one a line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use sdr_clinical::{ClinicalCost, Consistency, ConsistencyWeights, Expectations};
use sdr_core::cost::clinical::Polarity;
use sdr_core::report::split_sentences;

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

#[derive(Default)]
struct Tally {
    studies: usize,
    zero: usize,
    with_c: usize,
    with_u: usize,
    with_o: usize,
    sum: [f64; 4],
}

impl Tally {
    fn add(&mut self, r: &sdr_clinical::ConsistencyReport) {
        self.studies += 1;
        self.zero += (r.score == 0.0) as usize;
        self.with_c += !r.contradictions.is_empty() as usize;
        self.with_u += !r.unsupported_findings.is_empty() as usize;
        self.with_o += !r.omissions.is_empty() as usize;
        for (s, v) in self
            .sum
            .iter_mut()
            .zip([r.score, r.contradiction, r.unsupported, r.omission])
        {
            *s += v;
        }
    }

    fn print(&self, what: &str) {
        let n = self.studies.max(1) as f64;
        let pct = |a: usize| 100.0 * a as f64 / n;
        println!(
            "{what}: score 0 in {:.1} %; a contradiction in {:.1} %, an unsupported finding in {:.1} %, an omission in {:.1} %; \
             means: score {:.3}, contradictions {:.3}, unsupported {:.3}, omissions {:.3}",
            pct(self.zero),
            pct(self.with_c),
            pct(self.with_u),
            pct(self.with_o),
            self.sum[0] / n,
            self.sum[1] / n,
            self.sum[2] / n,
            self.sum[3] / n
        );
    }
}

fn run() -> Result<(), String> {
    let mut which = "train".to_string();
    let (mut write, mut csv) = (None, root().join("data/iu-xray/indiana_reports.csv"));
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--write" => write = Some(PathBuf::from(args.next().ok_or("--write FILE")?)),
            "--csv" => csv = PathBuf::from(args.next().ok_or("--csv FILE")?),
            _ => which = a,
        }
    }
    let show = std::env::var("SHOW").ok();
    let mut rdr = csv::Reader::from_path(&csv).map_err(|e| format!("{}: {e}", csv.display()))?;
    let headers = rdr.headers().map_err(|e| e.to_string())?.clone();
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .ok_or(format!("{}: no `{name}` column", csv.display()))
    };
    let (uid_c, f_c, i_c) = (col("uid")?, col("findings")?, col("impression")?);
    let cost = Arc::new(ClinicalCost::default());
    let labeler = cost.labeler();
    let check = Consistency::new(Arc::clone(&cost), ConsistencyWeights::default())?;
    let uniform = Consistency::new(Arc::clone(&cost), ConsistencyWeights::default())?
        .with_expectations(Expectations::uniform(labeler));
    // finding -> (studies whose Findings state it, of which the Impression omits it)
    let mut per: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let (mut tally, mut tally_uniform) = (Tally::default(), Tally::default());
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    let (mut normal_i, mut normal_i_abnormal_f) = (0usize, 0usize);
    for row in rdr.records() {
        let row = row.map_err(|e| e.to_string())?;
        let uid: u64 = row[uid_c].parse().map_err(|e| format!("uid: {e}"))?;
        if which != "all" && split(uid) != which {
            continue;
        }
        let (f, i) = (split_sentences(&row[f_c]), split_sentences(&row[i_c]));
        if f.is_empty() || i.is_empty() {
            continue;
        }
        let fs: Vec<&str> = f.iter().map(String::as_str).collect();
        let is: Vec<&str> = i.iter().map(String::as_str).collect();
        let (ff, fi) = (cost.facts(&fs), cost.facts(&is));
        let mut stated: Vec<u16> = ff
            .iter()
            .flat_map(|s| s.iter())
            .filter(|f| f.polarity != Polarity::Absent)
            .map(|f| f.observation)
            .filter(|&o| (o as usize) < labeler.fact_observations())
            .collect();
        stated.sort_unstable();
        stated.dedup();
        let ru = uniform.check_sentences(&is, &fs);
        for o in &stated {
            let name = labeler.fact_name(*o);
            let e = per.entry(name.to_string()).or_default();
            e.0 += 1;
            e.1 += ru.omissions.iter().any(|x| x.finding == name) as usize;
        }
        let r = check.check_sentences(&is, &fs);
        tally.add(&r);
        tally_uniform.add(&ru);
        for c in &r.contradictions {
            *kinds.entry(c.kind).or_default() += 1;
        }
        let issues = r
            .contradictions
            .iter()
            .chain(&r.unsupported_findings)
            .chain(&r.omissions);
        for x in issues {
            let label = match (&x.impression, &x.findings) {
                (Some(_), None) => "unsupported",
                (None, Some(_)) => "omitted",
                _ => x.kind,
            };
            if show.as_deref() == Some(label) {
                println!(
                    "{uid} {} {}: I {:?} / F {:?}",
                    x.finding,
                    x.weight,
                    x.impression.as_ref().map(|s| (&s.text, &s.fact)),
                    x.findings.as_ref().map(|s| (&s.text, &s.fact))
                );
            }
        }
        if fi.iter().all(|s| s.is_empty()) {
            normal_i += 1;
            normal_i_abnormal_f += !stated.is_empty() as usize;
        }
    }
    let n = tally.studies;
    println!("{which}: {n} studies with Findings and Impression (the radiologists' Impressions)");
    tally.print("bundled expectations");
    tally_uniform.print("every finding expected");
    println!("contradictions by kind: {kinds:?}");
    println!(
        "Impressions naming no finding: {normal_i} ({:.1} %), of which their Findings state one: {normal_i_abnormal_f} ({:.1} %)",
        100.0 * normal_i as f64 / n.max(1) as f64,
        100.0 * normal_i_abnormal_f as f64 / normal_i.max(1) as f64
    );
    println!("\nfinding | Findings state it | Impression omits it | e");
    let mut rows: Vec<_> = per.into_iter().collect();
    rows.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(&b.0)));
    let e = |s: usize, o: usize| ((1.0 - o as f64 / s as f64) * 100.0).round() / 100.0;
    for (name, (s, o)) in &rows {
        println!("{name} | {s} | {o} | {:.2}", e(*s, *o));
    }
    if let Some(path) = write {
        let findings: serde_json::Map<String, serde_json::Value> = rows
            .iter()
            .map(|(name, (s, o))| {
                (
                    name.clone(),
                    serde_json::json!({"expectation": e(*s, *o), "studies": s}),
                )
            })
            .collect();
        let doc = serde_json::json!({
            "comment": [
                "Expectation e(o) of each finding in an Impression whose Findings state it (present or hedged): the share of IU X-ray's radiologists' Impressions that name it or a related finding (docs/SPEC.md section 10a).",
                "An omitted finding costs e(o) (half for a hedged one) in the Findings-consistency check; a finding not listed costs 1.",
                "Written by: cargo run --release -p sdr-clinical --example findings_consistency -- train --write data/clinical/impression_expectation.json"
            ],
            "source": format!("IU X-ray {which} split (uid % 10 >= 2 for train), {n} studies with Findings and Impression; studies = those whose Findings state the finding"),
            "findings": findings,
        });
        let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())? + "\n";
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("findings_consistency: {e}");
            ExitCode::FAILURE
        }
    }
}
