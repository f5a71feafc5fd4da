//! How much a sentence's embedding depends on the rest of its batch, and the
//! tolerance SPEC §2 documents for it.
//!
//! The encoder pads each length bucket to its longest sentence and runs the
//! matrix products on the whole bucket, so a sentence alone and the same
//! sentence among longer or more sentences go through GEMMs of other shapes.
//! The plain build gives identical bits in the cases below, but at GRPO batch
//! sizes re-embedding moved rewards by up to 6e-8 (bench/cache_replay.py), so
//! the reward's sentence cache is the guarantee: within a run a sentence is
//! embedded once and every batch reuses those bits (tested in sdr-reward and
//! `sdr serve`). This test pins the tolerance: cosine >= 1 - 1e-6 between any
//! two batchings, and no coordinate apart by more than 1e-5.

mod common;

use sdr_embed::{EncoderOptions, Parallelism};

const PROBE: &str = "No pneumothorax or pleural effusion.";

const OTHERS: [&str; 9] = [
    "The lungs are clear.",
    "Heart size normal.",
    "There is a large right-sided pleural effusion with adjacent compressive atelectasis of the right lower lobe.",
    "Degenerative changes of the thoracic spine.",
    "No acute cardiopulmonary abnormality.",
    "Calcified granuloma in the left upper lobe, unchanged from XXXX.",
    "The cardiomediastinal silhouette is within normal limits for size and contour, and the pulmonary vasculature is normal.",
    "Stable cardiomegaly.",
    "Mild bibasilar opacities may represent atelectasis or early infiltrate; follow-up radiographs are recommended to exclude pneumonia.",
];

#[test]
fn a_sentence_embedding_depends_on_its_batch_only_within_the_documented_tolerance() {
    for parallelism in [Parallelism::Gemm, Parallelism::Batches] {
        let opts = EncoderOptions {
            cache: false,
            parallelism,
            ..Default::default()
        };
        let enc = common::encoder("all-mpnet-base-v2", opts);
        let alone = enc.embed(&[PROBE]).unwrap().remove(0);
        let mut worst_cos: f64 = 1.0;
        let mut worst_abs: f32 = 0.0;
        let mut differ = 0;
        let mut cases = 0;
        // Up to 50 others: several length buckets, batches of 32, run concurrently.
        for n in (1..=OTHERS.len()).chain([20, 35, 50]) {
            for start in [0, 3] {
                let mut batch: Vec<&str> =
                    OTHERS.iter().cycle().skip(start).take(n).copied().collect();
                let at = n / 2;
                batch.insert(at, PROBE);
                let v = enc.embed(&batch).unwrap().remove(at);
                let a64: Vec<f64> = alone.iter().map(|&x| f64::from(x)).collect();
                worst_cos = worst_cos.min(common::cosine(&v, &a64));
                let d = v
                    .iter()
                    .zip(&alone)
                    .map(|(x, y)| (x - y).abs())
                    .fold(0.0f32, f32::max);
                worst_abs = worst_abs.max(d);
                differ += usize::from(v != alone);
                cases += 1;
            }
        }
        eprintln!(
            "{parallelism:?}: {differ} of {cases} batchings change the bits; \
             min cosine {worst_cos:.9}, max |diff| {worst_abs:.2e}"
        );
        assert!(worst_cos >= 1.0 - 1e-6, "{worst_cos}");
        assert!(worst_abs <= 1e-5, "{worst_abs}");
    }
}
