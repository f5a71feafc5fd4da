//! End to end: `sdr distances` over a file of many pairs (computed as one
//! batch per chunk) gives, line by line, what one pair at a time gives, and a
//! bad line stops the run with its line number after the lines before it.

mod cli;

use cli::sdr;
use sdr_core::distance::evaluate_all;
use sdr_core::{EmbeddingSet, Metric, Side};

type Set = Vec<Vec<f64>>;

/// `count` pairs of 1-6 rows of 24-d vectors.
fn pairs(count: usize) -> Vec<(Set, Set)> {
    let mut seed = 7u64;
    let mut next = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    };
    (0..count)
        .map(|k| {
            let mut set = |n: usize| (0..n).map(|_| (0..24).map(|_| next()).collect()).collect();
            (set(1 + k % 6), set(1 + (k * 5) % 6))
        })
        .collect()
}

fn line(a: &[Vec<f64>], b: &[Vec<f64>]) -> String {
    serde_json::json!({"a": a, "b": b}).to_string()
}

#[test]
fn a_file_of_pairs_matches_pair_by_pair_values() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("pairs.jsonl");
    let all = pairs(300);
    let text: Vec<String> = all.iter().map(|(a, b)| line(a, b)).collect();
    std::fs::write(&input, text.join("\n") + "\n").unwrap();
    let out = sdr()
        .args(["distances", "-m", "chamfer", "-m", "hung-pen:alpha=0.1"])
        .arg(&input)
        .output()
        .unwrap();
    let got = cli::json_lines(&out);
    assert_eq!(got.len(), all.len());
    let metrics = [Metric::Chamfer, Metric::HungPen { alpha: 0.1 }];
    for ((a, b), row) in all.iter().zip(&got) {
        let a = EmbeddingSet::from_rows(a, Side::A).unwrap();
        let b = EmbeddingSet::from_rows(b, Side::B).unwrap();
        let want = evaluate_all(&metrics, &a.view(), &b.view()).unwrap();
        assert_eq!(row["chamfer"].as_f64().unwrap(), want[0].value);
        assert_eq!(row["hung-pen:alpha=0.1"].as_f64().unwrap(), want[1].value);
    }
}

#[test]
fn a_bad_line_stops_the_run_after_the_lines_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("pairs.jsonl");
    let all = pairs(5);
    let mut text: Vec<String> = all.iter().map(|(a, b)| line(a, b)).collect();
    text[3] = r#"{"a": [[0, 0]], "b": [[1, 0]]}"#.to_string();
    std::fs::write(&input, text.join("\n") + "\n").unwrap();
    let out = sdr()
        .args(["distances", "-m", "chamfer"])
        .arg(&input)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("pairs.jsonl:4") && err.contains("zero vector"),
        "{err}"
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 3);
}

#[test]
fn one_configuration_twice_and_parameters_out_of_range_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("pairs.jsonl");
    let (a, b) = &pairs(1)[0];
    std::fs::write(&input, line(a, b) + "\n").unwrap();
    for (metrics, want) in [
        (
            &["ot", "ot"][..],
            "--metric ot and --metric ot are the same configuration (ot): give it once",
        ),
        (
            &["sinkhorn", "sinkhorn:eps=0.1"][..],
            "--metric sinkhorn and --metric sinkhorn:eps=0.1 are the same configuration",
        ),
        (
            &["gw:eps=1e-30"][..],
            "`eps` must be in [0.001, 1000], got 1e-30",
        ),
        (
            &["hung-pen:alpha=1e308"][..],
            "`alpha` must be in [0, 1000]",
        ),
    ] {
        let mut cmd = sdr();
        cmd.arg("distances");
        for m in metrics {
            cmd.args(["-m", m]);
        }
        let out = cmd.arg(&input).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(want),
            "{metrics:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{metrics:?}");
    }
}
