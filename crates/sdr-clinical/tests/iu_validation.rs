//! The labeler against IU X-ray's MeSH coding on the bundled CSV: the macro
//! F1 over observations with enough positive studies must stay at the goal
//! (docs/results/labeler.md; `cargo run --release -p sdr-clinical --example
//! iu_validate` prints the table).

use sdr_clinical::iu::{validate, MeshMap, Study, IU_MACRO_F1_GOAL, IU_MIN_SUPPORT, IU_POLICY};
use sdr_clinical::{Labeler, Observation};

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
