//! Validates the labeler against IU X-ray's MeSH coding: prints the tables
//! and writes them, under both uncertain-label conventions, to
//! `docs/results/labeler/iu_validation.json`, from which
//! `python3 scripts/results.py` renders `docs/results/labeler.md`'s tables
//! (`crates/sdr-clinical/tests/iu_validation.rs` checks that the committed
//! file equals a fresh run).
//!
//! ```sh
//! cargo run --release -p sdr-clinical --example iu_validate
//! cargo run --release -p sdr-clinical --example iu_validate -- --show "Pleural Effusion" --no-write
//! ```
//!
//! Options: `--show NAME` prints that observation's disagreements under the
//! validation's policy (all, or `--limit N`; add `--uncertain-positive` to
//! see them with uncertain counted as present), `--no-write` leaves the
//! JSON file alone, `--csv PATH` reads another copy of
//! `indiana_reports.csv`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use sdr_clinical::iu::{
    validate, MeshMap, Study, Validation, IU_MACRO_F1_GOAL, IU_MIN_SUPPORT, IU_POLICY,
};
use sdr_clinical::{Labeler, Observation, UncertainPolicy};

/// The result file, relative to the repository root.
const JSON: &str = "docs/results/labeler/iu_validation.json";

fn root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .nth(2)
        .unwrap_or(manifest)
        .to_path_buf()
}

fn read_studies(path: &Path) -> Result<Vec<Study>, String> {
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

struct Opts {
    show: Option<Observation>,
    limit: usize,
    write: bool,
    show_policy: UncertainPolicy,
    csv: PathBuf,
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        show: None,
        limit: usize::MAX,
        write: true,
        show_policy: IU_POLICY,
        csv: root().join("data/iu-xray/indiana_reports.csv"),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--show" => {
                let name = value()?;
                o.show = Some(
                    Observation::from_name(&name).ok_or(format!("unknown observation `{name}`"))?,
                );
            }
            "--limit" => o.limit = value()?.parse().map_err(|e| format!("--limit: {e}"))?,
            "--no-write" => o.write = false,
            "--uncertain-positive" => o.show_policy = UncertainPolicy::Positive,
            "--csv" => o.csv = PathBuf::from(value()?),
            other => {
                return Err(format!(
                    "unknown argument `{other}` (see the file's doc comment)"
                ))
            }
        }
    }
    Ok(o)
}

fn section(title: &str, v: &Validation) -> String {
    format!("### {title}\n\n{}", v.markdown())
}

/// One convention's validation as JSON: counts and scores per observation
/// (`F1Report`), the averages and the studies left out.
fn convention(v: &Validation) -> serde_json::Value {
    serde_json::json!({
        "studies": v.studies,
        "left_out_no_indexing": v.unindexed,
        "left_out_without_text": v.empty,
        "supported": v.supported.iter().map(|o| o.name()).collect::<Vec<_>>(),
        "macro_supported": v.macro_supported,
        "micro_supported": v.micro_supported,
        "no_finding_vs_mesh_normal": v.no_finding_vs_mesh_normal,
        "report": v.report,
    })
}

/// Both conventions' results, as `JSON` holds them.
fn result_json(main: &Validation, other: &Validation) -> String {
    let v = serde_json::json!({
        "command": "cargo run --release -p sdr-clinical --example iu_validate",
        "csv": "data/iu-xray/indiana_reports.csv",
        "min_support": IU_MIN_SUPPORT,
        "goal": IU_MACRO_F1_GOAL,
        "uncertain_absent": convention(main),
        "uncertain_present": convention(other),
    });
    serde_json::to_string_pretty(&v).expect("JSON of numbers and strings") + "\n"
}

fn run() -> Result<(), String> {
    let o = parse_args()?;
    let studies = read_studies(&o.csv)?;
    let (labeler, map) = (Labeler::default(), MeshMap::default());
    let run = |p| validate(&labeler, &map, &studies, IU_MIN_SUPPORT, p);
    let main = run(IU_POLICY);
    let other = run(UncertainPolicy::Positive);
    let mut out = std::io::stdout().lock();
    // A closed pipe (`| head`) just ends the output.
    let mut say = |s: &str| {
        let _ = out.write_all(s.as_bytes());
    };
    if let Some(obs) = o.show {
        let v = if o.show_policy == IU_POLICY {
            &main
        } else {
            &other
        };
        for d in v
            .disagreements
            .iter()
            .filter(|d| d.observation == obs)
            .take(o.limit)
        {
            let kind = if d.reference_positive { "FN" } else { "FP" };
            let label = d
                .labeler
                .map_or("null".to_string(), |l| l.code().to_string());
            say(&format!(
                "{kind} uid={} labeler={label}\n    {}\n",
                d.uid,
                d.text.replace('\n', " | ")
            ));
        }
        say("\n");
    }
    let md = format!(
        "{}\n{}",
        section(
            "Uncertain counted as absent (the validation's protocol)",
            &main
        ),
        section("Uncertain counted as present (for comparison)", &other)
    );
    say(&md);
    say(&format!(
        "\nmacro F1 over observations with >= {IU_MIN_SUPPORT} positive studies: {:.4} \
         (uncertain as absent; goal {IU_MACRO_F1_GOAL}), {:.4} (uncertain as present)\n",
        main.macro_supported.f1, other.macro_supported.f1
    ));
    if o.write {
        // Written atomically: a stopped run leaves the old file whole.
        let path = root().join(JSON);
        let tmp = path.with_extension("json.tmp");
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(path.parent().expect("a file in a folder"))?;
            std::fs::write(&tmp, result_json(&main, &other))?;
            std::fs::rename(&tmp, &path)
        };
        write().map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        say(&format!(
            "wrote {} (python3 scripts/results.py renders docs/results/labeler.md from it)\n",
            path.display()
        ));
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("iu_validate: {e}");
            ExitCode::FAILURE
        }
    }
}
