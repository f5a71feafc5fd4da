//! Parity with sentence-transformers (SPEC §2: cosine >= 0.9999 per sentence).
//!
//! Fixtures: `tests/fixtures/*.json`, written by `tools/fixtures/embeddings.py`
//! (sentence-transformers on the same model folder). The model folder comes from
//! `SDR_MODEL` or the default cache folder (`bash scripts/fetch-model.sh`); when it is
//! absent the test fails with that instruction.

mod common;

use sdr_embed::{EncoderOptions, Parallelism, Precision};

#[test]
fn mpnet_matches_sentence_transformers() {
    let fx = common::load_fixture("mpnet.json");
    let enc = common::encoder("all-mpnet-base-v2", EncoderOptions::default());
    let worst = common::check_parity(&enc, &fx, 0.9999);
    eprintln!(
        "all-mpnet-base-v2 f32: min cosine {worst:.7} over {} cases",
        fx.cases.len()
    );
}

#[test]
fn mpnet_parity_holds_across_batching_and_threads() {
    let fx = common::load_fixture("mpnet.json");
    let opts = EncoderOptions {
        batch_size: 3,
        parallelism: Parallelism::Batches,
        cache: false,
        ..Default::default()
    };
    let enc = common::encoder("all-mpnet-base-v2", opts);
    common::check_parity(&enc, &fx, 0.9999);
}

/// `--precision bf16` on this CPU: the dense GEMMs in bf16 (the AVX-512 BF16 kernel, or
/// MKL with AMX), activations in f32. The bar: cosine >= 0.999.
#[test]
fn mpnet_bf16_gemms_stay_within_the_bf16_bar() {
    let fx = common::load_fixture("mpnet.json");
    let opts = EncoderOptions {
        precision: Precision::Bf16,
        ..Default::default()
    };
    let enc = common::encoder("all-mpnet-base-v2", opts);
    if enc.precision() != Precision::MixedBf16 {
        eprintln!("skipped: bf16 runs as {} on this CPU", enc.precision());
        return;
    }
    let worst = common::check_parity(&enc, &fx, 0.999);
    eprintln!("all-mpnet-base-v2 mixed bf16: min cosine {worst:.7}");
}

/// bf16 through candle is slow on CPU; run with `--ignored` (bench/embed.py measures it).
#[test]
#[ignore]
fn mpnet_reduced_precision_stays_close() {
    let fx = common::load_fixture("mpnet.json");
    let opts = EncoderOptions {
        precision: Precision::Bf16Candle,
        ..Default::default()
    };
    let enc = common::encoder("all-mpnet-base-v2", opts);
    let worst = common::check_parity(&enc, &fx, 0.98);
    eprintln!("all-mpnet-base-v2 bf16: min cosine {worst:.7}");
}

#[test]
fn token_embeddings_pool_to_sentence_embeddings() {
    let enc = common::encoder("all-mpnet-base-v2", EncoderOptions::default());
    let texts = [
        "Heart size is normal.",
        "No pneumothorax or pleural effusion seen here.",
    ];
    let toks = enc.embed_tokens(&texts).unwrap();
    let pooled = enc.embed(&texts).unwrap();
    for (t, p) in toks.iter().zip(&pooled) {
        assert_eq!(t.tokens.first().map(String::as_str), Some("<s>"));
        assert_eq!(t.tokens.len(), t.ids.len());
        assert_eq!(t.vectors.len(), t.ids.len() * t.dim);
        let mut mean = vec![0f64; t.dim];
        for row in t.vectors.chunks_exact(t.dim) {
            for (m, &x) in mean.iter_mut().zip(row) {
                *m += x as f64;
            }
        }
        let c = common::cosine(p, &mean);
        assert!(c > 0.99999, "cosine {c}");
    }
}
