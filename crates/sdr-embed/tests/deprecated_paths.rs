//! 0.1's public module paths of the models and kernels, kept as deprecated re-exports for
//! one release (CHANGELOG, "Deprecated"): code written against them still builds and gets
//! the same items.
#![allow(deprecated)]

#[test]
fn old_module_paths_resolve_to_the_same_items() {
    // gelu(1) = Φ(1) = 0.841344746...
    assert!((sdr_embed::activation::gelu(1.0) - 0.841_344_7).abs() < 1e-6);
    let mut xs = [1.0f32, -1.0];
    sdr_embed::activation::gelu_in_place(&mut xs);
    assert!((xs[0] - 0.841_344_7).abs() < 1e-5 && (xs[1] + 0.158_655_3).abs() < 1e-5);
    // MPNet's relative-position buckets: offsets 0 and 1 keep their own bucket.
    assert_eq!(sdr_embed::mpnet::relative_position_bucket(0, 32), 0);
    assert_ne!(
        sdr_embed::mpnet::relative_position_bucket(1, 32),
        sdr_embed::mpnet::relative_position_bucket(-1, 32)
    );
    assert_eq!(
        sdr_embed::roberta::bertscore_default_layer("roberta-large"),
        sdr_embed::bertscore_default_layer("roberta-large")
    );
    assert_eq!(sdr_embed::linear::F32_GEMM_ENV, "SDR_F32_GEMM");
    assert_eq!(sdr_embed::backbone::GRAPH_ENV, "SDR_ENCODER_GRAPH");
    let _ = sdr_embed::avx512_gemm::supported();
    let _: Option<&sdr_embed::packed::PackedMpnet> = None;
}
