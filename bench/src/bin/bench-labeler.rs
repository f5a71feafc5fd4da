//! Throughput of the CheXpert-rule labeler (`sdr-clinical`) on one thread.
//!
//! ```text
//! bench-labeler [--csv PATH] [--seconds S] [--json]
//! ```
//!
//! Labels every IU X-ray report that has text (Findings and Impression under
//! plain headers, as `sdr label` would get them; parsing included) over and
//! over on the calling thread for at least S seconds (default 5) after one
//! warm-up pass, and prints reports/s with the machine's load average
//! (`uptime`), since the figure scales with the free cores. `--json` prints
//! one JSON object instead (for `bench/labeler.py`).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use sdr_clinical::{Label, Labeler};

fn load_average() -> String {
    std::process::Command::new("uptime")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| {
            s.split("load average:")
                .nth(1)
                .map(|l| l.trim().to_string())
        })
        .or_else(|| std::fs::read_to_string("/proc/loadavg").ok())
        .unwrap_or_else(|| "unknown".to_string())
}

fn reports(csv_path: &PathBuf) -> Result<Vec<String>> {
    let mut rdr = csv::Reader::from_path(csv_path)
        .with_context(|| format!("cannot read {}", csv_path.display()))?;
    let h = rdr.headers()?.clone();
    let col = |n: &str| {
        h.iter()
            .position(|c| c == n)
            .with_context(|| format!("{}: no `{n}` column", csv_path.display()))
    };
    let (f, i) = (col("findings")?, col("impression")?);
    let mut out = Vec::new();
    for r in rdr.records() {
        let r = r?;
        let (findings, impression) = (r[f].trim(), r[i].trim());
        if !findings.is_empty() || !impression.is_empty() {
            out.push(format!("FINDINGS: {findings}\nIMPRESSION: {impression}"));
        }
    }
    Ok(out)
}

fn main() -> Result<()> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut csv_path = root.join("data/iu-xray/indiana_reports.csv");
    let mut seconds = 5.0f64;
    let mut json = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--csv" => csv_path = PathBuf::from(args.next().context("--csv needs a path")?),
            "--seconds" => {
                seconds = args
                    .next()
                    .context("--seconds needs a value")?
                    .parse()
                    .context("--seconds")?
            }
            "--json" => json = true,
            other => anyhow::bail!("unknown argument `{other}` (see the file's doc comment)"),
        }
    }
    let texts = reports(&csv_path)?;
    let t0 = Instant::now();
    let labeler = Labeler::default();
    let compile_s = t0.elapsed().as_secs_f64();
    // Positive labels, summed so that the work cannot be optimised away.
    let count = |labeler: &Labeler| -> usize {
        texts
            .iter()
            .map(|t| {
                labeler
                    .label(t)
                    .iter()
                    .filter(|(_, l)| *l == Some(Label::Positive))
                    .count()
            })
            .sum()
    };
    let positives = count(&labeler); // warm-up pass
    let start = Instant::now();
    let mut passes = 0usize;
    while passes == 0 || start.elapsed().as_secs_f64() < seconds {
        assert_eq!(count(&labeler), positives);
        passes += 1;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let rate = (passes * texts.len()) as f64 / elapsed;
    let load = load_average();
    if json {
        println!(
            "{}",
            serde_json::json!({
                "reports": texts.len(),
                "passes": passes,
                "seconds": elapsed,
                "reports_per_s": rate,
                "compile_s": compile_s,
                "positive_labels": positives,
                "load_average": load,
            })
        );
    } else {
        println!(
            "labeled {} IU X-ray reports x {passes} passes in {elapsed:.2} s on 1 thread: \
             {rate:.0} reports/s ({:.1} us/report); rules compiled in {:.1} ms; \
             {positives} positive labels per pass; load average: {load}",
            texts.len(),
            1e6 / rate,
            compile_s * 1e3
        );
    }
    Ok(())
}
