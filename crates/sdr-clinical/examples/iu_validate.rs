//! Validates the labeler against IU X-ray's MeSH coding: prints the table and
//! writes it into `docs/results/labeler.md` (between its markers).
//!
//! ```sh
//! cargo run --release -p sdr-clinical --example iu_validate
//! cargo run --release -p sdr-clinical --example iu_validate -- --show "Pleural Effusion" --no-write
//! ```
//!
//! Options: `--show NAME` prints that observation's disagreements (all, or
//! `--limit N`), `--uncertain-negative` counts uncertain as absent,
//! `--no-write` leaves the Markdown file alone, `--csv PATH` reads another
//! copy of `indiana_reports.csv`.

use std::path::PathBuf;
use std::process::ExitCode;

use sdr_clinical::iu::{validate, MeshMap, Study, IU_MACRO_F1_GOAL, IU_MIN_SUPPORT};
use sdr_clinical::{Labeler, Observation, UncertainPolicy};

const BEGIN: &str = "<!-- iu_validate:begin -->";
const END: &str = "<!-- iu_validate:end -->";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read_studies(path: &PathBuf) -> Result<Vec<Study>, String> {
    let mut rdr = csv::Reader::from_path(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let headers = rdr.headers().map_err(|e| e.to_string())?.clone();
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| format!("{}: no `{name}` column", path.display()))
    };
    let (uid, mesh, f, i) = (
        col("uid")?,
        col("MeSH")?,
        col("findings")?,
        col("impression")?,
    );
    rdr.records()
        .map(|r| {
            let r = r.map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(Study {
                uid: r[uid].to_string(),
                mesh: r[mesh].to_string(),
                findings: r[f].to_string(),
                impression: r[i].to_string(),
            })
        })
        .collect()
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut show: Option<Observation> = None;
    let mut limit = usize::MAX;
    let mut write = true;
    let mut policy = UncertainPolicy::Positive;
    let mut csv_path = root().join("data/iu-xray/indiana_reports.csv");
    while let Some(a) = args.next() {
        match a.as_str() {
            "--show" => {
                let name = args.next().unwrap_or_default();
                match Observation::from_name(&name) {
                    Some(o) => show = Some(o),
                    None => {
                        eprintln!("iu_validate: unknown observation `{name}`");
                        return ExitCode::FAILURE;
                    }
                }
            }
            "--limit" => {
                limit = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(usize::MAX)
            }
            "--no-write" => write = false,
            "--uncertain-negative" => policy = UncertainPolicy::Negative,
            "--csv" => csv_path = PathBuf::from(args.next().unwrap_or_default()),
            other => {
                eprintln!("iu_validate: unknown argument `{other}` (see the file's doc comment)");
                return ExitCode::FAILURE;
            }
        }
    }
    let studies = match read_studies(&csv_path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("iu_validate: {e}");
            return ExitCode::FAILURE;
        }
    };
    let v = validate(
        &Labeler::default(),
        &MeshMap::default(),
        &studies,
        IU_MIN_SUPPORT,
        policy,
    );
    if let Some(o) = show {
        for d in v
            .disagreements
            .iter()
            .filter(|d| d.observation == o)
            .take(limit)
        {
            let kind = if d.reference_positive { "FN" } else { "FP" };
            let label = d
                .labeler
                .map_or("null".to_string(), |l| l.code().to_string());
            println!(
                "{kind} uid={} labeler={label}\n    {}",
                d.uid,
                d.text.replace('\n', " | ")
            );
        }
        println!();
    }
    let md = v.markdown();
    print!("{md}");
    println!(
        "\nmacro F1 over observations with >= {IU_MIN_SUPPORT} positives: {:.4} (goal {IU_MACRO_F1_GOAL})",
        v.macro_supported.f1
    );
    if write && policy == UncertainPolicy::Positive {
        let path = root().join("docs/results/labeler.md");
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        let block = format!("{BEGIN}\n{md}{END}");
        let new = match (old.find(BEGIN), old.find(END)) {
            (Some(a), Some(b)) if a < b => format!("{}{block}{}", &old[..a], &old[b + END.len()..]),
            _ => format!("# CheXpert-rule labeler on IU X-ray\n\n{block}\n"),
        };
        if let Err(e) = std::fs::write(&path, new) {
            eprintln!("iu_validate: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", path.display());
    }
    ExitCode::SUCCESS
}
