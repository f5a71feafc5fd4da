//! Helpers shared by the integration tests.

#![allow(dead_code)]

use std::path::PathBuf;

use sdr_core::{EmbeddingSet, Side};
use serde_json::Value;

/// One set pair of `tests/fixtures/distances.json` with its reference values.
pub struct FixturePair {
    pub index: usize,
    pub kind: String,
    pub a: EmbeddingSet,
    pub b: EmbeddingSet,
    /// `(canonical metric spec, reference value)` in the file's order.
    pub values: Vec<(String, f64)>,
}

pub fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fixtures")
        .join(name)
}

fn rows(v: &Value) -> Vec<Vec<f64>> {
    v.as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            r.as_array()
                .expect("row")
                .iter()
                .map(|x| x.as_f64().expect("number"))
                .collect()
        })
        .collect()
}

/// The header (generator arguments, notes) and the pairs of `distances.json`
/// (written by `tools/fixtures/distances.py`).
pub fn distance_fixture() -> (Value, Vec<FixturePair>) {
    let path = fixture_path("distances.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let doc: Value = serde_json::from_str(&text).expect("fixture is JSON");
    let metrics: Vec<String> = doc["header"]["metrics"]
        .as_array()
        .expect("header.metrics")
        .iter()
        .map(|m| m.as_str().expect("metric name").to_string())
        .collect();
    let pairs = doc["pairs"]
        .as_array()
        .expect("pairs")
        .iter()
        .map(|p| {
            let values = metrics
                .iter()
                .map(|k| {
                    let v = p["values"][k.as_str()]
                        .as_f64()
                        .unwrap_or_else(|| panic!("pair {} lacks {k}", p["index"]));
                    (k.clone(), v)
                })
                .collect();
            FixturePair {
                index: p["index"].as_u64().expect("index") as usize,
                kind: p["kind"].as_str().unwrap_or("").to_string(),
                a: EmbeddingSet::from_rows(&rows(&p["a"]), Side::A).expect("valid set a"),
                b: EmbeddingSet::from_rows(&rows(&p["b"]), Side::B).expect("valid set b"),
                values,
            }
        })
        .collect();
    (doc["header"].clone(), pairs)
}
