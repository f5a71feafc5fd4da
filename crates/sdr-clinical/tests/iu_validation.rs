//! The labeler against IU X-ray's MeSH coding on the bundled CSV: the macro
//! F1 over observations with enough positive studies must stay at the goal,
//! and the committed result file that docs/results/labeler.md is rendered
//! from (`docs/results/labeler/iu_validation.json`, written by `cargo run
//! --release -p sdr-clinical --example iu_validate`) must hold today's counts.

use sdr_clinical::iu::{validate, MeshMap, Study, IU_MACRO_F1_GOAL, IU_MIN_SUPPORT, IU_POLICY};
use sdr_clinical::{Labeler, Observation, UncertainPolicy};

fn studies() -> Vec<Study> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../data/iu-xray/indiana_reports.csv"
    );
    let mut rdr = csv::Reader::from_path(path).expect("the bundled IU X-ray CSV");
    let h = rdr.headers().unwrap().clone();
    let col = |n: &str| h.iter().position(|c| c == n).unwrap();
    let (uid, mesh, f, i) = (col("uid"), col("MeSH"), col("findings"), col("impression"));
    rdr.records()
        .map(|r| {
            let r = r.unwrap();
            Study {
                uid: r[uid].into(),
                mesh: r[mesh].into(),
                findings: r[f].into(),
                impression: r[i].into(),
            }
        })
        .collect()
}

#[test]
fn macro_f1_on_iu_xray_meets_the_goal() {
    let studies = studies();
    assert_eq!(studies.len(), 3851);
    let v = validate(
        &Labeler::default(),
        &MeshMap::default(),
        &studies,
        IU_MIN_SUPPORT,
        IU_POLICY,
    );
    assert!(v.studies > 3700, "{} studies scored", v.studies);
    // Every observation has enough positive studies to count.
    assert_eq!(v.supported.len(), 14, "{:?}", v.supported);
    assert!(
        v.macro_supported.f1 >= IU_MACRO_F1_GOAL,
        "macro F1 {:.4} < {IU_MACRO_F1_GOAL}\n{}",
        v.macro_supported.f1,
        v.markdown()
    );
    // The five classes of the common variant stay well above the goal.
    assert!(
        v.report.macro_over(&Observation::FIVE).f1 >= 0.92,
        "{}",
        v.markdown()
    );
}

#[test]
fn committed_result_file_matches_the_labeler() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/results/labeler/iu_validation.json"
    );
    let committed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("the committed result file"))
            .expect("JSON");
    let studies = studies();
    let again = "rerun `cargo run --release -p sdr-clinical --example iu_validate` \
                 and `python3 scripts/results.py`";
    for (key, policy) in [
        ("uncertain_absent", UncertainPolicy::Negative),
        ("uncertain_present", UncertainPolicy::Positive),
    ] {
        let v = validate(
            &Labeler::default(),
            &MeshMap::default(),
            &studies,
            IU_MIN_SUPPORT,
            policy,
        );
        let c = &committed[key];
        assert_eq!(c["studies"], v.studies, "{key}: studies; {again}");
        let rows = c["report"]["per_observation"].as_array().expect("rows");
        assert_eq!(rows.len(), v.report.per_observation.len(), "{key}; {again}");
        for (row, o) in rows.iter().zip(&v.report.per_observation) {
            let counts = [&row["tp"], &row["fp"], &row["fn"]];
            assert_eq!(row["observation"], o.observation.name(), "{key}; {again}");
            assert_eq!(
                counts,
                [o.tp, o.fp, o.fn_],
                "{key}: {}; {again}",
                o.observation
            );
            assert_eq!(
                row["support"], o.support,
                "{key}: {}; {again}",
                o.observation
            );
        }
        let f1 = c["macro_supported"]["f1"].as_f64().expect("macro F1");
        assert!(
            (f1 - v.macro_supported.f1).abs() < 1e-12,
            "{key}: macro F1 {f1} committed, {} now; {again}",
            v.macro_supported.f1
        );
    }
}
