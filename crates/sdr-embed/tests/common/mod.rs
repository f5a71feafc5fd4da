//! Helpers of the sdr-embed integration tests.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use sdr_embed::{Encoder, EncoderOptions};
use serde::Deserialize;

/// A fixture written by `tools/fixtures/embeddings.py` (sentence-transformers).
#[derive(Deserialize)]
pub struct Fixture {
    pub model: String,
    pub max_seq_length: usize,
    pub dim: usize,
    pub cases: Vec<Case>,
}

#[derive(Deserialize)]
pub struct Case {
    pub text: String,
    pub n_tokens: usize,
    pub embedding: Vec<f64>,
}

pub fn load_fixture(name: &str) -> Fixture {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fixtures")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The model folder for a test: `$SDR_MODEL` when it names a folder of that model,
/// else `<sdr_home>/models/<name>`. A missing folder FAILS the test with the
/// instruction to fetch it: the parity tests must never pass vacuously.
pub fn model_dir(name: &str) -> PathBuf {
    let from_env = std::env::var_os("SDR_MODEL")
        .map(PathBuf::from)
        .filter(|p| p.file_name().is_some_and(|f| f == name));
    let dir = from_env.or_else(|| sdr_embed::sdr_home().map(|h| h.join("models").join(name)));
    match dir {
        Some(d) if d.join("config.json").is_file() => d,
        other => panic!(
            "model folder for {name} not found (looked at {other:?}); fetch it with \
             `bash scripts/fetch-model.sh` or set SDR_MODEL"
        ),
    }
}

pub fn encoder(name: &str, opts: EncoderOptions) -> Encoder {
    let dir = model_dir(name);
    Encoder::load(&dir, opts).unwrap_or_else(|e| panic!("{e}"))
}

pub fn cosine(a: &[f32], b: &[f64]) -> f64 {
    let (mut ab, mut aa, mut bb) = (0.0, 0.0, 0.0);
    for (&x, &y) in a.iter().zip(b) {
        let x = x as f64;
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    ab / (aa.sqrt() * bb.sqrt())
}

/// Min cosine against the fixture, with the per-case report on failure.
pub fn check_parity(enc: &Encoder, fx: &Fixture, min_cos: f64) -> f64 {
    assert_eq!(enc.dim(), fx.dim);
    assert_eq!(enc.max_seq_length(), fx.max_seq_length);
    let texts: Vec<&str> = fx.cases.iter().map(|c| c.text.as_str()).collect();
    let counts = enc.token_counts(&texts).unwrap();
    let got = enc.embed(&texts).unwrap();
    let mut worst = f64::INFINITY;
    let mut failures = Vec::new();
    for ((case, v), n) in fx.cases.iter().zip(&got).zip(counts) {
        assert_eq!(n, case.n_tokens, "token count of {:?}", case.text);
        let norm: f64 = v
            .iter()
            .map(|&x| (x as f64) * (x as f64))
            .sum::<f64>()
            .sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "norm {norm} for {:?}", case.text);
        let c = cosine(v, &case.embedding);
        worst = worst.min(c);
        if c < min_cos || c.is_nan() {
            failures.push(format!(
                "{c:.6} {:?}",
                case.text.chars().take(60).collect::<String>()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} below {min_cos} ({}):\n{}",
        failures.len(),
        fx.cases.len(),
        fx.model,
        failures.join("\n")
    );
    worst
}
