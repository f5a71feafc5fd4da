//! Selection-evaluation helpers on real data: strata counts of the bundled
//! IU X-ray reports, random baselines, tables and the heatmap PNG.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use sdr_eval::baseline::{
    improvement_percent, policy_mean, random_baseline_seeded, random_expectation, Pool, Study,
};
use sdr_eval::heatmap::Heatmap;
use sdr_eval::rouge::rouge;
use sdr_eval::strata::{stratum_from_problems, Stratum};
use sdr_eval::table::Table;

fn iu_reports() -> Vec<csv::StringRecord> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/iu-xray/indiana_reports.csv");
    let mut r = csv::Reader::from_path(&path).expect("bundled IU X-ray CSV");
    let headers = r.headers().unwrap().clone();
    assert_eq!(
        headers.iter().collect::<Vec<_>>(),
        [
            "uid",
            "MeSH",
            "Problems",
            "image",
            "indication",
            "comparison",
            "findings",
            "impression"
        ]
    );
    r.records().map(|x| x.unwrap()).collect()
}

/// Reports with both sections, as (uid, problems, findings, impression).
fn complete_reports() -> Vec<(u64, String, String, String)> {
    iu_reports()
        .iter()
        .filter(|r| !r[6].trim().is_empty() && !r[7].trim().is_empty())
        .map(|r| {
            (
                r[0].parse().unwrap(),
                r[2].to_string(),
                r[6].to_string(),
                r[7].to_string(),
            )
        })
        .collect()
}

#[test]
fn strata_reproduce_the_data_readme_counts() {
    let reports = complete_reports();
    assert_eq!(reports.len(), 3_331);
    let mut counts: BTreeMap<Stratum, usize> = BTreeMap::new();
    for (_, problems, _, _) in &reports {
        *counts
            .entry(stratum_from_problems(problems).unwrap())
            .or_default() += 1;
    }
    assert_eq!(counts[&Stratum::NoFinding], 1_195);
    assert_eq!(counts[&Stratum::SingleFinding], 770);
    assert_eq!(counts[&Stratum::MultipleFindings], 1_366);
}

/// Test-split studies (uid % 10 == 0) with K = 5 "candidates" taken from
/// other reports' Findings (seeded), scored by ROUGE-L F1 against the study's
/// own Findings; every third candidate is marked malformed.
fn toy_studies() -> (Vec<Vec<f64>>, Vec<Vec<bool>>) {
    let reports = complete_reports();
    let test: Vec<_> = reports.iter().filter(|r| r.0 % 10 == 0).take(120).collect();
    let mut rng = sdr_eval::baseline::SplitMix64::new(42);
    let mut values = Vec::new();
    let mut flags = Vec::new();
    for (s, study) in test.iter().enumerate() {
        let mut v = Vec::new();
        let mut f = Vec::new();
        for k in 0..5 {
            let other = &reports[rng.below(reports.len() as u64) as usize];
            v.push(rouge(&study.2, &other.2, false).rouge_l.fmeasure);
            f.push((s + k) % 3 != 0);
        }
        values.push(v);
        flags.push(f);
    }
    (values, flags)
}

#[test]
fn seeded_baselines_agree_with_exact_expectation() {
    let (values, flags) = toy_studies();
    let studies: Vec<Study> = values
        .iter()
        .zip(&flags)
        .map(|(v, f)| Study {
            values: v,
            well_formed: f,
        })
        .collect();
    for pool in [Pool::All, Pool::WellFormed] {
        let exact = random_expectation(&studies, pool).unwrap();
        let seeded = random_baseline_seeded(&studies, pool, 200, 0).unwrap();
        assert_eq!(seeded.per_seed.len(), 200);
        assert!(seeded.std_error > 0.0);
        // Within 4 standard errors (fails by chance with probability < 1e-4).
        assert!(
            (seeded.mean - exact).abs() <= 4.0 * seeded.std_error,
            "{pool:?}: seeded {} vs exact {exact} (se {})",
            seeded.mean,
            seeded.std_error
        );
        // Deterministic per seed, different across seeds.
        assert_eq!(
            seeded,
            random_baseline_seeded(&studies, pool, 200, 0).unwrap()
        );
        assert_ne!(
            seeded.per_seed,
            random_baseline_seeded(&studies, pool, 200, 1)
                .unwrap()
                .per_seed
        );
    }
    // An oracle policy (argmax) beats both baselines.
    let oracle: Vec<usize> = values
        .iter()
        .map(|v| {
            (0..v.len())
                .max_by(|&a, &b| v[a].total_cmp(&v[b]).then(b.cmp(&a)))
                .unwrap()
        })
        .collect();
    let best = policy_mean(&studies, &oracle).unwrap();
    let random = random_expectation(&studies, Pool::All).unwrap();
    assert!(improvement_percent(best, random).unwrap() > 0.0);
}

#[test]
fn tables_and_heatmap_are_written() {
    let dir = std::env::temp_dir().join(format!("sdr-eval-selection-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let columns: Vec<String> = ["BLEU-4", "ROUGE-L", "METEOR", "chrF++", "BERTScore-F1"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let policies = [
        ("Chamfer", "chamfer / min"),
        ("Chamfer", "chamfer / avg"),
        ("Hausdorff", "hausdorff / knn:k=5"),
        ("OT", "ot / avg"),
        ("OT", "sinkhorn:eps=0.1 / min"),
        ("Hungarian", "hung-pen:alpha=0.5 / avg"),
    ];
    let values: Vec<Vec<Option<f64>>> = policies
        .iter()
        .enumerate()
        .map(|(i, _)| {
            (0..columns.len())
                .map(|j| {
                    if i == 5 && j == 4 {
                        None
                    } else {
                        Some((i as f64 - 2.5) * 3.0 + j as f64 * 1.7)
                    }
                })
                .collect()
        })
        .collect();

    let mut t = Table::new(
        "Findings: improvement over random (%)",
        "policy",
        columns.clone(),
    );
    t.bertscore_encoder = Some("all-mpnet-base-v2 (last layer)".into());
    for ((_, label), row) in policies.iter().zip(&values) {
        t.push_row(*label, row.clone()).unwrap();
    }
    t.write_markdown(&dir.join("table.md")).unwrap();
    t.write_csv(&dir.join("table.csv")).unwrap();
    let md = std::fs::read_to_string(dir.join("table.md")).unwrap();
    assert!(md.contains("BERTScore-F1 [all-mpnet-base-v2 (last layer)]"));
    assert_eq!(
        md.lines().filter(|l| l.starts_with("| ")).count(),
        1 + policies.len()
    );
    let csv_text = std::fs::read_to_string(dir.join("table.csv")).unwrap();
    let mut rd = csv::Reader::from_reader(csv_text.as_bytes());
    assert_eq!(rd.headers().unwrap().len(), 1 + columns.len());
    assert_eq!(rd.records().count(), policies.len());

    let h = Heatmap {
        title: "Policy x metric: improvement over random (Findings)".into(),
        subtitle: "random = uniform over well-formed candidates, 100 seeds".into(),
        row_labels: policies.iter().map(|p| p.1.to_string()).collect(),
        row_groups: policies.iter().map(|p| p.0.to_string()).collect(),
        columns,
        values,
        bertscore_encoder: Some("all-mpnet-base-v2 (last layer)".into()),
    };
    let png = dir.join("heatmap.png");
    h.render_png(&png).unwrap();
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    // Nothing left behind but the three outputs.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 3);
    if let Ok(keep) = std::env::var("SDR_EVAL_KEEP_HEATMAP") {
        std::fs::copy(&png, keep).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
