//! Helpers for the sdr-eval integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

use serde_json::Value;

/// `crates/sdr-eval/tests/fixtures/<name>`.
pub fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The parity fixture written by `tools/fixtures/eval_metrics.py`.
pub fn fixture() -> Value {
    let text = std::fs::read_to_string(fixture_path("eval_metrics.json")).expect("fixture present");
    serde_json::from_str(&text).expect("fixture is JSON")
}

pub fn f64s(v: &Value) -> Vec<f64> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_f64().expect("number"))
        .collect()
}

pub fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_str().expect("string").to_string())
        .collect()
}

/// Tracks the largest deviation seen for one metric and fails on any
/// deviation above `tol`, where the deviation is
/// `|got - want| / max(1, |want|)` (absolute for values up to 1, relative
/// above; BLEU's tiny unsmoothed values are compared relatively, see
/// `check_rel`).
pub struct Deviation {
    pub name: &'static str,
    pub tol: f64,
    pub max: f64,
    pub count: usize,
}

impl Deviation {
    pub fn new(name: &'static str, tol: f64) -> Self {
        Deviation {
            name,
            tol,
            max: 0.0,
            count: 0,
        }
    }

    pub fn check(&mut self, got: f64, want: f64, what: &str) {
        let d = (got - want).abs() / want.abs().max(1.0);
        self.record(d, got, want, what);
    }

    /// Relative deviation `|got - want| / |want|` (0 when both are 0).
    pub fn check_rel(&mut self, got: f64, want: f64, what: &str) {
        let d = if want == 0.0 {
            got.abs()
        } else {
            (got - want).abs() / want.abs()
        };
        self.record(d, got, want, what);
    }

    fn record(&mut self, d: f64, got: f64, want: f64, what: &str) {
        assert!(
            d <= self.tol && got.is_finite(),
            "{}: {what}: got {got:e}, reference {want:e} (deviation {d:e} > tol {:e})",
            self.name,
            self.tol
        );
        self.max = self.max.max(d);
        self.count += 1;
    }

    /// Prints the summary (visible with `--nocapture`) and checks that
    /// something was compared.
    pub fn report(&self) {
        assert!(self.count > 0, "{}: nothing compared", self.name);
        println!(
            "parity {:<28} {:>4} values  max deviation {:.3e}  (tolerance {:.0e})",
            self.name, self.count, self.max, self.tol
        );
    }
}
